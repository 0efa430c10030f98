"""Exact symmetry (commsim.engine.symmetry): where a ring's hops cost the same and share no
link, the DES time is had from one representative (the closed form) and equals the full
simulation; where they share a link or differ, the full simulation runs."""

from __future__ import annotations

import itertools

import pytest

from commsim.algorithms.calls import make_call
from commsim.engine import evaluate as evaluate_module
from commsim.engine.analytic import predict
from commsim.engine.evaluate import evaluate
from commsim.engine.symmetry import symmetric_note
from commsim.nccl import NcclModel
from commsim.network import Device, Link, Network
from commsim.topology import fully_connected, hierarchical, load_topology, ring, switch, torus

SYMMETRIC = {
    "ring8": lambda: ring(8, latency="1us", bandwidth="100GB/s"),
    "ring5": lambda: ring(5, latency="3us", bandwidth="10GB/s", gamma="0.1ns"),
    "switch6": lambda: switch(6, latency="2us", bandwidth="50GB/s"),
    "full4": lambda: fully_connected(4, latency="1us", bandwidth="25GB/s"),
    "dgx-h100": lambda: load_topology("dgx-h100"),
}
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")


@pytest.fixture(autouse=True)
def _always_by_symmetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Symmetry even for these small rings (by default it starts at 50,000 transfers)."""
    monkeypatch.setattr(evaluate_module, "SYMMETRY_MIN_TRANSFERS", 0)


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
def test_symmetric_note_equals_the_full_simulation(name: str) -> None:
    """Every collective, sizes that do and do not divide evenly, default and forced chunks,
    a root other than 0: the one-representative time is the full DES's (to 1e-9)."""
    net = SYMMETRIC[name]()
    for coll, size, chunks in itertools.product(COLLECTIVES, (1 << 20, 1_000_003, 7),
                                                (None, 1, 3)):
        call = make_call(coll, net, size, chunks=chunks, root=1)
        assert symmetric_note(call, net, "ring") is not None
        full = evaluate(call, net, "ring", "des", records=True)
        fast = evaluate(call, net, "ring", "des")
        assert full.schedule is not None and full.timing is not None
        assert fast.note is not None and fast.schedule is None
        assert fast.time_s == pytest.approx(full.timing.time_s, rel=1e-9, abs=0.0)
        assert full.time_s == fast.time_s  # asking for records never changes the time


def test_nccl_phase_groups_are_symmetric_and_exact() -> None:
    """The phases of NCCL's pipelined trees on dgx-h100x4: the ring inside a host and the
    rail ring across hosts, each on its protocol network, equal their full simulations."""
    net = load_topology("dgx-h100x4")
    model = NcclModel.of(net)
    host, rail = tuple(range(8)), tuple(range(0, 32, 8))
    for ranks, protocol in itertools.product((host, rail), ("LL", "Simple")):
        view = model.phase_network(ranks, model.protocol(protocol), "tree")
        call = make_call("all_reduce", view, 3 << 20)
        assert symmetric_note(call, view, "ring") is not None
        full = evaluate(call, view, "ring", "des", records=True).time_s
        assert evaluate(call, view, "ring", "des").time_s == pytest.approx(full, rel=1e-9)


def _two_rings_over_shared_nics() -> Network:
    """GPUs 0 and 2 behind NIC a, 1 and 3 behind NIC b, the NICs joined by a core switch:
    every ring hop costs the same (4 links), but hops 0->1 and 2->3 both cross a->core."""
    devices = tuple(Device(f"gpu{i}", "gpu") for i in range(4)) + (
        Device("a", "switch"), Device("b", "switch"), Device("core", "switch"))
    a, b, core = 4, 5, 6
    pairs = [(0, a), (2, a), (1, b), (3, b), (a, core), (b, core)]
    links = tuple(Link(s, d, 1e-6, 1e9) for x, y in pairs for s, d in ((x, y), (y, x)))
    return Network("shared-nics", devices, links, (0, 1, 2, 3))


def test_a_ring_that_shares_a_link_is_simulated_in_full() -> None:
    """Alike hops that share a NIC are contended: no symmetry, and the DES (slower than the
    closed form) runs in full."""
    net = _two_rings_over_shared_nics()
    call = make_call("all_reduce", net, 1 << 20)
    assert symmetric_note(call, net, "ring") is None
    done = evaluate(call, net, "ring", "des")
    assert done.note is None and done.schedule is not None
    assert done.time_s > predict(call, net, "ring") * 1.2


@pytest.mark.parametrize("make", [
    lambda: hierarchical(2, 4, intra=("1us", "100GB/s"), inter=("5us", "10GB/s")),
    lambda: torus((4, 4), latency="1us", bandwidth="45GB/s"),
])
def test_rings_with_unlike_hops_are_simulated_in_full(make) -> None:  # type: ignore[no-untyped-def]
    """A ring across hosts (NVLink and network hops) or in row-major order on a torus (the
    wrap-around hops are longer): no symmetry claimed."""
    net = make()
    call = make_call("all_reduce", net, 1 << 20)
    assert symmetric_note(call, net, "ring") is None
    assert evaluate(call, net, "ring", "des").note is None


