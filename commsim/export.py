"""Write a simulated collective's records to files: the transfers CSV and a Perfetto trace.

Both writers are deterministic: the same result gives byte-identical files.

The trace is Chrome trace-event JSON (``{"traceEvents": [...]}``), which ui.perfetto.dev and
chrome://tracing open. Its layout:

* one process per rank (``pid`` = rank, named ``rank r``), with ``send`` and ``recv`` threads,
  then one per reducing switch an in-network schedule addresses (``switch e``, ``pid`` = e);
  each transfer is an ``X`` slice on its source's send thread and its destination's recv thread;
* one process ``links`` (``pid`` = number of ranks and switches) with a thread per directed
  link that carried traffic; each transfer is a slice on every link of its route.

Slices on one thread must nest perfectly, so concurrent transfers on the same rank or link go to
separate lanes (``send``, ``send #2``, ...), assigned greedily in start order. Times are integer
nanoseconds rounded from the engine's seconds, written as microseconds (``ts``/``dur``).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from commsim.network import Network
from commsim.results import TRANSFER_COLUMNS, Result
from commsim.units import format_size

__all__ = ["trace_events", "write_trace", "write_transfers_csv"]


def _records(result: Result) -> tuple[list, Sequence[float], Sequence[float]]:
    if result.schedule is None or result.timing is None:
        raise ValueError(
            "per-transfer records need the discrete-event engine (--engine des), "
            f"not {result.engine!r}"
        )
    return list(result.schedule.transfers), result.timing.start_s, result.timing.end_s


def write_transfers_csv(result: Result, path: str | Path) -> Path:
    """Write one row per transfer, columns ``src,dst,start_s,end_s,nbytes,offset,op``.

    Floats are written with :func:`repr`, so they read back exactly: the largest ``end_s``
    equals ``result.time_s``. Rows are in schedule order.
    """
    transfers, start, end = _records(result)
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(TRANSFER_COLUMNS)
        for t, s, e in zip(transfers, start, end, strict=True):
            writer.writerow(
                (t.src, t.dst, repr(float(s)), repr(float(e)), t.nbytes, t.offset, t.op.value)
            )
    return path


# -- trace ---------------------------------------------------------------------------------
def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _us(ns: int) -> float:
    """``ns`` as microseconds such that both ``int(x * 1000)`` and ``round(x * 1000)`` give ns.

    Perfetto converts ``ts``/``dur`` to integer ns, truncating in older versions; nudging the
    float up by an ulp where needed keeps slices exactly adjacent after that conversion.
    """
    x = ns / 1000
    while int(x * 1000.0) < ns:
        x = math.nextafter(x, math.inf)
    return x


@dataclass(frozen=True, slots=True)
class _Slice:
    start_ns: int
    end_ns: int
    index: int  # transfer index, the tie-breaker


def _lanes(slices: Iterable[_Slice]) -> list[list[_Slice]]:
    """Greedy interval partitioning: each slice goes to the first lane that is free by then."""
    lanes: list[list[_Slice]] = []
    for sl in sorted(slices, key=lambda s: (s.start_ns, s.end_ns, s.index)):
        for lane in lanes:
            if lane[-1].end_ns <= sl.start_ns:
                lane.append(sl)
                break
        else:
            lanes.append([sl])
    return lanes


def _meta(name: str, pid: int, tid: int, args: dict[str, object]) -> dict[str, object]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _link_name(network: Network, link_id: int) -> str:
    link = network.links[link_id]
    if link.label:
        return link.label
    return f"{network.devices[link.src].name}->{network.devices[link.dst].name}"


def trace_events(result: Result, network: Network | None = None) -> dict[str, object]:
    """The trace as a JSON-ready dict ``{"displayTimeUnit", "otherData", "traceEvents"}``.

    ``network`` (the one the result ran on) adds the ``links`` process; without it only the
    per-rank processes are written.
    """
    transfers, start, end = _records(result)
    ranks = result.ranks
    names = [
        f"r{t.src}->r{t.dst} [{t.offset},{t.offset + t.nbytes}) {t.op.value}" for t in transfers
    ]
    slices = [_Slice(_ns(s), _ns(e), i) for i, (s, e) in enumerate(zip(start, end, strict=True))]

    # one args dict per transfer, shared by its send, recv and link slices
    args = [
        {
            "transfer": i,
            "src": t.src,
            "dst": t.dst,
            "offset": t.offset,
            "nbytes": t.nbytes,
            "op": t.op.value,
            "start_s": float(start[i]),
            "end_s": float(end[i]),
        }
        for i, t in enumerate(transfers)
    ]

    def slice_events(lanes: list[list[_Slice]], pid: int, first_tid: int, cat: str) -> list:
        out = []
        for lane_no, lane in enumerate(lanes):
            for sl in lane:
                out.append(
                    {
                        "ph": "X",
                        "cat": cat,
                        "name": names[sl.index],
                        "pid": pid,
                        "tid": first_tid + lane_no,
                        "ts": _us(sl.start_ns),
                        "dur": _us(sl.end_ns - sl.start_ns),
                        "args": args[sl.index],
                    }
                )
        return out

    meta: list[dict[str, object]] = []
    events: list[dict[str, object]] = []
    # ranks, then the reducing switches an in-network schedule addresses
    ends = ranks + (result.schedule.endpoints if result.schedule is not None else 0)
    sends: list[list[_Slice]] = [[] for _ in range(ends)]
    recvs: list[list[_Slice]] = [[] for _ in range(ends)]
    for sl in slices:
        sends[transfers[sl.index].src].append(sl)
        recvs[transfers[sl.index].dst].append(sl)

    for rank in range(ends):
        label = f"rank {rank}" if rank < ranks else f"switch {rank}"
        if network is not None:
            label += f" ({network.devices[network.endpoint_device(rank)].name})"
        meta.append(_meta("process_name", rank, 0, {"name": label}))
        meta.append(_meta("process_sort_index", rank, 0, {"sort_index": rank}))
        tid = 1
        for kind, mine in (("send", sends[rank]), ("recv", recvs[rank])):
            lanes = _lanes(mine)
            for lane_no in range(len(lanes)):
                suffix = f" #{lane_no + 1}" if lane_no else ""
                meta.append(_meta("thread_name", rank, tid + lane_no, {"name": kind + suffix}))
                meta.append(
                    _meta("thread_sort_index", rank, tid + lane_no, {"sort_index": tid + lane_no})
                )
            events.extend(slice_events(lanes, rank, tid, kind))
            tid += len(lanes)

    if network is not None and transfers:
        pid = ends
        meta.append(_meta("process_name", pid, 0, {"name": "links"}))
        meta.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))
        on_link: dict[int, list[_Slice]] = {}
        for sl in slices:
            t = transfers[sl.index]
            for link_id in network.route(t.src, t.dst):
                on_link.setdefault(link_id, []).append(sl)
        tid = 1
        for link_id in sorted(on_link):
            lanes = _lanes(on_link[link_id])
            name = _link_name(network, link_id)
            for lane_no in range(len(lanes)):
                suffix = f" #{lane_no + 1}" if lane_no else ""
                meta.append(_meta("thread_name", pid, tid + lane_no, {"name": name + suffix}))
                meta.append(
                    _meta("thread_sort_index", pid, tid + lane_no, {"sort_index": tid + lane_no})
                )
            events.extend(slice_events(lanes, pid, tid, "link"))
            tid += len(lanes)

    return {
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "commsim",
            "collective": result.collective.value,
            "algorithm": result.algorithm,
            "protocol": result.protocol,
            "engine": result.engine,
            "topology": result.topology,
            "ranks": result.ranks,
            "nbytes": result.nbytes,
            "size": format_size(result.nbytes),
            "chunks": result.chunks,
            "time_s": result.time_s,
        },
        "traceEvents": meta + events,
    }


def write_trace(result: Result, path: str | Path, network: Network | None = None) -> Path:
    """Write :func:`trace_events` to ``path``, one event per line (stable, diff-friendly)."""
    trace = trace_events(result, network)
    events = trace.pop("traceEvents")
    encode = json.JSONEncoder(separators=(",", ":")).encode
    head = encode(trace)
    lines = [encode(e) for e in events]  # type: ignore[attr-defined]
    body = head[:-1] + ',"traceEvents":[\n' + ",\n".join(lines) + "\n]}\n"
    path = Path(path)
    path.write_text(body, encoding="utf-8")
    return path
