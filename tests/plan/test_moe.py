"""Mixtures of experts in ``commsim plan``: routing load, expert memory over EP x expert-DP,
the grouped GEMMs' shapes, the all-to-alls over the EP group, and the --ep axis."""

from __future__ import annotations

import dataclasses
import json

import pytest

from commsim.cli import main
from commsim.plan import SearchSpace, plan
from commsim.plan.compute import gemm_time
from commsim.plan.config import PlanConfig
from commsim.plan.costs import pipeline_costs
from commsim.plan.device import network_device
from commsim.plan.experts import MoESpec
from commsim.plan.memory import (
    WEIGHT_BYTES,
    layer_ids,
    moe_share,
    peak_memory,
    stage_expert_params,
)
from commsim.plan.models import ModelSpec, catalogue_model
from commsim.plan.moe_layer import dispatch_bytes, moe_times
from commsim.plan.search import layer_costs
from commsim.plan.timing import CollectiveTimer
from commsim.topology import load_topology

TINY = ModelSpec(name="tiny-moe", layers=4, hidden=1024, heads=16, kv_heads=4, ffn_hidden=2816,
                 vocab=32000, seq=2048, mlp="swiglu", tied_embeddings=False,
                 moe=MoESpec(experts=8, top_k=2, expert_ffn_hidden=1408))
ONE = dict(tp=(1,), cp=(1,), pp=(1,), micro_batch=(1,), schedule=(("1f1b", 1),),
           data_parallel=("ddp",), recompute=("none",))


def _cfg(**kw):
    base = dict(tp=1, cp=1, pp=1, dp=8, micro_batch=1, schedule="1f1b", chunks=1,
                data_parallel="ddp", recompute="none", ep=1)
    return PlanConfig(**{**base, **kw})


def test_load_of_the_busiest_rank():
    """Without skew every rank's load is even; the hottest expert's extra share reaches a
    rank in full only when it holds that expert alone; a capacity factor caps it."""
    moe = MoESpec(experts=64, top_k=8, expert_ffn_hidden=64)
    assert [moe.load(ep) for ep in (1, 8, 64)] == [1.0, 1.0, 1.0]
    hot = dataclasses.replace(moe, skew=1.0)
    loads = [hot.load(ep) for ep in (1, 2, 8, 64)]
    assert loads[0] == pytest.approx(1.0) and loads[-1] == pytest.approx(2.0)
    assert loads == sorted(loads)
    assert dataclasses.replace(hot, capacity_factor=1.25).load(64) == 1.25


