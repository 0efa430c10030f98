"""Memory per GPU of a training configuration: states, activations, communication buffers.

**States** (Adam in mixed precision, as DESIGN.md's seed figures): bf16 weights ``2N``, bf16
gradients ``2N`` (fp32, ``4N``, where the stack accumulates them in fp32) and fp32 master
weights, momentum and variance ``12N`` for the ``N`` parameters a rank holds (its stage's
layers over ``tp``; the first stage adds the embedding, the last the output layer, tied or
not, as Megatron-LM keeps a copy on both). Sharded over
the ``d = dp x cp`` ranks that hold the same parameters:

========  ==============================================================
ddp       ``16 N``
zero1     ``4 N + 12 N / d``  (optimizer states)
zero2     ``2 N + 14 N / d``  (and gradients), but ``4 N + 12 N / d`` with more than
          one micro-batch
fsdp      ``2 N + 16 N / d``, and ``2 N`` more with more than one micro-batch
========  ==============================================================

As the step is timed (:mod:`.costs`, and the ``hybrid`` replay): ZeRO-2 and FSDP
reduce-scatter each gradient once, after its layer's last micro-batch, so with gradient
accumulation the unsharded gradients live until then; FSDP gathers each layer before its first
forward and keeps it for the step (no reshard after forward, as Llama 3 does with pipelining),
so the stage's whole bf16 weights are live beside their shard. That FSDP costs ZeRO-1's
memory, and more, is the price of gathering once per step instead of once per micro-batch.

With PyTorch's FSDP (``Stack.fsdp_reshard``: weights freed after each unit's forward and
gathered again for its backward, gradients reduce-scattered after every micro-batch) a rank
holds its shard of the weights and gradients, ``(2 + g + 12) N / d``, plus the bf16 weights of
the :data:`FSDP_GATHERED` units its rate limiter lets it hold gathered at once.

**FP8** (``Stack.precision``): Transformer Engine casts each linear layer's weight to fp8 (a
copy and its transpose, 2 bytes per weight) in every forward and keeps them for the backward,
so every layer in flight holds them per micro-batch (with full recompute, only the layer being
recomputed); the fp32 master weights and bf16 weights are counted as before. Its saving on
the stored inputs (fp8 copies instead of bf16 ones) is neglected.

**Activations** of one layer per micro-batch, Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", Section 4 and Table 2) with tensor and sequence
parallelism over ``t``, ``T = b s / c`` tokens per CP rank, in bytes:
``(34 T h + 5 a T s) / t`` for ``a`` heads and a ``4h`` GeLU MLP (the ``5 a T s`` scores,
softmax and dropout of unfused attention; fused attention keeps none: :mod:`.stack`; without
sequence parallelism ``10 T h`` of it is not divided by ``t``). Generalised term by term:
attention ``(7 + 4 g/a) T h`` (``g`` key/value heads), MLP ``3 T h + 4 T f`` (GeLU) or
``3 T h + 6 T f`` (SwiGLU), layer norms ``4 T h``, attention scores ``5 a T s``.
``selective`` recompute drops the scores (Korthikanti's ``34 T h / t``); ``full`` keeps only
each layer's input, ``2 T h / t``, plus one layer's full set while it is recomputed; ``moe``
keeps of each MoE layer's MLP half only its input, ``2 T h / t``, plus one half's set while it
is recomputed. The last stage adds the fp32 logits, ``4 T V / t``.

**In flight**: a stage holds the activations of every micro-batch (model chunk) whose forward
has run and backward has not. Counted from the schedule itself: 1F1B's first stage holds
``pp`` micro-batches, GPipe all ``k``, interleaved Megatron-LM's ``(pp - 1 - d) 2 + (v - 1)
pp + 1`` chunks. With stages of different layers (:mod:`commsim.replay.stages`) every stage
is sized, its chunks in flight weighted by their own layers (walked from the schedule where
its chunks differ), and the heaviest decides.

**Mixtures of experts** (:mod:`.moe_layer`): a stage's routed experts, ``E/ep`` per MoE layer
split ``etp`` ways (expert TP; the attention's ``t`` by default), have their states sharded
over the expert data-parallel ranks, ``edp = t cp dp / (etp ep)`` (:mod:`.config`), the
rest (attention, router, shared experts, dense layers, embeddings) over ``dp cp`` as above;
a MoE layer's MLP activations are the routed tokens'
(:func:`~commsim.plan.moe_layer.moe_activation_bytes`, the busiest rank's), and a stage's
per-layer activations are the mean over its layers, dense and MoE.

**Buffers**: the point-to-point receive buffers of a stage (activation and gradient,
``2 T h / t`` each); DDP and ZeRO-1/2 two 25 MiB gradient buckets; FSDP one layer's
unsharded gradients, being reduce-scattered.

**DualPipe** (``Stack.moe_overlap == "dualpipe"``, :mod:`.overlap`): rank ``r`` holds stage
``r`` and stage ``PP - 1 - r``, the states of both (the DeepSeek-V3 report's Table 2: twice
the parameters), and the activations 1F1B keeps on both, ``PP - r`` and ``r + 1`` micro-batches
of them (the report's ``PP + 1`` for equal stages).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from commsim.plan.models import ModelSpec
from commsim.plan.moe_layer import moe_activation_bytes
from commsim.plan.stack import DEFAULT, Stack
from commsim.replay.ddp import DEFAULT_BUCKET_BYTES
from commsim.replay.pipeline import FORWARD, PipeOp, stage_orders
from commsim.replay.stages import chunk_layers, even_split, stage_layer_ids

DATA_PARALLEL = ("ddp", "zero1", "zero2", "fsdp")
#: Bytes per token and hidden unit of a layer that sequence parallelism splits and plain TP
#: does not (Korthikanti et al. 2022, Table 2: ``10 s b h``).
UNSPLIT = 10
#: Bytes per parameter of weights, gradients and Adam states (mixed precision).
WEIGHT_BYTES, GRAD_BYTES, OPTIMIZER_BYTES = 2, 2, 12
#: Units PyTorch FSDP holds gathered at once: the one running and the one prefetched
#: (``limit_all_gathers``' rate limiter allows two all-gathers in flight).
FSDP_GATHERED = 2
#: Bytes per linear weight of Transformer Engine's fp8 weight copy and its transpose.
FP8_WEIGHT_BYTES = 2


@lru_cache(maxsize=4096)
def layer_activation_bytes(
    model: ModelSpec, micro_batch: int, tp: int, cp: int, recompute: str,
    stack: Stack = DEFAULT,
) -> float:
    """Bytes one layer keeps for its backward per micro-batch on one rank (see above)."""
    h, a = model.hidden, model.heads
    tokens = micro_batch * model.seq / cp
    if recompute == "full":
        return 2.0 * tokens * h / (tp if stack.sequence_parallel else 1)
    attention = (7 + 4 * model.kv_heads / a) * tokens * h
    mlp = _mlp_bytes(model, tokens)
    norms = 4 * tokens * h
    unfused = stack.attention == "unfused" and recompute != "selective"
    scores = 5.0 * a * tokens * model.seq if unfused else 0.0
    total = attention + mlp + norms + scores
    if stack.sequence_parallel:
        return total / tp
    # without sequence parallelism the norms' and dropouts' 10 T h are whole on every TP rank
    return UNSPLIT * tokens * h + (total - UNSPLIT * tokens * h) / tp


def _mlp_bytes(model: ModelSpec, tokens: float) -> float:
    """A dense MLP half's activations of ``tokens`` tokens, before any split: ``3 T h`` (its
    input and dropout mask) and ``4 T f`` (GeLU) or ``6 T f`` (SwiGLU)."""
    per_f = 6 if model.mlp == "swiglu" else 4
    return 3 * tokens * model.hidden + per_f * tokens * model.ffn_hidden


@lru_cache(maxsize=4096)
def in_flight(schedule: str, pp: int, microbatches: int, chunks: int) -> tuple[int, ...]:
    """Per stage, the most model chunks whose forward has run and backward has not."""
    out = []
    for order in stage_orders(schedule, stages=pp, microbatches=microbatches, chunks=chunks):
        held = peak = 0
        for op in order:
            held += 1 if op.kind == FORWARD else -1
            peak = max(peak, held)
        out.append(peak)
    return tuple(out)


def stage_in_flight(schedule: str, pp: int, microbatches: int, chunks: int, stage: int) -> int:
    """:func:`in_flight` of one stage in closed form (what the schedule's warm-up holds, plus
    the one forward 1F1B runs before its first backward)."""
    k, v = microbatches, chunks
    if schedule == "gpipe":
        return k
    if schedule == "1f1b":
        return min(pp - stage, k)
    total = k * v
    warmup = total if k == pp else min((pp - stage - 1) * 2 + (v - 1) * pp, total)
    return warmup + 1 if warmup < total else total


@dataclass(frozen=True, slots=True)
class Memory:
    """Bytes on one GPU of the most loaded stage (``stage``)."""

    stage: int
    weights: int
    gradients: int
    optimizer: int
    activations: int
    buffers: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.buffers

    def as_dict(self) -> dict[str, int]:
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "activations": self.activations,
            "buffers": self.buffers,
        }


#: :func:`~commsim.replay.stages.chunk_layers`, memoised (a search asks it per configuration
#: and stage).
stage_chunk_layers = lru_cache(maxsize=4096)(chunk_layers)


def layer_ids(layers: int, pp: int, chunks: int, stage: int,
              split: tuple[int, ...] = ()) -> list[int]:
    """Global layers of ``stage`` in forward order, chunk by chunk, of ``split`` (each stage's
    layers; empty: ``layers / pp`` each)."""
    return stage_layer_ids(split or even_split(layers, pp), chunks, stage)


@lru_cache(maxsize=4096)
def stage_params(model: ModelSpec, *, tp: int, pp: int, stage: int, chunks: int = 1,
                 split: tuple[int, ...] = ()) -> int:
    """Parameters one TP rank of ``stage`` holds but its routed experts (embedding on the
    first, output layer on the last stage; with ``pp = 1`` a tied output layer is the
    embedding itself); ``split``: each stage's layers (empty: ``model.layers / pp`` each)."""
    if model.moe is None:
        params = (split[stage] if split else model.layers // pp) * model.layer_params
    else:
        ids = layer_ids(model.layers, pp, chunks, stage, split)
        params = sum(model.dense_params_at(i) for i in ids)
    if stage == 0:
        params += model.embedding_params
    if stage == pp - 1 and (pp > 1 or not model.tied_embeddings):
        params += model.embedding_params
    return math.ceil(params / tp)


@lru_cache(maxsize=4096)
def stage_expert_params(model: ModelSpec, *, tp: int, pp: int, ep: int, stage: int,
                        chunks: int = 1, split: tuple[int, ...] = ()) -> int:
    """Routed-expert parameters one rank of ``stage`` holds: ``1/(ep t)`` of its MoE layers'
    (``tp``: the expert TP)."""
    ids = layer_ids(model.layers, pp, chunks, stage, split)
    return math.ceil(sum(model.experts_at(i) for i in ids) / (ep * tp))


def states(params: int, data_parallel: str, shards: int,
           microbatches: int = 1, grad_bytes: int = GRAD_BYTES) -> tuple[int, int, int]:
    """(weights, gradients, optimizer) bytes of ``params`` sharded over ``shards`` ranks, at
    the step's peak (see the module docstring: what is gathered or accumulated unsharded;
    ``grad_bytes``: 4 where the stack keeps fp32 gradients)."""
    w, g, o = WEIGHT_BYTES * params, grad_bytes * params, OPTIMIZER_BYTES * params
    if data_parallel in ("zero1", "zero2", "fsdp"):
        o = math.ceil(o / shards)
    if data_parallel in ("zero2", "fsdp") and microbatches == 1:
        g = math.ceil(g / shards)  # reduce-scattered as the backward produces them
    if data_parallel == "fsdp":
        w += math.ceil(w / shards)  # the shard, and the stage's layers gathered for the step
    return w, g, o


def peak_memory(
    model: ModelSpec,
    *,
    tp: int,
    cp: int,
    pp: int,
    dp: int,
    micro_batch: int,
    microbatches: int,
    schedule: str,
    chunks: int,
    data_parallel: str,
    recompute: str,
    stack: Stack = DEFAULT,
    ep: int = 1,
    stage_layers: tuple[int, ...] = (),
    memo: dict[tuple[object, ...], tuple[Any, ...]] | None = None,
    etp: int = 0,
) -> Memory:
    """The :class:`Memory` of the stage that needs the most (see the module docstring): the
    first (most in flight, the embedding) or the last (logits, the output layer); with
    ``stage_layers`` (stages that differ), every stage is sized and the heaviest decides.

    ``memo``: a dict the caller keeps for one ``model`` and ``stack`` (a search's), where the
    stages' states and activations are kept between calls. ``etp``: expert TP (0: ``tp``)."""
    # NOTE: a search sizes ~100,000 configurations (deepseek-v3 --pp 16 on dgx-h100x256: 16
    # stages each); a stage's states do not depend on the micro-batch, schedule or
    # recompute, nor its activations on dp or the data parallelism, nor the buffers on the
    # schedule or recompute, so a search's memo keeps each per the fields it reads, keyed by
    # plain tuples (hashing the model and stack per look-up cost as much again; building
    # the configuration's _Where for each as much again: only on a miss;
    # benchmarks/plan_speed.py). The sums are the same integers as :func:`_stage_memory`'s.
    dual = stack.moe_overlap == "dualpipe" and model.moe is not None and pp > 1
    stages = range(pp) if stage_layers or dual else sorted({0, pp - 1})
    memo = {} if memo is None else memo
    etp = etp or tp
    skey = ("states", tp, cp, pp, dp, ep, etp, microbatches, chunks, data_parallel,
            stage_layers)
    key = ("activations", tp, cp, pp, ep, etp, micro_batch, microbatches, schedule, chunks,
           recompute, stage_layers)
    bkey = ("buffers", tp, cp, pp, dp, ep, etp, micro_batch, data_parallel)
    held, acts, bufs = memo.get(skey), memo.get(key), memo.get(bkey)
    if held is None or acts is None or bufs is None:
        where = _Where(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, etp=etp, micro_batch=micro_batch,
                       microbatches=microbatches, schedule=schedule, chunks=chunks,
                       data_parallel=data_parallel, recompute=recompute, stack=stack,
                       split=stage_layers)
        if held is None:
            held = memo[skey] = tuple(_stage_states(model, where, p) for p in stages)
        if acts is None:
            sizes = _sizes(where)
            acts = memo[key] = tuple(_stage_activations(model, where, p, sizes)
                                     for p in stages)
        if bufs is None:
            bufs = memo[bkey] = (_buffers(model, where),)
    buffers = bufs[0]
    if dual:  # DualPipe: rank r holds stages r and pp - 1 - r
        mems = [Memory(p, held[i][0], held[i][1], held[i][2], acts[i], buffers)
                for i, p in enumerate(stages)]
        return max((_dual(mems[r], mems[pp - 1 - r]) for r in range(pp // 2)),
                   key=lambda m: m.total)
    best = 0
    top = -1
    for i in range(len(stages)):
        weights, grads, optim = held[i]
        total = weights + grads + optim + acts[i] + buffers
        if total > top:
            best, top = i, total
    weights, grads, optim = held[best]
    return Memory(stages[best], weights, grads, optim, acts[best], buffers)


def _dual(a: Memory, b: Memory) -> Memory:
    """A DualPipe rank holding the stages of ``a`` and ``b``: both states and activations,
    the larger buffers."""
    return Memory(a.stage, a.weights + b.weights, a.gradients + b.gradients,
                  a.optimizer + b.optimizer, a.activations + b.activations,
                  max(a.buffers, b.buffers))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Where:
    """:func:`peak_memory`'s configuration, handed to each stage's :func:`_stage_memory`."""

    tp: int
    cp: int
    pp: int
    dp: int
    ep: int
    etp: int
    micro_batch: int
    microbatches: int
    schedule: str
    chunks: int
    data_parallel: str
    recompute: str
    stack: Stack
    split: tuple[int, ...]


def _stage_memory(model: ModelSpec, w: _Where, stage: int) -> Memory:
    """:func:`peak_memory`'s terms for one ``stage``: its layers' states (routed experts
    sharded over the expert data-parallel ranks), the layers it holds in flight, the last
    stage's logits, the buffers."""
    return Memory(stage, *_stage_states(model, w, stage),
                  _stage_activations(model, w, stage, _sizes(w)), _buffers(model, w))


def _sizes(w: _Where) -> tuple[tuple[int, ...], ...] | None:
    """The layers of each model chunk of each stage (None: equal stages)."""
    return stage_chunk_layers(w.split, w.chunks) if w.split else None


def _stage_states(model: ModelSpec, w: _Where, stage: int) -> tuple[int, int, int]:
    """(weights, gradients, optimizer) bytes of ``stage``'s layers on one rank, routed experts
    sharded over the expert data-parallel ranks."""
    tp, stack = w.tp, w.stack
    shards = w.dp * w.cp
    params = stage_params(model, tp=tp, pp=w.pp, stage=stage, chunks=w.chunks, split=w.split)
    weights, grads, optim = states(params, w.data_parallel, shards, w.microbatches,
                                   stack.grad_bytes)
    if w.data_parallel == "fsdp" and stack.fsdp_reshard:  # PyTorch's: shards, 2 units whole
        weights = (math.ceil(WEIGHT_BYTES * params / shards)
                   + FSDP_GATHERED * WEIGHT_BYTES * math.ceil(model.layer_params / tp))
        grads = math.ceil(stack.grad_bytes * params / shards)
    if model.moe is not None:
        expert_dp = max(w.tp * shards // (w.etp * w.ep), 1)
        experts = states(stage_expert_params(model, tp=w.etp, pp=w.pp, ep=w.ep, stage=stage,
                                             chunks=w.chunks, split=w.split),
                         w.data_parallel, expert_dp, w.microbatches,
                         w.stack.grad_bytes)
        weights, grads, optim = weights + experts[0], grads + experts[1], optim + experts[2]
    return weights, grads, optim


def _stage_activations(model: ModelSpec, w: _Where, stage: int,
                       sizes: tuple[tuple[int, ...], ...] | None) -> int:
    """The activations ``stage`` holds at its peak: its layers in flight, a recomputed
    layer's, the last stage's logits (``sizes``: :func:`_sizes`)."""
    tp, cp, pp, stack = w.tp, w.cp, w.pp, w.stack
    tokens = w.micro_batch * model.seq / cp
    if model.moe is None:
        per_layer = layer_activation_bytes(model, w.micro_batch, tp, cp, w.recompute, stack)
    else:
        per_layer = _mean_layer_bytes(model, w.micro_batch, tp, cp, w.ep, w.recompute, stack,
                                      (pp, w.chunks, stage, w.split), w.etp)
    # Megatron-Core's combined 1F1B holds one more warm-up micro-batch (its orders)
    combined = stack.moe_overlap == "ep-overlap" and model.moe is not None
    if combined and sizes is None:
        sizes = ((model.layers // (pp * w.chunks),) * w.chunks,) * pp
    if sizes is not None:
        held = held_layers(w.schedule, pp, w.microbatches, sizes[stage], stage, combined)
    else:
        held = (stage_in_flight(w.schedule, pp, w.microbatches, w.chunks, stage)
                * (model.layers // (pp * w.chunks)))
    fp8 = FP8_WEIGHT_BYTES * _fp8_layer_params(model, w, stage) / tp \
        if stack.precision == "fp8" else 0.0
    act = held * (per_layer + (0.0 if w.recompute == "full" else fp8))
    if w.recompute == "full":
        act += layer_activation_bytes(model, w.micro_batch, tp, cp, "none", stack) + fp8
    elif w.recompute == "moe":  # the MoE half being recomputed holds its activations again
        act += moe_activation_bytes(model, tp=tp, cp=cp, ep=w.ep, micro_batch=w.micro_batch,
                                    recompute="none", etp=None if w.etp in (0, tp) else w.etp)
    if stage == pp - 1:
        act += 4.0 * tokens * model.vocab / tp
    return math.ceil(act)


def _buffers(model: ModelSpec, w: _Where) -> int:
    """A stage's point-to-point and gradient buffers (the same on every stage)."""
    tp, cp, pp, stack = w.tp, w.cp, w.pp, w.stack
    tokens = w.micro_batch * model.seq / cp
    shards = w.dp * cp
    buffers = 2 * 2 * tokens * model.hidden / tp if pp > 1 else 0.0
    if w.data_parallel == "fsdp" and shards > 1:  # a layer's gradient being reduce-scattered
        # the largest layer a rank holds: a dense one, or a MoE layer with its 1/ep of the
        # experts
        last = model.layers - 1
        largest = max(model.layer_params,
                      model.dense_params_at(last) + math.ceil(model.experts_at(last) / w.ep))
        held = math.ceil(largest / tp)
        if w.etp != tp:  # the MoE layer's experts split over expert TP instead
            held = max(math.ceil(model.layer_params / tp), math.ceil(
                model.dense_params_at(last) / tp + model.experts_at(last) / (w.ep * w.etp)))
        buffers += held * WEIGHT_BYTES * stack.grad_bytes // WEIGHT_BYTES
    elif shards > 1:
        buffers += 2 * DEFAULT_BUCKET_BYTES
    return math.ceil(buffers)


def _fp8_layer_params(model: ModelSpec, w: _Where, stage: int) -> float:
    """The linear weights of a layer whose fp8 copies one rank keeps in flight: a dense
    layer's, or (a mixture of experts) the mean over the stage's layers of what the rank
    holds of each, its ``1/ep`` of the routed experts (in ``tp / etp`` the TP shares: the
    caller divides by ``tp``) and the rest whole."""
    if model.moe is None:
        return float(model.layer_params)
    ids = layer_ids(model.layers, w.pp, w.chunks, stage, w.split)
    if not ids:
        return 0.0
    scale = 1.0 if w.etp == w.tp else w.tp / w.etp
    return sum(model.dense_params_at(i) + model.experts_at(i) / w.ep * scale
               for i in ids) / len(ids)


@lru_cache(maxsize=4096)
def _mean_layer_bytes(model: ModelSpec, micro_batch: int, tp: int, cp: int, ep: int,
                      recompute: str, stack: Stack,
                      where: tuple[int, int, int, tuple[int, ...]], etp: int = 0) -> float:
    """The mean over the layers of a stage (``where``: pp, chunks, stage, split) of a layer's
    activations: a MoE layer's MLP half replaced by the routed tokens'
    (:func:`~commsim.plan.moe_layer.moe_activation_bytes`)."""
    dense = layer_activation_bytes(model, micro_batch, tp, cp, recompute, stack)
    if recompute == "full":
        return dense
    mlp = _mlp_bytes(model, micro_batch * model.seq / cp) / tp
    moe = dense - mlp + moe_activation_bytes(model, tp=tp, cp=cp, ep=ep,
                                             micro_batch=micro_batch, recompute=recompute,
                                             etp=None if etp in (0, tp) else etp)
    share = moe_share(model, *where)
    return share * moe + (1 - share) * dense


@lru_cache(maxsize=4096)
def moe_share(model: ModelSpec, pp: int, chunks: int, stage: int,
              split: tuple[int, ...] = ()) -> float:
    """The fraction of ``stage``'s layers (of ``split``; empty: equal stages) that are
    mixtures of experts (0 for a stage of none)."""
    ids = layer_ids(model.layers, pp, chunks, stage, split)
    return sum(1 for i in ids if model.is_moe(i)) / len(ids) if ids else 0.0


def held_layers(schedule: str, pp: int, microbatches: int, chunks: tuple[int, ...],
                stage: int, combined: bool = False) -> int:
    """The most layers of ``stage`` whose forward has run and backward has not, its model
    chunks holding ``chunks`` layers each (they may differ: :mod:`commsim.replay.stages`);
    ``combined``: in Megatron-Core's combined 1F1B order
    (:func:`~commsim.replay.pipeline.stage_orders`), where a step's forward starts before
    its backward frees its activations."""
    if len(set(chunks)) == 1 and not combined:
        return stage_in_flight(schedule, pp, microbatches, len(chunks), stage) * chunks[0]
    return _held_walk(schedule, pp, microbatches, chunks, stage, combined)


@lru_cache(maxsize=16)
def _orders(schedule: str, pp: int, microbatches: int, chunks: int,
            combined: bool) -> list[list[PipeOp]]:
    """Every stage's pipeline ops (walked once for all the stages)."""
    return stage_orders(schedule, stages=pp, microbatches=microbatches, chunks=chunks,
                        combined=combined)


@lru_cache(maxsize=1024)
def _held_walk(schedule: str, pp: int, microbatches: int, chunks: tuple[int, ...],
               stage: int, combined: bool) -> int:
    order = _orders(schedule, pp, microbatches, len(chunks), combined)[stage]
    held = peak = 0
    for op in order:
        held += chunks[op.chunk] if op.kind == FORWARD else -chunks[op.chunk]
        peak = max(peak, held)
    return peak
