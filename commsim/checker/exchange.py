"""The checker's all-to-all: every rank must end holding every other rank's block for it.

All-to-all moves blocks that belong to a sender (``Columns.origin``, the transfer's ``src``
where not given) and never reduces, so the holdings are sets that only grow: a rank holds its
own send buffer from the start and, kept apart per origin (a receive buffer, or a relay's
staging), every byte a transfer brings it. A transfer ``t`` carries bytes
``[offset, offset + nbytes)`` of its origin's send buffer from ``src`` to ``dst``. Rejected,
with the transfer, ranks and bytes named:

* a reduce; bytes beyond the origin's send buffer;
* bytes a rank receives twice, or receives although they are its own;
* reading bytes of another origin that ``src`` never receives, or that the transfer bringing
  them is not guaranteed to have delivered first (it is no ancestor of ``t`` in the DAG: some
  timing would read them before they arrive);
* a final state where rank ``j`` misses some of rank ``s``'s block for it (all-to-allv:
  ``Schedule.counts``; even: ``[j n // p, (j + 1) n // p)``).

Since nothing is overwritten there are no other races.
"""

from __future__ import annotations

import numpy as np

from commsim.checker.holdings import transfer_cells
from commsim.checker.reach import Reach
from commsim.errors import ScheduleError
from commsim.schedule import Columns, Schedule


