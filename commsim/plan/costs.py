"""From a configuration to the :class:`~commsim.plan.blocks.PipelineCosts` of its pipelines,
and to its step time: the communication sizes of the ``hybrid`` workload, each collective
timed once per shape.

Sizes per micro-batch (``T = b s / c`` tokens per CP rank, 2-byte elements): the TP
all-reduce after each half of a layer carries ``2 T h`` bytes; the CP all-gather of keys and
values ``2 x 2 b s (g d) / t`` (its reduce-scatter in backward the same); a pipeline send of
one TP rank ``2 T h / t``; FSDP gathers and reduce-scatters each layer's ``2 N_layer / t``;
DDP all-reduces (ZeRO-1/2 reduce-scatter) 25 MiB buckets in backward order (without
``grad_overlap``, :mod:`.stack`: the whole gradient once, after the last backward), and
ZeRO-1/2 all-gather the stage's updated weights at the end. Gradients travel in the stack's
``grad_bytes`` (16 bits, or fp32 as Llama 3 reduce-scatters them). Each stage ends with its
optimizer step (:func:`~commsim.plan.compute.optimizer_time` on the parameters it updates:
all of its own under DDP, ``1/(dp cp)`` of them under ZeRO and FSDP); with a blocking stack
(Megatron-LM 2021) a received activation is all-gathered over the TP group (``2 T h``).
Given the device, the reductions issued during the last backward also slow the compute they
overlap (``Stack.overlap_cost``: :func:`_charges`, :mod:`.interference`).

Data-parallel replicas differ only in where their ranks sit; replicas whose groups and sends
have the same times are evaluated once.

Under a what-if's slow ranks and jitter (:func:`stage_factors`), each stage computes at the
pace of its slowest rank over every replica: its TP and CP ranks synchronise at every
layer's collectives, and the data-parallel reduction (or FSDP gather) of a stage waits for
the slowest replica's. One slow GPU thus slows its stage in every replica, and through the
pipeline's sends the other stages wait for it. With one slow rank (or the slowest ranks of
all stages in one replica) that is the step exactly; with jitter spread over replicas it is
an upper bound (each replica's own slow stages, all in one pipeline).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from commsim.errors import SpecError
from commsim.plan.blocks import MoEStage, PipelineCosts, PipelineTiming, layer_blocks
from commsim.plan.compute import LayerTimes, optimizer_time
from commsim.plan.config import PlanConfig
from commsim.plan.device import DeviceSpec
from commsim.plan.dispatch import dispatch_seconds
from commsim.plan.evaluate import evaluate_pipeline
from commsim.plan.groups import ep_groups, group
from commsim.plan.interference import charge, hbm_bytes, load
from commsim.plan.memory import layer_ids, moe_share
from commsim.plan.models import ModelSpec
from commsim.plan.moe_layer import MoETimes, dispatch_bytes, moe_tp_collectives
from commsim.plan.overlap import evaluate_dualpipe, paired_blocks
from commsim.plan.stack import DEFAULT, Stack
from commsim.plan.timing import CollectiveTimer
from commsim.replay.ddp import DEFAULT_BUCKET_BYTES

BYTES = 2  #: bf16 weights, gradients and activations


def plan_layer_params(model: ModelSpec, cfg: PlanConfig) -> Callable[[int], int]:
    """Parameters of global layer ``i`` on one TP rank: the embedding with layer 0, the
    output layer with the last layer (unless tied and on the same stage)."""

    @cache
    def params(layer: int) -> int:
        n = model.dense_params_at(layer)
        if layer == 0:
            n += model.embedding_params
        if layer == model.layers - 1 and (cfg.pp > 1 or not model.tied_embeddings):
            n += model.embedding_params
        return math.ceil(n / cfg.tp)

    return params


def stage_layers(cfg: PlanConfig, layers: int, stage: int) -> list[int]:
    """Global layers of ``stage`` in forward order, chunk by chunk."""
    return layer_ids(layers, cfg.pp, cfg.chunks, stage, cfg.stage_layers)


def _buckets(layers: list[int], params: Callable[[int], int]) -> dict[int, int]:
    """Layer closing a 25 MiB bucket (walking backward) -> the bucket's bytes."""
    out: dict[int, int] = {}
    held = 0
    order = list(reversed(layers))
    for i, layer in enumerate(order):
        held += params(layer) * BYTES
        if held >= DEFAULT_BUCKET_BYTES or i == len(order) - 1:
            out[layer] = held
            held = 0
    return out


