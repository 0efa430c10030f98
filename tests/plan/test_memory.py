"""The memory model against bytes computed by hand, and in-flight counts against schedules."""

from __future__ import annotations

import pytest

from commsim.errors import SpecError
from commsim.plan.memory import (
    in_flight,
    layer_activation_bytes,
    peak_memory,
    stage_in_flight,
    states,
)
from commsim.plan.models import ModelSpec, catalogue_model
from commsim.plan.stack import MEGATRON_2021, Stack

GPT = ModelSpec(name="g", layers=4, hidden=1024, heads=16, kv_heads=16, ffn_hidden=4096,
                vocab=1000, seq=2048)


def test_korthikanti_activation_formulas():
    """Unfused attention, a 4h GeLU MHA layer with sequence parallelism keeps
    s b h (34 + 5 a s / h) / t bytes; selective 34 s b h / t; full 2 s b h / t; without
    sequence parallelism s b h (10 + 24 / t + 5 a s / (h t)) (Korthikanti et al. 2022,
    Table 2). Fused attention never stores the 5 a s^2 b scores."""
    s, b, h, a, t = 2048, 2, 1024, 16, 4
    unfused = Stack(attention="unfused")
    assert layer_activation_bytes(GPT, b, t, 1, "none", unfused) == (
        s * b * h * (34 + 5 * a * s / h) / t)
    assert layer_activation_bytes(GPT, b, t, 1, "none") == 34 * s * b * h / t
    for stack in (unfused, Stack()):
        assert layer_activation_bytes(GPT, b, t, 1, "selective", stack) == 34 * s * b * h / t
        assert layer_activation_bytes(GPT, b, t, 1, "full", stack) == 2 * s * b * h / t
        assert layer_activation_bytes(GPT, b, t, 2, "selective", stack) == 34 * s * b * h / t / 2
    assert layer_activation_bytes(GPT, b, t, 1, "none", MEGATRON_2021) == pytest.approx(
        s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    assert layer_activation_bytes(GPT, b, t, 1, "full", MEGATRON_2021) == 2 * s * b * h


def test_adam_states_per_zero_stage():
    """2N weights, 2N gradients, 12N optimizer, sharded over d by each ZeRO stage; with
    gradient accumulation ZeRO-2 and FSDP hold the unsharded gradients until the last
    micro-batch; FSDP keeps the gathered weights for the step beside their shard."""
    n, d = 1000, 4
    for k in (1, 8):
        assert states(n, "ddp", d, k) == (2000, 2000, 12000)
        assert states(n, "zero1", d, k) == (2000, 2000, 3000)
    assert states(n, "zero2", d, 1) == (2000, 500, 3000)
    assert states(n, "zero2", d, 8) == (2000, 2000, 3000)
    assert states(n, "fsdp", d, 1) == (2500, 500, 3000)
    assert states(n, "fsdp", d, 8) == (2500, 2000, 3000)


def test_peak_memory_by_hand():
    """tp 2, pp 2, dp 2, ddp, 1F1B with 8 micro-batches of 1, no recompute, unfused
    attention: the first stage holds 2 layers' weights and the embedding, 16 bytes per
    parameter, 2 micro-batches of activations of 2 layers, the p2p buffers and two DDP
    buckets."""
    mem = peak_memory(GPT, tp=2, cp=1, pp=2, dp=2, micro_batch=1, microbatches=8,
                      schedule="1f1b", chunks=1, data_parallel="ddp", recompute="none",
                      stack=Stack(attention="unfused"))
    params = (2 * 12 * 1024**2 + 1000 * 1024) // 2
    act = 2 * 2 * (2048 * 1024 * (34 + 5 * 16 * 2048 / 1024) / 2)
    buffers = 2 * 2 * 2048 * 1024 / 2 + 2 * 25 * 2**20
    assert mem.stage == 0
    assert (mem.weights, mem.gradients, mem.optimizer) == (2 * params, 2 * params, 12 * params)
    assert mem.activations == act
    assert mem.buffers == buffers
    assert mem.total == 16 * params + act + buffers


def test_gqa_swiglu_activations():
    """Grouped-query attention stores narrower keys and values; SwiGLU three f-wide tensors."""
    m = catalogue_model("llama3-8b")
    s, h, f, g, a = m.seq, m.hidden, m.ffn_hidden, m.kv_heads, m.heads
    expected = (7 + 4 * g / a) * s * h + 3 * s * h + 6 * s * f + 4 * s * h
    assert layer_activation_bytes(m, 1, 1, 1, "selective") == pytest.approx(expected)


@pytest.mark.parametrize("schedule,chunks", [("1f1b", 1), ("gpipe", 1), ("interleaved", 2),
                                             ("interleaved", 4)])
def test_in_flight_closed_form_matches_the_schedule(schedule, chunks):
    """The closed-form in-flight count equals the count walked from the schedule's ops
    (1F1B's first stage holds pp micro-batches, GPipe all of them)."""
    for pp in (1, 2, 4, 8):
        for k in (1, 2, 4, 8, 16, 24):
            if schedule == "interleaved" and k % pp:
                continue
            walked = in_flight(schedule, pp, k, chunks)
            assert walked == tuple(stage_in_flight(schedule, pp, k, chunks, s)
                                   for s in range(pp))
    assert in_flight("1f1b", 4, 16, 1)[0] == 4
    assert in_flight("gpipe", 4, 16, 1)[0] == 16


@pytest.mark.parametrize("stack", [Stack(), Stack(precision="fp8", fsdp_reshard=True)])
def test_memoised_peak_memory_is_every_stage_sized(stack):
    """peak_memory (its states and activations memoised per the fields each reads, in one
    dict shared by many configurations as a search shares it) gives exactly the Memory of the
    heaviest stage sized term by term (_stage_memory of each stage, the first on ties): every
    stage of stages of different layers, the first and last of equal ones; for dense and MoE
    models, every schedule, data parallelism and recompute."""
    import itertools

    from commsim.plan.memory import _stage_memory, _Where

    memo: dict = {}
    cases = [(catalogue_model("deepseek-v3"), (3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2), 16),
             (catalogue_model("llama3-70b"), (11, 12, 12, 12, 12, 11, 10), 7),
             (catalogue_model("llama3-70b"), (), 4)]
    checked = 0
    for model, split, pp in cases:
        stages = range(pp) if split else (0, pp - 1)
        for (schedule, chunks), dpm, rc, (tp, dp, ep, etp), mb in itertools.product(
                [("1f1b", 1), ("gpipe", 1), ("interleaved", 2)],
                ["ddp", "zero1", "zero2", "fsdp"], ["none", "selective", "full"],
                [(1, 8, 8, 1), (2, 4, 1, 2), (2, 4, 8, 1)], [1, 2]):
            k = 2 * pp
            kw = dict(tp=tp, cp=1, pp=pp, dp=dp, micro_batch=mb, microbatches=k,
                      schedule=schedule, chunks=chunks, data_parallel=dpm, recompute=rc,
                      stack=stack, ep=ep if model.moe else 1, stage_layers=split,
                      etp=etp if model.moe else tp)
            where = _Where(tp=tp, cp=1, pp=pp, dp=dp, ep=kw["ep"], etp=kw["etp"], micro_batch=mb,
                           microbatches=k, schedule=schedule, chunks=chunks,
                           data_parallel=dpm, recompute=rc, stack=stack, split=split)
            try:
                want = max((_stage_memory(model, where, p) for p in stages),
                           key=lambda m: m.total)
            except SpecError:  # the split's stages do not divide into the chunks
                continue
            assert peak_memory(model, memo=memo, **kw) == want
            assert peak_memory(model, **kw) == want
            checked += 1
    assert checked > 150 and memo