def layout(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """``(sizes, starts)`` per (origin, destination) of the schedule's call."""
    p, n = schedule.ranks, schedule.nbytes
    if schedule.counts is None:
        bounds = np.arange(p + 1, dtype=np.int64) * n // p
        return (np.broadcast_to(np.diff(bounds), (p, p)),
                np.broadcast_to(bounds[:-1], (p, p)))
    sizes = np.asarray(schedule.counts, dtype=np.int64).reshape(p, p)
    starts = np.zeros((p, p), dtype=np.int64)
    np.cumsum(sizes[:, :-1], axis=1, out=starts[:, 1:])
    return sizes, starts


def check_exchange(schedule: Schedule, cols: Columns) -> None:
    """Raise :class:`ScheduleError` unless ``cols`` implement ``schedule``'s all-to-all."""
    p = schedule.ranks
    sizes, starts = layout(schedule)
    origin = cols.src if cols.origin is None else cols.origin
    _check_rows(cols, origin, sizes.sum(axis=1), p)
    cuts = [np.array([0, schedule.nbytes], dtype=np.int64), cols.offset,
            cols.offset + cols.nbytes, starts.ravel(), (starts + sizes).ravel()]
    bounds = np.unique(np.concatenate(cuts))
    rows, cells = transfer_cells(cols, bounds)
    ncells = len(bounds) - 1
    o = origin[rows]
    moves = cols.src[rows] != cols.dst[rows]           # local copies bring nothing new
    wrote = (cols.dst[rows] * p + o) * ncells + cells
    w_rows, w_keys = rows[moves], wrote[moves]
    order = np.lexsort((w_rows, w_keys))
    w_rows, w_keys = w_rows[order], w_keys[order]
    _check_writes(cols, o[moves][order], w_rows, w_keys, bounds, p, ncells)
    _check_reads(cols, rows, cells, o, w_keys, w_rows, bounds, p, ncells)
    _check_final(sizes, starts, w_keys, bounds, p, ncells)


def _check_rows(cols: Columns, origin: np.ndarray, buffers: np.ndarray, p: int) -> None:
    bad_origin = (origin < 0) | (origin >= p)
    if bad_origin.any():
        i = int(np.flatnonzero(bad_origin)[0])
        raise ScheduleError(f"transfer #{i}: origin {int(origin[i])} out of range for {p} ranks")
    faults = cols.reduce | (cols.offset + cols.nbytes > buffers[origin])
    if not faults.any():
        return
    i = int(np.flatnonzero(faults)[0])
    where = f"transfer #{i} ({int(cols.src[i])}->{int(cols.dst[i])})"
    if cols.reduce[i]:
        raise ScheduleError(f"{where}: all_to_all moves blocks, it never reduces")
    a, b = int(cols.offset[i]), int(cols.offset[i] + cols.nbytes[i])
    raise ScheduleError(f"{where}: bytes [{a}, {b}) beyond rank {int(origin[i])}'s "
                        f"{int(buffers[origin[i]])}-byte send buffer")


def _span(bounds: np.ndarray, cell: int) -> str:
    return f"[{int(bounds[cell])}, {int(bounds[cell + 1])})"


def _check_writes(cols: Columns, o: np.ndarray, w_rows: np.ndarray, w_keys: np.ndarray,
                  bounds: np.ndarray, p: int, ncells: int) -> None:
    own = (w_keys // ncells) // p == o
    twice = np.r_[False, w_keys[1:] == w_keys[:-1]]
    bad = np.flatnonzero(own | twice)
    if not bad.size:
        return
    k = int(bad[np.argmin(w_rows[bad])])
    i, cell = int(w_rows[k]), int(w_keys[k] % ncells)
    d = int(cols.dst[i])
    what = "its own bytes" if own[k] else "bytes it already receives"
    raise ScheduleError(f"transfer #{i} ({int(cols.src[i])}->{d}) brings rank {d} {what}: "
                        f"rank {int(o[k])}'s {_span(bounds, cell)}")


def _check_reads(cols: Columns, rows: np.ndarray, cells: np.ndarray, o: np.ndarray,
                 w_keys: np.ndarray, w_rows: np.ndarray, bounds: np.ndarray, p: int,
                 ncells: int) -> None:
    src = cols.src[rows]
    relayed = np.flatnonzero(src != o)
    if not relayed.size:
        return
    key = (src[relayed] * p + o[relayed]) * ncells + cells[relayed]
    at = np.searchsorted(w_keys, key)
    found = at < len(w_keys)
    found[found] = w_keys[at[found]] == key[found]
    readers = rows[relayed]
    writer = np.where(found, w_rows[np.minimum(at, len(w_keys) - 1)], -1)
    ok = found & (writer < readers)
    check = np.flatnonzero(ok)
    if check.size:
        ok[check] = Reach(cols, cols.depths())(writer[check], readers[check])
    bad = np.flatnonzero(~ok)
    if not bad.size:
        return
    k = int(bad[np.argmin(readers[bad])])
    i, s = int(readers[k]), int(src[relayed[k]])
    span = f"rank {int(o[relayed[k]])}'s {_span(bounds, int(cells[relayed[k]]))}"
    if not found[k]:
        raise ScheduleError(f"transfer #{i} ({s}->{int(cols.dst[i])}) forwards {span}, which "
                            f"rank {s} never receives")
    raise ScheduleError(f"transfer #{i} ({s}->{int(cols.dst[i])}) forwards {span} before "
                        f"transfer #{int(writer[k])} surely brought it (missing dependency)")


def _check_final(sizes: np.ndarray, starts: np.ndarray, w_keys: np.ndarray,
                 bounds: np.ndarray, p: int, ncells: int) -> None:
    dst, o = np.divmod(w_keys // ncells, p)
    cell = w_keys % ncells
    inside = (bounds[cell] >= starts[o, dst]) & (bounds[cell + 1] <= starts[o, dst]
                                                 + sizes[o, dst])
    got = np.zeros((p, p), dtype=np.int64)
    np.add.at(got, (o[inside], dst[inside]), (bounds[cell + 1] - bounds[cell])[inside])
    want = np.array(sizes, dtype=np.int64)
    np.fill_diagonal(want, 0)
    missing = np.argwhere(got != want)
    if not len(missing):
        return
    s, j = (int(x) for x in missing[np.lexsort((missing[:, 0], missing[:, 1]))[0]])
    a, b = int(starts[s, j]), int(starts[s, j] + sizes[s, j])
    raise ScheduleError(f"all_to_all: rank {j} holds {int(got[s, j])} of the {b - a} bytes "
                        f"[{a}, {b}) rank {s} sends it")