@dataclass(frozen=True, slots=True)
class StepEstimate:
    """A configuration's step: time, and per-GPU means over stages."""

    step_time_s: float
    compute_s: float
    exposed_comm_s: float

    @property
    def bubble_fraction(self) -> float:
        """Time neither computing nor in exposed communication, over the step."""
        if self.step_time_s <= 0:
            return 0.0
        return max(0.0, 1.0 - (self.compute_s + self.exposed_comm_s) / self.step_time_s)


def stage_factors(cfg: PlanConfig, factors: np.ndarray) -> tuple[float, ...]:
    """Per stage, the largest compute factor among its ranks of every replica (``factors``:
    one per rank of the ``cfg.world`` ranks, laid out in ``cfg.order``).

    >>> cfg = PlanConfig(tp=2, cp=1, pp=2, dp=2, micro_batch=1, schedule="1f1b", chunks=1,
    ...                  data_parallel="ddp", recompute="none")
    >>> stage_factors(cfg, np.array([1, 1, 1, 1.3, 1, 1, 1, 1]))  # rank 3: TP 1, stage 1
    (1.0, 1.3)
    """
    flat = np.asarray(factors[:cfg.world], dtype=np.float64)
    if cfg.megatron:  # [TP, CP, DP, PP]: the stage outermost
        return tuple(flat.reshape(cfg.pp, -1).max(axis=1).tolist())
    return tuple(flat.reshape(cfg.dp, cfg.pp, -1).max(axis=(0, 2)).tolist())


def slowest_rank(cfg: PlanConfig, factors: np.ndarray) -> dict[str, int | float]:
    """The rank with the largest compute factor (the lowest such rank), its factor and
    where it sits in ``cfg``: its TP rank, CP rank, stage and replica."""
    rank = int(np.argmax(factors[:cfg.world]))
    t, c, p, d = cfg.coords(rank)
    return {"rank": rank, "factor": float(factors[rank]), "tp": t, "cp": c,
            "stage": p, "replica": d}


def _memo(timer: CollectiveTimer, group: tuple[int, ...]) -> Callable[[str, int], float]:
    """``timer.collective`` among one ``group``, memoised per (collective, bytes) without
    hashing the group again (a stage's layers repeat a few sizes over a large group)."""
    seen: dict[tuple[str, int], float] = {}

    def timed(collective: str, nbytes: int) -> float:
        key = (collective, nbytes)
        if key not in seen:
            seen[key] = timer.collective(collective, group, nbytes)
        return seen[key]

    return timed


class _Loads:
    """Per stage, layer -> the ``seconds x share`` of the reductions issued after its last
    backward (:func:`~commsim.plan.interference.load`); none without a device, or without
    ``stack.overlap_cost``."""

    def __init__(self, pp: int, stack: Stack, device: DeviceSpec | None) -> None:
        self.on = device is not None and stack.overlap_cost
        self.sm = stack.comm_sms / device.sms if device is not None else 0.0
        self.hbm = device.hbm_Bps if device is not None else 1.0
        self.by_stage: list[dict[int, float]] = [{} for _ in range(pp)]

    def add(self, stage: int, layer: int, collective: str, nbytes: int, ranks: int,
            seconds: float) -> float:
        """Note a reduction of ``seconds`` after ``layer``; returns ``seconds``."""
        if self.on and seconds > 0:
            held = self.by_stage[stage]
            held[layer] = held.get(layer, 0.0) + load(
                seconds, self.sm, hbm_bytes(collective, nbytes, ranks), self.hbm)
        return seconds


