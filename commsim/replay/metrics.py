"""Step metrics from task intervals: compute, communication, exposed communication, idle.

For each rank ``r`` of a step that lasts ``T`` (the latest end of any task; the step starts at 0):

* ``compute_time_s``: length of the union of ``r``'s compute intervals;
* ``comm_time_s``: length of the union of the intervals of the collectives and sends ``r`` takes
  part in (a collective counts from when it may start, its deps met, to its last arrival);
* ``exposed_comm_s``: the part of that union not covered by ``r``'s compute;
* ``overlap_fraction``: communication hidden under compute / communication,
  ``(comm - exposed) / comm`` (0 when ``r`` does not communicate);
* ``idle_fraction``: time not computing / step time, ``(T - compute) / T`` (0 when ``T = 0``);
* ``step_time_s``: when ``r``'s last task ends;
* ``peak_memory_bytes`` (workloads that account memory): ``static_bytes[r]`` plus the largest
  sum of the tasks' ``mem_start``/``mem_end`` events up to any instant (frees at an instant
  are applied before allocations at the same instant);
* ``wait_s``: the time ``r`` spends waiting for other ranks and doing nothing else
  (:func:`wait_intervals`): a task of ``r``'s whose own inputs on ``r`` were ready (its deps
  on ``r``: ``r``'s compute, its sends, collectives it is in) but which starts later, because
  another member of its collective has not reached it yet or a pipeline receive's sender is
  late; the part of that wait not covered by ``r``'s compute.

The step's aggregate has the same keys: ``step_time_s`` is ``T``; ``compute_time_s``,
``comm_time_s``, ``exposed_comm_s`` and ``idle_fraction`` are means over ranks (the contract's
idle fraction is that mean); ``overlap_fraction`` is the hidden communication summed over ranks
over the communication summed over ranks; ``peak_memory_bytes`` is the largest rank's;
``wait_time_s`` is the mean over ranks of ``wait_s``.

>>> union([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)])
[(0.0, 3.0), (5.0, 6.0)]
>>> uncovered([(0.0, 3.0), (5.0, 6.0)], [(1.0, 2.0)])
3.0
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from commsim.replay.graph import StepGraph, TaskKind
from commsim.replay.lower import GraphTiming

Interval = tuple[float, float]

#: The metric keys, in the order of the contract's JSON.
METRIC_KEYS = (
    "step_time_s",
    "compute_time_s",
    "comm_time_s",
    "exposed_comm_s",
    "overlap_fraction",
    "idle_fraction",
)


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time as ``intervals`` (empty ones dropped)."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def length(intervals: Iterable[Interval]) -> float:
    """Total length of disjoint intervals."""
    return sum(end - start for start, end in intervals)


def uncovered(cover_me: Sequence[Interval], by: Sequence[Interval]) -> float:
    """Length of the disjoint intervals ``cover_me`` not covered by the disjoint ``by``."""
    total, j = 0.0, 0
    for start, end in cover_me:
        cursor = start
        while j < len(by) and by[j][1] <= cursor:
            j += 1
        k = j
        while k < len(by) and by[k][0] < end:
            if by[k][0] > cursor:
                total += by[k][0] - cursor
            cursor = max(cursor, by[k][1])
            if cursor >= end:
                break
            k += 1
        if cursor < end:
            total += end - cursor
    return total


@dataclass(frozen=True, slots=True)
class RankMetrics:
    """One rank's metrics (see the module docstring)."""

    rank: int
    step_time_s: float
    compute_time_s: float
    comm_time_s: float
    exposed_comm_s: float
    overlap_fraction: float
    idle_fraction: float
    peak_memory_bytes: int | None = None
    wait_s: float | None = None  #: None: not known (a captured trace's measured metrics)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"rank": self.rank}
        out.update({key: getattr(self, key) for key in METRIC_KEYS})
        if self.peak_memory_bytes is not None:
            out["peak_memory_bytes"] = self.peak_memory_bytes
        if self.wait_s is not None:
            out["wait_s"] = self.wait_s
        return out


@dataclass(frozen=True, slots=True)
class StepMetrics:
    """The step's aggregate metrics and each rank's (see the module docstring)."""

    step_time_s: float
    compute_time_s: float
    comm_time_s: float
    exposed_comm_s: float
    overlap_fraction: float
    idle_fraction: float
    per_rank: tuple[RankMetrics, ...]
    peak_memory_bytes: int | None = None
    wait_time_s: float | None = None  #: the mean of the ranks' ``wait_s``

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {key: getattr(self, key) for key in METRIC_KEYS}
        if self.peak_memory_bytes is not None:
            out["peak_memory_bytes"] = self.peak_memory_bytes
        if self.wait_time_s is not None:
            out["wait_time_s"] = self.wait_time_s
        out["per_rank"] = [r.to_dict() for r in self.per_rank]
        return out


def _peak_memory(graph: StepGraph, timing: GraphTiming) -> list[int]:
    assert graph.static_bytes is not None
    events: list[list[tuple[float, int]]] = [[] for _ in range(graph.ranks)]
    for task, start, end in zip(graph.tasks, timing.start_s, timing.end_s, strict=True):
        for rank in task.ranks:
            if task.mem_start:
                events[rank].append((start, task.mem_start))
            if task.mem_end:
                events[rank].append((end, task.mem_end))
    peaks = []
    for rank, rank_events in enumerate(events):
        held = peak = 0
        for _, delta in sorted(rank_events):  # at one instant, frees (< 0) sort first
            held += delta
            peak = max(peak, held)
        peaks.append(graph.static_bytes[rank] + peak)
    return peaks


