"""Races, decided on the dependency DAG alone, for every pair of transfers touching the same
bytes of one rank (see :mod:`commsim.checker` for the rules).

The pairs come from sorting every (rank, cell) a transfer writes: a reader meets each writer of
its source's cells, a copy each other writer of its destination's cells, a reduce each copy.
Whether two of them are ordered is one batched ancestor query
(:class:`~commsim.checker.reach.Reach`); an unordered read is still safe when every dependency
of the reader is an ancestor of the writer (the reader surely starts, and reads, first: the
``MPI_Sendrecv`` exchange). The error names the first race a transfer-by-transfer check meets:
the smallest reader or writer, reads before writes, then the smallest other transfer.
"""

from __future__ import annotations

import numpy as np

from commsim.checker.reach import Reach
from commsim.errors import ScheduleError
from commsim.schedule import Columns, OpKind


def _meet(rows: np.ndarray, loc: np.ndarray, where: np.ndarray,
          writer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (row's transfer, writer) for every writer at the same location; ``where`` is
    the writes' sorted locations, ``writer`` their transfers."""
    a = np.searchsorted(where, loc, side="left")
    size = np.searchsorted(where, loc, side="right") - a
    t = np.repeat(rows, size)
    u = writer[np.repeat(a - np.cumsum(size) + size, size) + np.arange(int(size.sum()))]
    return t, u


def _others(t: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of two different transfers (a pair sharing several cells stays repeated:
    asking again is cheaper than sorting them out)."""
    other = t != u
    return t[other], u[other]


def check_races(cols: Columns, depth: np.ndarray, bounds: np.ndarray, rows: np.ndarray,
                cells: np.ndarray) -> None:
    """ScheduleError at the first race; ``rows``/``cells`` are every (transfer, cell) moved."""
    n = len(cols)
    if not n:
        return
    ncells = len(bounds) - 1
    written = cols.dst[rows] * ncells + cells
    order = np.argsort(written, kind="stable")
    where, writer = written[order], rows[order]
    copy = ~cols.reduce
    tr, ur = _others(*_meet(rows, cols.src[rows] * ncells + cells, where, writer))
    tw, uw = _meet(rows, written, where, writer)
    either = copy[tw] | copy[uw]
    tw, uw = _others(tw[either], uw[either])
    reach = Reach(cols, depth)
    t, u = np.concatenate([tr, tw]), np.concatenate([ur, uw])
    ordered = reach(np.minimum(t, u), np.maximum(t, u))
    loose = np.flatnonzero(~ordered[:len(tr)])
    read_bad = loose[~_exchange(cols, reach, tr[loose], ur[loose])]
    write_bad = np.flatnonzero(~ordered[len(tr):])
    if not read_bad.size and not write_bad.size:
        return
    # the first: smallest transfer, its read before its writes, then the smallest other one
    keys = np.concatenate([tr[read_bad] * (2 * n) + ur[read_bad],
                           tw[write_bad] * (2 * n) + n + uw[write_bad]])
    first = int(keys.min())
    i, rest = divmod(first, 2 * n)
    kind, j = divmod(rest, n)
    _raise(cols, i, j, write=bool(kind))


def _exchange(cols: Columns, reach: Reach, t: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Whether every dependency of ``t[k]`` is an ancestor of ``u[k]`` (true without any)."""
    counts = np.diff(cols.dep_ptr)[t]
    if not counts.any():
        return np.ones(len(t), dtype=bool)
    pair = np.repeat(np.arange(len(t)), counts)
    deps = cols.dep_idx[np.repeat(cols.dep_ptr[t] - np.cumsum(counts) + counts, counts)
                        + np.arange(int(counts.sum()))]
    fails = np.bincount(pair, weights=~reach(deps, u[pair]), minlength=len(t))
    return fails == 0


def _raise(cols: Columns, i: int, j: int, write: bool) -> None:
    s, d = int(cols.src[i]), int(cols.dst[i])
    us, ud = int(cols.src[j]), int(cols.dst[j])
    lo = max(int(cols.offset[i]), int(cols.offset[j]))
    hi = min(int(cols.offset[i] + cols.nbytes[i]), int(cols.offset[j] + cols.nbytes[j]))
    if not write:
        raise ScheduleError(
            f"race: transfer #{i} ({s}->{d}) reads rank {s} bytes [{lo}, {hi}) while transfer "
            f"#{j} ({us}->{ud}) writes them, unordered (missing dependency)"
        )

    def op(k: int) -> str:
        return (OpKind.REDUCE if cols.reduce[k] else OpKind.COPY).value

    raise ScheduleError(
        f"race: transfers #{i} ({s}->{d}, {op(i)}) and #{j} ({us}->{ud}, {op(j)}) both write "
        f"rank {d} bytes [{lo}, {hi}), unordered, and one is a copy"
    )
