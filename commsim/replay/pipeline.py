"""Pipeline parallelism: GPipe, 1F1B and interleaved 1F1B schedules as data, and their step graph.

A schedule is a list of ops per device (``stage_orders``): forward or backward of one
micro-batch on one model chunk. Device ``d`` holds chunks ``c = 0..v-1``, virtual stages
``c * p + d`` (Megatron-LM's interleaving; ``v = 1`` is the plain pipeline). A micro-batch's
forward runs virtual stages ``0..pv-1`` in order, its backward runs them in reverse, and the
last virtual stage starts a micro-batch's backward after its own forward. Activations (forward)
and their gradients (backward) cross each device boundary as a point-to-point send of
``activation_bytes``.

* ``gpipe``: all forwards, then all backwards (Huang et al. 2019);
* ``1f1b``: ``p - 1 - d`` warm-up forwards, then one forward and one backward alternately,
  then the remaining backwards (PipeDream-Flush, Narayanan et al. 2021);
* ``interleaved``: Megatron-LM's interleaved 1F1B with ``v`` chunks per device; needs the
  number of micro-batches to be a multiple of ``p``.

With uniform stages and no activation traffic, GPipe and 1F1B take ``(k + p - 1)(f + b)`` for
``k`` micro-batches of forward ``f`` and backward ``b`` per stage, an idle (bubble) fraction of
``(p - 1)/(k + p - 1)``; interleaved takes ``(k + (p - 1)/v)(f + b)``.

>>> [str(op) for op in stage_orders("1f1b", stages=2, microbatches=3)[0]]
['F0', 'F1', 'B0', 'F2', 'B1', 'B2']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from commsim.errors import ScheduleError, SpecError
from commsim.network import Network
from commsim.replay import fields
from commsim.replay.graph import GraphBuilder, StepGraph, check_tasks

KIND = "pipeline"
SCHEDULES = ("gpipe", "1f1b", "interleaved")

FORWARD, BACKWARD = "F", "B"


@dataclass(frozen=True, slots=True)
class PipeOp:
    """Forward (``F``) or backward (``B``) of one micro-batch on one model chunk."""

    kind: str
    microbatch: int
    chunk: int = 0

    def __str__(self) -> str:
        return f"{self.kind}{self.microbatch}" + (f".{self.chunk}" if self.chunk else "")


def _one_f_one_b(forwards: list[PipeOp], backwards: list[PipeOp],
                 warmup: int) -> tuple[list[PipeOp], int, int]:
    """The order, and where its steady state starts and how many (forward, backward) steps
    it has."""
    warmup = min(warmup, len(forwards))
    order = forwards[:warmup]
    steady = len(forwards) - warmup
    for i in range(steady):
        order += [forwards[warmup + i], backwards[i]]
    return order + backwards[steady:], warmup, steady


def pipeline_ops(stages: int, microbatches: int, chunks: int = 1) -> int:
    """Ops of a pipeline over all devices: a forward and a backward of every micro-batch on
    every virtual stage."""
    return 2 * stages * microbatches * chunks


def stage_orders(
    schedule: str, *, stages: int, microbatches: int, chunks: int = 1, combined: bool = False
) -> list[list[PipeOp]]:
    """Each device's ops, in the order its compute stream runs them; ``combined``: as
    Megatron-Core runs them with its combined 1F1B (:func:`combined_steps`)."""
    return [order for order, _, _ in _orders(schedule, stages, microbatches, chunks, combined)]


def combined_steps(
    schedule: str, *, stages: int, microbatches: int, chunks: int = 1
) -> list[frozenset[int]]:
    """Per device, the positions ``i`` of its ``combined`` order (:func:`stage_orders`) whose
    forward runs together with the backward at ``i + 1``: Megatron-Core's combined 1F1B
    (``--overlap-moe-expert-parallel-comm``, ``megatron/core/pipeline_parallel/
    combined_1f1b.py``), which pairs every steady-state step's forward and backward, of
    different micro-batches, layer by layer. It runs without pipelining (F0, then F1 with B0,
    F2 with B1, ..., then the last B) and in the interleaved schedule, where it schedules
    one more warm-up forward than the plain one so that each step's two halves are
    independent (``schedules.py``: "we schedule one extra micro-batch forward step before
    the 1f1b stages"); a plain pipeline of several stages has none (no pairs)."""
    out = []
    for _, warmup, steady in _orders(schedule, stages, microbatches, chunks, True):
        combines = stages == 1 or schedule == "interleaved"
        out.append(frozenset(warmup + 2 * j for j in range(steady)) if combines
                   else frozenset())
    return out


def _orders(schedule: str, p: int, k: int, v: int,
            combined: bool) -> list[tuple[list[PipeOp], int, int]]:
    """Per device: its order, where its steady state starts, its steady steps (0: none)."""
    if schedule in ("gpipe", "1f1b") and v != 1:
        raise SpecError(f"chunks_per_stage: must be 1 for schedule {schedule!r}, got {v}")
    if schedule == "interleaved" and k % p:
        raise SpecError(f"microbatches: interleaved needs a multiple of stages ({p}), got {k}")
    if schedule not in SCHEDULES:
        raise SpecError(f"schedule: unknown value {schedule!r} (known: {', '.join(SCHEDULES)})")
    check_tasks(pipeline_ops(p, k, v), "stages x microbatches x chunks_per_stage",
                f"{p} x {k} x {v}")
    # the combined schedule's extra warm-up forward, where there is one (combined_steps)
    extra = 1 if combined and (p == 1 or schedule == "interleaved") else 0
    orders = []
    for d in range(p):
        if schedule == "gpipe" and not extra:
            forwards = [PipeOp(FORWARD, m) for m in range(k)]
            orders.append((forwards + [PipeOp(BACKWARD, m) for m in range(k)], k, 0))
        elif schedule != "interleaved":  # 1f1b, and any schedule of one stage combined
            orders.append(_one_f_one_b([PipeOp(FORWARD, m) for m in range(k)],
                                       [PipeOp(BACKWARD, m) for m in range(k)],
                                       p - 1 - d + extra))
        else:
            # Megatron-LM: micro-step i runs chunk (i // p) % v of micro-batch (i // pv) p + i % p
            def op(kind: str, i: int) -> PipeOp:
                chunk = (i // p) % v
                return PipeOp(
                    kind, (i // (p * v)) * p + i % p, chunk if kind == FORWARD else v - 1 - chunk
                )

            total = k * v
            forwards = [op(FORWARD, i) for i in range(total)]
            backwards = [op(BACKWARD, i) for i in range(total)]
            warmup = total if k == p else (p - d - 1) * 2 + (v - 1) * p + extra
            orders.append(_one_f_one_b(forwards, backwards, warmup))
    return orders


#: ``run_op(device, op, deps) -> tasks`` whose ends mark the op done.
RunOp = Callable[[int, PipeOp, list[int]], list[int]]
#: ``transfer(src_device, dst_device, op, deps) -> tasks`` whose ends mark the data arrived.
Transfer = Callable[[int, int, PipeOp, list[int]], list[int]]
#: ``run_pair(device, forward, backward, forward_deps, backward_deps) -> (forward's tasks,
#: backward's tasks)``: a combined step (:func:`combined_steps`).
RunPair = Callable[[int, PipeOp, PipeOp, list[int], list[int]], tuple[list[int], list[int]]]


def emit_pipeline(
    orders: Sequence[Sequence[PipeOp]], *, chunks: int, run_op: RunOp, transfer: Transfer,
    pairs: Sequence[frozenset[int]] = (), run_pair: RunPair | None = None,
) -> dict[tuple[str, int, int], list[int]]:
    """Add every op to the graph in a topological order; return ``(kind, mb, vstage) -> tasks``.

    Each device's ops are added in its order; an op waits for its producer (the previous
    virtual stage's forward, the next one's backward, or its own forward at the last stage),
    through ``transfer`` when the producer ran on another device. ``pairs[d]``: the positions
    of device ``d``'s order whose op and the next are one combined step
    (:func:`combined_steps`), added together by ``run_pair`` once both have their inputs. A
    schedule whose orders cannot all be added (each device waiting on another) deadlocks:
    ScheduleError.
    """
    p = len(orders)
    last_stage = p * chunks - 1
    done: dict[tuple[str, int, int], list[int]] = {}

    def producer(d: int, op: PipeOp) -> tuple[str, int, int] | None:
        vs = op.chunk * p + d
        if op.kind == FORWARD:
            return (FORWARD, op.microbatch, vs - 1) if vs > 0 else None
        return (BACKWARD, op.microbatch, vs + 1) if vs < last_stage else (
            FORWARD, op.microbatch, vs)

    def inputs(d: int, op: PipeOp) -> list[int]:
        source = producer(d, op)
        if source is None:
            return []
        deps = done[source]
        return transfer(source[2] % p, d, op, deps) if source[2] % p != d else deps

    position = [0] * p
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for d in range(p):
            while position[d] < len(orders[d]):
                at = position[d]
                ops = orders[d][at:at + 2] if pairs and at in pairs[d] else orders[d][at:at + 1]
                if any((src := producer(d, op)) is not None and src not in done for op in ops):
                    break
                if len(ops) == 2:
                    assert run_pair is not None, "pairs need run_pair"
                    forward, backward = ops
                    ins = [inputs(d, op) for op in ops]
                    tasks = run_pair(d, forward, backward, ins[0], ins[1])
                    for op, out in zip(ops, tasks, strict=True):
                        done[(op.kind, op.microbatch, op.chunk * p + d)] = out
                else:
                    op = ops[0]
                    done[(op.kind, op.microbatch, op.chunk * p + d)] = run_op(
                        d, op, inputs(d, op))
                position[d] += len(ops)
                remaining -= len(ops)
                progressed = True
        if not progressed:
            stuck = ", ".join(
                f"device {d}: {orders[d][position[d]]}"
                for d in range(p)
                if position[d] < len(orders[d])
            )
            raise ScheduleError(f"pipeline schedule deadlocks ({stuck})")
    return done


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineSpec:
    """``kind: pipeline``: stage ``s`` runs on rank ``s``.

    Attributes
    ----------
    schedule
        ``gpipe``, ``1f1b`` or ``interleaved``.
    stages, microbatches
        ``p`` and ``k``.
    chunks_per_stage
        ``v``: model chunks per device (interleaved only).
    forward_time_s, backward_time_s
        Per micro-batch, per stage (one value per stage; a chunk takes ``1/v`` of it).
    activation_bytes
        Sent between consecutive stages per micro-batch (activations forward, their gradients
        backward).
    """

    schedule: str
    stages: int
    microbatches: int
    chunks_per_stage: int = 1
    forward_time_s: tuple[float, ...]
    backward_time_s: tuple[float, ...]
    activation_bytes: int = 0

    def __post_init__(self) -> None:
        fields.positive_int(self.stages, "stages")
        fields.positive_int(self.microbatches, "microbatches")
        fields.positive_int(self.chunks_per_stage, "chunks_per_stage")
        fields.choice(self.schedule, "schedule", SCHEDULES)
        for name in ("forward_time_s", "backward_time_s"):
            if len(getattr(self, name)) != self.stages:
                raise SpecError(f"{name[:-2]}: need one value per stage ({self.stages})")
        stage_orders(
            self.schedule,
            stages=self.stages,
            microbatches=self.microbatches,
            chunks=self.chunks_per_stage,
        )

    @property
    def kind(self) -> str:
        return KIND

    def graph(self, network: Network) -> StepGraph:
        """Stage ``s`` on rank ``s``; more stages than ranks is a SpecError."""
        p, v = self.stages, self.chunks_per_stage
        if p > network.ranks:
            raise SpecError(
                f"stages: {p} stages need {p} ranks, topology {network.name!r} has {network.ranks}"
            )
        builder = GraphBuilder(p)
        orders = stage_orders(self.schedule, stages=p, microbatches=self.microbatches, chunks=v)

        def run_op(d: int, op: PipeOp, deps: list[int]) -> list[int]:
            fwd = op.kind == FORWARD
            time_s = (self.forward_time_s if fwd else self.backward_time_s)[d] / v
            name = (
                ("fwd" if fwd else "bwd")
                + f" mb{op.microbatch}"
                + (f" c{op.chunk}" if v > 1 else "")
            )
            return [
                builder.compute(
                    d, time_s, name=name, phase="forward" if fwd else "backward", deps=deps
                )
            ]

        def transfer(src: int, dst: int, op: PipeOp, deps: list[int]) -> list[int]:
            if self.activation_bytes == 0:
                return deps
            what = "act" if op.kind == FORWARD else "grad"
            return [
                builder.send(
                    src,
                    dst,
                    self.activation_bytes,
                    deps=deps,
                    name=f"{what} mb{op.microbatch}",
                    phase="p2p",
                )
            ]

        emit_pipeline(orders, chunks=v, run_op=run_op, transfer=transfer)
        return builder.build()

    def extras(self, metrics: Any) -> dict[str, object]:
        """The idle fraction beside the lectures' estimates, and the per-stage times."""
        p, k, v = self.stages, self.microbatches, self.chunks_per_stage
        return {
            "schedule": self.schedule,
            "stages": p,
            "microbatches": k,
            "chunks_per_stage": v,
            "idle_fraction_exact": metrics.idle_fraction,
            "idle_fraction_estimate": p / (p + k),
            "bubble_fraction": (p - 1) / (k + p - 1),
            "bubble_fraction_interleaved": (p - 1) / (v * k + p - 1),
            "stage_times": [
                {"stage": s, "rank": s, "forward_time_s": f, "backward_time_s": b}
                for s, (f, b) in enumerate(
                    zip(self.forward_time_s, self.backward_time_s, strict=True)
                )
            ],
        }


def parse(data: Mapping[str, Any]) -> PipelineSpec:
    """A ``kind: pipeline`` mapping -> :class:`PipelineSpec` (errors name the field)."""
    fields.check_keys(
        data,
        ("kind", "stages", "microbatches", "forward_time", "backward_time"),
        ("schedule", "chunks_per_stage", "activation_bytes"),
        "",
        " for kind 'pipeline'",
    )
    stages = fields.positive_int(data["stages"], "stages")
    return PipelineSpec(
        schedule=fields.choice(data.get("schedule", "1f1b"), "schedule", SCHEDULES),
        stages=stages,
        microbatches=fields.positive_int(data["microbatches"], "microbatches"),
        chunks_per_stage=fields.positive_int(data.get("chunks_per_stage", 1), "chunks_per_stage"),
        forward_time_s=fields.each(
            data["forward_time"], "forward_time", stages, fields.time, "stage"
        ),
        backward_time_s=fields.each(
            data["backward_time"], "backward_time", stages, fields.time, "stage"
        ),
        activation_bytes=fields.size(data.get("activation_bytes", 0), "activation_bytes"),
    )
