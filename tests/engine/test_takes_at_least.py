"""A schedule's DES time proven at least a bound without the event loop
(:func:`commsim.engine.exact.takes_at_least`), and ``evaluate``'s ``cap``, which skips a DES
so proven: never a wrong yes, and ``min(time, cap)`` always the uncapped time's, to the bit."""

from __future__ import annotations

import pytest

from commsim.algorithms import build_schedule
from commsim.api import make_call
from commsim.collectives import Collective
from commsim.engine.evaluate import evaluate
from commsim.engine.exact import exact_timing, takes_at_least, time_schedule
from commsim.topology import hierarchical, load_topology, switch

#: Contended (trees sharing a rank's port; a butterfly over a hierarchy) and uncontended cases.
CASES = [
    (switch(7, latency="1us", bandwidth="100GB/s", gamma=3e-12), "double_binary_tree"),
    (switch(7, latency="1us", bandwidth="100GB/s"), "ring"),
    (hierarchical(3, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s")), "double_binary_tree"),
    (hierarchical(3, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s")), "recursive_doubling"),
    (load_topology("dgx-h100x2"), "double_binary_tree"),
    (load_topology("dgx-h100x2"), "ring"),
]
SIZES = [1, 1001, 2**20 + 3]


@pytest.mark.parametrize("network, algorithm", CASES, ids=lambda x: getattr(x, "name", x))
@pytest.mark.parametrize("nbytes", SIZES)
def test_a_yes_holds_for_the_event_loop_and_is_given_below_it(network, algorithm, nbytes
                                                              ) -> None:
    """Yes only where the DES's time reaches the bound; yes just below the time where the
    schedule is uncontended (its DES is that longest path) and at a tenth of it always."""
    call = make_call(Collective.ALL_REDUCE, network, nbytes)
    schedule = build_schedule(call, algorithm)
    time_s = time_schedule(schedule, network).time_s
    for factor in (0.1, 0.5, 0.999999, 1.0, 1.000001, 2.0):
        bound = time_s * factor
        if takes_at_least(schedule, network, bound):
            assert time_s >= bound
    assert takes_at_least(schedule, network, time_s * 0.1)
    if exact_timing(schedule.columns, network) is not None:
        assert takes_at_least(schedule, network, time_s * 0.999999)
    assert not takes_at_least(schedule, network, time_s * 1.000001)


def test_the_cases_include_contended_schedules() -> None:
    """Where the event loop runs (the exact evaluator declines), the bound is the point."""
    calls = [(make_call(Collective.ALL_REDUCE, net, 2**20 + 3), net, algo) for net, algo in CASES]
    contended = [net.name for call, net, algo in calls
                 if exact_timing(build_schedule(call, algo).columns, net) is None]
    assert len(contended) >= 2


@pytest.mark.parametrize("network, algorithm", CASES, ids=lambda x: getattr(x, "name", x))
def test_a_capped_evaluation_gives_the_uncapped_minimum(network, algorithm) -> None:
    """``min(evaluate(..., cap=c).time_s, c) == min(evaluate(...).time_s, c)`` for caps
    below, at and above the time; a cap the schedule provably reaches is the time given."""
    call = make_call(Collective.ALL_REDUCE, network, 2**20 + 3)
    full = evaluate(call, network, algorithm, "des").time_s
    for cap in (full * 0.1, full * 0.9, full, full * 1.1):
        capped = evaluate(call, network, algorithm, "des", cap=cap)
        assert min(capped.time_s, cap) == min(full, cap)
    assert evaluate(call, network, algorithm, "des", cap=full * 0.1).time_s == full * 0.1
