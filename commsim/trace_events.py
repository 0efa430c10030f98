"""Chrome/Perfetto trace-event JSON: the one writer behind ``commsim run --trace`` (transfers,
:mod:`commsim.export`) and ``commsim replay --trace`` (a step's tasks, :mod:`commsim.replay.trace`).

A trace is ``{"displayTimeUnit": "ns", "otherData": {...}, "traceEvents": [...]}``, which
ui.perfetto.dev and chrome://tracing open: metadata events (``M``: process and thread names and
sort order) first, then complete slices (``X``). Slices on one thread must nest perfectly, so a
track's overlapping slices go to separate lanes (``send``, ``send #2``, ...), assigned greedily
in start order (:func:`lanes`). Times are integer nanoseconds rounded from seconds, written as
microseconds that convert back to exactly those nanoseconds (:func:`us`). The same input gives
byte-identical files.

>>> trace = TraceEvents()
>>> trace.process(0, "rank 0")
>>> trace.track(0, 1, "send", [Slice(0, 10, 0), Slice(5, 20, 1)], lambda s: {"name": f"t{s.index}"})
2
>>> [e["args"]["name"] for e in trace.to_dict({})["traceEvents"] if e["name"] == "thread_name"]
['send', 'send #2']
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Slice", "TraceEvents", "lanes", "ns", "us", "write_trace_json"]


def ns(seconds: float) -> int:
    """``seconds`` as whole nanoseconds (rounded)."""
    return int(round(seconds * 1e9))


def us(ns: int) -> float:
    """``ns`` as microseconds such that both ``int(x * 1000)`` and ``round(x * 1000)`` give ns.

    Perfetto converts ``ts``/``dur`` to integer ns, truncating in older versions; nudging the
    float up by an ulp where needed keeps slices exactly adjacent after that conversion.
    """
    x = ns / 1000
    while int(x * 1000.0) < ns:
        x = math.nextafter(x, math.inf)
    return x


@dataclass(frozen=True, slots=True)
class Slice:
    """One slice of a track: ``[start_ns, end_ns)`` of item ``index`` (the tie-breaker)."""

    start_ns: int
    end_ns: int
    index: int


def lanes(slices: Iterable[Slice]) -> list[list[Slice]]:
    """Greedy interval partitioning: each slice goes to the first lane that is free by then."""
    out: list[list[Slice]] = []
    for sl in sorted(slices, key=lambda s: (s.start_ns, s.end_ns, s.index)):
        for lane in out:
            if lane[-1].end_ns <= sl.start_ns:
                lane.append(sl)
                break
        else:
            out.append([sl])
    return out


def _meta(name: str, pid: int, tid: int, args: dict[str, object]) -> dict[str, object]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


class TraceEvents:
    """A trace being built: processes, then each track's lanes (threads) and slices."""

    def __init__(self) -> None:
        self.meta: list[dict[str, object]] = []
        self.slices: list[dict[str, object]] = []

    def process(self, pid: int, name: str) -> None:
        """Name process ``pid`` and sort it by its pid."""
        self.meta.append(_meta("process_name", pid, 0, {"name": name}))
        self.meta.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))

    def track(
        self,
        pid: int,
        first_tid: int,
        name: str,
        slices: Iterable[Slice],
        describe: Callable[[Slice], Mapping[str, object]],
        *,
        keep_empty: bool = False,
    ) -> int:
        """Add a track of ``slices`` on process ``pid``: one thread per lane from ``first_tid``
        (``name``, ``name #2``, ...), one ``X`` slice per slice with the fields
        ``describe(slice)`` gives (``name``, ``cat``, ``args``). An empty track gets no thread
        unless ``keep_empty``. Returns the number of threads used."""
        found = lanes(slices) or ([[]] if keep_empty else [])
        for lane_no, lane in enumerate(found):
            tid = first_tid + lane_no
            label = name if lane_no == 0 else f"{name} #{lane_no + 1}"
            self.meta.append(_meta("thread_name", pid, tid, {"name": label}))
            self.meta.append(_meta("thread_sort_index", pid, tid, {"sort_index": tid}))
            for sl in lane:
                fields = describe(sl)
                self.slices.append(
                    {
                        "ph": "X",
                        "cat": fields.get("cat", ""),
                        "name": fields.get("name", ""),
                        "pid": pid,
                        "tid": tid,
                        "ts": us(sl.start_ns),
                        "dur": us(sl.end_ns - sl.start_ns),
                        "args": fields.get("args", {}),
                    }
                )
        return len(found)

    def to_dict(self, other_data: Mapping[str, object]) -> dict[str, object]:
        """The JSON-ready trace: ``otherData`` and every metadata event, then every slice."""
        return {
            "displayTimeUnit": "ns",
            "otherData": dict(other_data),
            "traceEvents": self.meta + self.slices,
        }


def write_trace_json(trace: Mapping[str, object], path: str | Path) -> Path:
    """Write a trace dict to ``path``, one event per line (stable, diff-friendly)."""
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    events = trace.get("traceEvents", [])
    encode = json.JSONEncoder(separators=(",", ":")).encode
    lines = [encode(e) for e in events]  # type: ignore[attr-defined]
    body = encode(head)[:-1] + ',"traceEvents":[\n' + ",\n".join(lines) + "\n]}\n"
    path = Path(path)
    path.write_text(body, encoding="utf-8")
    return path
