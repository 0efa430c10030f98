"""``hierarchical_rabenseifner`` built as columns, for hosts of equal size.

The phases of :mod:`commsim.algorithms.hierarchical`: a ring reduce-scatter on every host
(:func:`~commsim.algorithms.columnar.ring_steps`), Rabenseifner on every rail (local rank ``l``
of every host all-reduces part ``l``: fold, halving, doubling, unfold, in lockstep over the
rails), a ring all-gather on every host. What ``Plan`` and the rails' ``_Nics`` give a rail
piece, spelled out:

* the same link's previous piece, the last piece its source sent and the last piece its
  destination received over the rails (:func:`~commsim.algorithms.rows.previous`);
* the data of its bytes in its source, with of the rail transfers among them only the latest:
  bytes never copied into the source wait for the host phase's last reduce of them (``X``) and
  every rail reduce so far; copied bytes for the copy.

The host all-gather's first step reads each owner's part as it ends (every write, untrimmed),
and follows the host phase's last piece on its link. The result equals ``Plan``'s schedule
transfer for transfer (tests compare the two).
"""

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import ring_steps, segments
from commsim.algorithms.rows import Table, Writes, join, overlaps, pieces, previous, read
from commsim.schedule import Columns


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

    def finish(self, ranks: int) -> None:
        """The link and NIC dependencies of every rail row (the previous rail piece on its
        ordered pair, from its source, into its destination) and its latest rail data."""
        if not self.rows:
            return
        rows, src, dst = (np.concatenate(x) for x in (self.rows, self.src, self.dst))
        for key in (src * ranks + dst, src, dst):
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


def rabenseifner_rails_columns(groups: list[list[int]], nbytes: int,
                               chunks: int) -> Columns | None:
    """The hierarchical all-reduce with Rabenseifner rails over ``groups`` (ranks per host),
    as columns; None where hosts differ in size."""
    if len({len(g) for g in groups}) != 1:
        return None
    hosts = np.array(groups, dtype=np.int64)                              # (H, G)
    n_hosts, per_host = hosts.shape
    c = chunks
    table = Table()
    ps, pe = segments(per_host, nbytes)
    lo = np.broadcast_to(ps, hosts.shape)
    hi = np.broadcast_to(pe, hosts.shape)
    a_rows = table.extend(_ring(hosts, lo, hi, c, True)).reshape(-1, *hosts.shape, c)
    x_lo, x_hi = pieces(ps, pe, c)                                        # (G, c)
    if per_host > 1:   # X: the host phase's last reduce of part l into its owner
        last = a_rows[-1][:, (np.arange(per_host) - 1) % per_host]       # (H, G, c)
        x = Writes.of(last, hosts[:, :, None], x_lo, x_hi)
    else:
        x = Writes.of(*(np.zeros(0, dtype=np.int64),) * 4)
    rails = _Rails(table)
    reduces: list[Writes] = []
    copies: list[Writes] = []
    kept = (lo, hi)                        # per owner, the bytes of its part never copied in
    if n_hosts > 1:
        kept = _rabenseifner(rails, hosts, (ps, pe), c, x, reduces, copies)
    rails.finish(hosts.size)
    c_rows = table.extend(_ring(hosts, lo, hi, c, False)).reshape(-1, *hosts.shape, c)
    if per_host > 1:
        table.follow(c_rows[0, :, :, 0], a_rows[-1, :, :, c - 1])
        reader = Writes.of(c_rows[0], hosts[:, :, None], x_lo, x_hi)
        inside = _within(reader, *(np.broadcast_to(k[:, :, None], c_rows[0].shape)
                                   for k in kept))
        read(table, inside, [x, *reduces])
        if copies:
            read(table, reader, [join(copies)])
    return table.columns()


def _ring(hosts: np.ndarray, lo: np.ndarray, hi: np.ndarray, chunks: int,
          reduce: bool) -> Columns:
    cols = ring_steps(hosts, lo, hi, chunks, (reduce,), keep_empty=True)
    assert cols is not None
    return cols


def _rabenseifner(rails: _Rails, hosts: np.ndarray, parts: tuple[np.ndarray, np.ndarray],
                  c: int, x: Writes, reduces: list[Writes],
                  copies: list[Writes]) -> tuple[np.ndarray, np.ndarray]:
    """Every rail's fold, halving, doubling and unfold (rail ``l``: ranks ``hosts[:, l]``,
    bytes ``parts[l]``); appends the rail reduces and copies; returns, per owner, the
    bytes of its part never copied in (its own block)."""
    table = rails.table
    n_hosts, per_host = hosts.shape
    owner = hosts.T                                                       # (G, H)
    pof2 = 1 << (n_hosts.bit_length() - 1)
    rem = n_hosts - pof2
    a = np.arange(pof2, dtype=np.int64)
    core = np.where(a < rem, 2 * a + 1, a + rem)
    ps, pe = parts
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
    kept_lo = np.where(folded[:, None], 0, b_lo.T[np.clip(index, 0, pof2 - 1)])
    kept_hi = np.where(folded[:, None], 0, b_hi.T[np.clip(index, 0, pof2 - 1)])
    return kept_lo, kept_hi                                               # (H, G)