def _expert_dp_costs(cfg: PlanConfig, model: ModelSpec, timer: CollectiveTimer, stack: Stack,
                     gather: list[tuple[float, ...]], reduce: list[dict[int, float]],
                     final: list[float], loads: _Loads) -> None:
    """Add the routed experts' data parallelism to :func:`_dp_costs`' lists: over the expert
    data-parallel group (:meth:`PlanConfig.expert_dp_group`), each MoE layer's ``1/(ep etp)``
    of its experts gathered (FSDP) and its gradients reduced after the layer's last backward
    (its own bucket), or all of the stage's after the backward without overlap; ZeRO's
    all-gather of the updated weights."""
    grad = stack.grad_bytes
    coll = "all_reduce" if cfg.data_parallel == "ddp" else "reduce_scatter"
    for p in range(cfg.pp):
        ranks = group(cfg, "expert_dp_group", p)
        timed = _memo(timer, ranks)
        mine = stage_layers(cfg, model.layers, p)
        per = {i: -(-model.experts_at(i) // (cfg.ep * cfg.etp)) for i in mine if model.is_moe(i)}
        if cfg.data_parallel == "fsdp":
            gather[p] = tuple(g + timed("all_gather", per.get(i, 0) * BYTES)
                              for g, i in zip(gather[p], mine, strict=True))
        total = sum(per.values())
        if cfg.data_parallel in ("zero1", "zero2"):
            final[p] += timed("all_gather", total * BYTES)
        if stack.grad_overlap or cfg.data_parallel == "fsdp":
            for i, n in per.items():
                reduce[p][i] = reduce[p].get(i, 0.0) + loads.add(
                    p, i, coll, n * grad, len(ranks), timed(coll, n * grad))
        else:
            final[p] += timed(coll, total * grad)


def _dp_costs(cfg: PlanConfig, model: ModelSpec, params: Callable[[int], int],
              timer: CollectiveTimer, stack: Stack,
              device: DeviceSpec | None = None) -> tuple[tuple, tuple, tuple, tuple]:
    """Per stage: FSDP's gathers, the reductions issued after a layer's last backward, the
    ``final`` ones, and the reductions' loads on the compute they overlap (:class:`_Loads`)."""
    layers = model.layers
    loads = _Loads(cfg.pp, stack, device)
    overlap, grad = stack.grad_overlap, stack.grad_bytes
    gather: list[tuple[float, ...]] = []
    reduce: list[dict[int, float]] = []
    final: list[float] = []
    for p in range(cfg.pp):
        ranks = group(cfg, "dp_group", p)
        mine = stage_layers(cfg, layers, p)
        if cfg.data_parallel == "fsdp":
            timed = _memo(timer, ranks)
            gather.append(tuple(timed("all_gather", params(i) * BYTES) for i in mine))
            reduce.append({i: loads.add(p, i, "reduce_scatter", params(i) * grad, len(ranks),
                                        timed("reduce_scatter", params(i) * grad))
                           for i in mine})
            final.append(0.0)
            continue
        coll = "all_reduce" if cfg.data_parallel == "ddp" else "reduce_scatter"
        total = sum(params(i) for i in mine)
        gathered = (0.0 if cfg.data_parallel == "ddp"
                    else timer.collective("all_gather", ranks, total * BYTES))
        if overlap:
            reduce.append({i: loads.add(p, i, coll, nbytes * grad // BYTES, len(ranks),
                                        timer.collective(coll, ranks, nbytes * grad // BYTES))
                           for i, nbytes in _buckets(mine, params).items()})
            final.append(gathered)
        else:  # one reduction of the whole gradient buffer after the last backward
            reduce.append({})
            final.append(timer.collective(coll, ranks, total * grad) + gathered)
    if model.moe is not None:
        _expert_dp_costs(cfg, model, timer, stack, gather, reduce, final, loads)
    if cfg.dp * cfg.cp < 2 and (model.moe is None or cfg.expert_dp < 2):
        return (), (), (), ()
    return (tuple(gather) if cfg.data_parallel == "fsdp" else (), tuple(reduce), tuple(final),
            tuple(loads.by_stage) if any(loads.by_stage) else ())


def layer_bytes(cfg: PlanConfig, model: ModelSpec) -> tuple[int, int]:
    """Bytes of a layer's TP all-reduce and of its CP all-gather of keys and values (see the
    module docstring)."""
    tp_bytes = cfg.micro_batch * model.seq // cfg.cp * model.hidden * BYTES
    kv = max(model.kv_heads // cfg.tp, 1) * model.head_dim if cfg.tp > 1 else model.kv_hidden
    return tp_bytes, 2 * cfg.micro_batch * model.seq * kv * BYTES


def pipeline_costs(
    cfg: PlanConfig,
    model: ModelSpec,
    times: LayerTimes,
    timer: CollectiveTimer,
    microbatches: int,
    params: Callable[[int], int] | None = None,
    stack: Stack = DEFAULT,
    device: DeviceSpec | None = None,
    compute_factor: tuple[float, ...] = (),
    moe: MoETimes | None = None,
) -> list[PipelineCosts]:
    """The distinct pipelines of ``cfg`` (one per kind of replica), ready to evaluate
    (``stack.grad_overlap``: DDP/ZeRO reductions per bucket during the backward, or one
    after it; ``device``: the GPU that runs each stage's optimizer step, None: no step;
    ``compute_factor``: each stage's, :func:`stage_factors`; ``moe``: the MoE layers' MLP
    half, :func:`~commsim.plan.moe_layer.moe_times`, for a model with experts; under a
    ``stack.moe_overlap`` each stage's paired layer, :func:`~commsim.plan.overlap.paired_blocks`,
    the all-to-alls holding ``stack.comm_sms`` of ``device``'s SMs, none without a device)."""
    params = params or plan_layer_params(model, cfg)
    tp_bytes, cp_bytes = layer_bytes(cfg, model)
    send_bytes = tp_bytes // cfg.tp
    gather, reduce, final, loads = _dp_costs(cfg, model, params, timer, stack, device)
    optimizer = () if device is None else optimizer_times(cfg, model, params, device, stack)
    base = PipelineCosts(
        schedule=cfg.schedule, pp=cfg.pp, chunks=cfg.chunks, microbatches=microbatches,
        layers_per_chunk=model.layers // (cfg.pp * cfg.chunks),
        chunk_layers=tuple(len(r) for r in cfg.vstages(model.layers)) if cfg.stage_layers
        else (),
        attn_fwd=times.attn_fwd, mlp_fwd=times.mlp_fwd, attn_bwd=times.attn_bwd,
        mlp_bwd=times.mlp_bwd, attn_rc=times.attn_recompute, mlp_rc=times.mlp_recompute,
        rc_comm=times.recompute_collectives, moe_rc=cfg.recompute == "moe" and moe is not None,
        logits_fwd=times.logits_fwd,
        logits_bwd=times.logits_bwd, gather=gather, reduce=reduce, final=final,
        tp_ar=(), cp_gather=(), cp_rs=(), optimizer=optimizer, p2p_blocking=stack.p2p_blocking,
        compute_factor=compute_factor,
        moe=() if moe is None else _moe_stages(cfg, model, moe, timer, stack.dispatcher),
        fsdp_reshard=stack.fsdp_reshard and cfg.data_parallel == "fsdp",
        moe_overlap=stack.moe_overlap if moe is not None else "none",
    )
    if loads and not base.fsdp_reshard:  # PyTorch FSDP's every-micro-batch ones: not charged
        base = replace(base, overlap=_charges(cfg, model, base, loads))
    seen: dict[tuple, PipelineCosts] = {}
    pairs = sorted({(p, (p + 1) % cfg.pp) for p in range(cfg.pp)}
                   | {((p + 1) % cfg.pp, p) for p in range(cfg.pp)})
    pairs = [(a, b) for a, b in pairs if a != b]
    for d in _distinct_replicas(cfg, timer):
        tp = tuple(timer.collective("all_reduce", group(cfg, "tp_group", p, d), tp_bytes)
                   for p in range(cfg.pp))
        cg = tuple(timer.collective("all_gather", group(cfg, "cp_group", p, d), cp_bytes)
                   for p in range(cfg.pp))
        rs = tuple(timer.collective("reduce_scatter", group(cfg, "cp_group", p, d), cp_bytes)
                   for p in range(cfg.pp))
        send = tuple(timer.send(cfg.rank(0, 0, a, d), cfg.rank(0, 0, b, d), send_bytes)
                     for a, b in pairs)
        # Megatron-LM 2021 sends 1/t of an activation per TP rank and all-gathers it on arrival
        recv = tuple(timer.collective("all_gather", group(cfg, "tp_group", p, d), tp_bytes)
                     for p in range(cfg.pp)) if stack.p2p_blocking and cfg.pp > 1 else ()
        key = (tp, cg, rs, send, recv)
        if key not in seen:
            seen[key] = _paired(replace(base, tp_ar=tp, cp_gather=cg, cp_rs=rs,
                                        send=dict(zip(pairs, send, strict=True)),
                                        recv_gather=recv), stack, device)
    return list(seen.values())


def _charges(cfg: PlanConfig, model: ModelSpec, costs: PipelineCosts,
             loads: tuple[dict[int, float], ...]) -> tuple[dict[int, float], ...]:
    """Per stage, layer -> the compute seconds its reductions add after its last backward
    (:func:`~commsim.plan.interference.charge`): their time ``a`` at the share ``load / a``
    against the backward compute the stage has left once they start. Each layer's last
    backward comes after those of the stage's layers above it, in every schedule; on that
    backward's compute, run back to back at healthy pace (the bubbles between a pipeline's
    ops not counted; the evaluation runs the charges at the stage's ``compute_factor``), a
    reduction starts when its layer's backward ends or the one before it ends, whichever is
    later, each one's time ``a`` on the stream."""
    zeros = (0.0,) * cfg.pp
    bare = replace(costs, tp_ar=zeros, cp_gather=zeros, cp_rs=zeros, compute_factor=())
    out = []
    for p in range(cfg.pp):
        per = sum(x for s, x in layer_blocks(bare, p, False) if s == "compute")
        order = sorted(stage_layers(cfg, model.layers, p), reverse=True)
        total, queue, added = len(order) * per, 0.0, {}
        for done, i in enumerate(order, 1):
            a = costs.reduce[p].get(i, 0.0)
            if not (a and loads[p].get(i)):
                continue
            start = max(done * per, queue)
            queue = start + a
            extra = charge(a, loads[p][i] / a, max(0.0, total - start))
            if extra > 0:
                added[i] = extra
        out.append(added)
    return tuple(out)


def _paired(costs: PipelineCosts, stack: Stack, device: DeviceSpec | None) -> PipelineCosts:
    """``costs`` with each stage's paired layer (:func:`~commsim.plan.overlap.paired_blocks`)
    under a ``moe_overlap``."""
    if costs.moe_overlap == "none":
        return costs
    share = 0.0 if device is None else stack.comm_sms / device.sms
    if not 0.0 <= share < 1.0:
        raise SpecError(f"stack comm_sms {stack.comm_sms}: must leave some of the device's "
                        f"{device.sms if device else 0} SMs to compute")
    return replace(costs, paired=tuple(paired_blocks(costs, p, share)
                                       for p in range(costs.pp)))


def _moe_stages(cfg: PlanConfig, model: ModelSpec, moe: MoETimes,
                timer: CollectiveTimer, dispatcher: str = "alltoall") -> tuple[MoEStage, ...]:
    """Per stage, its :class:`~commsim.plan.blocks.MoEStage`: the share of MoE layers, the
    MoE half's compute, its TP collective, and the slowest of the stage's expert-parallel
    groups' dispatches by ``dispatcher`` (:mod:`.dispatch`; every group's ranks wait for the
    busiest)."""
    spec = model.moe
    assert spec is not None
    a2a_bytes = dispatch_bytes(model, tp=cfg.tp, cp=cfg.cp, ep=cfg.ep,
                               micro_batch=cfg.micro_batch, precision=moe.precision)
    bf16_bytes = dispatch_bytes(model, tp=cfg.tp, cp=cfg.cp, ep=cfg.ep,
                                micro_batch=cfg.micro_batch)
    tp_colls = moe_tp_collectives(model, tp=cfg.tp, etp=cfg.etp, cp=cfg.cp, ep=cfg.ep,
                                  micro_batch=cfg.micro_batch)
    starts = _distinct_replicas(cfg, timer, cfg.ep) if not cfg.megatron else ()
    out = []
    for p in range(cfg.pp):
        share = moe_share(model, cfg.pp, cfg.chunks, p, cfg.stage_layers)
        # folded groups (Megatron-Core's order): every group, each shape timed once
        groups = (ep_groups(cfg, p) if cfg.megatron
                  else [group(cfg, "ep_group", p, d) for d in starts])
        a2a = max(dispatch_seconds(timer, spec, g, a2a_bytes, dispatcher) for g in groups)
        bf16 = a2a if bf16_bytes == a2a_bytes else max(
            dispatch_seconds(timer, spec, g, bf16_bytes, dispatcher) for g in groups)
        tp_ar = sum(timer.collective("all_reduce", group(cfg, "tp_group", p, 0) if g == "tp"
                                     else group(cfg, "etp_group", p), nbytes)
                    for g, nbytes in tp_colls)
        out.append(MoEStage(share, moe.pre_fwd, moe.experts_fwd, moe.pre_bwd, moe.experts_bwd,
                            a2a, tp_ar, bf16))
    return tuple(out)


def optimizer_times(cfg: PlanConfig, model: ModelSpec, params: Callable[[int], int],
               device: DeviceSpec, stack: Stack) -> tuple[float, ...]:
    """Per stage, the optimizer step of one rank: its parameters, or its ``1/(dp cp)`` shard
    of them under ZeRO and FSDP (its routed experts': ``1/edp``, :attr:`PlanConfig.expert_dp`)."""
    sharded = cfg.data_parallel != "ddp"
    shards = cfg.dp * cfg.cp if sharded else 1
    expert_shards = cfg.expert_dp if sharded else 1
    out = []
    for p in range(cfg.pp):
        mine = stage_layers(cfg, model.layers, p)
        experts = sum(model.experts_at(i) for i in mine) // (cfg.ep * cfg.etp)
        out.append(optimizer_time(device, -(-sum(params(i) for i in mine) // shards)
                                  + -(-experts // expert_shards), stack))
    return tuple(out)


def _distinct_replicas(cfg: PlanConfig, timer: CollectiveTimer,
                       step: int = 1) -> range | list[int]:
    """Replicas that may differ: on hosts of ``G`` GPUs each, replica ``d`` starts at GPU
    ``d R`` (``R = tp cp pp``; ``tp cp`` in Megatron-Core's order, each stage a further
    ``tp cp dp`` on), so replicas with the same ``d R mod G`` sit alike, unless a
    what-if's changed links touch a host of theirs (:attr:`CollectiveTimer.exact`). With
    ``step``, only every ``step``-th replica (the first of each expert-parallel group)."""
    per_host = timer.network.meta.get("gpus_per_node")
    exact = timer.exact
    if (timer.network.meta.get("kind") != "hierarchical" or not isinstance(per_host, int)
            or exact is None):
        return range(0, cfg.dp, step)
    size = cfg.tp * cfg.cp * (1 if cfg.megatron else cfg.pp)
    first: dict[int, int] = {}
    for d in range(0, cfg.dp, step):
        first.setdefault(d * size % per_host, d)
        if len(first) == per_host:
            break
    touched = {cfg.coords(r)[3] // step * step for r in exact if r < cfg.world}
    return sorted(set(first.values()) | touched)


def estimate_step(costs: list[PipelineCosts]) -> StepEstimate:
    """The step of the slowest pipeline, with its mean compute and exposed communication."""
    worst: PipelineTiming | None = None
    for c in costs:
        timing = evaluate_dualpipe(c) if c.paired and c.moe_overlap == "dualpipe" \
            else evaluate_pipeline(c)
        if worst is None or timing.step_time_s > worst.step_time_s:
            worst = timing
    assert worst is not None
    n = len(worst.compute_s)
    return StepEstimate(worst.step_time_s, sum(worst.compute_s) / n,
                        sum(worst.exposed_comm_s) / n)
