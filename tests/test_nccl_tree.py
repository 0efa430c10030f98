"""NCCL's tree across hosts as a schedule (:mod:`commsim.algorithms.pipelined`,
:mod:`commsim.nccl_tree`): the checker proves it, one piece is the hierarchical all-reduce with
Rabenseifner rails (its DES its closed form where nothing contends), the pieces pipeline, the
call's records are its answer (also paced at NCCL's tree cap), and the composed estimate it
replaces stays a close cross-check."""

from __future__ import annotations

import numpy as np
import pytest

import commsim
from commsim.algorithms.calls import make_call
from commsim.algorithms.innetwork import network_for
from commsim.algorithms.pipelined import build
from commsim.checker import check
from commsim.engine.analytic import predict
from commsim.engine.des import _Simulation
from commsim.engine.exact import exact_timing, time_schedule
from commsim.errors import ScheduleError
from commsim.nccl import NcclModel
from commsim.nccl_caps import tree_cap_Bps
from commsim.nccl_composed import ComposedTimer
from commsim.nccl_tree import (
    MAX_TREE_DEPENDENCIES,
    MAX_TREE_TRANSFERS,
    MIN_PIECES,
    even_pieces,
    host_rings,
    pieces_wanted,
    pipelined_schedule,
    simulate,
    tree_network,
)
from commsim.topology import load_topology

HOSTS = [
    [[0, 1], [2, 3]],
    [[0, 1, 2], [3, 4, 5], [6, 7, 8]],
    [[0], [1], [2]],
    [[4 * h + k for k in range(4)] for h in range(5)],
    [[8 * h + k for k in range(8)] for h in range(4)],
]


@pytest.mark.parametrize("groups", HOSTS, ids=lambda g: f"{len(g)}x{len(g[0])}")
def test_the_checker_proves_every_pipelined_tree(groups: list[list[int]]) -> None:
    """Even and odd hosts and ranks per host, sizes that do not divide, 1 to 16 pieces; the
    level the chain gives every transfer is its depth in the DAG."""
    ranks = sum(map(len, groups))
    for nbytes in (ranks, 7 * ranks + 3, 1000, 1 << 20):
        for pieces in (1, 2, 3, 16):
            if pieces == 1 or nbytes // pieces >= ranks:
                schedule = build(groups, nbytes, pieces)
                check(schedule)
                assert np.array_equal(schedule.columns.level, schedule.columns.depths())


def test_one_piece_is_the_hierarchical_all_reduce_and_its_closed_form() -> None:
    """With one piece the schedule is ``hierarchical_rabenseifner``'s, and on a machine whose
    transfers share no link (one NVSwitch per host, a NIC per GPU) its DES is that closed
    form."""
    net = load_topology("dgx-h100x4")
    call = make_call("all_reduce", net, 3 << 20)
    groups = [list(range(8 * h, 8 * h + 8)) for h in range(4)]
    mine = build(groups, call.nbytes, 1)
    theirs = commsim.simulate("all_reduce", net, call.nbytes,
                              algorithm="hierarchical_rabenseifner", protocol="none")
    assert theirs.schedule is not None
    assert np.array_equal(mine.columns.src, theirs.schedule.columns.src)
    assert np.array_equal(mine.columns.offset, theirs.schedule.columns.offset)
    assert time_schedule(mine, net).time_s == pytest.approx(
        predict(call, net, "hierarchical_rabenseifner"), rel=1e-9)


def test_pieces_pipeline_the_phases() -> None:
    """8 pieces of 256 MiB on 4 hosts take less than one piece does: the host rings of one
    piece run while the rails carry another."""
    net = load_topology("dgx-h100x4")
    groups = NcclModel.of(net).hosts(32)
    one, many = (time_schedule(build(groups, 256 << 20, k), net).time_s for k in (1, 8))
    assert many < 0.85 * one
    with pytest.raises(ScheduleError, match="leave a rank none"):
        build(groups, 64, 4)
    with pytest.raises(ScheduleError, match="several hosts"):
        build([[0, 1, 2]], 64, 1)


