"""From a configuration to the :class:`~commsim.plan.evaluate.PipelineCosts` of its pipelines,
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

import numpy as np

from commsim.plan.compute import LayerTimes, optimizer_time
from commsim.plan.config import PlanConfig
from commsim.plan.device import DeviceSpec
from commsim.plan.evaluate import PipelineCosts, PipelineTiming, evaluate_pipeline
from commsim.plan.models import ModelSpec
from commsim.plan.stack import DEFAULT, Stack
from commsim.plan.timing import CollectiveTimer
from commsim.replay.ddp import DEFAULT_BUCKET_BYTES

BYTES = 2  #: bf16 weights, gradients and activations


def plan_layer_params(model: ModelSpec, cfg: PlanConfig) -> Callable[[int], int]:
    """Parameters of global layer ``i`` on one TP rank: the embedding with layer 0, the
    output layer with the last layer (unless tied and on the same stage)."""

    def params(layer: int) -> int:
        n = model.layer_params
        if layer == 0:
            n += model.embedding_params
        if layer == model.layers - 1 and (cfg.pp > 1 or not model.tied_embeddings):
            n += model.embedding_params
        return math.ceil(n / cfg.tp)

    return params


def stage_layers(cfg: PlanConfig, layers: int, stage: int) -> list[int]:
    """Global layers of ``stage`` in forward order, chunk by chunk."""
    ranges = cfg.vstages(layers)
    return [i for c in range(cfg.chunks) for i in ranges[c * cfg.pp + stage]]


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
    one per rank of the ``cfg.world`` ranks, laid out ``[TP, CP, PP, DP]``).

    >>> cfg = PlanConfig(tp=2, cp=1, pp=2, dp=2, micro_batch=1, schedule="1f1b", chunks=1,
    ...                  data_parallel="ddp", recompute="none")
    >>> stage_factors(cfg, np.array([1, 1, 1, 1.3, 1, 1, 1, 1]))  # rank 3: TP 1, stage 1
    (1.0, 1.3)
    """
    grid = np.asarray(factors[:cfg.world], dtype=np.float64).reshape(cfg.dp, cfg.pp, -1)
    return tuple(grid.max(axis=(0, 2)).tolist())


