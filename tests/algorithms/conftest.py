"""Shared fixtures of the algorithm tests: an uncontended alpha-beta timer for schedules."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from commsim.schedule import Schedule

Timer = Callable[..., float]


def dag_time(schedule: Schedule, alpha: float = 1.0, beta: float = 1.0) -> float:
    """Finish time of ``schedule`` when each transfer costs ``alpha + nbytes / beta`` and starts
    when its dependencies end: the engine's time on a topology where no two transfers share a
    link. A test oracle only; the real closed forms live beside the engine."""
    end: list[float] = []
    for t in schedule.transfers:
        start = max((end[d] for d in t.deps), default=0.0)
        end.append(start + alpha + t.nbytes / beta)
    return max(end, default=0.0)


@pytest.fixture
def timer() -> Timer:
    """The :func:`dag_time` oracle."""
    return dag_time
