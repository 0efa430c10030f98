"""Goodput by simulation: many seeded runs of :mod:`commsim.engine.failures`, their mean and CI.

Run ``i`` of seed ``s`` draws its failures from ``numpy.random.default_rng([s, i])``, so a run
is the same whatever the number of runs beside it, and the same inputs print the same bytes.
Each run trains ``work_s`` (the run's tokens, or :data:`DEFAULT_HORIZON_S` of compute); its
goodput is that work over its wall time. The estimate is the mean of the runs' goodputs, with a
95% confidence interval of half-width ``1.96 s / sqrt(R)`` (``s``: their standard deviation).

Bounded: at most :data:`MAX_RUNS` runs and :data:`MAX_FAILURES` failures expected over all of
them (each failure is a few events), refused in one line before anything runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from commsim.engine.failures import FailureModel, simulate_run
from commsim.errors import SpecError
from commsim.progress import Progress

MAX_RUNS = 100_000
#: Failures expected over all runs: about 30 s of simulation on a 2-core machine.
MAX_FAILURES = 10_000_000
#: What one run trains when the run's tokens are not given: 30 days of compute.
DEFAULT_HORIZON_S = 30 * 86400.0
#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Simulated:
    """The runs' mean goodput, its 95% CI half-width, and the mean failures per run."""

    goodput: float
    ci95: float
    runs: int
    failures_per_run: float


def check_runs(runs: int, model: FailureModel, expected_goodput: float) -> None:
    """Refuse too many runs, or runs that would simulate too many failures, in one line."""
    if not 2 <= runs <= MAX_RUNS:
        raise SpecError(f"--simulate: runs must be from 2 to {MAX_RUNS:,} (got {runs})")
    wall = model.work_s / max(expected_goodput, 1e-9)
    failures = runs * model.rate_per_s * wall
    if failures > MAX_FAILURES:
        raise SpecError(
            f"--simulate {runs}: about {failures:,.0f} failures to simulate, over the "
            f"{MAX_FAILURES:,} limit (fewer runs, or a shorter --horizon)"
        )


def simulate(model: FailureModel, runs: int, seed: int, *, expected_goodput: float = 1.0,
             progress: bool = False) -> Simulated:
    """``runs`` seeded runs of ``model``: the mean goodput and its 95% CI (see above).
    ``expected_goodput`` (the closed form's) sizes the bound on the work before it starts."""
    check_runs(runs, model, expected_goodput)
    goodputs = np.empty(runs)
    failures = 0
    bar = Progress("simulating runs", "run", enabled=progress)
    try:
        for i in range(runs):
            run = simulate_run(model, np.random.default_rng([seed, i]))
            goodputs[i] = run.goodput
            failures += run.failures
            if i % 16 == 15 or i == runs - 1:
                bar.update_to(i + 1, runs)
    finally:
        bar.close()
    mean = float(goodputs.mean())
    ci = Z95 * float(goodputs.std(ddof=1)) / math.sqrt(runs)
    return Simulated(mean, ci, runs, failures / runs)
