"""The batched engine (``commsim.engine.batched``) gives the event loop's timings to the bit.

Both are run on the same columns: schedules of every algorithm of every collective on flat,
switched, torus and hierarchical topologies (contended or not, sizes even and uneven, 1 or 3
pieces, zero-latency links where a piece starts the instant the previous one drained), every
all-to-all on two DGX H100 hosts, and random contended schedules; the vectorised max-min
filling equals the event loop's on random link sharings.
"""

from __future__ import annotations

import numpy as np
import pytest
from _networks import small_networks
from hypothesis import given, settings
from hypothesis import strategies as st

from commsim.algorithms import build_schedule, candidates
from commsim.api import make_call
from commsim.collectives import BUFFER_COLLECTIVES
from commsim.engine import batched, des, maxmin
from commsim.engine.des import Timing, simulate_des
from commsim.network import Network
from commsim.schedule import Columns, OpKind, Schedule, Transfer
from commsim.topology import (
    load_topology,
    switch,
)

NETWORKS = small_networks(with_shared=True)


def _both(columns: Columns, network: Network) -> tuple[Timing, Timing]:
    return (des._Simulation(columns, network).run(),
            Timing(*batched.BatchedSimulation(columns, network).run()))


@pytest.mark.parametrize("network", NETWORKS, ids=lambda n: f"{n.name}-{n.ranks}")
def test_batched_equals_the_event_loop_on_every_algorithm(network: Network) -> None:
    for coll in BUFFER_COLLECTIVES:
        for n in (1001, 2**20 + 3):
            for chunks in (None, 3):
                call = make_call(coll, network, n, chunks=chunks, root=network.ranks // 2)
                for name in candidates(call):
                    loop, batch = _both(build_schedule(call, name).columns, network)
                    assert loop == batch, (coll, n, chunks, name)


@pytest.mark.parametrize("size", [1001, 2**20, 64 * 2**20])
def test_batched_equals_the_event_loop_on_all_to_all(size: int) -> None:
    network = load_topology("dgx-h100x2")
    call = make_call("all_to_all", network, size)
    for name in candidates(call):
        loop, batch = _both(build_schedule(call, name).columns, network)
        assert loop == batch, name


def test_batched_equals_the_event_loop_on_random_contended_schedules() -> None:
    """Random DAGs of transfers (any pair, reduce or copy, 0 B to 32 MiB, heavy sharing,
    sizes that make flows drain at one instant)."""
    rng = np.random.default_rng(7)
    for trial in range(60):
        network = NETWORKS[trial % len(NETWORKS)]
        items = []
        for i in range(int(rng.integers(1, 60))):
            deps = tuple(sorted(rng.choice(i, size=min(i, int(rng.integers(0, 3))),
                                           replace=False).tolist())) if i else ()
            src, dst = (int(x) for x in rng.integers(0, network.ranks, 2))
            nbytes = int(rng.choice([0, 1, 2**20, int(rng.integers(1, 2**25))]))
            items.append(Transfer(src, dst, 0, nbytes, OpKind.REDUCE if rng.random() < 0.3
                                  else OpKind.COPY, deps))
        loop, batch = _both(Columns.from_transfers(items), network)
        assert loop == batch, trial


@pytest.mark.parametrize("network", [*NETWORKS, load_topology("dgx-h100x2")],
                         ids=lambda n: f"{n.name}-{n.ranks}")
def test_route_table_holds_every_route(network: Network) -> None:
    """Routes found in numpy (with their lengths) or pair by pair (a local copy that crosses
    links on a shared host) are the router's, pair by pair."""
    p = network.ranks
    src, dst = (a.ravel() for a in np.divmod(np.arange(p * p), p))
    ptr, links = network.route_csr(src, dst)
    assert [tuple(links[ptr[k]:ptr[k + 1]].tolist()) for k in range(p * p)] == [
        network.route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True)]


def test_simulate_des_takes_the_batched_engine_for_wide_schedules(monkeypatch) -> None:
    """An all-to-all of 64 ranks is wide (one step, 4,032 transfers); the event loop never
    runs for it, and the answer is the event loop's."""
    network = load_topology("dgx-h100x8")
    schedule: Schedule = build_schedule(make_call("all_to_all", network, 2**26), "all_pairs")
    monkeypatch.setattr(batched, "WIDE_MIN_TRANSFERS", 1000)
    assert batched.is_wide(schedule.columns)
    expected = des._Simulation(schedule.columns, network).run()
    monkeypatch.setattr(des._Simulation, "run", lambda self: pytest.fail("event loop ran"))
    assert simulate_des(schedule, network) == expected


def test_a_cyclic_schedule_is_refused() -> None:
    cols = Columns.from_transfers([Transfer(0, 1, 0, 8, OpKind.COPY, (1,)),
                                   Transfer(1, 0, 0, 8, OpKind.COPY, (0,))])
    with pytest.raises(RuntimeError, match="never became ready"):
        batched.BatchedSimulation(cols, switch(2, latency="1us", bandwidth="1GB/s")).run()


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True),
                min_size=1, max_size=30),
       st.lists(st.sampled_from([1e9, 2e9, 3e9, 46e9, 370e9, 7e8]), min_size=6, max_size=6))
def test_vectorised_filling_equals_the_event_loops(routes: list[list[int]],
                                                   capacity: list[float]) -> None:
    """``fill_arrays`` gives ``fill``'s rates to the bit."""
    flows = [des._Flow(i, tuple(r), 1.0, 0.0) for i, r in enumerate(routes)]
    on_link: list[dict[int, des._Flow]] = [{} for _ in capacity]
    for flow in flows:
        for link in flow.links:
            on_link[link][flow.index] = flow
    used = sorted({link for r in routes for link in r})
    expected = maxmin.fill(flows, used, capacity, on_link)
    inc_flow = np.repeat(np.arange(len(routes)), [len(r) for r in routes])
    inc_link = np.array([link for r in routes for link in r])
    rates = maxmin.fill_arrays(inc_flow, inc_link, len(routes), np.array(capacity))
    assert rates.tolist() == [expected[i] for i in range(len(routes))]
