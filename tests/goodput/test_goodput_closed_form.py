"""The goodput closed form: Young's and Daly's intervals, Daly's exact expectation, the best
interval, asynchronous checkpoints and the checkpoint's cost and size."""

from __future__ import annotations

import functools
import math

import pytest

from commsim.goodput import closed_form as cf
from commsim.goodput.checkpoint import checkpoint_cost, model_checkpoint_bytes
from commsim.goodput.spec import GoodputSpec
from commsim.plan.models import catalogue_model


@pytest.mark.parametrize("ratio", [1e-6, 1e-5, 1e-4])
def test_best_interval_is_youngs_at_low_rates(ratio):
    """With a checkpoint far cheaper than the MTBF, the best interval is Young's sqrt(2 C M)
    (to a relative error of order sqrt(C/M))."""
    mtbf = 3 * 3600.0
    c = ratio * mtbf
    best = cf.best_interval(1 / mtbf, c, 0.0)
    assert best == pytest.approx(math.sqrt(2 * c * mtbf), rel=2 * math.sqrt(ratio))


@pytest.mark.parametrize("ratio", [1e-3, 1e-2, 0.1])
def test_dalys_estimate_is_closer_than_youngs(ratio):
    """Daly's higher-order estimate sqrt(2CM)(1 + sqrt(C/2M)/3 + C/18M) - C is nearer the exact
    optimum than Young's, within 1% of it for C <= M/10."""
    mtbf = 3600.0
    c = ratio * mtbf
    best = cf.best_interval(1 / mtbf, c, 0.0)
    daly, young = cf.daly_interval(1 / mtbf, c), cf.young_interval(1 / mtbf, c)
    assert abs(daly - best) < abs(young - best)
    assert daly == pytest.approx(best, rel=0.01)


def test_dalys_formula_at_its_published_constants():
    """Daly's eq. 37 term by term at C = 600 s, M = 24 h, and M itself once C >= 2M."""
    c, m = 600.0, 86400.0
    r = c / (2 * m)
    expected = math.sqrt(2 * c * m) * (1 + math.sqrt(r) / 3 + r / 9) - c
    assert cf.daly_interval(1 / m, c) == pytest.approx(expected, rel=1e-12)
    assert cf.daly_interval(1 / 100.0, 250.0) == pytest.approx(100.0)


def test_goodput_is_dalys_exact_expectation():
    """Without an asynchronous write, G = tau / (M e^{R/M} (e^{(tau+C)/M} - 1))."""
    m, tau, c, r = 7200.0, 900.0, 45.0, 600.0
    expected = tau / (m * math.exp(r / m) * (math.exp((tau + c) / m) - 1))
    assert cf.goodput(1 / m, tau, c, 0.0, r) == pytest.approx(expected, rel=1e-12)


def test_best_interval_maximises_the_goodput():
    """The best interval beats its neighbours 1% either side (it solves dG/dtau = 0)."""
    lam, c, r = 1 / 3600.0, 30.0, 300.0
    best = cf.best_interval(lam, c, 0.0)
    g = cf.goodput(lam, best, c, 0.0, r)
    assert g > cf.goodput(lam, best * 1.01, c, 0.0, r)
    assert g > cf.goodput(lam, best * 0.99, c, 0.0, r)


def test_no_failures_leaves_only_the_checkpoints():
    """At a zero failure rate the goodput is tau / (tau + C)."""
    assert cf.goodput(0.0, 900.0, 100.0, 50.0, 600.0) == pytest.approx(0.9)


def test_async_best_interval_is_at_least_the_write():
    """An asynchronous checkpoint's best interval is the synchronous optimum of its stall, but
    never shorter than its background write; a background write costs less than a stall."""
    lam = 1 / 3600.0
    assert cf.best_interval(lam, 1.0, 10.0) == pytest.approx(cf.best_interval(lam, 1.0, 0.0))
    assert cf.best_interval(lam, 1.0, 500.0) == 500.0
    assert cf.goodput(lam, 300, 1, 60, 600) > cf.goodput(lam, 300, 61, 0, 600)