def test_expert_states_shard_over_ep_and_expert_dp():
    """Under ZeRO-1 a rank keeps 4 bytes (weights, gradients) of its 1/ep of the experts and
    12 bytes over the dp/ep expert-DP ranks, the dense parts as a dense model's."""
    expert = TINY.moe.experts * TINY.expert_params * TINY.layers  # every layer is MoE
    mem = {ep: peak_memory(TINY, tp=1, cp=1, pp=1, dp=8, micro_batch=1, microbatches=1,
                           schedule="1f1b", chunks=1, data_parallel="zero1", recompute="none",
                           ep=ep) for ep in (1, 8)}
    assert mem[1].weights - mem[8].weights == WEIGHT_BYTES * expert * 7 // 8
    # the optimizer state of the experts is 12 E / 8 either way: over 8 expert-DP ranks
    # (ep 1), or 1/8 of the experts on a single expert-DP rank (ep 8 = dp)
    assert mem[8].optimizer == mem[1].optimizer
    dense = 4 * TINY.dense_params_at(0) + 2 * TINY.embedding_params
    assert mem[8].weights == WEIGHT_BYTES * (dense + expert // 8)


def test_grouped_gemm_shapes_and_skew():
    """The busiest rank's expert GEMMs: with EP the same tokens per rank reach fewer experts
    (more tokens each); the skew makes the hottest expert's GEMM longer; and a GEMM of few
    tokens per expert achieves less than a large one (the wave-roofline)."""
    dev = network_device(load_topology("dgx-h100"), None)
    base = moe_times(TINY, dev, tp=1, cp=1, ep=1, micro_batch=1)
    skewed = moe_times(dataclasses.replace(TINY, moe=dataclasses.replace(TINY.moe, skew=3.0)),
                       dev, tp=1, cp=1, ep=8, micro_batch=1)
    even8 = moe_times(TINY, dev, tp=1, cp=1, ep=8, micro_batch=1)
    assert skewed.load == pytest.approx(4.0) and skewed.experts_fwd > 2 * even8.experts_fwd
    assert base.load == 1.0 and base.experts_fwd > 0 and base.pre_fwd > 0
    few, many = 64, 65536
    rate = [n / gemm_time(dev, n, 2 * 1408, 1024) for n in (few, many)]
    assert rate[0] < rate[1] / 2


def test_all_to_alls_on_the_ep_group():
    """A MoE stage's dispatch/combine all-to-all is the timing layer's all_to_all among the
    EP group's ranks (replicas d..d+ep-1 of TP rank 0), of k L T/t h bf16 bytes; dispatch
    and combine appear twice in the forward's and backward's blocks."""
    net = load_topology("dgx-h100x2")
    dev = network_device(net, None)
    cfg = _cfg(dp=16, ep=8)
    assert cfg.ep_group(0, 9) == tuple(range(8, 16))
    assert cfg.expert_dp_group(0) == (0, 8)
    nbytes = dispatch_bytes(TINY, tp=1, cp=1, ep=8, micro_batch=1)
    assert nbytes == 2 * 2048 * 1024 * 2
    timer = CollectiveTimer(net, "analytic")
    times = layer_costs(TINY, dev, 1, 1, 1, "none")
    costs = pipeline_costs(cfg, TINY, times, timer, 1, device=dev,
                           moe=moe_times(TINY, dev, tp=1, cp=1, ep=8, micro_batch=1))
    stage = costs[0].moe[0]
    assert stage.share == 1.0
    assert stage.a2a == timer.collective("all_to_all", tuple(range(8)), nbytes) > 0


def test_skew_slows_the_step_and_ep_is_searched():
    """The same layout trains slower when routing is skewed (the busiest rank waits and
    receives more); EP is searched over the divisors of the experts that divide dp, and
    each ranked config says its ep."""
    net = load_topology("dgx-h100")
    space = SearchSpace(**ONE, ep=(8,))
    steps = []
    for skew in (0.0, 2.0):
        m = dataclasses.replace(TINY, moe=dataclasses.replace(TINY.moe, skew=skew))
        steps.append(plan(m, net, global_batch=8, space=space).result.configs[0].record)
    assert steps[1]["step_time_s"] > steps[0]["step_time_s"] and steps[0]["ep"] == 8
    out = plan(TINY, net, global_batch=8, space=SearchSpace(**ONE), top=0)
    assert sorted(e.config.ep for e in out.result.configs) == [1, 2, 4, 8]


def test_dense_first_layers():
    """DeepSeek-V3's first three layers are dense: they hold no experts, and count the dense
    MLP's parameters."""
    v3 = catalogue_model("deepseek-v3")
    assert [v3.is_moe(i) for i in (0, 2, 3, 60)] == [False, False, True, True]
    assert v3.experts_at(0) == 0 and v3.dense_params_at(0) == v3.layer_params
    assert v3.experts_at(3) == 256 * 3 * 7168 * 2048


def _run(capsys, *argv):
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv,needle", [
    (["mixtral-8x7b", "--ep", "3"], "--ep 3: does not divide the model's experts (8)"),
    (["llama2-7b", "--ep", "2"], "--ep 2: llama2-7b has no experts"),
    (["mixtral-8x7b", "--ep", "x"], "--ep 'x': not an integer"),
])
def test_impossible_ep_is_one_line_exit_2(capsys, argv, needle):
    """An explicit EP that cannot divide the experts (or a dense model's EP) is a one-line
    error, exit status 2."""
    code, out, err = _run(capsys, *argv, "--topology", "dgx-h100", "--global-batch", "8")
    assert code == 2 and needle in err and err.count("\n") == 1 and not out


def test_ep_not_dividing_dp_is_rejected(capsys, tmp_path):
    """A listed EP that divides the experts but not a layout's dp is rejected with the
    reason; the JSON configs carry ``ep``."""
    path = tmp_path / "m.yaml"
    path.write_text("model: {layers: 4, hidden: 1024, heads: 16, kv_heads: 4, seq: 2048, "
                    "vocab: 32000, mlp: swiglu, moe: {experts: 8, top_k: 2, "
                    "expert_ffn_hidden: 1408}}\n")
    code, out, _ = _run(capsys, str(path), "--topology", "dgx-h100", "--global-batch", "8",
                        "--ep", "8", "--pp", "1,2", "--cp", "1", "--tp", "1",
                        "--micro-batch", "1", "--data-parallel", "ddp", "--recompute", "none",
                        "--json")
    data = json.loads(out)
    assert code == 0 and {c["ep"] for c in data["configs"]} == {8}
    assert any(r.get("ep") == 8 and "does not divide dp (4)" in r["reason"]
               for r in data["rejected"])


