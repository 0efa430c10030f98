"""DES vs closed form: each engine is the other's oracle on uncontended topologies.

For every algorithm and every collective it runs, on topologies where no two of its transfers
share a link (fully connected for all; the ring topology for ring algorithms; the hierarchical
topology with equal hosts for ``hierarchical`` and ``hierarchical_rabenseifner``), the
discrete-event time equals
:func:`commsim.engine.analytic.predict` to a relative 1e-9: ranks 1..17, sizes that do and do
not divide (0, 1, 7, 1000, 1001, 2^20 + 3), default / 1 / 3 pieces, a non-zero root, and
``gamma > 0`` on half the cases. The contract's worked examples are pinned as numbers.

The one algorithm whose schedules contend by design is ``double_binary_tree``: its two trees use
the same ordered pairs, so once pipelined their pieces share links in the DES. There the closed
form is checked against the longest path of the builder's graph instead (and is a lower bound
of the DES).
"""

from __future__ import annotations

import ast
import functools
import math
from pathlib import Path

import numpy as np
import pytest

from commsim.algorithms import ALGORITHMS, build_schedule
from commsim.algorithms.base import Call
from commsim.api import make_call, simulate
from commsim.collectives import Collective
from commsim.engine import analytic, butterfly
from commsim.engine import closed_forms as cf
from commsim.engine.analytic import predict
from commsim.engine.des import simulate_des
from commsim.network import Network
from commsim.schedule import OpKind, Schedule, ScheduleBuilder
from commsim.topology import fully_connected, hierarchical, ring

REL = 1e-9
SIZES = (0, 1, 7, 1000, 1001, 2**20 + 3)
CHUNKS = (None, 1, 3)
GAMMA = 3e-12  # s/B: 1/3 of the 100 GB/s wire time, so reduce terms are visible
ALPHA, BETA = 1e-6, 100e9


def _flat(kind: str, ranks: int, gamma: float) -> Network:
    build = fully_connected if kind == "fully_connected" else ring
    return build(ranks, latency=ALPHA, bandwidth=BETA, gamma=gamma)


def _cases(kind: str) -> list[tuple[str, Collective, int]]:
    out = []
    for name, algo in ALGORITHMS.items():
        if (
            algo.needs_hosts
            or algo.needs_torus
            or algo.reduces_in
            or not algo.closed_form
            or (kind == "ring" and name != "ring")
            # Bruck's closed form is exact for equal blocks only (a round's blocks of unequal
            # sizes share one link and end apart): tests/algorithms/test_alltoall.py
            or name == "bruck"
        ):
            continue
        for coll in sorted(algo.collectives):
            for p in range(1, 18):
                if algo.power_of_two_only and p & (p - 1):
                    continue
                out.append((name, coll, p))
    return out