def test_checkpoint_cost_sharded_rank0_async():
    """Sharded writes run at min(storage, ranks x one writer), rank 0's at min(storage, one
    writer); an asynchronous checkpoint stalls for the host copy of each rank's shard only."""
    base = dict(gpus=64, step_time_s=1.0, checkpoint_bytes=10**12, write_Bps=100e9,
                read_Bps=50e9, rank_Bps=10e9)
    sharded = checkpoint_cost(GoodputSpec(**base))
    assert (sharded.write_s, sharded.read_s, sharded.commit_delay_s) == (10.0, 20.0, 0.0)
    rank0 = checkpoint_cost(GoodputSpec(**base, writers="rank0"))
    assert (rank0.write_s, rank0.blocking_s) == (100.0, 100.0)
    snap = checkpoint_cost(GoodputSpec(**base, async_checkpoint=True, host_Bps=25e9))
    assert snap.blocking_s == pytest.approx(10**12 / 64 / 25e9)
    assert snap.commit_delay_s == 10.0


def test_model_checkpoint_is_weights_and_adam_states():
    """A model's checkpoint is 14 bytes per parameter (bf16 weights, fp32 master weights,
    momentum and variance): Llama 3 70B about 0.99 TB."""
    model = catalogue_model("llama3-70b")
    assert model_checkpoint_bytes(model) == 14 * model.params
    assert model_checkpoint_bytes(model) / 1e12 == pytest.approx(0.988, abs=0.01)


def test_elastic_never_beats_no_failure_and_loses_speed_with_slowdown():
    """The elastic goodput falls as one node out costs more speed, and stays below the plain
    goodput (it pays rejoins and slower training on top)."""
    lam, tau, c, r = 1 / 10800, 600.0, 20.0, 600.0
    plain = cf.goodput(lam, tau, c, 0.0, r)
    values = [cf.elastic_goodput(lam, tau, c, 0.0, r, rejoin_s=r, repair_s=3600, slowdown=d)
              for d in (0.0, 0.01, 0.1)]
    assert plain > values[0] > values[1] > values[2]


def test_elastic_without_its_costs_is_the_plain_goodput():
    """A node back before the recovery ends (S <= R) never slows the run nor needs a rejoin;
    a free rejoin (R_j = 0, synchronous) at no speed cost loses nothing: both are G(tau; R)."""
    lam, tau, c, r = 1 / 3600, 600.0, 20.0, 600.0
    plain = cf.goodput(lam, tau, c, 0.0, r)
    early = cf.elastic_goodput(lam, tau, c, 0.0, r, rejoin_s=r, repair_s=r, slowdown=0.5)
    free = cf.elastic_goodput(lam, tau, c, 0.0, r, rejoin_s=0.0, repair_s=5 * 3600, slowdown=0)
    assert early == pytest.approx(plain, rel=1e-12)
    assert free == pytest.approx(plain, rel=1e-12)


def _first_order(lam, tau, c, w, r, rejoin, repair, d):
    """The elastic form to first order in lam: one planned rejoin per failure, which costs
    R_j and the write W after the snapshot it stops at; the failed node out for the J
    checkpoints up to the first durable one at or after L = S - R (``J b = L + wait - W``)."""
    b, live = tau + c, repair - r
    checkpoints = 1 if live < b + w else math.floor((live - b - w) / b) + 2
    plain = cf.goodput(lam, tau, c, w, r)
    return plain * (1 - lam * (rejoin + w)) * (1 - d * lam * checkpoints * b)