#: One wait of a rank: (start, end, the task it waited to start).
Wait = tuple[float, float, int]


def _own_ready(graph: StepGraph, end_s: Sequence[float], index: int) -> dict[int, float]:
    """When each member of task ``index`` had its own inputs: the latest end of the task's
    deps that ran on it (its compute, its sends, collectives it is in)."""
    tasks = graph.tasks
    ready = dict.fromkeys(tasks[index].ranks, 0.0)
    for dep in tasks[index].deps:
        task, end = tasks[dep], end_s[dep]
        # a compute runs on its rank, a send on its source; a collective on all its members
        for rank in task.ranks if task.kind is TaskKind.COLLECTIVE else task.ranks[:1]:
            if rank in ready and end > ready[rank]:
                ready[rank] = end
    return ready


def wait_intervals(graph: StepGraph, timing: GraphTiming) -> list[list[Wait]]:
    """Per rank, the times it waits for other ranks and does nothing else, each with the task
    it waits to start (see the module docstring): for every collective and compute task, the
    interval from when its inputs on the rank were ready to when it starts, less the rank's
    compute. Sends wait for nothing of another rank's."""
    start_s, end_s = timing.start_s, timing.end_s
    raw: list[list[Wait]] = [[] for _ in range(graph.ranks)]
    compute: list[list[Interval]] = [[] for _ in range(graph.ranks)]
    for index, task in enumerate(graph.tasks):
        if task.kind is TaskKind.COMPUTE:
            compute[task.ranks[0]].append((start_s[index], end_s[index]))
        if task.kind is TaskKind.SEND or not task.deps:
            continue
        start = start_s[index]
        for rank, ready in _own_ready(graph, end_s, index).items():
            if start > ready:
                raw[rank].append((ready, start, index))
    out: list[list[Wait]] = []
    for rank, waits in enumerate(raw):
        busy = union(compute[rank])
        out.append([(lo, hi, index) for start, end, index in sorted(waits)
                    for lo, hi in _outside((start, end), busy)])
    return out


def _outside(interval: Interval, busy: Sequence[Interval]) -> list[Interval]:
    """The parts of ``interval`` outside the sorted, disjoint ``busy`` intervals."""
    start, end = interval
    out: list[Interval] = []
    i = bisect.bisect_right(busy, (start, math.inf)) - 1
    cursor = start
    for lo, hi in busy[max(i, 0):]:
        if lo >= end:
            break
        if hi <= cursor:
            continue
        if lo > cursor:
            out.append((cursor, lo))
        cursor = max(cursor, hi)
        if cursor >= end:
            break
    if cursor < end:
        out.append((cursor, end))
    return out


def step_metrics(graph: StepGraph, timing: GraphTiming,
                 images: Sequence[int] | None = None) -> StepMetrics:
    """Per-rank and aggregate metrics of a timed step graph; with ``images``, rank ``r``'s
    are those of rank ``images[r]`` (a replica fold's: the graph holds that rank's tasks)."""
    step = timing.step_time_s
    compute: list[list[Interval]] = [[] for _ in range(graph.ranks)]
    comm: list[list[Interval]] = [[] for _ in range(graph.ranks)]
    last = [0.0] * graph.ranks
    for task, start, end in zip(graph.tasks, timing.start_s, timing.end_s, strict=True):
        target = compute if task.kind is TaskKind.COMPUTE else comm
        for rank in task.ranks:
            target[rank].append((start, end))
            last[rank] = max(last[rank], end)
    peaks = _peak_memory(graph, timing) if graph.tracks_memory else [None] * graph.ranks
    waits = [float(length(union((lo, hi) for lo, hi, _ in w)))
             for w in wait_intervals(graph, timing)]
    own: dict[int, RankMetrics] = {}
    for rank in range(graph.ranks):
        if images is not None and images[rank] != rank:
            continue
        busy, talk = union(compute[rank]), union(comm[rank])
        compute_s, comm_s = length(busy), length(talk)
        exposed = uncovered(talk, busy)
        own[rank] = RankMetrics(
            rank=rank,
            step_time_s=last[rank],
            compute_time_s=compute_s,
            comm_time_s=comm_s,
            exposed_comm_s=exposed,
            overlap_fraction=(comm_s - exposed) / comm_s if comm_s > 0 else 0.0,
            idle_fraction=(step - compute_s) / step if step > 0 else 0.0,
            peak_memory_bytes=peaks[rank],
            wait_s=waits[rank],
        )
    ranks = [own[rank] if images is None or images[rank] == rank
             else replace(own[images[rank]], rank=rank) for rank in range(graph.ranks)]
    count = max(len(ranks), 1)
    total_comm = math.fsum(r.comm_time_s for r in ranks)
    hidden = math.fsum(r.comm_time_s - r.exposed_comm_s for r in ranks)
    return StepMetrics(
        step_time_s=step,
        compute_time_s=math.fsum(r.compute_time_s for r in ranks) / count,
        comm_time_s=total_comm / count,
        exposed_comm_s=math.fsum(r.exposed_comm_s for r in ranks) / count,
        overlap_fraction=hidden / total_comm if total_comm > 0 else 0.0,
        idle_fraction=math.fsum(r.idle_fraction for r in ranks) / count,
        per_rank=tuple(ranks),
        peak_memory_bytes=max(r.peak_memory_bytes or 0 for r in ranks)
        if graph.tracks_memory and ranks else None,
        wait_time_s=math.fsum(r.wait_s or 0.0 for r in ranks) / count,
    )
