"""Rings of any lengths run in lockstep, as rows of a :class:`~commsim.algorithms.rows.Table`:
ring reduce-scatters (position ``i`` sends block ``i - s - 1`` at step ``s``) and all-gathers
(block ``i - s``) of several rings at once (step by step; in each step ring by ring, position
by position, piece by piece; a ring that has finished its steps sits out).

A piece reads the same piece its source received one step earlier (across a reduce-scatter
into the following all-gather too); the link order (the previous piece on the same ordered
pair) is left to the caller, who knows every row on every pair.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from commsim.algorithms.columnar import pieces
from commsim.algorithms.rows import Table, Writes


class Rings(NamedTuple):
    """Ring positions, flattened ring by ring (arrays of one entry per position)."""

    rank: np.ndarray    #: the rank at the position
    base: np.ndarray    #: the index of its ring's first position
    place: np.ndarray   #: its place in its ring
    length: np.ndarray  #: its ring's length
    lo: np.ndarray      #: the bytes the position owns (its block), from
    hi: np.ndarray      #: ... to

    @staticmethod
    def of(ranks: list[np.ndarray], lo: list[np.ndarray], hi: list[np.ndarray]) -> Rings:
        """Rings ``ranks[r]`` whose position ``k`` owns ``[lo[r][k], hi[r][k])``."""
        sizes = np.array([len(r) for r in ranks], dtype=np.int64)
        base = np.repeat(np.cumsum(sizes) - sizes, sizes)
        flat = np.concatenate(ranks) if ranks else np.zeros(0, dtype=np.int64)
        return Rings(flat.astype(np.int64), base,
                     np.arange(len(flat), dtype=np.int64) - base, np.repeat(sizes, sizes),
                     np.concatenate(lo).astype(np.int64) if ranks else flat,
                     np.concatenate(hi).astype(np.int64) if ranks else flat)

    @property
    def next(self) -> np.ndarray:
        """The position each one sends to."""
        return self.base + (self.place + 1) % np.maximum(self.length, 1)

    @property
    def previous(self) -> np.ndarray:
        """The position each one receives from."""
        return self.base + (self.place - 1) % np.maximum(self.length, 1)


class Step(NamedTuple):
    """One lockstep step: the positions that send, their rows ``(k, c)`` and byte ranges."""

    at: np.ndarray
    rows: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def writes(self, rings: Rings) -> Writes:
        """What the step wrote: into each sender's next position."""
        return Writes.of(self.rows, rings.rank[rings.next[self.at]][:, None], self.lo, self.hi)

    def reads(self, rings: Rings) -> Writes:
        """What the step read: its blocks' pieces in each sender."""
        return Writes.of(self.rows, rings.rank[self.at][:, None], self.lo, self.hi)


def lockstep(table: Table, rings: Rings, chunks: int,
             phases: tuple[bool, ...]) -> list[list[Step]]:
    """Reduce-scatter (``True``) and/or all-gather (``False``) phases on ``rings``; the
    steps of each phase."""
    steps = int(rings.length.max(initial=0)) - 1
    latest = np.full(len(rings.rank), -1, dtype=np.int64)   # each position's last piece 0
    out: list[list[Step]] = []
    for reduce in phases:
        made: list[Step] = []
        for s in range(steps):
            at = np.flatnonzero(rings.length - 1 > s)
            block = rings.base[at] + (rings.place[at] - s - reduce) % rings.length[at]
            lo, hi = pieces(rings.lo[block], rings.hi[block], chunks)
            rows = table.add(rings.rank[at][:, None], rings.rank[rings.next[at]][:, None],
                             lo, hi, reduce)
            source = latest[rings.previous[at]]
            has = source >= 0
            table.reads(rows[has], source[has][:, None] + np.arange(chunks))
            latest[at] = rows[:, 0]
            made.append(Step(at, rows, lo, hi))
        out.append(made)
    return out
