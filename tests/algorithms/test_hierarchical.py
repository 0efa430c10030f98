"""Hierarchical all-reduce: intra-host rings, inter-host rails, hosts of any size."""

from __future__ import annotations

import pytest

from commsim.algorithms import Call, build_schedule
from commsim.algorithms.hierarchical import host_groups
from commsim.collectives import Collective
from commsim.errors import ScheduleError

AR = Collective.ALL_REDUCE


def _hosts(sizes: list[int]) -> tuple[int, ...]:
    return tuple(h for h, size in enumerate(sizes) for _ in range(size))


def _hier(sizes: list[int], n: int, chunks: int | None = None):
    hosts = _hosts(sizes)
    call = Call(collective=AR, ranks=len(hosts), nbytes=n, chunks=chunks, hosts=hosts)
    return build_schedule(call, "hierarchical")


@pytest.mark.parametrize(("hosts", "local"), [(2, 4), (3, 3), (4, 2)])
def test_equal_hosts_use_rails(hosts: int, local: int, timer) -> None:
    """Between hosts only ranks of the same local index talk (each rail on its own part); the
    time is 2(L-1)(alpha + n/(L beta)) + 2(H-1)(alpha + n/(L H beta)) with dedicated links."""
    n = 120 * hosts * local
    schedule = _hier([local] * hosts, n)
    for t in schedule.transfers:
        if t.src // local != t.dst // local:
            assert t.src % local == t.dst % local
    want = 2 * (local - 1) * (1.0 + n / local) + 2 * (hosts - 1) * (1.0 + n / local / hosts)
    assert timer(schedule, 1.0, 1.0) == pytest.approx(want)


def test_unequal_hosts_pass_through_owners() -> None:
    """Hosts of 3 and 2 ranks: parts differ per host, so the buffer is cut at every part
    boundary and each range is all-reduced among the one rank per host holding it."""
    schedule = _hier([3, 2], 60)
    inter = {(t.src, t.dst) for t in schedule.transfers if (t.src < 3) != (t.dst < 3)}
    # host 0 parts [0,20) [20,40) [40,60); host 1 parts [0,30) [30,60)
    assert inter == {(0, 3), (3, 0), (1, 3), (3, 1), (1, 4), (4, 1), (2, 4), (4, 2)}


def test_host_groups_order() -> None:
    """Ranks are grouped by host, ascending, hosts ordered by their lowest rank."""
    assert host_groups((1, 1, 0, 0, 2)) == [[0, 1], [2, 3], [4]]


def test_needs_hosts() -> None:
    """Without hosts (a single-host topology) hierarchical is a clear ScheduleError."""
    with pytest.raises(ScheduleError, match="needs a multi-host topology"):
        build_schedule(Call(collective=AR, ranks=4, nbytes=8), "hierarchical")
