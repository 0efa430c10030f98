"""DeepEP's dispatch against NCCL's all-to-all (commsim/plan/dispatch.py): the chances a
token reaches a rank or a host, checked by enumerating every routing; the two legs by hand;
the CLI and the model file's routing groups."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from commsim.cli import main
from commsim.errors import SpecError
from commsim.plan import SearchSpace, Stack, plan
from commsim.plan.dispatch import dispatch_seconds, hit
from commsim.plan.experts import MoESpec
from commsim.plan.models import catalogue_model
from commsim.plan.timing import CollectiveTimer
from commsim.plan.workload import replay_spec, replay_workload, workload_dict
from commsim.replay import replay
from commsim.topology import load_topology


def _enumerated(moe: MoESpec, ep: int, width: int) -> float:
    """The chance that a token's experts include one of the first ``width`` ranks', over every
    choice of its groups and then of its experts among theirs, each equally likely."""
    e, k = moe.experts, moe.top_k
    held = set(range(width * e // ep))
    g = moe.groups or 1
    m = moe.group_limit or 1
    size = e // g
    hits = total = 0
    for chosen in itertools.combinations(range(g), m):
        pool = [x for c in chosen for x in range(c * size, (c + 1) * size)]
        for experts in itertools.combinations(pool, k):
            total += 1
            hits += bool(held.intersection(experts))
    return hits / total


@pytest.mark.parametrize("moe, ep, width", [
    (MoESpec(experts=8, top_k=2, expert_ffn_hidden=1), 8, 1),
    (MoESpec(experts=8, top_k=2, expert_ffn_hidden=1), 4, 2),
    (MoESpec(experts=12, top_k=3, expert_ffn_hidden=1), 6, 3),
    (MoESpec(experts=16, top_k=4, expert_ffn_hidden=1, groups=4, group_limit=2), 8, 2),
    (MoESpec(experts=16, top_k=4, expert_ffn_hidden=1, groups=4, group_limit=2), 8, 1),
    (MoESpec(experts=16, top_k=3, expert_ffn_hidden=1, groups=4, group_limit=3), 4, 2),
    (MoESpec(experts=16, top_k=2, expert_ffn_hidden=1, groups=8, group_limit=1), 4, 1),
])
def test_the_chance_a_token_reaches_ranks_is_every_routings(moe: MoESpec, ep: int,
                                                           width: int) -> None:
    """Unlimited routing (groups 0 enumerates as one group) and group-limited routing, for
    ranks holding whole groups and part of one."""
    assert hit(moe, ep, width) == pytest.approx(_enumerated(moe, ep, width), rel=1e-12)


def test_group_limited_routing_reaches_at_most_its_groups_hosts() -> None:
    """DeepSeek-V3 on 8 hosts of 8 (EP 64, a routing group per host): a token reaches at most
    4 hosts, 3.63 of them on average, where unlimited routing would reach 5.29."""
    moe = catalogue_model("deepseek-v3").moe
    assert moe is not None
    assert 8 * hit(moe, 64, 8) == pytest.approx(3.629, abs=1e-3)
    assert 8 * hit(replace(moe, groups=0, group_limit=0), 64, 8) == pytest.approx(5.295,
                                                                                   abs=1e-3)


def test_one_expert_per_rank_on_one_host_moves_what_nccl_moves() -> None:
    """Mixtral's 8 experts, one per GPU of one DGX H100: no two copies of a token go to one
    rank, so DeepEP sends the all-to-all's bytes over the same NVLinks (hit 1/4 per rank:
    7 x 1/4 x 8/7 = 2 copies, top_k's)."""
    timer = CollectiveTimer(load_topology("dgx-h100"), "analytic")
    moe = catalogue_model("mixtral-8x7b").moe
    assert moe is not None
    group, nbytes = tuple(range(8)), 64 << 20
    nccl = timer.collective("all_to_all", group, nbytes)
    assert dispatch_seconds(timer, moe, group, nbytes, "alltoall") == nccl
    assert dispatch_seconds(timer, moe, group, nbytes, "deepep") == nccl


