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

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commsim.engine.des import Timing
from commsim.network import Network
from commsim.results import TRANSFER_COLUMNS, Result
from commsim.schedule import Columns, OpKind
from commsim.trace_events import Slice, TraceEvents, ns, write_trace_json
from commsim.units import format_size

if TYPE_CHECKING:
    import numpy as np

__all__ = ["trace_events", "write_trace", "write_transfers_csv"]


def _records(result: Result) -> tuple[Columns, Timing]:
    """The columns and timing of ``result``'s transfers (ValueError when it has none)."""
    if result.schedule is None or result.timing is None:
        raise ValueError(
            "per-transfer records need the discrete-event engine (--engine des), "
            f"not {result.engine!r}"
        )
    return result.schedule.columns, result.timing


#: Rows formatted and written at a time (bounds the strings held at once).
_CSV_BLOCK = 1 << 16


def _texts(values: np.ndarray, fmt: Callable[[Any], str]) -> list[str]:
    """``fmt`` of every value, formatted once per distinct value (a schedule's times, sizes
    and ranks repeat: a ring's pieces share each step's start)."""
    import numpy as np

    # floats by their bits: every distinct value (0.0 and -0.0 too) keeps its own text
    keys = values.view(np.int64) if values.dtype.kind == "f" else values
    _, index, which = np.unique(keys, return_index=True, return_inverse=True)
    texts = np.array([fmt(v) for v in values[index].tolist()], dtype=object)
    return texts[which.reshape(-1)].tolist()  # type: ignore[no-any-return]


def write_transfers_csv(result: Result, path: str | Path) -> Path:
    """Write one row per transfer, columns ``src,dst,start_s,end_s,nbytes,offset,op``.

    Floats are written with :func:`repr`, so they read back exactly: the largest ``end_s``
    equals ``result.time_s``. Rows are in schedule order.
    """
    import numpy as np

    cols, timing = _records(result)
    ops = np.array([OpKind.COPY.value, OpKind.REDUCE.value], dtype=object)
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as handle:
        handle.write(",".join(TRANSFER_COLUMNS) + "\n")
        for a in range(0, len(cols), _CSV_BLOCK):
            rows = slice(a, a + _CSV_BLOCK)
            fields = (_texts(cols.src[rows], str), _texts(cols.dst[rows], str),
                      _texts(timing.start_s[rows], repr), _texts(timing.end_s[rows], repr),
                      _texts(cols.nbytes[rows], str), _texts(cols.offset[rows], str),
                      ops[cols.reduce[rows].astype(np.intp)].tolist())
            handle.write("".join(line + "\n" for line in map(",".join, zip(*fields, strict=True))))
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
    import numpy as np

    cols, timing = _records(result)
    start, end = timing.start_s.tolist(), timing.end_s.tolist()
    slices = [Slice(ns(s), ns(e), i) for i, (s, e) in enumerate(zip(start, end, strict=True))]
    src, dst = cols.src.tolist(), cols.dst.tolist()
    offset, nbytes = cols.offset.tolist(), cols.nbytes.tolist()
    ops = np.array([OpKind.COPY.value, OpKind.REDUCE.value])[cols.reduce.astype(np.intp)].tolist()

    def describe(cat: str) -> Callable[[Slice], Mapping[str, object]]:
        """A slice's fields: one description per transfer on its send, recv and link slices."""
        def fields(sl: Slice) -> Mapping[str, object]:
            i = sl.index
            return {
                "name": f"r{src[i]}->r{dst[i]} [{offset[i]},{offset[i] + nbytes[i]}) {ops[i]}",
                "args": {"transfer": i, "src": src[i], "dst": dst[i], "offset": offset[i],
                         "nbytes": nbytes[i], "op": ops[i], "start_s": start[i],
                         "end_s": end[i]},
                "cat": cat,
            }
        return fields

    trace = TraceEvents()
    # ranks, then the reducing switches an in-network schedule addresses
    ends = result.ranks + (result.schedule.endpoints if result.schedule is not None else 0)
    _endpoint_tracks(trace, result.ranks, ends, cols, slices, network, describe)
    if network is not None and len(cols):
        _link_tracks(trace, ends, cols, slices, network, describe("link"))
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


def _grouped(keys: np.ndarray, slices: list[Slice], groups: int) -> list[list[Slice]]:
    """``slices`` (one per row of ``keys``) grouped by key ``0..groups-1``, in row order."""
    import numpy as np

    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(groups + 1)).tolist()
    rows = order.tolist()
    return [[slices[i] for i in rows[a:b]] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _endpoint_tracks(
    trace: TraceEvents,
    ranks: int,
    ends: int,
    cols: Columns,
    slices: list[Slice],
    network: Network | None,
    describe: Callable[[str], Callable[[Slice], Mapping[str, object]]],
) -> None:
    """A process per rank and reducing switch, with its send and recv lanes."""
    sends = _grouped(cols.src, slices, ends)
    recvs = _grouped(cols.dst, slices, ends)
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
    cols: Columns,
    slices: list[Slice],
    network: Network,
    describe: Callable[[Slice], Mapping[str, object]],
) -> None:
    """The ``links`` process: a lane per directed link that carried traffic, in link order."""
    import numpy as np

    trace.process(pid, "links")
    src, dst, which = cols.pairs()
    paths = [network.route(s, d) for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
    hops = np.array([len(path) for path in paths], dtype=np.int64)[which]
    links = np.array([link for path in paths for link in path], dtype=np.int64)
    path_ptr = np.zeros(len(paths) + 1, dtype=np.int64)
    np.cumsum([len(path) for path in paths], out=path_ptr[1:])
    # every (transfer, link of its route), by transfer
    row = np.repeat(np.arange(len(cols), dtype=np.int64), hops)
    first = np.repeat(path_ptr[which] - np.cumsum(hops) + hops, hops)
    link = links[first + np.arange(int(hops.sum()))]
    order = np.lexsort((row, link))
    link, row = link[order], row[order]
    cut = np.flatnonzero(np.diff(link)) + 1
    tid = 1
    for part_links, part_rows in zip(np.split(link, cut), np.split(row, cut), strict=True):
        if not len(part_links):
            continue
        mine = [slices[i] for i in part_rows.tolist()]
        tid += trace.track(pid, tid, _link_name(network, int(part_links[0])), mine, describe)


def write_trace(result: Result, path: str | Path, network: Network | None = None) -> Path:
    """Write :func:`trace_events` to ``path``, one event per line (stable, diff-friendly)."""
    return write_trace_json(trace_events(result, network), path)
