"""Costs of a training step beyond the layers: optimizer step, loss, blocking sends, fp32
gradients and achievable HBM bandwidth, against hand-computed figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from commsim.errors import SpecError
from commsim.plan.blocks import PipelineCosts
from commsim.plan.compute import LayerTimes, gemm_time, layer_times, optimizer_time
from commsim.plan.config import PlanConfig
from commsim.plan.costs import estimate_step, pipeline_costs
from commsim.plan.device import DeviceSpec, device_from_dict
from commsim.plan.evaluate import evaluate_pipeline
from commsim.plan.memory import states
from commsim.plan.models import ModelSpec
from commsim.plan.stack import LLAMA3, MEGATRON_2021, Stack, named_stack
from commsim.plan.timing import CollectiveTimer
from commsim.topology import load_topology

GPT = ModelSpec(name="g", layers=4, hidden=1024, heads=16, kv_heads=16, ffn_hidden=4096,
                vocab=1000, seq=2048)
DEV = DeviceSpec(name="x", memory_bytes=2**34, memory_bandwidth_Bps=2e12, peak_flops=1e15,
                 sms=100, gemm_efficiency=0.8, attention_efficiency=0.5, memory_efficiency=0.5)
TIMES = LayerTimes(1e-3, 2e-3, 2e-3, 4e-3, 0.0, 0.0, 1e-3, 2e-3, False)


def test_optimizer_bytes_per_parameter():
    """Grad norm 4 + Adam 28 + master copy 6 + zeroing the gradients; 16-bit gradients are
    first cast (6), fp16 loss scaling unscales them (8); at the achievable bandwidth."""
    n, hbm = 1000, 1e12
    assert optimizer_time(DEV, n, LLAMA3) == pytest.approx(n * (38 + 4) / hbm)
    assert optimizer_time(DEV, n, Stack()) == pytest.approx(n * (38 + 2 + 6) / hbm)
    assert optimizer_time(DEV, n, MEGATRON_2021) == pytest.approx(n * (38 + 2 + 6 + 8) / hbm)


@pytest.mark.parametrize("dp_kind", ["ddp", "zero1", "fsdp"])
def test_each_stage_ends_with_its_optimizer_step(dp_kind):
    """The step grows by the slowest stage's optimizer step on the parameters it updates:
    all of its own under DDP, a 1/dp shard under ZeRO and FSDP."""
    timer = CollectiveTimer(load_topology("dgx-a100"))
    cfg = PlanConfig(tp=1, cp=1, pp=1, dp=1, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel=dp_kind, recompute="none")
    without = estimate_step(pipeline_costs(cfg, GPT, TIMES, timer, 4)).step_time_s
    (costs,) = pipeline_costs(cfg, GPT, TIMES, timer, 4, device=DEV)
    params = GPT.layers * GPT.layer_params + GPT.embedding_params
    assert costs.optimizer == (optimizer_time(DEV, params),)
    assert estimate_step([costs]).step_time_s == pytest.approx(without + costs.optimizer[0])
    if dp_kind != "ddp":
        sharded = replace(cfg, dp=8)
        (costs,) = pipeline_costs(sharded, GPT, TIMES, timer, 4, device=DEV)
        assert costs.optimizer == (optimizer_time(DEV, -(-params // 8)),)


def test_the_loss_reads_and_writes_the_logits_in_fp32():
    """The last stage's logits add 38 (forward) and 14 (backward) bytes per logit."""
    t = layer_times(GPT, DEV, tp=2, cp=1, micro_batch=1, recompute="none",
                    elementwise_bytes=0.0)
    tokens, cols, h = GPT.seq, GPT.vocab // 2, GPT.hidden
    per = tokens * cols / DEV.hbm_Bps
    assert t.logits_fwd == pytest.approx(gemm_time(DEV, tokens, cols, h) + 38 * per)
    bwd = gemm_time(DEV, tokens, h, cols) + gemm_time(DEV, h, cols, tokens)
    assert t.logits_bwd == pytest.approx(bwd + 14 * per)


def _two_stages(blocking: bool, gather: float = 0.0) -> float:
    costs = PipelineCosts(schedule="1f1b", pp=2, chunks=1, microbatches=4, layers_per_chunk=1,
                          attn_fwd=1.0, mlp_fwd=0.0, attn_bwd=2.0, mlp_bwd=0.0, tp_ar=(0, 0),
                          cp_gather=(0, 0), cp_rs=(0, 0), send={(0, 1): 0.5, (1, 0): 0.5},
                          p2p_blocking=blocking, recv_gather=(gather, gather) if gather else ())
    return evaluate_pipeline(costs).step_time_s


def test_blocking_sends_hold_the_sender():
    """1F1B on two stages, F = 1, B = 2, sends of 0.5, by hand. Asynchronous: stage 0 runs
    F1 F2 [0, 2], B1 at 5 (stage 1's B1 ends at 4.5), F3 [7, 8], B2 [8, 10], F4 [10, 11],
    B3 [12, 14] and B4 once stage 1's B4 (ends 14.5) has crossed: [15, 17]. Blocking, each
    send also holds its sender: stage 1 runs F2 only at 5 (after B1's send), its B4 ends
    at 15 and is sent by 15.5, so stage 0's B4 ends at 17.5."""
    assert _two_stages(False) == pytest.approx(17.0)
    assert _two_stages(True) == pytest.approx(17.5)
    # a received activation is usable only after its TP all-gather
    assert _two_stages(False, gather=0.25) > _two_stages(False)


def test_fp32_gradients_double_the_reduction_and_the_memory():
    net = load_topology("dgx-a100")
    timer = CollectiveTimer(net)
    cfg = PlanConfig(tp=1, cp=1, pp=1, dp=8, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="ddp", recompute="none")
    total = GPT.layers * GPT.layer_params + GPT.embedding_params
    for grad_bytes in (2, 4):
        stack = Stack(grad_overlap=False, grad_bytes=grad_bytes)
        (costs,) = pipeline_costs(cfg, GPT, TIMES, timer, 4, stack=stack)
        assert costs.final == (timer.collective("all_reduce", cfg.dp_group(0),
                                                grad_bytes * total),)
    assert states(1000, "ddp", 8, 1, 4) == (2000, 4000, 12000)
    assert Stack(grad_bytes=4).wgrad_add_bytes == 10 and Stack().wgrad_add_bytes == 6
    with pytest.raises(SpecError, match="grad_bytes 3"):
        Stack(grad_bytes=3)
    assert named_stack("llama3") == LLAMA3


def test_memory_efficiency_scales_memory_bound_kernels():
    block = {"name": "g", "memory": "1GiB", "memory_bandwidth": "2TB/s",
             "peak_flops": {"bf16": "1PFLOP/s"}, "sms": 100,
             "efficiency": {"curve": "wave-roofline", "gemm": 0.8, "attention": 0.5}}
    assert device_from_dict(block).hbm_Bps == 2e12  # default: the datasheet's
    half = device_from_dict({**block, "efficiency": {**block["efficiency"], "memory": 0.5}})
    assert half.hbm_Bps == 1e12
    # a memory-bound GEMM (k = 1) takes twice as long at half the bandwidth
    assert gemm_time(half, 4096, 4096, 1) == pytest.approx(
        2 * gemm_time(device_from_dict(block), 4096, 4096, 1))
    with pytest.raises(SpecError, match="device.efficiency.memory"):
        device_from_dict({**block, "efficiency": {**block["efficiency"], "memory": 1.5}})