def _calls(coll: Collective, p: int):  # type: ignore[no-untyped-def]
    """Every size x chunks, alternating gamma and moving the root off rank 0."""
    for i, n in enumerate(SIZES):
        for chunks in CHUNKS:
            root = (p // 2) if chunks != 3 else p - 1
            yield Call(collective=coll, ranks=p, nbytes=n, root=root, chunks=chunks), i % 2


def _longest_path(schedule: Schedule, network: Network) -> float:
    """Finish time with no bandwidth sharing: each transfer costs alpha + n/beta (+ gamma n)
    after its dependencies (valid for schedules whose messages have one byte range each)."""
    end: list[float] = []
    for t in schedule.transfers:
        alpha, beta = network.path_cost(t.src, t.dst)
        cost = alpha + t.nbytes / beta
        if t.op is OpKind.REDUCE:
            cost += network.gamma_s_per_B * t.nbytes
        end.append(max((end[d] for d in t.deps), default=0.0) + cost)
    return max(end, default=0.0)


def _check(name: str, call: Call, network: Network) -> None:
    des = simulate_des(build_schedule(call, name), network).time_s
    closed = predict(call, network, name)
    where = f"{name} {call.collective.value} p={call.ranks} n={call.nbytes} chunks={call.chunks}"
    assert closed == pytest.approx(des, rel=REL, abs=1e-18), where


@pytest.mark.parametrize(
    ("name", "coll", "p"),
    _cases("fully_connected"),
    ids=lambda v: v.value if isinstance(v, Collective) else str(v),
)
def test_des_equals_closed_form_on_fully_connected(name: str, coll: Collective, p: int) -> None:
    """Every algorithm x collective on a dedicated link per ordered pair: DES == closed form,
    for all sizes (even and uneven), piece counts, roots and with/without gamma."""
    nets = {g: _flat("fully_connected", p, GAMMA * g) for g in (0, 1)}
    for call, g in _calls(coll, p):
        if name == "double_binary_tree" and (call.chunks or 2) > 1:
            continue  # pipelined DBT contends: see test_double_binary_tree_closed_form
        _check(name, call, nets[g])


@pytest.mark.parametrize(
    ("name", "coll", "p"),
    _cases("ring"),
    ids=lambda v: v.value if isinstance(v, Collective) else str(v),
)
def test_des_equals_closed_form_ring_on_ring_topology(name: str, coll: Collective, p: int) -> None:
    """Ring algorithms on the ring topology (each rank sends only to its + neighbour): exact."""
    nets = {g: _flat("ring", p, GAMMA * g) for g in (0, 1)}
    for call, g in _calls(coll, p):
        _check(name, call, nets[g])


@pytest.mark.parametrize("p", range(1, 18))
def test_double_binary_tree_closed_form(p: int) -> None:
    """double_binary_tree: the closed form is the exact longest path of the builder's graph
    for every size and piece count, equals the DES unpipelined, and never exceeds the DES
    (pipelined pieces of the two trees share links there)."""
    net = _flat("fully_connected", p, GAMMA)
    for call, _ in _calls(Collective.ALL_REDUCE, p):
        schedule = build_schedule(call, "double_binary_tree")
        closed = predict(call, net, "double_binary_tree")
        assert closed == pytest.approx(_longest_path(schedule, net), rel=REL, abs=1e-18)
        des = simulate_des(schedule, net).time_s
        if call.chunks == 1:
            assert closed == pytest.approx(des, rel=REL, abs=1e-18)
        assert closed <= des * (1 + REL)


def _hier_cases() -> list[tuple[int, int]]:
    return [(h, g) for h in range(1, 5) for g in range(1, 5) if h * g > 1]


@pytest.mark.parametrize(("hosts", "gpus"), _hier_cases())
def test_des_equals_closed_form_hierarchical(hosts: int, gpus: int) -> None:
    """``hierarchical`` on hosts of equal size (NVSwitch inside, one NIC per GPU between):
    rings within hosts and rails between them never share a link, so DES == closed form."""
    for g in (0, 1):
        net = hierarchical(
            hosts, gpus, intra=("2us", "450GB/s"), inter=("5us", "50GB/s"), gamma=GAMMA * g
        )
        for n in SIZES:
            for chunks in CHUNKS:
                _check("hierarchical", make_call("all_reduce", net, n, chunks=chunks), net)


def _rabenseifner_rail_cases() -> list[tuple[int, int]]:
    return [(h, g) for h in (2, 3, 4, 5, 8) for g in (1, 2, 3)]


@pytest.mark.parametrize(("hosts", "gpus"), _rabenseifner_rail_cases())
def test_des_equals_closed_form_hierarchical_rabenseifner(hosts: int, gpus: int) -> None:
    """``hierarchical_rabenseifner`` on hosts of equal size, powers of two and not (folded
    hosts), sizes even and uneven, 1 or 3 pieces, with and without gamma, and with zero
    latencies: its rails take turns on each NIC, so nothing is shared and DES == closed form."""
    for g in (0, 1):
        latency = ("0us", "0us") if g else ("2us", "5us")
        net = hierarchical(
            hosts,
            gpus,
            intra=(latency[0], "450GB/s"),
            inter=(latency[1], "50GB/s"),
            gamma=GAMMA * g,
        )
        for n in SIZES:
            for chunks in CHUNKS:
                call = make_call("all_reduce", net, n, chunks=chunks)
                _check("hierarchical_rabenseifner", call, net)


@pytest.mark.parametrize(
    ("hosts", "gpus", "ranks"), [(2, 2, 3), (3, 4, 10), (4, 8, 25), (5, 4, 17)]
)
def test_hierarchical_rabenseifner_unequal_hosts_is_an_estimate(
    hosts: int, gpus: int, ranks: int
) -> None:
    """Hosts of unequal size: a rank owning ``k`` rails sends them in turn on its NIC; the
    closed form charges every rail step ``k`` times over, an upper estimate: not below the DES
    and within 2.5x of it (the worst case is one rank holding every rail of a short host)."""
    net = hierarchical(hosts, gpus, intra=("2us", "450GB/s"), inter=("5us", "50GB/s"))
    net = net.with_ranks(ranks)
    for n in (1000, 2**20 + 3, 2**26):
        call = make_call("all_reduce", net, n)
        schedule = build_schedule(call, "hierarchical_rabenseifner")
        des = simulate_des(schedule, net).time_s
        assert des * (1 - REL) <= predict(call, net, "hierarchical_rabenseifner") <= 2.5 * des


@pytest.mark.parametrize(("hosts", "gpus", "ranks"), [(2, 2, 3), (3, 4, 10), (4, 8, 25)])
def test_hierarchical_unequal_hosts_is_an_estimate(hosts: int, gpus: int, ranks: int) -> None:
    """Hosts of unequal size make ranks own several rails (queued on a pair or sharing a NIC);
    the closed form is then an estimate: not below the DES and within 1.6x of it."""
    net = hierarchical(hosts, gpus, intra=("2us", "450GB/s"), inter=("5us", "50GB/s"))
    net = net.with_ranks(ranks)
    for n in (1000, 2**20 + 3, 2**26):
        call = make_call("all_reduce", net, n)
        des = simulate_des(build_schedule(call, "hierarchical"), net).time_s
        assert des * (1 - REL) <= predict(call, net, "hierarchical") <= 1.6 * des


# -- the contract's worked examples, as numbers ------------------------------------------------
def _both(collective: str, topology: dict[str, object], size: int | str, **kw: object) -> tuple:
    des = simulate(collective, topology, size, engine="des", **kw).time_s  # type: ignore[arg-type]
    ana = simulate(collective, topology, size, engine="analytic", **kw).time_s  # type: ignore[arg-type]
    return des, ana


def _topo(kind: str, ranks: int, gamma: float = 0.0) -> dict[str, object]:
    return {
        "kind": kind,
        "ranks": ranks,
        "gamma": f"{gamma!r}s",
        "link": {"latency": "1us", "bandwidth": "100GB/s"},
    }


def test_ring_all_reduce_8_ranks_1GiB() -> None:
    """Contract: ring all-reduce, 8-rank ring, 1 us, 100 GB/s, 1 GiB = 14 (1 us + 2^30/8 / B)."""
    expected = 14 * (1e-6 + 2**30 / 8 / 100e9)
    for t in _both("all_reduce", _topo("ring", 8), "1GiB", algorithm="ring"):
        assert t == pytest.approx(expected, rel=1e-12)


def test_binomial_broadcast_16_fully_connected() -> None:
    """Binomial broadcast on 16 fully connected ranks: log2(16) = 4 hops of alpha + n/beta."""
    n = 3 * 2**20 + 1
    for t in _both("broadcast", _topo("fully_connected", 16), n, algorithm="binomial_tree", root=5):
        assert t == pytest.approx(4 * (1e-6 + n / 100e9), rel=1e-12)


def test_rabenseifner_all_reduce_with_gamma() -> None:
    """Rabenseifner, p = 16, n divisible: 2 log2(p) alpha + 2 (p-1)/p n/beta + (p-1)/p n gamma."""
    p, n, gamma = 16, 2**24, 1e-12
    expected = 2 * 4 * 1e-6 + 2 * (p - 1) / p * n / 100e9 + (p - 1) / p * n * gamma
    for t in _both("all_reduce", _topo("fully_connected", p, gamma), n, algorithm="rabenseifner"):
        assert t == pytest.approx(expected, rel=1e-12)


def test_pipelined_ring_broadcast_equal_pieces() -> None:
    """Ring broadcast of n in c equal pieces over p ranks: (p - 2 + c)(alpha + n/(c beta))."""
    p, c, n = 8, 4, 4 * 2**20
    expected = (p - 2 + c) * (1e-6 + n / c / 100e9)
    for t in _both("broadcast", _topo("ring", p), n, algorithm="ring", chunks=c, root=3):
        assert t == pytest.approx(expected, rel=1e-12)


def test_pipelined_ring_broadcast_uneven_pieces() -> None:
    """Uneven pieces (1001 B in 3: 333, 334, 334): (p-2) cost(max piece) + sum of piece costs."""
    p = 8

    def cost(x: int) -> float:
        return 1e-6 + x / 100e9

    expected = (p - 2) * cost(334) + cost(333) + 2 * cost(334)
    for t in _both("broadcast", _topo("ring", p), 1001, algorithm="ring", chunks=3):
        assert t == pytest.approx(expected, rel=1e-12)


def test_ring_all_gather_uneven_uses_the_largest_segment() -> None:
    """Ring all-gather of 1001 B over 7 ranks (segments 143): 6 (alpha + 143/beta); over 9
    ranks (segments 111 or 112) the largest segment's chain sets the pace: 8 (alpha + 112/beta)."""
    for p, top in ((7, 143), (9, 112)):
        for t in _both("all_gather", _topo("ring", p), 1001, algorithm="ring"):
            assert t == pytest.approx((p - 1) * (1e-6 + top / 100e9), rel=1e-12)


def test_recursive_doubling_all_reduce_power_of_two_with_gamma() -> None:
    """Recursive doubling, p = 8: log2(p) (alpha + n/beta + gamma n)."""
    n, gamma = 10**6, 2e-12
    for t in _both(
        "all_reduce", _topo("fully_connected", 8, gamma), n, algorithm="recursive_doubling"
    ):
        assert t == pytest.approx(3 * (1e-6 + n / 100e9 + gamma * n), rel=1e-12)


@pytest.mark.parametrize(
    "algorithm",
    ["ring", "binomial_tree", "recursive_doubling", "rabenseifner", "double_binary_tree"],
)
def test_one_rank_and_zero_bytes_take_no_time(algorithm: str) -> None:
    """p = 1 and n = 0 cost exactly 0 s in both engines."""
    for p, size in ((1, 2**20), (4, 0)):
        for t in _both("all_reduce", _topo("fully_connected", p), size, algorithm=algorithm):
            assert t == 0.0


@functools.cache
def _large_hierarchical() -> Network:
    """8,192 hosts x 8 GPUs, gamma 1e-12 s/B (built once: 262,144 links)."""
    return hierarchical(8192, 8, intra=("2us", "450GB/s"), inter=("5us", "50GB/s"), gamma=1e-12)


def test_large_hierarchical_all_reduce_is_the_phase_sum() -> None:
    """65,536 ranks (8,192 hosts x 8 GPUs), 1 GiB: with every size dividing evenly the closed
    form is intra reduce-scatter + rail all-reduce + intra all-gather, term by term."""
    hosts, gpus, n, gamma = 8192, 8, 2**30, 1e-12
    net = _large_hierarchical()
    part, sub = n / gpus, n / gpus / hosts
    expected = (
        (gpus - 1) * (2e-6 + part / 450e9 + gamma * part)
        + (hosts - 1) * (2 * 5e-6 + 2 * sub / 50e9 + gamma * sub)
        + (gpus - 1) * (2e-6 + part / 450e9)
    )
    call = make_call("all_reduce", net, n)
    assert predict(call, net, "hierarchical") == pytest.approx(expected, rel=1e-12)


def test_large_hierarchical_rabenseifner_all_reduce_is_the_phase_sum() -> None:
    """65,536 ranks, 1 GiB, everything dividing evenly: intra reduce-scatter + the rails'
    recursive halving (2^13 hosts: 13 steps of m/2, m/4, ... reduced) and doubling (the same
    sizes copied) + intra all-gather, term by term; ``auto`` picks it there."""
    gpus, n, gamma = 8, 2**30, 1e-12
    net = _large_hierarchical()
    part = n / gpus
    halves = [part / 2**k for k in range(1, 14)]
    expected = (
        (gpus - 1) * (2e-6 + part / 450e9 + gamma * part)
        + sum(5e-6 + x / 50e9 + gamma * x for x in halves)
        + sum(5e-6 + x / 50e9 for x in halves)
        + (gpus - 1) * (2e-6 + part / 450e9)
    )
    call = make_call("all_reduce", net, n)
    assert predict(call, net, "hierarchical_rabenseifner") == pytest.approx(expected, rel=1e-12)


def test_auto_picks_rabenseifner_rails_at_scale() -> None:
    """512 DGX H100 nodes, 1 GiB: ``auto`` ranks by closed forms and picks Rabenseifner rails
    (18 inter-host steps instead of the rings' 1022), the schedule the DES can run at 4096 ranks."""
    result = simulate("all_reduce", "dgx-h100x512", "1GiB", engine="analytic", protocol="none")
    assert result.algorithm == "hierarchical_rabenseifner"


@pytest.mark.parametrize("p", [2, 3, 5, 8, 13, 16, 33])
def test_rabenseifner_nested_shortcut_equals_the_general_recurrence(p: int, monkeypatch) -> None:
    """With one piece and no empty block, Rabenseifner's readiness is a running maximum
    (``butterfly.NESTED_SHORTCUT``); switched off, the general scan over every earlier write
    gives the very same times, flat (all-reduce and reduce-scatter) and per rail."""
    hop = cf.Hop(1e-6, 1e9, 1e-10)
    steps = {1 << m: cf.Hop(1e-6 * (m + 1), 1e9 / (m + 1), 1e-10) for m in range(6)}
    ready = np.array([3e-6])

    def times() -> list[object]:
        out: list[object] = []
        for n in sorted({p, 2 * p - 1, 1001, 2**20 + 3}):
            for all_reduce in (True, False):
                out.append(butterfly.rabenseifner(p, n, 1, all_reduce, hop, steps, hop))
            final, rail_s = butterfly.rail_rabenseifner(p, n, 1, ready, hop)
            out += [final.tolist(), rail_s]
        return out

    shortcut = times()
    monkeypatch.setattr(butterfly, "NESTED_SHORTCUT", False)
    assert times() == shortcut


# -- the closed forms' own shortcuts ---------------------------------------------------------
@pytest.mark.parametrize("p", [5, 17, 33])
@pytest.mark.parametrize("alpha", [0.0, 1e-9, 1e-6])
def test_ring_link_chain_shortcut_matches_the_recurrence(p: int, alpha: float) -> None:
    """Pipelined ring collectives return the longest link chain when no data-following path
    can beat it; that shortcut equals the full (step, piece) recurrence."""
    hop = cf.Hop(alpha, 1e9, 1e-10)
    for n in (7, 1001, 2**16 + 5):
        for c in (2, 3, 5):
            segs = cf.segment_lengths(p, n)
            table = cf.piece_table(segs, c)[None]
            for steps in ((p - 1, p - 1, 1), (0, p - 1, 0), (p - 1, 0, 1)):
                fast = cf.ring_collective(p, n, c, *steps, hop, hop)
                full = cf.ring_steps(table, *steps, hop, hop).time_s
                assert fast == pytest.approx(full, rel=1e-12)


def test_piece_table_follows_the_floor_rule() -> None:
    """Pieces are cut as the builders cut them: [j n // c, (j + 1) n // c)."""
    assert cf.piece_table(np.array([10, 2]), 3).tolist() == [[3, 3, 4], [0, 1, 1]]
    assert cf.piece_sizes(10, 3) == [3, 3, 4]
    assert math.isclose(cf.Hop(1.0, 2.0, 0.5).reduce(4), 1 + 2 + 2)


def _imports(module: object) -> set[str]:
    tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_analytic_engine_needs_neither_simpy_nor_schedules(monkeypatch) -> None:
    """The closed-form modules import neither the DES nor SimPy, and predict() never builds a
    schedule (every builder ends in Schedule.of_columns or ScheduleBuilder.add, both made to
    fail here)."""
    for module in (analytic, cf, butterfly):
        assert not {"simpy", "commsim.engine.des"} & _imports(module), module

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("predict built a schedule")

    monkeypatch.setattr(ScheduleBuilder, "add", refuse)
    monkeypatch.setattr(Schedule, "of_columns", staticmethod(refuse))
    net = fully_connected(6, latency=ALPHA, bandwidth=BETA)
    for name, algo in ALGORITHMS.items():
        for coll in algo.collectives:
            if not algo.needs_hosts and algo.closed_form and not algo.reduces_in:
                dims = (2, 3) if algo.needs_torus else None
                call = Call(collective=coll, ranks=6, nbytes=1001, chunks=2, torus_dims=dims)
                predict(call, net, name)
