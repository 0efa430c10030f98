"""The exact fast evaluator (commsim.engine.exact) gives the DES's records, or declines.

Where :func:`exact_timing` proves a schedule uncontended, its start and end of every transfer
equal the discrete-event engine's (exact float equality, so 1e-9 a fortiori), on every
algorithm and collective of every preset (two hosts where the preset has hosts, a sub-torus
where it is a torus) and of the flat, switched, torus and hierarchical test topologies. Where it
declines, the schedule really is contended: the DES gives a different time than the longest
path, and ``evaluate`` answers with the DES's. ``COMMSIM_FULL_DES`` forces the event loop.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from _networks import small_networks

from commsim.algorithms import build_schedule, candidates
from commsim.api import make_call
from commsim.collectives import BUFFER_COLLECTIVES, Collective
from commsim.engine import des, evaluate, exact
from commsim.network import Network
from commsim.schedule import Columns, OpKind, Schedule, Transfer
from commsim.topology import (
    custom,
    fully_connected,
    hierarchical,
    list_presets,
    load_topology,
    ring,
    switch,
)

NETWORKS = small_networks(torus_latency="1us")


def _preset(name: str, kind: str) -> Network:
    if kind == "hierarchical":
        return load_topology(f"{name}x2")
    net = load_topology(name)
    return net.with_ranks(16) if net.ranks > 16 else net


PRESETS = [_preset(p.name, p.kind) for p in list_presets()]


def _compare(network: Network) -> tuple[int, int]:
    """Every algorithm, collective, uneven and even size, default and 3 pieces: exact where
    proven, else contended. Returns (proven, declined) counts."""
    proven = declined = 0
    for coll in BUFFER_COLLECTIVES:
        for n in (1001, 2**20 + 3):
            for chunks in (None, 3):
                call = make_call(coll, network, n, chunks=chunks, root=network.ranks // 2)
                for name in candidates(call):
                    schedule = build_schedule(call, name)
                    fast = exact.exact_timing(schedule.columns, network)
                    slow = des.simulate_des(schedule, network)
                    if fast is None:
                        declined += 1
                        continue
                    proven += 1
                    assert fast == slow, (network.name, coll, n, chunks, name)
    return proven, declined


@pytest.mark.parametrize("network", NETWORKS + PRESETS, ids=lambda n: f"{n.name}-{n.ranks}")
def test_exact_equals_des_on_every_algorithm(network: Network) -> None:
    proven, _ = _compare(network)
    assert proven > 0  # ring, at least, runs uncontended on every one of them


def test_generic_levels_match_the_builders() -> None:
    """A columnar schedule's own levels and the DAG depth computed from its deps time alike."""
    net = ring(9, latency="1us", bandwidth="10GB/s", gamma=1e-11)
    for coll in BUFFER_COLLECTIVES:
        schedule = build_schedule(make_call(coll, net, 10**5, chunks=3, root=4), "ring")
        cols = schedule.columns
        assert cols.level is not None
        bare = Columns(cols.src, cols.dst, cols.offset, cols.nbytes, cols.reduce, cols.dep_ptr,
                       cols.dep_idx)
        assert exact.exact_timing(bare, net) == exact.exact_timing(cols, net)
        assert exact.exact_timing(cols, net) == des.simulate_des(schedule, net)


def _longest_path_time(schedule: Schedule, network: Network) -> float:
    cols = schedule.columns
    which, _, drain, delay, _ = exact._routes(cols, network)
    _, end = exact._longest_path(cols, drain, delay)
    return float(end.max())


def _shared_nics() -> Network:
    """Two hosts of two GPUs; each host reaches the other through one NIC (one cable)."""
    devices: list[dict[str, object]] = [{"name": "fabric", "kind": "switch"}]
    links = [{"src": f"nic{h}", "dst": "fabric", "latency": "2us", "bandwidth": "25GB/s"}
             for h in range(2)]
    for h in range(2):
        devices.append({"name": f"nic{h}", "kind": "switch", "host": h})
        for g in range(2):
            devices.append({"name": f"gpu{h}{g}", "kind": "gpu", "host": h})
            links.append({"src": f"gpu{h}{g}", "dst": f"nic{h}", "latency": "1us",
                          "bandwidth": "100GB/s"})
    return custom(devices, links, ["gpu00", "gpu01", "gpu10", "gpu11"])