@pytest.mark.parametrize("protocol", ["LL", "LL128", "Simple"])
@pytest.mark.parametrize("size", [4096, 1 << 20, 256 << 20])
def test_records_are_the_answer_and_the_composed_estimate_agrees(protocol: str,
                                                                 size: int) -> None:
    """NCCL's tree across two hosts is a schedule: its transfers end at the call's time
    (launch included), it is never faster than NCCL's tree cap, and the composed estimate
    (its closed form, ``--engine analytic``) is within 25% of it."""
    net = load_topology("dgx-h100x2")
    done = commsim.simulate("all_reduce", net, size, algorithm="hierarchical_pipelined",
                            protocol=protocol)
    assert done.schedule is not None
    per_piece = len(build(NcclModel.of(net).hosts(16), 16, 1))
    assert done.schedule.chunks == min(pieces_wanted(size, 16), MAX_TREE_TRANSFERS // per_piece)
    assert len(done.schedule) <= MAX_TREE_TRANSFERS
    assert done.transfers()["end_s"].max() == pytest.approx(done.time_s, rel=1e-9)
    config = NcclModel.of(net).config
    cap = tree_cap_Bps(config.version, config.arch, 2, protocol, config.channels, config.cpu,
                       False) * NcclModel.of(net).tree_scale("tree", protocol, size)
    device = done.time_s - done.launch_s
    assert device >= size * 2 * 15 / 16 / cap * (1 - 1e-9)
    closed = commsim.simulate("all_reduce", net, size, algorithm="hierarchical_pipelined",
                              protocol=protocol, engine="analytic")
    assert closed.time_s == pytest.approx(done.time_s, rel=0.25)


def test_at_the_cap_the_call_runs_paced() -> None:
    """LL across two hosts at 256 MiB is bound by NCCL's LL cap: the schedule runs paced, its
    time that of the cap to rounding."""
    net = load_topology("dgx-h100x2")
    model = NcclModel.of(net)
    call = make_call("all_reduce", net, 256 << 20)
    done = model.evaluate(call, "hierarchical_pipelined", "LL", "des")
    config = model.config
    cap = tree_cap_Bps(config.version, config.arch, 2, "LL", config.channels, config.cpu,
                       False) * model.tree_scale("tree", "LL", call.nbytes)
    assert done.time_s == pytest.approx(call.nbytes * 2 * 15 / 16 / cap, rel=1e-9)
    assert done.timing is not None and done.timing.time_s == done.time_s


def test_beyond_the_budget_the_composed_estimate_answers() -> None:
    """A pipelined schedule that cannot have :data:`MIN_PIECES` pieces within the budget
    (NVLS on 64 x 8 H100 at 256 MiB: a piece is about 70,000 transfers, refused before one is
    built) is timed by its composed estimate even under the DES, and asking for its records
    says why in one line."""
    net = load_topology("dgx-h100x64")
    call = make_call("all_reduce", net, 256 << 20)
    model = NcclModel.of(net)
    assert pipelined_schedule(call, "nvls", host_rings(model, call.ranks)) is None
    done = model.evaluate(call, "nvls", "Simple", "des")
    assert done.schedule is None and MIN_PIECES == 8
    composed = ComposedTimer(model, "des").evaluate(call.collective, call.ranks, call.nbytes,
                                                    "nvls", model.protocol("Simple"))
    assert done.time_s == composed.time_s
    result = commsim.simulate("all_reduce", net, call.nbytes, algorithm="nvls",
                              protocol="Simple")
    with pytest.raises(commsim.CommsimError, match="closed form"):
        result.transfers()


def test_a_budget_short_of_the_pieces_wanted_cuts_pieces_of_one_size() -> None:
    """NVLS on 16 x 8 H100 at 256 MiB wants 64 pieces; its 17 million dependencies afford
    18, of which it takes 16, the most that cut the buffer evenly (pieces a byte apart end
    apart: every transfer an instant of its own in the DES)."""
    net = load_topology("dgx-h100x16")
    call = make_call("all_reduce", net, 256 << 20)
    schedule = pipelined_schedule(call, "nvls", host_rings(NcclModel.of(net), call.ranks))
    assert schedule is not None and pieces_wanted(call.nbytes, call.ranks) == 64
    assert schedule.chunks == 16 and call.nbytes % schedule.chunks == 0
    assert len(schedule) <= MAX_TREE_TRANSFERS
    assert len(schedule.columns.dep_idx) <= MAX_TREE_DEPENDENCIES
    assert even_pieces(256 << 20, 8, 18) == 16 and even_pieces(3 ** 12, 8, 12) == 9
    assert even_pieces(1021, 8, 12) == 12  # a prime: none does, the most are taken


@pytest.mark.parametrize(("preset", "name", "protocol"), [
    ("dgx-h100x2", "hierarchical_pipelined", "LL128"), ("dgx-h100x4", "nvls", "Simple"),
    ("aws-p3dnx2", "hierarchical_pipelined", "Simple")])
def test_pipelined_schedules_are_timed_as_the_event_loop_times_them(
        preset: str, name: str, protocol: str) -> None:
    """The batched engine :func:`~commsim.nccl_tree.simulate` times pieces of one size with
    gives the event loop's start and end of every transfer, to the bit (and the exact
    evaluator, which it passes over, finds them contended)."""
    net = load_topology(preset)
    model = NcclModel.of(net)
    for size in (8 << 20, 3 << 20):
        call = make_call("all_reduce", net, size)
        schedule = pipelined_schedule(call, name, host_rings(model, call.ranks))
        assert schedule is not None and schedule.chunks > 1
        on = network_for(call, tree_network(model, schedule, model.protocol(protocol)), name)
        assert exact_timing(schedule.columns, on) is None
        assert simulate(schedule, on) == _Simulation(schedule.columns, on).run()


def test_host_rings_follow_each_hosts_nvlinks() -> None:
    """Across two hybrid cube-mesh hosts (aws-p3dn: NCCL's ring across hosts is in rank
    order) every host's ring still goes from GPU to GPU over direct NVLinks, in the order NCCL's
    ring takes inside one host."""
    net = load_topology("aws-p3dnx2")
    model = NcclModel.of(net)
    groups = host_rings(model, 16)
    assert groups[0] == list(model.ring_order(8))
    assert groups[1] == [8 + r for r in groups[0]]
    for group in groups:
        for src, dst in zip(group, group[1:] + group[:1], strict=True):
            assert len(net.route(src, dst)) == 1


def test_a_rail_relayed_to_its_nic_pays_no_protocol_hop_for_the_relay() -> None:
    """aws-p3dn's one NIC sits by GPUs 0 and 1: GPU 6's rail reaches it over two NVLinks no host
    ring crosses, which NCCL's tree (leaving the host from the NIC's GPU) never takes as a hop.
    On the tree's network they cost their own latency, not the Simple tree's 35.7 us hop each,
    so that rail's latency is within one NVLink hop of GPU 0's."""
    net = load_topology("aws-p3dnx2")
    model = NcclModel.of(net)
    call = make_call("all_reduce", net, 1 << 20)
    schedule = pipelined_schedule(call, "hierarchical_pipelined", host_rings(model, 16))
    assert schedule is not None
    tree = tree_network(model, schedule, model.protocol("Simple"))
    near, far, hop = (tree.path_cost(a, b)[0] for a, b in ((0, 8), (6, 14), (0, 1)))
    assert len(net.route(6, 14)) == len(net.route(0, 8)) + 4
    assert near < far < near + hop
