"""Where expert-parallel groups sit: Megatron-Core's rank order (``tp-cp-ep-dp-pp``, the pipeline
outermost, EP folded over CP x DP) for mixtures of experts, Llama 3's ``[TP, CP, PP, DP]`` for
dense models, and what that changes in a step."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from commsim.errors import SpecError
from commsim.plan import SearchSpace, plan
from commsim.plan.config import LLAMA3_ORDER, MEGATRON_ORDER, PlanConfig
from commsim.plan.costs import estimate_step, pipeline_costs, slowest_rank, stage_factors
from commsim.plan.device import network_device
from commsim.plan.models import catalogue_model
from commsim.plan.moe_layer import moe_times
from commsim.plan.search import layer_costs
from commsim.plan.timing import CollectiveTimer
from commsim.topology import load_topology


def _cfg(order: str, **kw) -> PlanConfig:
    base = dict(tp=1, cp=1, pp=4, dp=16, micro_batch=1, schedule="1f1b", chunks=1,
                data_parallel="zero1", recompute="none", ep=8, order=order)
    return PlanConfig(**{**base, **kw})


def test_megatron_order_puts_an_ep8_group_on_one_host():
    """Mixtral 8x7B's published layout (TP 1, PP 4, EP 8 on 64 GPUs): in Megatron-Core's order
    a stage's 16 replicas are ranks 16p..16p+15, so each EP group is 8 consecutive GPUs, one
    host; in Llama 3's order the replicas of a stage are 4 ranks apart and the same EP group
    spans 4 hosts."""
    meg, llama = _cfg(MEGATRON_ORDER), _cfg(LLAMA3_ORDER)
    assert meg.ep_group(0, 0) == tuple(range(8))
    assert meg.ep_group(2, 9) == tuple(range(40, 48))
    assert meg.ep_groups(1) == [tuple(range(16, 24)), tuple(range(24, 32))]
    assert meg.expert_dp_group(0) == (0, 8)
    assert llama.ep_group(0, 0) == tuple(range(0, 32, 4))
    assert {r // 8 for r in meg.ep_group(3, 15)} == {7}
    assert len({r // 8 for r in llama.ep_group(3, 15)}) == 4
    # every rank once, and coords inverts rank
    for cfg in (meg, llama):
        ranks = [cfg.rank(0, 0, p, d) for p in range(4) for d in range(16)]
        assert sorted(ranks) == list(range(64))
        assert all(cfg.coords(cfg.rank(0, 0, p, d)) == (0, 0, p, d)
                   for p in range(4) for d in range(16))


def test_ep_folds_over_context_parallel_ranks():
    """With CP 2 and EP 8, Megatron-Core folds EP over CP x DP: an EP group is CP ranks 0 and 1
    of four replicas (eight GPUs of one host with TP 1), and the expert data-parallel group is
    every eighth of the folded ranks."""
    cfg = _cfg(MEGATRON_ORDER, cp=2, dp=8)
    assert cfg.ep_group(0, 0) == tuple(range(8)) and cfg.ep_group(0, 5) == tuple(range(8, 16))
    assert cfg.expert_dp_group(1) == (16, 24)
    assert sorted(r for g in cfg.ep_groups(1) for r in g) == list(range(16, 32))


def test_deepseek_v3_ep64_spans_eight_hosts():
    """DeepSeek-V3's layout (PP 16, EP 64, TP 1 on 2,048 GPUs; its report, arXiv 2412.19437,
    Section 3.2: 64-way EP over 8 nodes): each EP group is 64 consecutive GPUs, 8 hosts."""
    cfg = PlanConfig(tp=1, cp=1, pp=16, dp=128, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="zero1", recompute="none", ep=64, order=MEGATRON_ORDER)
    for p in (0, 15):
        for g in cfg.ep_groups(p):
            assert len({r // 8 for r in g}) == 8 and g == tuple(range(g[0], g[0] + 64))


def test_stage_factors_follow_the_order():
    """A slow rank slows the stage it sits in, in either order (rank 3 with TP 2, PP 2, DP 2:
    stage 1 in Llama 3's order, stage 0 in Megatron-Core's)."""
    factors = np.array([1, 1, 1, 1.3, 1, 1, 1, 1])
    kw = dict(tp=2, pp=2, dp=2, ep=1)
    assert stage_factors(_cfg(LLAMA3_ORDER, **kw), factors) == (1.0, 1.3)
    assert stage_factors(_cfg(MEGATRON_ORDER, **kw), factors) == (1.3, 1.0)
    slow = slowest_rank(_cfg(MEGATRON_ORDER, **kw), factors)
    assert (slow["stage"], slow["replica"], slow["tp"]) == (0, 1, 1)


def test_an_unknown_order_is_refused():
    """An order other than the two is a SpecError naming it."""
    with pytest.raises(SpecError, match="order: 'pp-dp'"):
        _cfg("pp-dp")


def test_on_host_ep_is_faster_and_plan_uses_megatron_order():
    """The same Mixtral 8x7B layout (TP 1, PP 4, EP 8, 64 H100) steps faster with its EP
    groups on NVLink (Megatron-Core's order) than across hosts (Llama 3's); ``plan`` lays a
    mixture of experts out in Megatron-Core's order and a dense model in Llama 3's."""
    net = load_topology("dgx-h100x8")
    dev = network_device(net)
    model = dataclasses.replace(catalogue_model("mixtral-8x7b"), seq=4096)
    times = layer_costs(model, dev, 1, 1, 1, "none")
    moe = moe_times(model, dev, tp=1, cp=1, ep=8, micro_batch=1)
    steps = {}
    for order in (MEGATRON_ORDER, LLAMA3_ORDER):
        cfg = _cfg(order)
        costs = pipeline_costs(cfg, model, times, CollectiveTimer(net, "analytic"), 16,
                               device=dev, moe=moe)
        steps[order] = estimate_step(costs).step_time_s
    assert steps[MEGATRON_ORDER] < steps[LLAMA3_ORDER]
    space = SearchSpace(tp=(1,), cp=(1,), pp=(4,), micro_batch=(1,), schedule=(("1f1b", 1),),
                        data_parallel=("zero1",), recompute=("none",), ep=(8,))
    best = plan(model, net, global_batch=256, space=space).result.configs[0]
    assert best.config.order == MEGATRON_ORDER and best.record["order"] == MEGATRON_ORDER
    dense = plan("llama2-7b", "dgx-h100x2", global_batch=16,
                 space=dataclasses.replace(space, ep=None)).result.configs[0]
    assert dense.config.order == LLAMA3_ORDER and "order" not in dense.record