def test_two_rings_over_one_nic_are_rejected() -> None:
    """The bidirectional ring on hosts that share one NIC: its two rings cross host 0's NIC in
    the same direction at once (1 -> 2 and 0 -> 3). The proof declines, the DES is slower than
    the contention-free longest path, and ``evaluate`` (engine des) gives the DES's time and
    records. The one-way ring on the same hosts is proven and exact."""
    net = _shared_nics()
    call = make_call(Collective.ALL_REDUCE, net, 2**22)
    schedule = build_schedule(call, "ring_bidirectional")
    assert exact.exact_timing(schedule.columns, net) is None
    slow = des.simulate_des(schedule, net)
    assert slow.time_s > _longest_path_time(schedule, net) * 1.01
    done = evaluate.evaluate(call, net, "ring_bidirectional", "des")
    assert done.time_s == slow.time_s
    assert done.timing == slow
    one_way = build_schedule(call, "ring")
    assert exact.exact_timing(one_way.columns, net) == des.simulate_des(one_way, net)


def test_contended_ring_pieces_are_rejected() -> None:
    """Two transfers into one switch port at once, and a double binary tree's pipelined pieces
    on shared pairs: both declined, and the DES's answer differs from the longest path."""
    net = switch(3, latency="1us", bandwidth="1GB/s")
    hand = Schedule(Collective.ALL_GATHER, "hand", 3, 0, 0, 1, (
        Transfer(0, 2, 0, 10**6, OpKind.COPY), Transfer(1, 2, 0, 10**6, OpKind.COPY)))
    assert exact.exact_timing(hand.columns, net) is None
    assert des.simulate_des(hand, net).time_s > _longest_path_time(hand, net)
    flat = fully_connected(8, latency="1us", bandwidth="100GB/s")
    dbt = build_schedule(make_call(Collective.ALL_REDUCE, flat, 2**24, chunks=8),
                         "double_binary_tree")
    assert exact.exact_timing(dbt.columns, flat) is None
    assert des.simulate_des(dbt, flat).time_s > _longest_path_time(dbt, flat)


def test_touching_intervals_are_not_proof() -> None:
    """On zero-latency links a piece starts the instant the previous one drained: the DES might
    re-share for an instant there, so the proof declines rather than guess."""
    net = ring(4, latency="0us", bandwidth="1GB/s")
    schedule = build_schedule(make_call(Collective.ALL_GATHER, net, 4000), "ring")
    assert exact.exact_timing(schedule.columns, net) is None
    assert evaluate.evaluate(make_call(Collective.ALL_GATHER, net, 4000), net, "ring",
                             "des").timing == des.simulate_des(schedule, net)


def test_full_des_is_forced_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    net = ring(5, latency="1us", bandwidth="1GB/s")
    call = make_call(Collective.ALL_REDUCE, net, 10**4)
    ran: list[int] = []
    original = des.simulate_des

    def spy(schedule: Schedule, network: Network) -> des.Timing:
        ran.append(len(schedule))
        return original(schedule, network)

    monkeypatch.setattr(exact, "simulate_des", spy)
    quick = evaluate.evaluate(call, net, "ring", "des")
    assert ran == []
    monkeypatch.setenv(exact.FULL_DES_ENV, "1")
    forced = evaluate.evaluate(call, net, "ring", "des")
    assert ran == [40] and forced.timing == quick.timing


def test_columns_round_trip() -> None:
    """Objects -> columns -> objects is the identity (the adapter for object builders)."""
    net = hierarchical(2, 3, intra=("1us", "100GB/s"), inter=("3us", "25GB/s"))
    schedule = build_schedule(make_call(Collective.ALL_REDUCE, net, 9999), "hierarchical")
    cols = Columns.from_transfers(schedule.transfers)
    assert cols.to_transfers() == tuple(schedule.transfers)
    assert np.all(np.diff(cols.dep_ptr) >= 0)


def test_random_schedules_are_exact_or_declined() -> None:
    """Random DAGs of transfers (any pair, copy or reduce, 1 B to 4 MiB, 0 to 3 earlier
    dependencies) on every test topology: where the proof holds, the timing is the DES's to the
    last bit; many are proven (sparse ones), many declined (dense ones)."""
    rng = random.Random(11)
    proven = declined = 0
    for trial in range(300):
        network = NETWORKS[trial % len(NETWORKS)]
        transfers = []
        for i in range(rng.randint(1, 30)):
            deps = tuple(sorted(rng.sample(range(i), k=min(i, rng.randint(0, 3)))))
            src, dst = rng.randrange(network.ranks), rng.randrange(network.ranks)
            op = OpKind.COPY if src == dst else rng.choice(list(OpKind))
            transfers.append(Transfer(src, dst, 0, rng.choice([1, 4096, rng.randint(1, 2**22)]),
                                      op, deps))
        schedule = Schedule(Collective.ALL_GATHER, "random", network.ranks, 0, 0, 1,
                            tuple(transfers))
        fast = exact.exact_timing(schedule.columns, network)
        if fast is None:
            declined += 1
            continue
        proven += 1
        assert fast == des.simulate_des(schedule, network), trial
    assert proven > 50 and declined > 50, (proven, declined)
