"""Write a simulated collective's records to files: the transfers CSV and a Perfetto trace.

Both writers are deterministic: the same result gives byte-identical files.

The trace is Chrome trace-event JSON (``{"traceEvents": [...]}``), which ui.perfetto.dev and
chrome://tracing open. Its layout:

* one process per rank (``pid`` = rank, named ``rank r``), with ``send`` and ``recv`` threads,
  then one per reducing switch an in-network schedule addresses (``switch e``, ``pid`` = e);
  each transfer is an ``X`` slice on its source's send thread and its destination's recv thread;
* one process ``links`` (``pid`` = number of ranks and switches) with a thread per directed
  link that carried traffic; each transfer is a slice on every link of its route.

Concurrent transfers on the same rank or link go to separate lanes (``send``, ``send #2``, ...);
lanes, times and the file layout are :mod:`commsim.trace_events`' (with replay's trace).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from commsim.network import Network
from commsim.results import TRANSFER_COLUMNS, Result
from commsim.schedule import OpKind, Transfer
from commsim.trace_events import Slice, TraceEvents, ns, write_trace_json
from commsim.units import format_size

__all__ = ["trace_events", "write_trace", "write_transfers_csv"]


def _records(result: Result) -> tuple[list[Transfer], Sequence[float], Sequence[float]]:
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
    _records(result)  # the error when there are none
    assert result.schedule is not None and result.timing is not None
    # NOTE: read as columns: a columnar schedule then never makes an object per transfer
    cols = result.schedule.columns
    ops = [OpKind.REDUCE.value if r else OpKind.COPY.value for r in cols.reduce.tolist()]
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(TRANSFER_COLUMNS)
        writer.writerows(zip(cols.src.tolist(), cols.dst.tolist(),
                             map(repr, map(float, result.timing.start_s)),
                             map(repr, map(float, result.timing.end_s)),
                             cols.nbytes.tolist(), cols.offset.tolist(), ops, strict=True))
    return path


# -- trace ---------------------------------------------------------------------------------
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
    slices = [Slice(ns(s), ns(e), i) for i, (s, e) in enumerate(zip(start, end, strict=True))]
    # one description per transfer, shared by its send, recv and link slices
    described = [
        {
            "name": f"r{t.src}->r{t.dst} [{t.offset},{t.offset + t.nbytes}) {t.op.value}",
            "args": {
                "transfer": i,
                "src": t.src,
                "dst": t.dst,
                "offset": t.offset,
                "nbytes": t.nbytes,
                "op": t.op.value,
                "start_s": float(start[i]),
                "end_s": float(end[i]),
            },
        }
        for i, t in enumerate(transfers)
    ]

    def describe(cat: str) -> Callable[[Slice], Mapping[str, object]]:
        return lambda sl: described[sl.index] | {"cat": cat}

    trace = TraceEvents()
    # ranks, then the reducing switches an in-network schedule addresses
    ends = result.ranks + (result.schedule.endpoints if result.schedule is not None else 0)
    _endpoint_tracks(trace, result.ranks, ends, transfers, slices, network, describe)
    if network is not None and transfers:
        _link_tracks(trace, ends, transfers, slices, network, describe("link"))
    return trace.to_dict(
        {
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
        }
    )


def _endpoint_tracks(
    trace: TraceEvents,
    ranks: int,
    ends: int,
    transfers: list[Transfer],
    slices: list[Slice],
    network: Network | None,
    describe: Callable[[str], Callable[[Slice], Mapping[str, object]]],
) -> None:
    """A process per rank and reducing switch, with its send and recv lanes."""
    sends: list[list[Slice]] = [[] for _ in range(ends)]
    recvs: list[list[Slice]] = [[] for _ in range(ends)]
    for sl in slices:
        sends[transfers[sl.index].src].append(sl)
        recvs[transfers[sl.index].dst].append(sl)
    for rank in range(ends):
        label = f"rank {rank}" if rank < ranks else f"switch {rank}"
        if network is not None:
            label += f" ({network.devices[network.endpoint_device(rank)].name})"
        trace.process(rank, label)
        tid = 1
        for kind, mine in (("send", sends[rank]), ("recv", recvs[rank])):
            tid += trace.track(rank, tid, kind, mine, describe(kind))


def _link_tracks(
    trace: TraceEvents,
    pid: int,
    transfers: list[Transfer],
    slices: list[Slice],
    network: Network,
    describe: Callable[[Slice], Mapping[str, object]],
) -> None:
    """The ``links`` process: a lane per directed link that carried traffic, in link order."""
    trace.process(pid, "links")
    on_link: dict[int, list[Slice]] = {}
    for sl in slices:
        t = transfers[sl.index]
        for link_id in network.route(t.src, t.dst):
            on_link.setdefault(link_id, []).append(sl)
    tid = 1
    for link_id in sorted(on_link):
        tid += trace.track(pid, tid, _link_name(network, link_id), on_link[link_id], describe)


def write_trace(result: Result, path: str | Path, network: Network | None = None) -> Path:
    """Write :func:`trace_events` to ``path``, one event per line (stable, diff-friendly)."""
    return write_trace_json(trace_events(result, network), path)