@pytest.mark.parametrize(("w", "repair"), [(0.0, 3600.0), (150.0, 3600.0), (0.0, 7200.0)])
def test_elastic_reduces_to_first_order_as_failures_get_rare(w, repair):
    """As lam -> 0 the exact form's difference from the first-order one shrinks like lam
    relative to what the elastic restart costs: 10x rarer failures, 10x smaller."""
    tau, c, r, rejoin, d = 600.0, 20.0, 600.0, 500.0, 0.05
    ratios = []
    for mtbf in (1e5, 1e6):
        lam = 1 / mtbf
        exact = cf.elastic_goodput(lam, tau, c, w, r, rejoin_s=rejoin, repair_s=repair,
                                   slowdown=d)
        loss = cf.goodput(lam, tau, c, w, r) - exact
        ratios.append(abs(exact - _first_order(lam, tau, c, w, r, rejoin, repair, d)) / loss)
    assert ratios[1] < 0.002 and ratios[1] < ratios[0] / 5


def _by_stretches(lam, tau, c, w, r, rejoin, repair, d):
    """The elastic goodput by another route: a recursion over whole stretches, each ending at
    the checkpoint after the first repair in it, with the expected nodes out per outcome in
    closed form (the first repair at ``z ~ Exp(lam)``, at most ``h``, leaves ``1 + lam (h - z)``
    out on average besides it). Linear speed: for a ``d`` small enough never to reach 0."""
    b, live = tau + c, repair - r
    a = b + w
    settled = tau * math.exp(-lam * a) / -math.expm1(-lam * b)

    @functools.cache
    def value(n, m):  # a stretch starting with the failed node back h later
        h = live - n * (a + rejoin) - m * b
        if h <= 0:
            return settled
        ends = [0.0] + [a + (j - 1) * b for j in range(1, 2 + math.ceil(h / b))]
        total, banked = 0.0, 0.0
        for j in range(1, len(ends)):
            lo, hi = ends[j - 1], min(ends[j], h)
            banked += math.exp(-lam * ends[j])
            p_in = math.exp(-lam * lo) - (math.exp(-lam * hi) if ends[j] <= h else 0.0)

            def tail(x):  # the antiderivative of lam e^-(lam x) (1 + lam (h - x))
                return math.exp(-lam * x) * (lam * x - lam * h)
            out = p_in + tail(hi) - tail(lo)  # E[nodes out; first repair in slot j]
            total += tau * banked * (p_in - d * out)
            total += p_in * math.exp(-lam * (ends[j] + rejoin)) * value(n + 1, m + j - 1)
            if ends[j] > h:
                return total
        raise AssertionError("the slot that holds h ends the stretch")

    return lam * math.exp(-lam * r) * value(0, 0)


@pytest.mark.parametrize(("lam", "w", "rejoin", "repair"), [
    (1 / 10800, 0.0, 600.0, 3600.0), (1 / 2000, 0.0, 700.0, 3600.0),
    (1 / 1800, 200.0, 250.0, 5000.0), (1 / 3600, 0.0, 60.0, 4 * 3600.0)])
def test_elastic_agrees_with_a_recursion_over_stretches(lam, w, rejoin, repair):
    """The slot-by-slot sum equals the stretch-by-stretch recursion to rounding."""
    args = (lam, 500.0, 40.0, w, 600.0)
    exact = cf.elastic_goodput(*args, rejoin_s=rejoin, repair_s=repair, slowdown=0.01)
    assert exact == pytest.approx(_by_stretches(*args, rejoin, repair, 0.01), rel=1e-9)


def test_elastic_speed_never_goes_below_zero():
    """With a node out costing a third of the speed, three out stop the run: the expected
    speed counts more as 0, not negative, so the goodput stays above the line through d = 0
    and a small d (where the speed never reaches 0), and at d = 1 it is still >= 0."""
    lam, tau, c, r, s = 1 / 1800, 600.0, 20.0, 600.0, 6 * 3600.0

    def g(d):
        return cf.elastic_goodput(lam, tau, c, 0.0, r, rejoin_s=r, repair_s=s, slowdown=d)

    per_d = (g(0.0) - g(1e-3)) / 1e-3
    assert g(1 / 3) > g(0.0) - per_d / 3 + 0.05
    assert g(1.0) >= 0
