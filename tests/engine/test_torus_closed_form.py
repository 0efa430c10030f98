"""DES vs closed form for ``ring_bidirectional`` and ``torus``.

On the ring topology (3 ranks or more the two directions use different links) and on a fully
connected one, ``ring_bidirectional``'s DES time equals
:func:`commsim.engine.analytic.predict` to a relative 1e-9; so does ``torus`` on 1-, 2- and
3-D tori with wrap-around (each ring uses neighbour cables no other ring of its phase uses):
sizes that do and do not divide, default / 1 / 3 pieces, ``gamma > 0`` on half the cases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from commsim.algorithms import SCHEDULED, Call, build_schedule
from commsim.api import make_call, simulate
from commsim.collectives import Collective
from commsim.engine import bidirectional
from commsim.engine import closed_forms as cf
from commsim.engine.analytic import PairCosts, predict
from commsim.engine.des import simulate_des
from commsim.engine.ring_phases import ring_phases
from commsim.network import Network
from commsim.topology import fully_connected, hierarchical, load_topology, ring, switch, torus

REL = 1e-9
SIZES = (0, 1, 7, 1000, 1001, 2**20 + 3)
CHUNKS = (None, 1, 3)
GAMMA = 3e-12
ALPHA, BETA = 1e-6, 100e9
RING_COLLECTIVES = (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_REDUCE)


def _check(name: str, call: Call, network: Network) -> None:
    des = simulate_des(build_schedule(call, name), network).time_s
    closed = predict(call, network, name)
    where = f"{name} {call.collective.value} p={call.ranks} n={call.nbytes} c={call.chunks}"
    assert closed == pytest.approx(des, rel=REL, abs=1e-18), where


@pytest.mark.parametrize("kind", ["ring", "fully_connected"])
@pytest.mark.parametrize("p", range(1, 14))
@pytest.mark.parametrize("coll", SCHEDULED, ids=str)
def test_ring_bidirectional_des_equals_closed_form(coll: Collective, p: int, kind: str) -> None:
    build = ring if kind == "ring" else fully_connected
    nets = [build(p, latency=ALPHA, bandwidth=BETA, gamma=GAMMA * g) for g in (0, 1)]
    for i, n in enumerate(SIZES):
        for chunks in CHUNKS:
            root = (p // 2) if chunks != 3 else p - 1
            call = Call(collective=coll, ranks=p, nbytes=n, chunks=chunks, root=root)
            _check("ring_bidirectional", call, nets[i % 2])


DIMS = [(4, 4), (2, 4), (3, 5), (4, 4, 4), (2, 2, 2), (8, 1), (5,), (2,), (2, 3, 4), (1, 6)]


@pytest.mark.parametrize("dims", DIMS, ids=str)
@pytest.mark.parametrize("coll", RING_COLLECTIVES, ids=str)
def test_torus_des_equals_closed_form(coll: Collective, dims: tuple[int, ...]) -> None:
    p = math.prod(dims)
    nets = [torus(list(dims), latency=ALPHA, bandwidth=BETA, gamma=GAMMA * g) for g in (0, 1)]
    for i, n in enumerate(SIZES):
        for chunks in CHUNKS:
            call = Call(collective=coll, ranks=p, nbytes=n, chunks=chunks, torus_dims=dims)
            _check("torus", call, nets[i % 2])


def test_torus_even_formula() -> None:
    """When ``2 p`` divides ``n``, one piece: ``sum_a 2 (d_a - 1)(alpha + n_a / (2 beta))``
    (plus ``gamma n_a / 2`` per reduce step), ``n_a = n / (d_0 ... d_a)``."""
    dims, n = (4, 4, 4), 64 * 2 * 1000
    net = torus(list(dims), latency=ALPHA, bandwidth=BETA, gamma=GAMMA)
    call = make_call("all_reduce", net, n)
    expected, block = 0.0, n
    for d in dims:
        block //= d
        expected += (d - 1) * (2 * (ALPHA + block / 2 / BETA) + GAMMA * block / 2)
    assert predict(call, net, "torus") == pytest.approx(expected, rel=REL)


def test_scaling_book_all_gather() -> None:
    """All-gather of V bytes over one bidirectional axis of d chips: (d - 1) hops of
    V / (2 d) bytes each way, about V / (2 beta) = V / W_bidirectional for large V."""
    d, v = 16, 2**30
    net = torus([d], latency="1us", bandwidth="45GB/s")
    t = simulate("all_gather", net, v, algorithm="torus", engine="analytic").time_s
    assert t == pytest.approx((d - 1) * (1e-6 + v / (2 * d) / 45e9), rel=REL)
    assert t == pytest.approx(v / (2 * 45e9), rel=0.07)


def test_tpu_preset_all_reduce_des_equals_closed_form() -> None:
    """The v4 cube (4x4x4, wrap-around): torus all-reduce of an uneven 1 MiB + 5 bytes."""
    net = load_topology("tpu-v4-64")
    r = simulate("all_reduce", net, 2**20 + 5, algorithm="torus")
    a = simulate("all_reduce", net, 2**20 + 5, algorithm="torus", engine="analytic")
    assert a.time_s == pytest.approx(r.time_s, rel=REL)


def test_ring_phases_budget_bound() -> None:
    """Past the budget, the phase sum bounds the exact longest path from above."""
    dims, n = (3, 5), 1001
    net = torus(list(dims), latency=ALPHA, bandwidth=BETA, gamma=GAMMA)
    call = make_call("all_reduce", net, n, chunks=3)
    exact = predict(call, net, "torus")
    pairs = PairCosts.of(net, 15, None)
    phases = [bidirectional._torus_phase(pairs, dims, a, n, True) for a in (0, 1)]
    phases += [bidirectional._torus_phase(pairs, dims, a, n, False) for a in (1, 0)]
    assert ring_phases(n, 3, phases, GAMMA) == pytest.approx(exact, rel=REL)
    assert ring_phases(n, 3, phases, GAMMA, budget=0) >= exact


def test_ring_blocks_matches_ring_collective() -> None:
    """With the ring's own segments, ring_blocks is ring_collective."""
    hop = cf.Hop(ALPHA, BETA, GAMMA)
    for p, n, c in [(5, 1001, 1), (5, 1001, 3), (7, 2**20 + 3, 4), (3, 2, 5)]:
        segs = cf.segment_lengths(p, n)
        for steps in [(p - 1, 0, 1), (0, p - 1, 0), (p - 1, p - 1, 1)]:
            assert cf.ring_blocks(segs, c, *steps, hop, hop) == pytest.approx(
                cf.ring_collective(p, n, c, *steps, hop, hop), rel=REL
            )
    assert cf.ring_blocks(np.zeros(4, dtype=np.int64), 2, 3, 3, 1, hop, hop) == 0.0


def test_ring_bidirectional_counts_shared_switch_ports() -> None:
    """On a switch, a rank's two flows share its port: no faster than the ring there (the DES
    agrees); across hosts the NIC's second direction halves the inter-host time."""
    net = switch(8, latency="1us", bandwidth="100GB/s")
    call = make_call("all_reduce", net, 2**24)
    ring_s, bidi_s = predict(call, net, "ring"), predict(call, net, "ring_bidirectional")
    des = simulate_des(build_schedule(call, "ring_bidirectional"), net).time_s
    assert bidi_s >= ring_s * 0.99
    assert bidi_s == pytest.approx(des, rel=0.01)
    hier = hierarchical(4, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s"))
    call = make_call("all_gather", hier, 2**26)
    assert predict(call, hier, "ring_bidirectional") < 0.6 * predict(call, hier, "ring")