def test_across_hosts_by_hand() -> None:
    """Qwen3-30B-A3B (128 experts, top 8) with EP 16 over two DGX H100: per copy ``c`` a rank
    sends ``(2 - 1) P_host c`` to its peer of the other host (an all-to-all of twice that
    among the two) and ``(16 - 2) P_rank c`` over NVLink (an all-to-all among its host's 8
    of 8/7 of that); the dispatch is the longer."""
    net = load_topology("dgx-h100x2")
    timer = CollectiveTimer(net, "analytic")
    moe = catalogue_model("qwen3-30b-a3b").moe
    assert moe is not None
    group, nbytes = tuple(range(16)), 8 * 3 << 20
    copy = nbytes / 8
    p_host = 1 - (64 * 63 * 62 * 61 * 60 * 59 * 58 * 57) / (128 * 127 * 126 * 125 * 124 * 123
                                                             * 122 * 121)
    p_rank = hit(moe, 16, 1)
    rdma = timer.collective("all_to_all", (0, 8), int(copy * p_host * 2))
    nvlink = timer.collective("all_to_all", tuple(range(8)), int(copy * 14 * p_rank * 8 / 7))
    got = dispatch_seconds(timer, moe, group, nbytes, "deepep")
    assert got == max(rdma, nvlink)
    assert got < dispatch_seconds(timer, moe, group, nbytes, "alltoall")


def test_the_search_prunes_nothing_it_should_keep_under_deepep() -> None:
    """The bounds time the same dispatch: the best configuration found with pruning is the
    best of all configurations timed."""
    model = catalogue_model("qwen3-30b-a3b")
    kw = dict(global_batch=64, space=SearchSpace(tp=(1, 2), pp=(1, 2), cp=(1,)),
              stack=Stack(dispatcher="deepep"))
    pruned = plan(model, "dgx-h100x2", top=1, **kw).result.configs[0]
    every = plan(model, "dgx-h100x2", top=0, **kw).result.configs[0]
    assert pruned.config == every.config
    assert pruned.record["step_time_s"] == every.record["step_time_s"]
    assert pruned.record["dispatcher"] == "deepep"


def test_bad_dispatcher_and_routing_groups_are_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "qwen3-30b-a3b", "-t", "dgx-h100x2", "--global-batch", "64",
            "--dispatcher", "nccl-magic"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nccl-magic" in err
    with pytest.raises(SpecError, match="moe.groups: 3 must divide"):
        MoESpec(experts=16, top_k=2, expert_ffn_hidden=1, groups=3, group_limit=1)
    with pytest.raises(SpecError, match="moe.group_limit: 1 must be"):
        MoESpec(experts=16, top_k=4, expert_ffn_hidden=1, groups=8, group_limit=1)


def test_the_hybrid_workload_lowers_deepep_as_its_two_legs() -> None:
    """``replay`` of a DeepEP plan runs each dispatch and combine as DeepEP's two legs at once
    in the one DES: an all-to-all among the group's ranks of each local index across the two
    hosts (lane ``ep``) and one among each host's 8 (lane ``ep #2``), each rank waiting for its
    group's legs; the step is the planner's within 1% (the replay also sees the dense
    replicas' ZeRO traffic share links with them), never below it. Without the topology's
    hosts there are no legs to lay out: one line."""
    model = replace(catalogue_model("qwen3-30b-a3b"), layers=2, seq=2048)
    stack = Stack(dispatcher="deepep")
    out = plan(model, "dgx-h100x2", global_batch=2, top=1, engine="auto", stack=stack,
               space=SearchSpace(tp=(8,), etp=(1,), ep=(16,), pp=(1,), micro_batch=(1,),
                                 recompute=("none",), data_parallel=("zero1",)))
    best = out.result.configs[0]
    spec = replay_workload(workload_dict(out.model, best.config, 2, out.stack), "dgx-h100x2")
    moe = spec.block_times().moe
    assert moe is not None
    legs = moe.legs[(tuple(range(16)), moe.to_experts_bytes)]
    assert sorted(ranks for ranks, _, lane in legs if lane == 0) == [(i, i + 8) for i in range(8)]
    assert [ranks for ranks, _, lane in legs if lane == 1] == [tuple(range(8)),
                                                               tuple(range(8, 16))]
    result = replay(spec, "dgx-h100x2")
    dispatches = [t for t in result.graph.tasks if t.name.endswith("fwd L1 mb0 dispatch")]
    assert sorted(t.stream for t in dispatches) == ["ep"] * 8 + ["ep #2"] * 2
    planned = best.record["step_time_s"]
    assert planned * (1 - 1e-9) <= result.step_time_s <= planned * 1.01
    with pytest.raises(SpecError, match="deepep needs the topology's hosts"):
        replay_spec(out.model, best.config, 2, out.device, out.stack)
