"""Hierarchical all-reduce: intra-host rings, inter-host rails (rings or Rabenseifner), hosts
of any size."""

from __future__ import annotations

import pytest

from commsim.algorithms import Call, build_schedule
from commsim.algorithms.hierarchical import host_groups
from commsim.collectives import Collective
from commsim.errors import ScheduleError

AR = Collective.ALL_REDUCE


def _hosts(sizes: list[int]) -> tuple[int, ...]:
    return tuple(h for h, size in enumerate(sizes) for _ in range(size))


def _hier(sizes: list[int], n: int, chunks: int | None = None, name: str = "hierarchical"):
    hosts = _hosts(sizes)
    call = Call(collective=AR, ranks=len(hosts), nbytes=n, chunks=chunks, hosts=hosts)
    return build_schedule(call, name)


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


@pytest.mark.parametrize(("hosts", "local"), [(2, 4), (4, 2), (8, 3)])
def test_rabenseifner_rails_take_2_log2_hosts_steps(hosts: int, local: int, timer) -> None:
    """``hierarchical_rabenseifner`` with a power-of-two host count: between hosts only ranks
    of the same local index talk, each sending one message per halving and doubling step
    (``2 log2 H`` of them), of ``m/2, m/4, ..., m/H`` bytes for a part of ``m`` bytes; the time
    is ``2(L-1)(alpha + n/(L beta)) + 2 sum_k (alpha + m/(2^k beta))``."""
    n = 120 * hosts * local
    schedule = _hier([local] * hosts, n, name="hierarchical_rabenseifner")
    inter = [t for t in schedule.transfers if t.src // local != t.dst // local]
    assert all(t.src % local == t.dst % local for t in inter)
    steps = 2 * (hosts.bit_length() - 1)
    assert len(inter) == steps * hosts * local
    part = n / local
    halves = [part / 2**k for k in range(1, hosts.bit_length())]
    want = 2 * (local - 1) * (1.0 + part) + 2 * sum(1.0 + x for x in halves)
    assert timer(schedule, 1.0, 1.0) == pytest.approx(want)


def test_rabenseifner_rails_send_one_piece_at_a_time_per_nic() -> None:
    """Each rank's inter-host pieces form one chain: every piece a rank sends between hosts
    depends on the previous piece it sent, and on the previous piece its destination received
    (so a rail's pieces never share a NIC link, even pipelined and with folded hosts)."""
    local = 2
    schedule = _hier([local] * 5, 10_007, chunks=3, name="hierarchical_rabenseifner")
    sent: dict[int, int] = {}
    received: dict[int, int] = {}
    for index, t in enumerate(schedule.transfers):
        if t.src // local == t.dst // local:
            continue
        for previous in (sent.get(t.src), received.get(t.dst)):
            assert previous is None or previous in t.deps, (index, t)
        sent[t.src] = received[t.dst] = index
