"""Rabenseifner rails of ``hierarchical_rabenseifner``
(:mod:`commsim.algorithms.hierarchical`) as rows of a :class:`~commsim.algorithms.rows.Table`.

Each rail (one owner per host, a range of the buffer) runs the fold, recursive halving,
recursive doubling and unfold, in lockstep with the other rails. What a rail piece
waits for besides the previous piece on its ordered pair, spelled out:

* the last piece its source sent and the last piece its destination received over the rails
  (:func:`~commsim.algorithms.rows.previous`);
* the data of its bytes in its source, with of the rail transfers among them only the latest:
  bytes never copied into the source wait for the host phase's last reduce of them (``X``) and
  every rail reduce so far; copied bytes for the copy.
"""

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import pieces
from commsim.algorithms.rows import Table, Writes, join, overlaps, previous, read


class _Rails:
    """The rail rows as they are made: their ids, sources and destinations, and what each
    reads (``(row, writer)`` candidates of rail writers, trimmed to the latest at the end)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.rows: list[np.ndarray] = []
        self.src: list[np.ndarray] = []
        self.dst: list[np.ndarray] = []
        self.inter: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, src: np.ndarray, dst: np.ndarray, lo: np.ndarray, hi: np.ndarray,
            reduce: bool) -> np.ndarray:
        rows = self.table.add(src, dst, lo, hi, reduce)
        s, d = np.broadcast_arrays(src, dst, rows)[:2]
        self.rows.append(rows.ravel())
        self.src.append(s.ravel())
        self.dst.append(d.ravel())
        return rows

    def reads(self, reader: Writes, phases: list[Writes]) -> None:
        for w in phases:
            which, by = overlaps(reader.rank, reader.lo, reader.hi, w.rank, w.lo, w.hi)
            self.inter.append((reader.rows[which], w.rows[by]))

    def finish(self) -> None:
        """The NIC dependencies of every rail row (the previous rail piece from its source
        and into its destination) and its latest rail data."""
        if not self.rows:
            return
        rows, src, dst = (np.concatenate(x) for x in (self.rows, self.src, self.dst))
        for key in (src, dst):
            prev = previous(key)
            self.table.follow(rows[prev >= 0], rows[prev[prev >= 0]])
        if self.inter:
            reader = np.concatenate([r for r, _ in self.inter])
            writer = np.concatenate([w for _, w in self.inter])
            latest = np.full(self.table.count, -1, dtype=np.int64)
            np.maximum.at(latest, reader, writer)
            has = np.flatnonzero(latest >= 0)
            self.table.reads(has, latest[has])


def _within(reader: Writes, lo: np.ndarray, hi: np.ndarray) -> Writes:
    """``reader``'s ranges cut to ``[lo, hi)`` (per row; empty where they miss)."""
    return Writes(reader.rows, reader.rank, np.maximum(reader.lo, lo.ravel()),
                  np.minimum(reader.hi, hi.ravel()))


def rabenseifner_rails(table: Table, owner: np.ndarray, cuts: np.ndarray, c: int, x: Writes,
                       reduces: list[Writes], copies: list[Writes]) -> Writes:
    """Every rail's fold, halving, doubling and unfold, in lockstep (rail ``k``: ranks
    ``owner[k]``, one per host, bytes ``[cuts[k], cuts[k + 1])``); appends the rail reduces
    and copies; returns what each owner keeps reduced, never copied in (its own block)."""
    rails = _Rails(table)
    n_hosts = owner.shape[1]
    pof2 = 1 << (n_hosts.bit_length() - 1)
    rem = n_hosts - pof2
    a = np.arange(pof2, dtype=np.int64)
    core = np.where(a < rem, 2 * a + 1, a + rem)
    ps, pe = cuts[:-1], cuts[1:]
    b_lo = ps[:, None] + a * (pe - ps)[:, None] // pof2                   # (G, pof2)
    b_hi = ps[:, None] + (a + 1) * (pe - ps)[:, None] // pof2
    i = np.arange(rem, dtype=np.int64)
    full = pieces(ps, pe, c)
    full = (full[0][:, None, :], full[1][:, None, :])                     # (G, 1, c)

    def send(src: np.ndarray, dst: np.ndarray, lo: np.ndarray, hi: np.ndarray, reduce: bool,
             block: np.ndarray | None) -> None:
        rows = rails.add(src[..., None], dst[..., None], lo, hi, reduce)
        reader = Writes.of(rows, src[..., None], lo, hi)
        if block is None:        # nothing copied in yet
            read(table, reader, [x])
            rails.reads(reader, reduces)
        else:
            inside = _within(reader, *(np.broadcast_to(k[..., None], rows.shape)
                                       for k in (b_lo[:, block], b_hi[:, block])))
            read(table, inside, [x])
            rails.reads(inside, reduces)
            if copies:
                rails.reads(reader, [join(copies)])
        (reduces if reduce else copies).append(Writes.of(rows, dst[..., None], lo, hi))

    send(owner[:, 2 * i], owner[:, 2 * i + 1], *full, True, None)
    mask = pof2 >> 1
    while mask:
        first = (a ^ mask) & ~(mask - 1)
        lo, hi = pieces(b_lo[:, first], b_hi[:, first + mask - 1], c)
        send(owner[:, core], owner[:, core[a ^ mask]], lo, hi, True, None)
        mask >>= 1
    mask = 1
    while mask < pof2:
        first = a & ~(mask - 1)
        lo, hi = pieces(b_lo[:, first], b_hi[:, first + mask - 1], c)
        send(owner[:, core], owner[:, core[a ^ mask]], lo, hi, False, a)
        mask <<= 1
    send(owner[:, 2 * i + 1], owner[:, 2 * i], *full, False, i)
    h = np.arange(n_hosts, dtype=np.int64)
    index = np.where(h < 2 * rem, (h - 1) // 2, h - rem)                  # core index
    folded = (h < 2 * rem) & (h % 2 == 0)
    at = np.clip(index, 0, pof2 - 1)
    kept_lo = np.where(folded, 0, b_lo[:, at])                            # (R, H)
    kept_hi = np.where(folded, 0, b_hi[:, at])
    rails.finish()
    return Writes.of(np.zeros_like(owner), owner, kept_lo, kept_hi)
