"""Transfer estimates (``commsim.algorithms.estimate``): an upper bound of every registered
algorithm's schedule size, within a small factor, without building it."""

from __future__ import annotations

import pytest

from commsim.algorithms import ALGORITHMS, SCHEDULED, build_schedule
from commsim.algorithms.base import Call
from commsim.algorithms.estimate import ESTIMATES, estimate_transfers
from commsim.errors import ScheduleError


def test_every_algorithm_has_an_estimate() -> None:
    """The estimate table and the registry name the same algorithms."""
    assert set(ESTIMATES) == set(ALGORITHMS)


def _calls() -> list[Call]:
    out = []
    for coll in SCHEDULED:
        for p, hosts, dims in ((2, None, None), (5, None, None), (8, (0,) * 4 + (1,) * 4, None),
                               (12, (0,) * 4 + (1,) * 4 + (2,) * 4, None),
                               (16, None, (4, 4)), (8, None, (2, 2, 2))):
            for chunks in (1, 3):
                out.append(Call(collective=coll, ranks=p, nbytes=1 << 20, chunks=chunks,
                                hosts=hosts, torus_dims=dims,
                                host_switches=tuple(p + (h or 0) for h in (hosts or (0,) * p)),
                                fabric_switch=p + 3))
    return out


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_estimate_bounds_the_schedule(name: str) -> None:
    """For every call the algorithm runs, ``len(schedule) <= estimate <= 8 x len + 64``."""
    checked = 0
    for call in _calls():
        try:
            schedule = build_schedule(call, name)
        except ScheduleError:
            continue
        estimate = estimate_transfers(call, name, schedule.chunks)
        assert len(schedule) <= estimate <= 8 * len(schedule) + 64, (call, len(schedule))
        checked += 1
    assert checked > 0
