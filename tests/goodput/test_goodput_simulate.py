"""The seeded SimPy runs of failures against the closed form: within 2% over a grid of failure
rates, checkpoint costs and cluster sizes, with a 95% CI tighter than 2%; the best interval
within the simulation's resolution; elastic runs; determinism and bounds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from commsim.engine.failures import FailureModel, simulate_run
from commsim.errors import SpecError
from commsim.goodput import GoodputSpec, analyse
from commsim.goodput import closed_form as cf
from commsim.goodput.simulate import simulate

#: 2 x 2 x 2 cases: per-GPU-hour rates, checkpoint sizes (5 s and 100 s to write at 100 GB/s),
#: cluster sizes.
GRID = list(itertools.product((2e-5, 1e-4), (5 * 10**11, 10**13), (1024, 16384)))


@pytest.mark.parametrize(("rate", "nbytes", "gpus"), GRID)
def test_simulation_agrees_with_the_closed_form(rate, nbytes, gpus):
    """The mean of 200 seeded runs, each long enough for about 100 failures, is within 2% of
    the closed form, and its 95% CI half-width is under 2% of it (so the agreement is
    resolved, not noise)."""
    spec = GoodputSpec(gpus=gpus, step_time_s=5.0, checkpoint_bytes=nbytes,
                       failures_per_gpu_hour=rate, restart_s=600.0)
    a = analyse(spec, runs=200, seed=7, horizon_s=100 / spec.rate_per_s)
    sim, closed = a.plain.simulated, a.plain.outcome.goodput
    assert sim is not None
    assert sim.ci95 < 0.02 * closed
    assert abs(sim.goodput - closed) < 0.02 * closed
    assert abs(sim.goodput - closed) < max(3 * sim.ci95, 1e-3)


def test_async_and_spare_wait_agree_with_the_closed_form():
    """An asynchronous checkpoint (its background write longer than the best interval) and a
    recovery that waits an hour for a spare: simulation within 2% of the closed form."""
    spec = GoodputSpec(gpus=16384, step_time_s=5.0, checkpoint_bytes=5 * 10**12,
                       async_checkpoint=True, failures_per_gpu_hour=5e-5)
    a = analyse(spec, runs=100, seed=3, horizon_s=10 * 86400.0, elastic=True)
    for policy in (a.plain, a.spare):
        assert policy is not None and policy.simulated is not None
        assert policy.simulated.goodput == pytest.approx(policy.outcome.goodput, rel=0.02)
    assert a.plain.outcome.interval_s == pytest.approx(a.cost.commit_delay_s)


#: (failures per s, interval, stall, background write, recovery, rejoin, repair, slowdown)
ELASTIC = {
    "8 nodes": (1 / 10800, 600.0, 20.0, 0.0, 600.0, 600.0, 3600.0, 1 / 8),
    "256 nodes": (1 / 10800, 600.0, 20.0, 0.0, 600.0, 600.0, 3600.0, 1 / 256),
    # the benchmark grid's hardest row: lam (R + S) near 2, so repairs overlap
    "repairs overlap": (1.6384 / 3600, 742.0, 100.0, 0.0, 700.0, 700.0, 3600.0, 1 / 2048),
    "async": (1 / 1800, 300.0, 5.0, 200.0, 300.0, 250.0, 5000.0, 0.1),
    # five nodes out stop the run: the speed floors at 0
    "speed floors": (1 / 3600, 900.0, 60.0, 0.0, 600.0, 600.0, 10000.0, 0.2),
}


@pytest.mark.parametrize("case", ELASTIC.values(), ids=ELASTIC.keys())
def test_elastic_simulation_agrees_with_the_closed_form(case):
    """The elastic restart's exact expectation is within 2% of the mean of 100 seeded runs of
    about 200 failures each, and within 3 of its 95% CIs, for small and large clusters,
    overlapping repairs, an asynchronous write and a speed that reaches 0."""
    lam, tau, c, w, r, rejoin, repair, slowdown = case
    model = FailureModel(rate_per_s=lam, interval_s=tau, blocking_s=c, commit_delay_s=w,
                         restart_s=r, work_s=200 / lam, elastic=True, repair_s=repair,
                         slowdown=slowdown, rejoin_s=rejoin)
    closed = cf.elastic_goodput(lam, tau, c, w, r, rejoin_s=rejoin, repair_s=repair,
                                slowdown=slowdown)
    sim = simulate(model, 100, seed=11, expected_goodput=closed)
    assert sim.goodput == pytest.approx(closed, rel=0.02)
    assert abs(sim.goodput - closed) < max(3 * sim.ci95, 1e-3)


def test_best_interval_within_the_simulations_resolution():
    """Simulated at 0.5x, 0.7x, 1x, 1.4x and 2x the closed form's best interval (the same
    seeds for each), the best simulated goodput is the one at 1x or within its 95% CI."""
    lam, c, r = 1 / 3600.0, 60.0, 300.0
    best = cf.best_interval(lam, c, 0.0)
    results = {}
    for factor in (0.5, 0.7, 1.0, 1.4, 2.0):
        model = FailureModel(rate_per_s=lam, interval_s=best * factor, blocking_s=c,
                             commit_delay_s=0.0, restart_s=r, work_s=5 * 86400.0)
        results[factor] = simulate(model, 100, seed=5)
    top = max(results, key=lambda f: results[f].goodput)
    assert results[top].goodput - results[1.0].goodput <= results[1.0].ci95
    assert results[1.0].goodput > max(results[0.5].goodput, results[2.0].goodput)


def test_same_seed_same_runs():
    """A run depends only on its seed and index: the same inputs give identical results, and a
    different seed gives different ones."""
    model = FailureModel(rate_per_s=1 / 3600, interval_s=300, blocking_s=10, commit_delay_s=5,
                         restart_s=600, work_s=5 * 86400)
    one = simulate_run(model, np.random.default_rng([1, 0]))
    assert one == simulate_run(model, np.random.default_rng([1, 0]))
    assert one != simulate_run(model, np.random.default_rng([2, 0]))
    assert simulate(model, 4, seed=1) == simulate(model, 4, seed=1)


def test_no_failures_runs_the_checkpoint_schedule():
    """With no failures a run takes its whole intervals and their stalls, no more."""
    model = FailureModel(rate_per_s=0.0, interval_s=900, blocking_s=100, commit_delay_s=0,
                         restart_s=600, work_s=9000)
    run = simulate_run(model, np.random.default_rng(0))
    assert (run.wall_s, run.work_s, run.failures, run.goodput) == (10000, 9000, 0, 0.9)


@pytest.mark.parametrize("runs", [0, 1, 10**6])
def test_runs_out_of_range_are_refused(runs):
    """Fewer than 2 runs (no interval) or more than the maximum: one SpecError."""
    model = FailureModel(rate_per_s=1 / 3600, interval_s=300, blocking_s=10, commit_delay_s=0,
                         restart_s=600, work_s=86400)
    with pytest.raises(SpecError, match="--simulate"):
        simulate(model, runs, seed=0)


def test_too_many_failures_are_refused_before_running():
    """Runs that would simulate over ten million failures are refused in one line."""
    spec = GoodputSpec(gpus=10**6, step_time_s=5.0, checkpoint_bytes=10**12,
                       failures_per_gpu_hour=1e-4)
    with pytest.raises(SpecError, match="failures to simulate"):
        analyse(spec, runs=10_000, horizon_s=365 * 86400.0)