def test_other_algorithms_are_not_claimed() -> None:
    net = ring(8, latency="1us", bandwidth="100GB/s")
    call = make_call("all_reduce", net, 1 << 20)
    assert symmetric_note(call, net, "ring_bidirectional") is None
    assert symmetric_note(call, net, "recursive_doubling") is None


def test_small_simulations_keep_their_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the threshold the DES runs (its result carries its transfers); from it on, the
    same call is had by symmetry."""
    net = ring(8, latency="1us", bandwidth="100GB/s")
    call = make_call("all_reduce", net, 1 << 20)
    monkeypatch.setattr(evaluate_module, "SYMMETRY_MIN_TRANSFERS", 113)  # the ring has 112
    assert evaluate(call, net, "ring", "des").schedule is not None
    monkeypatch.setattr(evaluate_module, "SYMMETRY_MIN_TRANSFERS", 112)
    assert evaluate(call, net, "ring", "des").note is not None


def test_replay_still_sees_contention_between_symmetric_notes() -> None:
    """A step with two groups' rings lowers their transfers (made when asked), so rings that
    are each symmetric alone still contend where their routes meet."""
    from commsim.replay.graph import GraphBuilder
    from commsim.replay.lower import time_graph

    net = ring(4, latency="1us", bandwidth="100GB/s")

    def step(groups: list[tuple[int, ...]]) -> float:
        b = GraphBuilder(4)
        for g in groups:
            b.collective(g, "all_reduce", 1 << 20, algorithm="ring", name="ar", phase="g")
        return time_graph(b.build(), net).step_time_s

    assert step([(0, 2), (1, 3)]) > step([(0, 2)]) * 1.1


HOSTS = {
    "3x4": lambda: hierarchical(3, 4, intra=("1us", "100GB/s"), inter=("5us", "10GB/s")),
    "5x2-gamma": lambda: hierarchical(5, 2, intra=("1us", "100GB/s"), inter=("5us", "10GB/s"),
                                      gamma="0.1ns"),
    "2x1": lambda: hierarchical(2, 1, intra=("1us", "100GB/s"), inter=("5us", "10GB/s")),
    **{f"{p}x2": (lambda p=p: load_topology(f"{p}x2"))
       for p in ("dgx-a100", "dgx-h100", "dgx2-v100", "gcp-a3-mega", "hgx-h800")},
}


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_symmetric_hosts_equal_the_full_simulation(name: str) -> None:
    """``hierarchical`` over hosts of one size: where its host rings and rail rings are
    claimed symmetric, the one-representative time is the full DES's (to 1e-9)."""
    net = HOSTS[name]()
    claimed = 0
    for size, chunks in itertools.product((1 << 20, 1_000_003, 7), (None, 3)):
        call = make_call("all_reduce", net, size, chunks=chunks)
        full = evaluate(call, net, "hierarchical", "des", records=True).time_s
        fast = evaluate(call, net, "hierarchical", "des")
        claimed += fast.note is not None
        assert fast.time_s == pytest.approx(full, rel=1e-9, abs=0.0)
    assert claimed in (0, 6)
    if name in ("3x4", "5x2-gamma", "2x1", "dgx-h100x2"):
        assert claimed == 6


def test_hosts_of_different_sizes_are_simulated_in_full() -> None:
    """The first 12 ranks of two 8-GPU hosts: no symmetry claimed."""
    net = load_topology("dgx-h100x2").with_ranks(12)
    call = make_call("all_reduce", net, 1 << 20)
    assert symmetric_note(call, net, "hierarchical") is None


def test_a_composed_phase_too_large_to_simulate_is_refused(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A composed candidate's phases run their DES only up to MAX_PHASE_DES_TRANSFERS each (a
    phase had by symmetry simulates nothing): beyond it the call is refused in one line
    naming the phase, and the closed form still answers. (At 256 MiB on 8 x 8 ranks the
    call's pipelined schedule is beyond a budget of 8,192 transfers: the composed phases
    answer.)"""
    from commsim import nccl_composed, nccl_tree
    from commsim.errors import SpecError

    monkeypatch.setattr(nccl_tree, "MAX_TREE_TRANSFERS", 8192)
    net = load_topology("dgx-h100x8")
    call = make_call("all_reduce", net, 256 << 20)
    des = NcclModel(net).evaluate(call, nccl_composed.PIPELINED, "Simple", "des").time_s
    monkeypatch.setattr(nccl_composed, "MAX_PHASE_DES_TRANSFERS", 1)
    with pytest.raises(SpecError, match="double_binary_tree all_reduce on 8 ranks"):
        NcclModel(net).evaluate(call, nccl_composed.PIPELINED, "Simple", "des")
    assert NcclModel(net).evaluate(call, nccl_composed.PIPELINED, "Simple", "analytic").time_s > 0
    assert des > 0
