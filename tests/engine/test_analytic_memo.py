"""The analytic engine's memoised pair costs: a warm network predicts what a fresh one does.

``predict`` keeps each network's per-phase hops and host layout with the network (they do not
depend on the size), so a sweep computes them once. Reusing them must never change a result.
"""

from __future__ import annotations

import pytest

from commsim.algorithms import SCHEDULED, candidates
from commsim.api import make_call
from commsim.engine.analytic import PairCosts, predict
from commsim.topology import hierarchical, load_topology, torus

SIZES = (1, 1001, 2**20 + 3, 2**30)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torus([4, 4], latency="1us", bandwidth="45GB/s"),
        lambda: hierarchical(4, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s")),
        lambda: hierarchical(3, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s")).with_ranks(
            10
        ),
    ],
)
def test_warm_network_predicts_what_a_fresh_one_does(make) -> None:  # type: ignore[no-untyped-def]
    """Every collective, algorithm, size and piece count on one network (memo warm, in sweep
    order) equals the prediction on a freshly built network (memo cold)."""
    warm = make()
    for coll in SCHEDULED:
        for n in SIZES:
            for chunks in (None, 3):
                call = make_call(coll, warm, n, chunks=chunks, root=1)
                for name in candidates(call):
                    fresh = make()
                    assert predict(call, warm, name) == predict(call, fresh, name), (coll, name)


def test_pair_costs_are_kept_per_network_and_rank_count() -> None:
    """One PairCosts per (network, ranks, hosts); another network or rank count gets its own."""
    net = hierarchical(2, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s"))
    hosts = net.rank_hosts()
    assert hosts == (0, 0, 0, 0, 1, 1, 1, 1)
    assert PairCosts.of(net, 8, hosts) is PairCosts.of(net, 8, hosts)
    assert PairCosts.of(net, 4, hosts[:4]) is not PairCosts.of(net, 8, hosts)
    other = hierarchical(2, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s"))
    assert PairCosts.of(other, 8, hosts) is not PairCosts.of(net, 8, hosts)


def test_preset_networks_are_built_once() -> None:
    """A preset named twice is one (immutable) network, so its memo serves a whole sweep; its
    predictions equal those on a network built from the same spec."""
    first, again = load_topology("dgx-h100x2"), load_topology("dgx-h100x2")
    assert first is again
    call = make_call("all_reduce", first, "64MiB")
    rebuilt = hierarchical(2, 8, intra=("0.6us", "370GB/s"), inter=("2.7us", "46GB/s"))
    for name in candidates(call):
        if name == "nvls":  # the preset's node switches reduce; the rebuilt ones do not
            continue
        assert predict(call, first, name) == predict(call, rebuilt, name)
