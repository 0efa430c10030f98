"""Every builder passes the symbolic checker on every collective it runs, across rank counts,
sizes that do and do not divide evenly (including sizes below the rank count), chunk counts
and roots."""

from __future__ import annotations

import pytest

from commsim.algorithms import ALGORITHMS, Call, build_schedule
from commsim.checker import check
from commsim.collectives import Collective

SIZES = (0, 1, 7, 1000, 1001)
CHUNKS = (None, 1, 3)
RANKS = range(1, 18)

FLAT = [
    (name, coll, p)
    for name, algorithm in ALGORITHMS.items()
    if not algorithm.needs_hosts
    and algorithm.reduces_in is None  # see test_innetwork.py
    and not algorithm.needs_torus  # see test_torus.py
    for coll in sorted(algorithm.collectives)
    for p in RANKS
]


def _roots(p: int) -> list[int]:
    return sorted({0, p // 2, p - 1})


@pytest.mark.parametrize(("name", "coll", "p"), FLAT, ids=lambda v: str(v))
def test_builder_passes_checker(name: str, coll, p: int) -> None:
    """The schedule of ``name`` for ``coll`` on ``p`` ranks implements ``coll`` for every size,
    chunk count and root, and records the call's parameters."""
    for n in SIZES:
        for chunks in CHUNKS:
            for root in _roots(p):
                call = Call(collective=coll, ranks=p, nbytes=n, chunks=chunks, root=root)
                schedule = build_schedule(call, name)
                check(schedule)
                assert (schedule.collective, schedule.ranks, schedule.nbytes) == (coll, p, n)
                assert schedule.algorithm == name
                assert schedule.chunks == (chunks or ALGORITHMS[name].default_chunks(call))
                if p == 1 or n == 0:
                    assert len(schedule) == 0


def _hosts(sizes: list[int]) -> tuple[int, ...]:
    return tuple(h for h, size in enumerate(sizes) for _ in range(size))


HOST_LAYOUTS = [
    [4, 4],
    [3, 3, 3],
    [2, 2, 2, 2],
    [4, 4, 3],
    [8, 8, 1],
    [1, 3],
    [5],
    [1, 1, 1],
    [2, 2, 2, 2, 2, 2, 2],
    [2, 2, 2, 2, 1],
]


@pytest.mark.parametrize("name", ["hierarchical", "hierarchical_rabenseifner"])
@pytest.mark.parametrize("sizes", HOST_LAYOUTS, ids=lambda s: "x".join(map(str, s)))
def test_hierarchical_passes_checker(sizes: list[int], name: str) -> None:
    """Hierarchical all-reduce (ring or Rabenseifner rails) is correct for 2x4, 3x3, 4x2 hosts,
    unequal hosts (the first R ranks of a topology), a single host, single-rank hosts, and host
    counts that are not powers of two (folded rails)."""
    hosts = _hosts(sizes)
    for n in SIZES:
        for chunks in CHUNKS:
            call = Call(
                collective=Collective.ALL_REDUCE,
                ranks=len(hosts),
                nbytes=n,
                chunks=chunks,
                hosts=hosts,
            )
            check(build_schedule(call, name))
