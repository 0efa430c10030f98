"""Reading captured traces: per-rank Kineto files -> a :class:`~commsim.traces.model.TraceModel`.

:func:`read_traces` loads a directory, a file or a list of files; :func:`build_model` orders
them by rank, aligns their clocks and applies the GPU (:mod:`.gpu`) or CPU (:mod:`.cpu`) rules
to each rank (see :mod:`commsim.traces.model` for what the model holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from commsim.errors import ParseError
from commsim.traces import cpu, gpu
from commsim.traces.kineto import KinetoTrace, load_kineto, trace_files
from commsim.traces.model import TraceModel

__all__ = ["build_model", "read_traces"]


def _flavour(trace: KinetoTrace) -> str:
    if any(e.cat == "kernel" for e in trace.events):
        return "gpu"
    return "cpu"


def _assign_ranks(traces: Sequence[KinetoTrace]) -> list[KinetoTrace]:
    """Order the files by rank; every rank ``0..world-1`` exactly once."""
    if len(traces) == 1 and traces[0].rank is None:
        return list(traces)
    by_rank: dict[int, KinetoTrace] = {}
    for trace in traces:
        if trace.rank is None:
            raise ParseError(
                f"{trace.source}: no distributedInfo.rank and no 'rank<N>' in the file name: "
                "cannot tell which rank wrote it"
            )
        if trace.rank in by_rank:
            raise ParseError(
                f"{trace.source}: rank {trace.rank} again (also {by_rank[trace.rank].source})"
            )
        by_rank[trace.rank] = trace
    worlds = {t.world_size for t in traces if t.world_size is not None}
    if len(worlds) > 1:
        raise ParseError(f"the trace files disagree on world_size: {sorted(worlds)}")
    world = worlds.pop() if worlds else max(by_rank) + 1
    missing = [r for r in range(world) if r not in by_rank]
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        raise ParseError(
            f"world_size is {world} but no trace file for rank(s) {shown}: replay needs "
            "one file per rank"
        )
    return [by_rank[r] for r in range(world)]


def _shifts_us(traces: Sequence[KinetoTrace]) -> list[float]:
    """Per file, what to add to ``ts`` (us) to get microseconds from the common origin."""
    base = min(t.base_time_ns for t in traces)
    firsts = []
    for t in traces:
        offset = (t.base_time_ns - base) / 1000.0
        first = min((e.ts_us for e in t.events if isinstance(e.pid, int)), default=0.0)
        firsts.append(offset + first)
    origin = min(firsts)
    return [(t.base_time_ns - base) / 1000.0 - origin for t in traces]


def build_model(traces: Iterable[KinetoTrace]) -> TraceModel:
    """The trace model of one rank's file per rank (see the module docstring)."""
    ordered = _assign_ranks(list(traces))
    if not ordered:
        raise ParseError("no trace files")
    flavours = {_flavour(t) for t in ordered}
    if len(flavours) > 1:
        raise ParseError("some trace files have GPU kernels and some do not: mixed captures")
    flavour = flavours.pop()
    backend = next((t.backend for t in ordered if t.backend), "")
    world = len(ordered)
    notes: list[str] = []
    ranks = []
    for rank, (trace, shift) in enumerate(zip(ordered, _shifts_us(ordered), strict=True)):
        rules = gpu.rank_trace if flavour == "gpu" else cpu.rank_trace
        ranks.append(rules(trace, rank, world, shift, notes))
    return TraceModel(
        backend=backend,
        flavour=flavour,
        ranks=tuple(ranks),
        notes=tuple(notes),
        sources=tuple(t.source for t in ordered),
    )


def read_traces(path: str | Path | Sequence[str | Path]) -> TraceModel:
    """The model of a directory of per-rank traces, one trace file, or a list of files."""
    if isinstance(path, str | Path):
        files = trace_files(path)
    else:
        files = [Path(p) for p in path]
        if not files:
            raise ParseError("no trace files given")
    return build_model(load_kineto(f) for f in files)
