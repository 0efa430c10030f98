"""Simulated timings reused within a scope (a machine and its what-ifs): the same time, and
only where the schedule runs over links alike."""

from __future__ import annotations

import pytest

import commsim
from commsim.algorithms.calls import make_call
from commsim.engine import reuse
from commsim.engine.evaluate import evaluate
from commsim.engine.exact import exact_timing
from commsim.engine.reuse import in_scope
from commsim.topology import load_topology
from commsim.topology.degrade import apply_what_if, link_labels

#: 16 hosts of 8 GPUs, a double binary tree among all 128 ranks in one piece: 508 transfers,
#: contended (its two trees share each rank's links), so the event loop times it and it is kept.
PRESET, ALGORITHM = "dgx-h100x16", "double_binary_tree"


def _timed(network: commsim.Network, nbytes: int = 1 << 30, algorithm: str = ALGORITHM):
    call = make_call(commsim.Collective.ALL_REDUCE, network, nbytes, chunks=1)
    return evaluate(call, network, algorithm, "des")


@pytest.fixture(autouse=True)
def _empty_memo():
    reuse.forget()
    yield
    reuse.forget()


def test_an_alike_call_in_the_scope_is_given_back_and_equals_a_fresh_simulation() -> None:
    """The same schedule on a degraded machine of the scope whose changed link it does not
    cross is the kept timing; timed outside any scope it is simulated afresh, to the same
    digits."""
    healthy = in_scope(load_topology(PRESET))
    first = _timed(healthy)
    assert len(first.schedule) >= reuse.MIN_TRANSFERS
    crossed = {link for pair in {(int(s), int(d)) for s, d in zip(
        first.schedule.columns.src, first.schedule.columns.dst, strict=True)}
        for link in healthy.route(*pair)}
    spare = next(label for k, label in enumerate(link_labels(healthy)) if k not in crossed)
    other, _ = apply_what_if(healthy, {"links": {spare: {"bandwidth": 0.5}}})
    again = _timed(other)
    assert again.timing is first.timing
    fresh = _timed(load_topology(PRESET))
    assert fresh.timing is not first.timing
    assert fresh.time_s == first.time_s
    assert (fresh.timing.end_s == first.timing.end_s).all()


def test_a_changed_link_on_the_routes_is_simulated_again() -> None:
    """Every NIC of host 0 at half speed: the ring crosses it, so the degraded call is
    simulated (a different, slower time), never given the healthy one."""
    healthy = in_scope(load_topology(PRESET))
    first = _timed(healthy)
    slow, _ = apply_what_if(healthy, {"links": {"gpu[0-7]->fabric": {"bandwidth": 0.5},
                                                "fabric->gpu[0-7]": {"bandwidth": 0.5}}})
    degraded = _timed(slow)
    assert degraded.timing is not first.timing and degraded.time_s > first.time_s


def test_scopes_never_share_timings() -> None:
    """Two scopes of one machine (a benchmark's repeated runs) each simulate."""
    a = _timed(in_scope(load_topology(PRESET)))
    b = _timed(in_scope(load_topology(PRESET)))
    assert a.timing is not b.timing and a.time_s == b.time_s


def test_run_what_if_reuses_nothing_it_should_not() -> None:
    """``run --what-if``'s healthy result in a scope equals the plain healthy run, on a
    what-if whose changed NIC one rail crosses and the others do not."""
    what_if = {"links": {"gpu3->fabric": {"bandwidth": 0.5}, "fabric->gpu3": {"bandwidth": 0.5}}}
    net = in_scope(load_topology("dgx-h100x16"))
    degraded, _ = apply_what_if(net, what_if)
    slow = commsim.simulate("all_reduce", degraded, "1GiB")
    healthy = commsim.simulate("all_reduce", net, "1GiB")
    plain = commsim.simulate("all_reduce", load_topology("dgx-h100x16"), "1GiB")
    assert healthy.time_s == plain.time_s < slow.time_s


def test_an_uncontended_schedule_is_timed_exactly_and_never_kept() -> None:
    """A ring among 128 ranks (32,512 transfers) shares no link: the exact evaluator times it,
    cheaper than its key, so nothing is kept and each call in the scope times it anew, to the
    same digits."""
    healthy = in_scope(load_topology(PRESET))
    first = _timed(healthy, algorithm="ring")
    assert len(first.schedule) >= reuse.MIN_TRANSFERS
    assert exact_timing(first.schedule.columns, first.network) == first.timing
    again = _timed(healthy, algorithm="ring")
    assert again.timing is not first.timing and again.timing == first.timing
    assert reuse._kept.held == 0
