"""The software stack's choices (commsim.plan.stack) against hand-computed times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from commsim.errors import SpecError
from commsim.plan.compute import LayerTimes, attention_core_times
from commsim.plan.config import PlanConfig
from commsim.plan.costs import estimate_step, pipeline_costs
from commsim.plan.device import DeviceSpec
from commsim.plan.models import ModelSpec
from commsim.plan.search import layer_costs
from commsim.plan.stack import MEGATRON_2021, Stack, named_stack
from commsim.plan.timing import CollectiveTimer
from commsim.topology import load_topology

GPT = ModelSpec(name="g", layers=4, hidden=1024, heads=16, kv_heads=16, ffn_hidden=4096,
                vocab=1000, seq=2048)
#: So much compute that every GEMM is bound by its memory traffic.
FAST = DeviceSpec(name="x", memory_bytes=2**34, memory_bandwidth_Bps=1e12, peak_flops=1e20,
                  sms=100, gemm_efficiency=1.0, attention_efficiency=0.5)


def test_unfused_attention_by_hand():
    """Unfused: per head the full s x s scores; the forward's Q K^T and P V GEMMs move their
    operands and results, softmax and dropout 9 bytes per score; the backward's four GEMMs
    and 11 bytes per score."""
    b, t, s, d = 2, 4, GPT.seq, GPT.head_dim
    heads = b * GPT.heads // t
    qk = 2 * (s * d + d * s + s * s)  # bytes of one head's Q K^T (and of P V, dP, dQ, ...)
    fwd, bwd = attention_core_times(GPT, FAST, tp=t, cp=1, micro_batch=b, attention="unfused")
    assert fwd == pytest.approx(heads * (2 * qk + 9 * s * s) / 1e12)
    assert bwd == pytest.approx(heads * (4 * qk + 11 * s * s) / 1e12)
    fused = attention_core_times(GPT, FAST, tp=t, cp=1, micro_batch=b, attention="fused")
    causal = 2 * b * s * s * GPT.hidden / t / 0.5e20
    # FlashAttention's backward: five GEMMs per tile (Q K^T again, dV, dP, dQ, dK) to two;
    # each block of 128 queries costs 3 tiles more forward, 5 backward (the tile factor)
    assert fused == pytest.approx((causal * (s + 3 * 128) / s,
                                   5 / 2 * causal * (s + 5 * 128) / s), rel=1e-12)


def test_megatron_2021_costs_more_than_today():
    """Unfused attention, unsplit element-wise work and separate gradient additions only add
    time; without weight-gradient fusion each backward adds 6 bytes per parameter."""
    now = layer_costs(GPT, FAST, 4, 1, 2, "full")
    old = layer_costs(GPT, FAST, 4, 1, 2, "full", MEGATRON_2021)
    assert old.attn_fwd > now.attn_fwd and old.mlp_fwd > now.mlp_fwd
    no_fusion = layer_costs(GPT, FAST, 4, 1, 2, "full", Stack(wgrad_fusion=False))
    h, f = GPT.hidden, GPT.ffn_hidden
    assert no_fusion.mlp_bwd - now.mlp_bwd == pytest.approx(6 * 2 * h * f / 4 / 1e12)
    assert no_fusion.attn_bwd - now.attn_bwd == pytest.approx(6 * 4 * h * h / 4 / 1e12)


def test_without_overlap_the_gradient_is_reduced_once_after_the_backward():
    """DDP without grad_overlap: the step is the pipeline's compute, then one all-reduce of
    the whole gradient."""
    net = load_topology("dgx-a100")
    timer = CollectiveTimer(net)
    cfg = PlanConfig(tp=1, cp=1, pp=1, dp=8, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="ddp", recompute="none")
    times = LayerTimes(1e-3, 2e-3, 2e-3, 4e-3, 0.0, 0.0, 1e-3, 2e-3, False)
    stack = Stack(grad_overlap=False)
    (costs,) = pipeline_costs(cfg, GPT, times, timer, 4, stack=stack)
    alone = estimate_step([replace(costs, reduce=(), final=())]).step_time_s
    total = sum(GPT.layer_params for _ in range(GPT.layers)) + GPT.embedding_params
    reduce = timer.collective("all_reduce", cfg.dp_group(0), 2 * total)
    assert estimate_step([costs]).step_time_s == pytest.approx(alone + reduce, rel=1e-12)
    overlapped = estimate_step(pipeline_costs(cfg, GPT, times, timer, 4)).step_time_s
    assert overlapped < alone + reduce


def test_named_stacks_and_bad_names():
    assert named_stack("megatron-2021") == MEGATRON_2021
    assert named_stack("current", "unfused").attention == "unfused"
    with pytest.raises(SpecError, match="--stack 'x'"):
        named_stack("x")
    assert named_stack("pytorch-fsdp").attention == "fa2"
    assert named_stack("pytorch-fsdp", "fused").attention == "fused"
    assert named_stack("pytorch-fsdp", " FA1 ").attention == "fa1"
    with pytest.raises(SpecError,
                       match="--attention flash: must be one of fused, fa2, fa1, unfused"):
        named_stack("current", "flash")
