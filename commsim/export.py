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

A large schedule makes a trace too big to open (a ring on 512 GPUs: millions of events), so
:class:`TraceKeep` keeps some ranks' transfers or some links' lanes, and :func:`trace_size`
says how big a trace would be before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
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

__all__ = ["TraceKeep", "trace_events", "trace_size", "write_trace", "write_transfers_csv"]

#: Bytes a slice of a collective's trace takes in the file, the metadata events shared out:
#: 257-272 measured on ring, double binary tree and NVLS all-reduce traces of 8 to 64 ranks.
EVENT_BYTES = 270


@dataclass(frozen=True, slots=True)
class TraceKeep:
    """What a trace keeps: the transfers from or to ``ranks`` (None: all), and of the links'
    lanes those whose label matches the fnmatch pattern ``links`` with the transfers that cross
    them (None: every link)."""

    ranks: frozenset[int] | None = None
    links: str | None = None

    @property
    def everything(self) -> bool:
        return self.ranks is None and self.links is None


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


def trace_events(result: Result, network: Network | None = None,
                 keep: TraceKeep | None = None) -> dict[str, object]:
    """The trace as a JSON-ready dict ``{"displayTimeUnit", "otherData", "traceEvents"}``.

    ``network`` (the one the result ran on) adds the ``links`` process; without it only the
    per-rank processes are written. ``keep`` narrows it (:class:`TraceKeep`; it needs
    ``network`` for its ``links``).
    """
    import numpy as np

    cols, timing = _records(result)
    hops = _hops(cols, network) if network is not None else None
    rows, hops = _kept(cols, network, hops, keep or TraceKeep())
    start, end = timing.start_s.tolist(), timing.end_s.tolist()
    slices = {i: Slice(ns(start[i]), ns(end[i]), i) for i in rows.tolist()}
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
    _endpoint_tracks(trace, result.ranks, ends, cols, rows, slices, network, describe,
                     every=keep is None or keep.everything)
    if network is not None and hops is not None and len(cols):
        _link_tracks(trace, ends, hops, slices, network, describe("link"))
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


def trace_size(result: Result, network: Network | None = None,
               keep: TraceKeep | None = None) -> tuple[int, int]:
    """(slices, estimated bytes) of the trace :func:`trace_events` would make, had from the
    schedule's routes without building it."""
    cols, _ = _records(result)
    hops = _hops(cols, network) if network is not None else None
    rows, hops = _kept(cols, network, hops, keep or TraceKeep())
    slices = 2 * len(rows) + (len(hops[0]) if hops is not None else 0)
    return slices, slices * EVENT_BYTES


def _hops(cols: Columns, network: Network) -> tuple[np.ndarray, np.ndarray]:
    """Every (transfer, link of its route), by transfer: two arrays."""
    import numpy as np

    src, dst, which = cols.pairs()
    paths = [network.route(s, d) for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
    hops = np.array([len(path) for path in paths], dtype=np.int64)[which]
    links = np.array([link for path in paths for link in path], dtype=np.int64)
    path_ptr = np.zeros(len(paths) + 1, dtype=np.int64)
    np.cumsum([len(path) for path in paths], out=path_ptr[1:])
    row = np.repeat(np.arange(len(cols), dtype=np.int64), hops)
    first = np.repeat(path_ptr[which] - np.cumsum(hops) + hops, hops)
    return row, links[first + np.arange(int(hops.sum()))]


def _kept(cols: Columns, network: Network | None,
          hops: tuple[np.ndarray, np.ndarray] | None, keep: TraceKeep
          ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """The transfers ``keep`` keeps (indices, in order) and their (transfer, link) hops on
    the links it keeps."""
    import numpy as np

    kept = np.ones(len(cols), dtype=bool)
    if keep.ranks is not None:
        ranks = np.fromiter(sorted(keep.ranks), dtype=np.int64)
        kept &= np.isin(cols.src, ranks) | np.isin(cols.dst, ranks)
    if keep.links is not None:
        if network is None or hops is None:
            raise ValueError("keeping links needs the network the result ran on")
        names = np.array([fnmatchcase(_link_name(network, i), keep.links)
                          for i in range(len(network.links))], dtype=bool)
        on = names[hops[1]]
        crossing = np.zeros(len(cols), dtype=bool)
        crossing[hops[0][on]] = True
        kept &= crossing
        hops = (hops[0][on], hops[1][on])
    if hops is not None and not keep.everything:
        mine = kept[hops[0]]
        hops = (hops[0][mine], hops[1][mine])
    return np.flatnonzero(kept), hops


def _grouped(keys: np.ndarray, rows: np.ndarray, slices: Mapping[int, Slice],
             groups: int) -> list[list[Slice]]:
    """The slices of ``rows`` grouped by their key ``0..groups-1`` (``keys[rows]``), in row
    order."""
    import numpy as np

    mine = keys[rows]
    order = np.argsort(mine, kind="stable")
    bounds = np.searchsorted(mine[order], np.arange(groups + 1)).tolist()
    at = rows[order].tolist()
    return [[slices[i] for i in at[a:b]] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _endpoint_tracks(
    trace: TraceEvents,
    ranks: int,
    ends: int,
    cols: Columns,
    rows: np.ndarray,
    slices: Mapping[int, Slice],
    network: Network | None,
    describe: Callable[[str], Callable[[Slice], Mapping[str, object]]],
    every: bool,
) -> None:
    """A process per rank and reducing switch (``every``; else those with a kept transfer),
    with its send and recv lanes."""
    sends = _grouped(cols.src, rows, slices, ends)
    recvs = _grouped(cols.dst, rows, slices, ends)
    for rank in range(ends):
        if not (every or sends[rank] or recvs[rank]):
            continue
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
    hops: tuple[np.ndarray, np.ndarray],
    slices: Mapping[int, Slice],
    network: Network,
    describe: Callable[[Slice], Mapping[str, object]],
) -> None:
    """The ``links`` process: a lane per directed link that carried traffic, in link order."""
    import numpy as np

    trace.process(pid, "links")
    row, link = hops
    order = np.lexsort((row, link))
    link, row = link[order], row[order]
    cut = np.flatnonzero(np.diff(link)) + 1
    tid = 1
    for part_links, part_rows in zip(np.split(link, cut), np.split(row, cut), strict=True):
        if not len(part_links):
            continue
        mine = [slices[i] for i in part_rows.tolist()]
        tid += trace.track(pid, tid, _link_name(network, int(part_links[0])), mine, describe)


def write_trace(result: Result, path: str | Path, network: Network | None = None,
                keep: TraceKeep | None = None) -> Path:
    """Write :func:`trace_events` to ``path``, one event per line (stable, diff-friendly)."""
    return write_trace_json(trace_events(result, network, keep), path)
