"""A table of transfers made block by block as arrays, with their dependencies (the rules of
:mod:`commsim.algorithms.plan`) given as ``(row, dependency)`` pairs, for builders whose data
flow is known phase by phase.

A builder adds rows in its algorithm's natural order (:meth:`Table.add`, any array shape,
read in C order), says which earlier rows each must follow on its link (:meth:`Table.follow`)
and which wrote the bytes it reads (:meth:`Table.reads`, or :func:`overlaps` to find them), and
gets :class:`~commsim.schedule.Columns` with zero-byte rows dropped as ``ScheduleBuilder`` drops
them (:func:`~commsim.algorithms.columnar.assemble`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from commsim.algorithms.columnar import Pairs, assemble
from commsim.schedule import Columns


class Table:
    """Rows (source, destination, byte range, op) and their dependencies, built in order."""

    def __init__(self) -> None:
        self.count = 0
        self._cols: list[tuple[np.ndarray, ...]] = []
        self.link: Pairs = []
        self.data: Pairs = []
        self._flat: tuple[np.ndarray, ...] | None = None

    def _column(self, k: int, rows: np.ndarray) -> np.ndarray:
        if not self._cols:
            return np.zeros(0, dtype=np.int64)[rows]
        if self._flat is None:
            self._flat = tuple(np.concatenate(c) for c in zip(*self._cols, strict=True))
        return self._flat[k][rows]

    def src(self, rows: np.ndarray) -> np.ndarray:
        """The sources of ``rows``."""
        return self._column(0, rows)

    def dst(self, rows: np.ndarray) -> np.ndarray:
        """The destinations of ``rows``."""
        return self._column(1, rows)

    def sizes(self, rows: np.ndarray) -> np.ndarray:
        """The byte counts of ``rows``."""
        return self._column(3, rows)

    def add(self, src: np.ndarray | int, dst: np.ndarray | int, lo: np.ndarray | int,
            hi: np.ndarray | int, reduce: bool | np.ndarray) -> np.ndarray:
        """Append rows (the arguments broadcast together, read in C order); their row ids, in
        the broadcast shape."""
        s, d, a, b, r = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64)
                                              for x in (src, dst, lo, hi)), np.asarray(reduce))
        rows = self.count + np.arange(s.size, dtype=np.int64).reshape(s.shape)
        self.count += s.size
        self._cols.append((s.ravel(), d.ravel(), a.ravel(), (b - a).ravel(),
                           r.ravel().astype(bool, copy=False)))
        self._flat = None
        return rows

    def extend(self, cols: Columns) -> np.ndarray:
        """Append the rows of ``cols`` (zero-byte ones included, as
        :func:`~commsim.algorithms.columnar.ring_steps` makes them) with
        their dependencies (as links: already complete); their row ids."""
        rows = self.count + np.arange(len(cols), dtype=np.int64)
        self._cols.append((cols.src, cols.dst, cols.offset, cols.nbytes, cols.reduce))
        self._flat = None
        owner = np.repeat(rows, np.diff(cols.dep_ptr))
        self.link.append((owner, cols.dep_idx + self.count))
        self.count += len(cols)
        return rows

    def follow(self, rows: np.ndarray, deps: np.ndarray) -> None:
        """``rows`` each wait for the matching ``deps`` (link order, or what they come after)."""
        r, d = np.broadcast_arrays(rows, deps)
        self.link.append((r.ravel(), d.ravel()))

    def reads(self, rows: np.ndarray, deps: np.ndarray) -> None:
        """``rows`` read bytes the matching ``deps`` wrote (ignored for zero-byte rows)."""
        r, d = np.broadcast_arrays(rows, deps)
        self.data.append((r.ravel(), d.ravel()))

    def columns(self) -> Columns:
        """The rows as columns, zero-byte ones dropped (standing for their dependencies)."""
        if not self._cols:
            empty = np.zeros(0, dtype=np.int64)
            return assemble(empty, empty, empty, empty, empty.astype(bool), [], [])
        src, dst, offset, nbytes, reduce = (np.concatenate(c) for c in zip(*self._cols,
                                                                           strict=True))
        return assemble(src, dst, offset, nbytes, reduce, self.link, self.data)


class Writes(NamedTuple):
    """Rows of one phase that wrote bytes ``[lo, hi)`` into ``rank`` (flat arrays)."""

    rows: np.ndarray
    rank: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @staticmethod
    def of(rows: np.ndarray, rank: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Writes:
        r, k, a, b = np.broadcast_arrays(rows, rank, lo, hi)
        return Writes(r.ravel(), k.ravel(), a.ravel(), b.ravel())


def read(table: Table, reader: Writes, phases: list[Writes]) -> None:
    """``reader``'s rows read their bytes of ``rank``: they wait for every overlapping write of
    each phase (the writes of one phase into one rank being disjoint)."""
    for w in phases:
        which, by = overlaps(reader.rank, reader.lo, reader.hi, w.rank, w.lo, w.hi)
        table.reads(reader.rows[which], w.rows[by])


def join(writes: list[Writes]) -> Writes:
    """One phase of all of ``writes``."""
    return Writes(*(np.concatenate(parts) for parts in zip(*writes, strict=True)))


def overlaps(r_rank: np.ndarray, r_lo: np.ndarray, r_hi: np.ndarray, w_rank: np.ndarray,
             w_lo: np.ndarray, w_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (reader, writer) index pair of the same rank whose non-empty byte ranges overlap,
    where the non-empty writers of each rank are disjoint (one phase's writes).

    >>> overlaps(np.array([0, 1]), np.array([2, 0]), np.array([7, 4]),
    ...          np.array([0, 0, 0, 1]), np.array([0, 4, 8, 0]), np.array([4, 8, 9, 4]))
    (array([0, 0, 1]), array([0, 1, 3]))
    """
    r_rank, r_lo, r_hi = (np.asarray(x, dtype=np.int64).ravel() for x in (r_rank, r_lo, r_hi))
    w_rank, w_lo, w_hi = (np.asarray(x, dtype=np.int64).ravel() for x in (w_rank, w_lo, w_hi))
    span = int(max(r_hi.max(initial=0), w_hi.max(initial=0))) + 1
    real = np.flatnonzero(w_hi > w_lo)
    if not len(real):
        return np.zeros(0, dtype=np.int64), real
    key = w_rank[real] * span + w_lo[real]
    order = np.argsort(key, kind="stable")
    real, key = real[order], key[order]
    base = r_rank * span
    first = np.searchsorted(key, base + r_lo, side="right") - 1
    at = real[np.maximum(first, 0)]
    hit = (first >= 0) & (w_rank[at] == r_rank) & (w_hi[at] > r_lo)
    first = np.where(hit, first, first + 1)
    last = np.searchsorted(key, base + r_hi, side="left") - 1
    sizes = np.where(r_hi > r_lo, np.maximum(last - first + 1, 0), 0)
    reader = np.repeat(np.arange(len(r_lo), dtype=np.int64), sizes)
    offsets = np.repeat(first - np.cumsum(sizes) + sizes, sizes)
    return reader, real[offsets + np.arange(int(sizes.sum()), dtype=np.int64)]


def previous(keys: np.ndarray) -> np.ndarray:
    """For each row (in order), the index of the last earlier row with the same key, or -1.

    >>> previous(np.array([3, 1, 3, 3, 1])).tolist()
    [-1, -1, 0, 2, 1]
    """
    order = np.argsort(keys, kind="stable")
    out = np.full(len(keys), -1, dtype=np.int64)
    same = keys[order][1:] == keys[order][:-1]
    out[order[1:][same]] = order[:-1][same]
    return out