def slowest_rank(cfg: PlanConfig, factors: np.ndarray) -> dict[str, int | float]:
    """The rank with the largest compute factor (the lowest such rank), its factor and
    where it sits in ``cfg``: its TP rank, CP rank, stage and replica."""
    rank = int(np.argmax(factors[:cfg.world]))
    t, rest = rank % cfg.tp, rank // cfg.tp
    c, rest = rest % cfg.cp, rest // cfg.cp
    return {"rank": rank, "factor": float(factors[rank]), "tp": t, "cp": c,
            "stage": rest % cfg.pp, "replica": rest // cfg.pp}


def _dp_costs(cfg: PlanConfig, layers: int, params: Callable[[int], int],
              timer: CollectiveTimer, stack: Stack) -> tuple[tuple, tuple, tuple]:
    overlap, grad = stack.grad_overlap, stack.grad_bytes
    gather: list[tuple[float, ...]] = []
    reduce: list[dict[int, float]] = []
    final: list[float] = []
    for p in range(cfg.pp):
        group = cfg.dp_group(p)
        mine = stage_layers(cfg, layers, p)
        if cfg.data_parallel == "fsdp":
            gather.append(tuple(timer.collective("all_gather", group, params(i) * BYTES)
                                for i in mine))
            reduce.append({i: timer.collective("reduce_scatter", group, params(i) * grad)
                           for i in mine})
            final.append(0.0)
            continue
        coll = "all_reduce" if cfg.data_parallel == "ddp" else "reduce_scatter"
        total = sum(params(i) for i in mine)
        gathered = (0.0 if cfg.data_parallel == "ddp"
                    else timer.collective("all_gather", group, total * BYTES))
        if overlap:
            reduce.append({i: timer.collective(coll, group, nbytes * grad // BYTES)
                           for i, nbytes in _buckets(mine, params).items()})
            final.append(gathered)
        else:  # one reduction of the whole gradient buffer after the last backward
            reduce.append({})
            final.append(timer.collective(coll, group, total * grad) + gathered)
    if len(cfg.dp_group(0)) < 2:
        return (), (), ()
    return tuple(gather) if cfg.data_parallel == "fsdp" else (), tuple(reduce), tuple(final)


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
) -> list[PipelineCosts]:
    """The distinct pipelines of ``cfg`` (one per kind of replica), ready to evaluate
    (``stack.grad_overlap``: DDP/ZeRO reductions per bucket during the backward, or one
    after it; ``device``: the GPU that runs each stage's optimizer step, None: no step;
    ``compute_factor``: each stage's, :func:`stage_factors`)."""
    params = params or plan_layer_params(model, cfg)
    tokens = cfg.micro_batch * model.seq // cfg.cp
    tp_bytes = tokens * model.hidden * BYTES
    kv = max(model.kv_heads // cfg.tp, 1) * model.head_dim if cfg.tp > 1 else model.kv_hidden
    cp_bytes = 2 * cfg.micro_batch * model.seq * kv * BYTES
    send_bytes = tp_bytes // cfg.tp
    gather, reduce, final = _dp_costs(cfg, model.layers, params, timer, stack)
    optimizer = () if device is None else _optimizer(cfg, model.layers, params, device, stack)
    base = PipelineCosts(
        schedule=cfg.schedule, pp=cfg.pp, chunks=cfg.chunks, microbatches=microbatches,
        layers_per_chunk=model.layers // (cfg.pp * cfg.chunks),
        chunk_layers=tuple(len(r) for r in cfg.vstages(model.layers)) if cfg.stage_layers
        else (),
        attn_fwd=times.attn_fwd, mlp_fwd=times.mlp_fwd, attn_bwd=times.attn_bwd,
        mlp_bwd=times.mlp_bwd, attn_rc=times.attn_recompute, mlp_rc=times.mlp_recompute,
        rc_comm=times.recompute_collectives, logits_fwd=times.logits_fwd,
        logits_bwd=times.logits_bwd, gather=gather, reduce=reduce, final=final,
        tp_ar=(), cp_gather=(), cp_rs=(), optimizer=optimizer, p2p_blocking=stack.p2p_blocking,
        compute_factor=compute_factor,
    )
    seen: dict[tuple, PipelineCosts] = {}
    pairs = sorted({(p, (p + 1) % cfg.pp) for p in range(cfg.pp)}
                   | {((p + 1) % cfg.pp, p) for p in range(cfg.pp)})
    pairs = [(a, b) for a, b in pairs if a != b]
    for d in _distinct_replicas(cfg, timer):
        tp = tuple(timer.collective("all_reduce", cfg.tp_group(p, d), tp_bytes)
                   for p in range(cfg.pp))
        cg = tuple(timer.collective("all_gather", cfg.cp_group(p, d), cp_bytes)
                   for p in range(cfg.pp))
        rs = tuple(timer.collective("reduce_scatter", cfg.cp_group(p, d), cp_bytes)
                   for p in range(cfg.pp))
        send = tuple(timer.send(cfg.rank(0, 0, a, d), cfg.rank(0, 0, b, d), send_bytes)
                     for a, b in pairs)
        # Megatron-LM 2021 sends 1/t of an activation per TP rank and all-gathers it on arrival
        recv = tuple(timer.collective("all_gather", cfg.tp_group(p, d), tp_bytes)
                     for p in range(cfg.pp)) if stack.p2p_blocking and cfg.pp > 1 else ()
        key = (tp, cg, rs, send, recv)
        if key not in seen:
            seen[key] = replace(base, tp_ar=tp, cp_gather=cg, cp_rs=rs,
                                send=dict(zip(pairs, send, strict=True)), recv_gather=recv)
    return list(seen.values())


def _optimizer(cfg: PlanConfig, layers: int, params: Callable[[int], int],
               device: DeviceSpec, stack: Stack) -> tuple[float, ...]:
    """Per stage, the optimizer step of one rank: its parameters, or its ``1/(dp cp)`` shard
    of them under ZeRO and FSDP."""
    shards = 1 if cfg.data_parallel == "ddp" else cfg.dp * cfg.cp
    return tuple(
        optimizer_time(device, -(-sum(params(i) for i in stage_layers(cfg, layers, p)) // shards),
                       stack)
        for p in range(cfg.pp)
    )


def _distinct_replicas(cfg: PlanConfig, timer: CollectiveTimer) -> range | list[int]:
    """Replicas that may differ: on hosts of ``G`` GPUs each, replica ``d`` starts at GPU
    ``d R`` (``R = tp cp pp``), so replicas with the same ``d R mod G`` sit alike, unless a
    what-if's changed links touch a host of theirs (:attr:`CollectiveTimer.exact`)."""
    per_host = timer.network.meta.get("gpus_per_node")
    exact = timer.exact
    if (timer.network.meta.get("kind") != "hierarchical" or not isinstance(per_host, int)
            or exact is None):
        return range(cfg.dp)
    size = cfg.tp * cfg.cp * cfg.pp
    first: dict[int, int] = {}
    for d in range(cfg.dp):
        first.setdefault(d * size % per_host, d)
        if len(first) == per_host:
            break
    touched = {r // size for r in exact if r < cfg.dp * size}
    return sorted(set(first.values()) | touched)


def estimate_step(costs: list[PipelineCosts]) -> StepEstimate:
    """The step of the slowest pipeline, with its mean compute and exposed communication."""
    worst: PipelineTiming | None = None
    for c in costs:
        timing = evaluate_pipeline(c)
        if worst is None or timing.step_time_s > worst.step_time_s:
            worst = timing
    assert worst is not None
    n = len(worst.compute_s)
    return StepEstimate(worst.step_time_s, sum(worst.compute_s) / n,
                        sum(worst.exposed_comm_s) / n)