def test_pruning_keeps_the_best_moe_configs():
    """The search's bound (compute, and the TP/CP collectives and all-to-alls already
    timed) never prunes a configuration that ranks in the top: the top 3 with pruning
    equal the top 3 of timing everything."""
    space = SearchSpace(tp=(1, 2), cp=(1,), data_parallel=("ddp", "zero1"),
                        recompute=("none", "full"))
    every = plan(TINY, "dgx-h100", global_batch=16, space=space, top=0).result.configs
    pruned = plan(TINY, "dgx-h100", global_batch=16, space=space, top=3).result.configs
    assert len(pruned) < len(every)
    assert [e.record for e in pruned[:3]] == [e.record for e in every[:3]]


def test_mla_attention_shapes():
    """DeepSeek-V3's latent attention: its projections' weights are the published shapes
    (q 7168->1536->128x192, kv 7168->512+64->128x256, out 128x128->7168), the down
    projections are not split by TP, and the causal core multiplies by a (192 + 128) / 2."""
    v3 = catalogue_model("deepseek-v3")
    assert v3.attention_params == (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576
                                   + 512 * 128 * 256 + 128 * 128 * 7168)
    t8 = v3.mla.projections(7168, 128, 8)
    assert t8[0] == (1536 + 576, 7168) and t8[1] == (16 * 192, 1536)
    assert v3.core_width == 128 * 160


def test_deepseek_v3_on_2048_gpus():
    """DeepSeek-V3 (MLA, 3 dense layers, 256 experts) plans on 2,048 H100 in a fixed
    layout: it fits, its all-to-alls are exposed communication, and MFU counts the active
    parameters only."""
    space = SearchSpace(tp=(8,), cp=(1,), pp=(1,), micro_batch=(1,), schedule=(("1f1b", 1),),
                        data_parallel=("zero1",), recompute=("full",), ep=(64,))
    out = plan("deepseek-v3", "dgx-h100x256", global_batch=2048, space=space)
    best = out.result.configs[0].record
    assert best["ep"] == 64 and best["fits"] and best["exposed_comm_s"] > 0
    assert best["expert_load"] == 1.0 and 0 < best["mfu"] < 1


def test_moe_on_uneven_stages():
    """A MoE model whose layers PP does not divide plans on an uneven split: its dense first
    layers sit in the first stage (which holds no experts), the other stages are all MoE,
    the experts' memory is each stage's own, and pruning (the split's compute bound with
    the stage's all-to-alls) keeps the top configurations."""
    model = dataclasses.replace(TINY, name="tiny-moe-10", layers=10,
                                moe=dataclasses.replace(TINY.moe, dense_layers=1))
    space = SearchSpace(tp=(1,), cp=(1,), pp=(4,), micro_batch=(1,),
                        schedule=(("1f1b", 1),), data_parallel=("zero1",),
                        recompute=("none", "full"))
    every = plan(model, "dgx-h100x2", global_batch=16, space=space, top=0).result.configs
    pruned = plan(model, "dgx-h100x2", global_batch=16, space=space, top=2).result.configs
    assert [e.record for e in pruned[:2]] == [e.record for e in every[:2]]
    assert {e.config.ep for e in every} == {1, 2, 4}
    cfg = every[0].config
    split = cfg.stage_layers
    assert len(split) == 4 and sum(split) == 10 and len(set(split)) > 1
    assert every[0].record["stage_layers"] == list(split)
    first = layer_ids(10, 4, 1, 0, split)
    assert first[0] == 0 and [model.is_moe(i) for i in first] == [i >= 1 for i in first]
    shares = [moe_share(model, 4, 1, p, split) for p in range(4)]
    assert shares[0] == (split[0] - 1) / split[0] and shares[1:] == [1.0, 1.0, 1.0]
    assert stage_expert_params(model, tp=1, pp=4, ep=2, stage=1, split=split) == (
        split[1] * model.experts_at(2) // 2)
    # the per-stage memory of the split: every stage sized, experts sharded over EP
    kw = dict(tp=1, cp=1, pp=4, dp=4, micro_batch=1, microbatches=4, schedule="1f1b",
              chunks=1, data_parallel="zero1", recompute="none", stage_layers=split)
    mem = {ep: peak_memory(model, ep=ep, **kw) for ep in (1, 4)}
    assert mem[4].total < mem[1].total
