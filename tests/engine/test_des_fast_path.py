"""The DES's fast path for flows that start on idle links gives byte-identical timings.

``_Simulation.fast_path`` skips the component search and max-min filling for a flow alone on
its links; switched off, every start goes through :meth:`_Simulation._reshare`. Both must give
the same start and end of every transfer, to the last bit, on uncontended and contended
schedules alike (schedules of every algorithm on flat, switched, torus and hierarchical
topologies, hosts of unequal size, pipelined double binary trees), and on task graphs mixing
transfers with delays (``commsim.engine.tasks``).
"""

from __future__ import annotations

import random

import pytest
from _networks import small_networks

from commsim.algorithms import build_schedule, candidates
from commsim.api import make_call
from commsim.collectives import BUFFER_COLLECTIVES
from commsim.engine import des, maxmin, tasks
from commsim.engine.des import Timing
from commsim.network import Network
from commsim.schedule import Columns, OpKind, Transfer
from commsim.topology import switch


class _General(des._Simulation):
    fast_path = False


class _GeneralTasks(tasks._TaskSimulation):
    fast_path = False


def _both(items, network: Network) -> tuple[Timing, Timing]:  # type: ignore[no-untyped-def]
    table = tasks.ItemTable.of(items)
    return tasks._TaskSimulation(table, network).run(), _GeneralTasks(table, network).run()


NETWORKS = small_networks()


@pytest.mark.parametrize("network", NETWORKS, ids=lambda n: f"{n.name}-{n.ranks}")
def test_fast_path_is_byte_identical_on_every_algorithm(network: Network) -> None:
    """Every algorithm able to run each collective, sizes even and uneven, 1 or 3 pieces: the
    same ``Timing`` (exact float equality) with and without the fast path."""
    for coll in BUFFER_COLLECTIVES:
        for n in (1001, 2**20 + 3):
            for chunks in (None, 3):
                call = make_call(coll, network, n, chunks=chunks, root=network.ranks // 2)
                for name in candidates(call):
                    cols = build_schedule(call, name).columns
                    fast = des._Simulation(cols, network).run()
                    assert fast == _General(cols, network).run(), (coll, n, chunks, name)


def test_fast_path_is_byte_identical_on_random_task_graphs() -> None:
    """Random graphs of transfers (any pair, reduce or copy, 0 B to 32 MiB, heavy link sharing)
    and delays (0 and fractions of a microsecond, so events tie): identical timings."""
    rng = random.Random(7)
    for trial in range(60):
        network = NETWORKS[trial % len(NETWORKS)]
        items: list[Transfer | tasks.Delay] = []
        for i in range(rng.randint(1, 40)):
            deps = tuple(sorted(rng.sample(range(i), k=min(i, rng.randint(0, 3)))))
            if rng.random() < 0.2:
                items.append(tasks.Delay(rng.choice([0.0, 2.5e-7, 1e-6]), deps))
                continue
            src, dst = rng.randrange(network.ranks), rng.randrange(network.ranks)
            nbytes = rng.choice([0, 1, 2**20, rng.randint(1, 2**25)])
            items.append(Transfer(src, dst, 0, nbytes, rng.choice(list(OpKind)), deps))
        fast, general = _both(items, network)
        assert fast == general, trial


def test_fast_path_taken_only_on_idle_links(monkeypatch) -> None:
    """The fast path never replaces a real re-sharing: two flows into one switch port still
    share it (each drains at half the bandwidth): the second start re-shares both; the two
    drains come at one instant, re-shared once at its end, when no flow is left to fill."""
    network = switch(3, latency="0us", bandwidth="1GB/s")
    seen: list[int] = []
    original = maxmin.fill

    def spy(flows, links, capacity, on_link):  # type: ignore[no-untyped-def]
        seen.append(len(flows))
        return original(flows, links, capacity, on_link)

    monkeypatch.setattr(maxmin, "fill", spy)
    items = [Transfer(0, 2, 0, 10**6, OpKind.COPY), Transfer(1, 2, 0, 10**6, OpKind.COPY)]
    timing = des._Simulation(Columns.from_transfers(items), network).run()
    assert timing.end_s[0] == pytest.approx(2e-3, rel=1e-12)
    assert seen == [2]  # the first flow started alone: no filling
