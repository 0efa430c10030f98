"""A replayed step as a Chrome/Perfetto trace: compute and communication tracks per rank.

Layout: one process per rank (``pid`` = rank, named ``rank r``) with a ``compute`` thread and a
``comm`` thread; each task is an ``X`` slice named after it (category = its phase) on every rank
it involves: a collective on each member of its group, a send on its source and destination.
Slices on one thread must nest, so overlapping tasks (FSDP's all-gather and reduce-scatter
streams, TP and DP collectives) go to extra lanes ``comm #2``, ... assigned greedily in start
order. Times are whole nanoseconds written as microseconds. Zero-length compute tasks (joins)
are left out. The same result gives byte-identical files.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from commsim.replay.graph import TaskKind

if TYPE_CHECKING:
    from commsim.replay.step import StepResult

__all__ = ["step_trace_events", "write_step_trace"]


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _us(ns: int) -> float:
    """``ns`` as microseconds that convert back to exactly ``ns`` (truncating or rounding)."""
    x = ns / 1000
    while int(x * 1000.0) < ns:
        x = math.nextafter(x, math.inf)
    return x


def _lanes(slices: list[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    """Greedy interval partitioning of ``(start_ns, end_ns, task)``: first lane free by then."""
    lanes: list[list[tuple[int, int, int]]] = []
    for sl in sorted(slices):
        for lane in lanes:
            if lane[-1][1] <= sl[0]:
                lane.append(sl)
                break
        else:
            lanes.append([sl])
    return lanes


def step_trace_events(result: StepResult) -> dict[str, object]:
    """The trace as a JSON-ready dict ``{"displayTimeUnit", "otherData", "traceEvents"}``."""
    graph, timing = result.graph, result.timing
    per_rank: list[dict[str, list[tuple[int, int, int]]]] = [
        {"compute": [], "comm": []} for _ in range(graph.ranks)
    ]
    for index, task in enumerate(graph.tasks):
        start, end = _ns(timing.start_s[index]), _ns(timing.end_s[index])
        if task.kind is TaskKind.COMPUTE and end <= start:
            continue
        track = "compute" if task.kind is TaskKind.COMPUTE else "comm"
        for rank in task.ranks:
            per_rank[rank][track].append((start, end, index))
    events: list[dict[str, object]] = []
    slices: list[dict[str, object]] = []
    for rank, tracks in enumerate(per_rank):
        events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": rank,
                "tid": 0,
                "args": {"name": f"rank {rank}"},
            }
        )
        events.append(
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": rank,
                "tid": 0,
                "args": {"sort_index": rank},
            }
        )
        tid = 0
        for track in ("compute", "comm"):
            for lane_no, lane in enumerate(_lanes(tracks[track]) or [[]]):
                name = track if lane_no == 0 else f"{track} #{lane_no + 1}"
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": rank,
                        "tid": tid,
                        "args": {"name": name},
                    }
                )
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_sort_index",
                        "pid": rank,
                        "tid": tid,
                        "args": {"sort_index": tid},
                    }
                )
                for start, end, index in lane:
                    task = graph.tasks[index]
                    args: dict[str, object] = {"task": index, "kind": task.kind.value}
                    if task.kind is TaskKind.COLLECTIVE:
                        assert task.collective is not None
                        args.update(
                            collective=task.collective.value,
                            algorithm=timing.algorithms[index],
                            nbytes=task.nbytes,
                            group=list(task.ranks),
                        )
                    elif task.kind is TaskKind.SEND:
                        args.update(src=task.ranks[0], dst=task.ranks[1], nbytes=task.nbytes)
                    slices.append(
                        {
                            "ph": "X",
                            "name": task.name,
                            "cat": task.phase or task.kind.value,
                            "pid": rank,
                            "tid": tid,
                            "ts": _us(start),
                            "dur": _us(end - start),
                            "args": args,
                        }
                    )
                tid += 1
    metrics = result.metrics
    return {
        "displayTimeUnit": "ns",
        "otherData": {
            "workload": result.workload.kind,
            "topology": result.topology,
            "ranks": graph.ranks,
            "step_time_s": metrics.step_time_s,
            "exposed_comm_s": metrics.exposed_comm_s,
            "overlap_fraction": metrics.overlap_fraction,
            "idle_fraction": metrics.idle_fraction,
        },
        "traceEvents": events + slices,
    }


def write_step_trace(result: StepResult, path: str | Path) -> Path:
    """Write the step's trace (see the module docstring) to ``path``; return the path."""
    path = Path(path)
    path.write_text(
        json.dumps(step_trace_events(result), separators=(",", ":")) + "\n", encoding="utf-8"
    )
    return path
