"""A replayed step as a Chrome/Perfetto trace: compute and communication tracks per rank.

Layout: one process per rank (``pid`` = rank, named ``rank r``) with a ``compute`` thread and a
``comm`` thread; each task is an ``X`` slice named after it (category = its phase) on every rank
it involves: a collective on each member of its group, a send on its source and destination.
Slices on one thread must nest, so overlapping tasks (FSDP's all-gather and reduce-scatter
streams, TP and DP collectives) go to extra lanes ``comm #2``, ... assigned greedily in start
order. Zero-length compute tasks (joins) are left out. A rank that waits for others (a
collective whose other members are late, a pipeline receive whose sender is late:
:func:`commsim.replay.metrics.wait_intervals`) has a ``wait`` thread too, with a slice
named ``wait`` for each wait (category ``wait``; its args name the task waited for). Lanes,
times and the file layout are :mod:`commsim.trace_events`' (shared with ``commsim run
--trace``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from commsim.replay.graph import TaskKind
from commsim.replay.metrics import wait_intervals
from commsim.trace_events import Slice, TraceEvents, ns, write_trace_json

if TYPE_CHECKING:
    from commsim.replay.step import StepResult

__all__ = ["step_trace_events", "write_step_trace"]


def step_trace_events(result: StepResult) -> dict[str, object]:
    """The trace as a JSON-ready dict ``{"displayTimeUnit", "otherData", "traceEvents"}``."""
    graph, timing = result.graph, result.timing
    per_rank: list[dict[str, list[Slice]]] = [
        {"compute": [], "comm": []} for _ in range(graph.ranks)
    ]
    for index, task in enumerate(graph.tasks):
        start, end = ns(timing.start_s[index]), ns(timing.end_s[index])
        if task.kind is TaskKind.COMPUTE and end <= start:
            continue
        track = "compute" if task.kind is TaskKind.COMPUTE else "comm"
        for rank in task.ranks:
            per_rank[rank][track].append(Slice(start, end, index))

    def describe(sl: Slice) -> Mapping[str, object]:
        task = graph.tasks[sl.index]
        args: dict[str, object] = {"task": sl.index, "kind": task.kind.value}
        if task.kind is TaskKind.COLLECTIVE:
            assert task.collective is not None
            args.update(
                collective=task.collective.value,
                algorithm=timing.algorithms[sl.index],
                nbytes=task.nbytes,
                group=list(task.ranks),
            )
        elif task.kind is TaskKind.SEND:
            args.update(src=task.ranks[0], dst=task.ranks[1], nbytes=task.nbytes)
        return {"name": task.name, "cat": task.phase or task.kind.value, "args": args}

    def describe_wait(sl: Slice) -> Mapping[str, object]:
        task = graph.tasks[sl.index]
        return {"name": "wait", "cat": "wait",
                "args": {"task": sl.index, "waits_for": task.name, "kind": "wait"}}

    waits = wait_intervals(graph, timing)
    trace = TraceEvents()
    for rank, tracks in enumerate(per_rank):
        trace.process(rank, f"rank {rank}")
        tid = 0
        for track in ("compute", "comm"):
            tid += trace.track(rank, tid, track, tracks[track], describe, keep_empty=True)
        waited = [Slice(ns(lo), ns(hi), index) for lo, hi, index in waits[rank]]
        trace.track(rank, tid, "wait", [w for w in waited if w.end_ns > w.start_ns],
                    describe_wait)
    metrics = result.metrics
    other: dict[str, object] = {
        "workload": result.workload.kind,
        "topology": result.topology,
        "ranks": graph.ranks,
        "step_time_s": metrics.step_time_s,
        "exposed_comm_s": metrics.exposed_comm_s,
        "overlap_fraction": metrics.overlap_fraction,
        "idle_fraction": metrics.idle_fraction,
    }
    if result.what_if is not None:
        other["what_if"] = result.what_if.name
    return trace.to_dict(other)


def write_step_trace(result: StepResult, path: str | Path) -> Path:
    """Write the step's trace (see the module docstring) to ``path``; return the path."""
    return write_trace_json(step_trace_events(result), path)
