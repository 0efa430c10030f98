"""The step graph on the engine: collectives gated by deps, remapped to global ranks, contending."""

from __future__ import annotations

import pytest

from commsim import simulate
from commsim.engine.tasks import Delay, simulate_items
from commsim.errors import SpecError
from commsim.replay import GraphBuilder, time_graph
from commsim.replay.graph import Task, TaskKind
from commsim.schedule import OpKind, Transfer
from commsim.topology import load_topology

RING4 = {
    "kind": "ring",
    "ranks": 4,
    "link": {"latency": f"{2.0**-20!r}s", "bandwidth": f"{2.0**30!r}B/s"},
}
N = 2**22


def test_delays_and_transfers_share_one_simulation() -> None:
    """A transfer waits for a delay; a delay waits for the transfer: times add up exactly."""
    net = load_topology(RING4)
    t = simulate_items([Delay(1.0), Transfer(0, 1, 0, N, OpKind.COPY, (0,)), Delay(0.5, (1,))], net)
    assert t.end_s.tolist() == [1.0, 1.0 + 2.0**-20 + N / 2.0**30, 1.5 + 2.0**-20 + N / 2.0**30]


def test_items_must_point_backwards() -> None:
    """Deps on later items are rejected (the list must be topologically ordered)."""
    with pytest.raises(ValueError, match="earlier"):
        simulate_items([Delay(1.0, (1,)), Delay(1.0)], load_topology(RING4))


def test_collective_waits_for_its_deps_and_costs_its_standalone_time() -> None:
    """A collective after compute starts when the compute ends and lasts what simulate() says."""
    net = load_topology(RING4)
    b = GraphBuilder(4)
    c = [b.compute(r, 0.25 * (r + 1), name="c", phase="forward") for r in range(4)]
    ar = b.collective(range(4), "all_reduce", N, algorithm="ring", name="ar", phase="g", deps=c)
    timing = time_graph(b.build(), net)
    alone = simulate("all_reduce", net, N, algorithm="ring").time_s
    assert timing.start_s[ar] == 1.0
    assert timing.end_s[ar] - timing.start_s[ar] == pytest.approx(alone, rel=1e-12)
    assert timing.algorithms[ar] == "ring"


def test_collectives_of_different_groups_contend_for_shared_links() -> None:
    """On a ring of 4, all-reduces among {0,2} and {1,3} both route through the middle links:
    run together they take longer than either alone; groups {0,1} and {2,3} do not interfere."""
    net = load_topology(RING4)

    def run(groups: list[tuple[int, ...]]) -> float:
        b = GraphBuilder(4)
        for g in groups:
            b.collective(g, "all_reduce", N, algorithm="ring", name="ar", phase="g")
        return time_graph(b.build(), net).step_time_s

    assert run([(0, 2), (1, 3)]) > run([(0, 2)]) * 1.1
    assert run([(0, 1), (2, 3)]) == run([(0, 1)])


def test_a_pipeline_send_and_a_data_parallel_reduction_share_a_nic_by_max_min() -> None:
    """Two hosts of two GPUs with one NIC each (B each way, latency a per crossing): stage 0
    (rank 0) and stage 1 (rank 2) exchange N bytes each way while the data-parallel pair
    {1, 3} all-reduces N by ring. By hand: the sends alone take N/B + a; the all-reduce
    alone two steps of N/2, N/B + 2a. Together every NIC direction carries 2N bytes: from a
    on, two flows share it at B/2 each by max-min, and while the all-reduce's second step
    waits out its latency the sends take the whole B, so the link never idles and the step
    ends at a + 2N/B, slower than either alone."""
    b_nic, a = 10e9, 5e-6
    net = load_topology({"kind": "server", "nodes": 2, "gpus": 2,
                         "nvswitch": {"latency": "1us", "bandwidth": "1000GB/s"},
                         "nics": {"link": {"latency": f"{a}s", "bandwidth": f"{b_nic}B/s"},
                                  "gpus": [[0, 1]]}})
    assert [net.host_of(r) for r in range(4)] == [0, 0, 1, 1]

    def step(sends: bool, reduction: bool) -> float:
        b = GraphBuilder(4)
        if sends:
            b.send(0, 2, N, name="activation", phase="pipeline")
            b.send(2, 0, N, name="gradient", phase="pipeline")
        if reduction:
            b.collective((1, 3), "all_reduce", N, algorithm="ring", name="grads", phase="dp")
        return time_graph(b.build(), net).step_time_s

    assert step(True, False) == pytest.approx(N / b_nic + a, rel=1e-12)
    assert step(False, True) == pytest.approx(N / b_nic + 2 * a, rel=1e-12)
    assert step(True, True) == pytest.approx(2 * N / b_nic + a, rel=1e-12)


def test_group_ranks_are_remapped_to_global_ranks() -> None:
    """Group (1, 3) on a ring of 4 runs between global ranks 1 and 3, two hops apart: its ring
    all-reduce (two steps of n/2 each way) pays one extra hop latency per step over group (1, 2)."""
    net = load_topology(RING4)

    def run(group: tuple[int, ...]) -> float:
        b = GraphBuilder(4)
        b.collective(group, "all_reduce", N, algorithm="ring", name="ar", phase="g")
        return time_graph(b.build(), net).step_time_s

    assert run((1, 2)) == pytest.approx(2 * (2.0**-20 + N / 2 / 2.0**30), rel=1e-12)
    assert run((1, 3)) == pytest.approx(run((1, 2)) + 2 * 2.0**-20, rel=1e-12)


def test_streams_order_tasks_on_each_rank() -> None:
    """Tasks on one rank's stream run one at a time, in the order they were added."""
    b = GraphBuilder(2)
    b.compute(0, 1.0, name="a", phase="f")
    b.compute(0, 1.0, name="b", phase="f")
    b.compute(1, 1.0, name="c", phase="f")
    g = b.build()
    assert [t.deps for t in g.tasks] == [(), (0,), ()]
    timing = time_graph(g, load_topology(RING4))
    assert timing.end_s == (1.0, 2.0, 1.0)


def test_malformed_tasks_are_spec_errors() -> None:
    """A compute task on two ranks, a send to itself or a graph larger than the network fail."""
    with pytest.raises(SpecError):
        Task(name="x", kind=TaskKind.COMPUTE, ranks=(0, 1))
    with pytest.raises(SpecError):
        Task(name="x", kind=TaskKind.SEND, ranks=(1, 1))
    b = GraphBuilder(8)
    b.compute(7, 1.0, name="x", phase="f")
    with pytest.raises(SpecError, match="needs 8 ranks"):
        time_graph(b.build(), load_topology(RING4))
