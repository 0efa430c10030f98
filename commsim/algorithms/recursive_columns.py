"""Recursive doubling and Rabenseifner (:mod:`commsim.algorithms.recursive`) as columns.

Rows come in the algorithm's natural order, phase by phase: the fold (``rem`` pairs), the core
rounds (``p'`` ranks, or ``p' / 2`` exchanging pairs), the unfold; each message in ``chunks``
pieces, a piece after the previous one on its link. What a piece reads, it waits for
(:mod:`commsim.algorithms.plan`):

* bytes only ever reduced into a rank (the fold's, the halving's, a rank's own block): every
  reduce into them so far (reduces add up, :class:`~commsim.algorithms.rows.Table` finds them
  round by round with :func:`~commsim.algorithms.rows.overlaps`);
* bytes copied in (a doubling round, the all-gather): the one copy that brought them.
"""

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import pieces
from commsim.algorithms.rows import Table, Writes, join, overlaps, read
from commsim.schedule import Columns


def _core(ranks: int) -> tuple[int, int, np.ndarray]:
    """``p'``, ``rem`` and the rank of every core index (the fold of
    :mod:`commsim.algorithms.recursive`).

    >>> _core(6)[2].tolist()
    [1, 3, 4, 5]
    """
    pof2 = 1 << (ranks.bit_length() - 1)
    rem = ranks - pof2
    a = np.arange(pof2, dtype=np.int64)
    return pof2, rem, np.where(a < rem, 2 * a + 1, a + rem)


def _pipe(table: Table, rows: np.ndarray) -> None:
    """Piece ``j`` of each message (last axis) after piece ``j - 1`` on its link."""
    table.follow(rows[..., 1:], rows[..., :-1])


def _fold(table: Table, rem: int, lo: np.ndarray, hi: np.ndarray, reduce: bool,
          back: bool) -> np.ndarray:
    """Pair ``i``: ``2i -> 2i + 1`` (``back``: the other way) of pieces ``[lo, hi)``."""
    i = np.arange(rem, dtype=np.int64)[:, None]
    rows = table.add(2 * i + back, 2 * i + 1 - back, lo, hi, reduce)
    _pipe(table, rows)
    return rows


def doubling_all_reduce(ranks: int, nbytes: int, chunks: int) -> Columns:
    """``recursive_doubling`` all-reduce: the fold, exchanges at distances 1, 2, 4, ..., the
    unfold; both directions of an exchange's piece wait for the same set."""
    table = Table()
    pof2, rem, core = _core(ranks)
    lo, hi = pieces(0, nbytes, chunks)
    into = np.full((pof2, chunks), -1, dtype=np.int64)   # reduces into each core rank, by piece
    into[:rem] = _fold(table, rem, lo, hi, True, False)
    layers = [into]
    mask = 1
    while mask < pof2:
        a = np.flatnonzero((np.arange(pof2) & mask) == 0)
        b = a ^ mask
        side = np.arange(2)
        src = np.where(side == 0, core[a][:, None, None], core[b][:, None, None])
        dst = np.where(side == 0, core[b][:, None, None], core[a][:, None, None])
        rows = table.add(src, dst, lo[None, :, None], hi[None, :, None], True)
        for prev in (0, 1):
            table.follow(rows[:, 1:, :], rows[:, :-1, prev, None])
        for layer in layers:
            for ends in (a, b):
                dep = np.broadcast_to(layer[ends][:, :, None], rows.shape)
                table.reads(rows[dep >= 0], dep[dep >= 0])
        into = np.full((pof2, chunks), -1, dtype=np.int64)
        into[a], into[b] = rows[:, :, 1], rows[:, :, 0]
        layers.append(into)
        mask <<= 1
    out = _fold(table, rem, lo, hi, False, True)
    for layer in layers:
        dep = np.broadcast_to(layer[:rem], out.shape)
        table.reads(out[dep >= 0], dep[dep >= 0])
    return table.columns()


def doubling_all_gather(ranks: int, nbytes: int, chunks: int) -> Columns:
    """``recursive_doubling`` all-gather: the fold of the even ranks' segments, windows doubling
    at distances 1, 2, 4, ..., the unfold of the rest of the buffer."""
    table = Table()
    pof2, rem, core = _core(ranks)
    bounds = np.arange(ranks + 1, dtype=np.int64) * nbytes // ranks
    i = np.arange(rem, dtype=np.int64)
    rows = _fold(table, rem, *pieces(bounds[2 * i], bounds[2 * i + 1], chunks), False, False)
    lo, hi = pieces(bounds[2 * i], bounds[2 * i + 1], chunks)
    writes = [Writes.of(rows, (2 * i + 1)[:, None], lo, hi)]      # every copy in: disjoint
    a = np.arange(pof2, dtype=np.int64)
    first_rank = np.where(a < rem, 2 * a, a + rem)
    last_rank = core
    mask = 1
    while mask < pof2:
        window = a & ~(mask - 1)
        lo, hi = pieces(bounds[first_rank[window]], bounds[last_rank[window + mask - 1] + 1],
                        chunks)
        rows = table.add(core[:, None], core[a ^ mask][:, None], lo, hi, False)
        _pipe(table, rows)
        read(table, Writes.of(rows, core[:, None], lo, hi), [join(writes)])
        writes.append(Writes.of(rows, core[a ^ mask][:, None], lo, hi))
        mask <<= 1
    _unfold_rest(table, rem, bounds, nbytes, chunks, join(writes))
    return table.columns()


def _unfold_rest(table: Table, rem: int, bounds: np.ndarray, nbytes: int, chunks: int,
                 writes: Writes) -> None:
    """Odd ``2i + 1`` sends even ``2i`` the buffer but its segment, as ``runs`` gives it: one
    range when the segment is empty, else the non-empty ones of the two around it."""
    i = np.arange(rem, dtype=np.int64)
    seg_lo, seg_hi = bounds[2 * i], bounds[2 * i + 1]
    merged = seg_lo == seg_hi
    lo2 = np.stack([np.zeros(rem, dtype=np.int64), seg_hi], axis=1)
    hi2 = np.stack([np.where(merged, nbytes, seg_lo), np.full(rem, nbytes)], axis=1)
    exists = (hi2 > lo2) & np.stack([np.ones(rem, dtype=bool), ~merged], axis=1)
    lo, hi = pieces(lo2, hi2, chunks)                                  # (rem, 2, c)
    lo, hi = lo.transpose(0, 2, 1), hi.transpose(0, 2, 1)              # (rem, c, 2)
    keep = np.broadcast_to(exists[:, None, :], lo.shape)
    src = np.broadcast_to((2 * i + 1)[:, None, None], lo.shape)
    flat = table.add(src[keep], src[keep] - 1, lo[keep], hi[keep], False)
    rows = np.full(lo.shape, -1, dtype=np.int64)
    rows[keep] = flat
    for prev in (0, 1):
        dep = np.broadcast_to(rows[:, :-1, prev, None], rows[:, 1:].shape)
        now = rows[:, 1:]
        ok = (now >= 0) & (dep >= 0)
        table.follow(now[ok], dep[ok])
    # every part of a piece waits for what any of them reads, an empty part too (it stands
    # for the piece's dependencies on the link): so ``follow``, which keeps zero-byte rows'
    group = np.broadcast_to(np.arange(rem * chunks).reshape(rem, chunks, 1), lo.shape)[keep]
    which, by = overlaps(src[keep], lo[keep], hi[keep], writes.rank, writes.lo, writes.hi)
    parts = rows.reshape(-1, 2)[group[which]]
    for part in (0, 1):
        ok = parts[:, part] >= 0
        table.follow(parts[ok, part], writes.rows[by][ok])


def rabenseifner(ranks: int, nbytes: int, chunks: int, all_reduce: bool) -> Columns:
    """``rabenseifner``: the fold, recursive halving, then (``all_reduce``) recursive doubling
    and the unfold of the whole buffer, or (reduce-scatter) of the even ranks' segments."""
    table = Table()
    pof2, rem, core = _core(ranks)
    bounds = np.arange(ranks + 1, dtype=np.int64) * nbytes // ranks
    a = np.arange(pof2, dtype=np.int64)
    if all_reduce:
        b_lo, b_hi = a * nbytes // pof2, (a + 1) * nbytes // pof2
    else:  # core rank a ends with the segments of the rank(s) it stands for
        b_lo, b_hi = bounds[np.where(a < rem, core - 1, core)], bounds[core + 1]
    lo, hi = pieces(0, nbytes, chunks)
    rows = _fold(table, rem, lo, hi, True, False)
    reduces = [Writes.of(rows, (2 * np.arange(rem) + 1)[:, None], lo, hi)]
    last: dict[int, np.ndarray] = {}
    mask = pof2 >> 1
    while mask:
        first = (a ^ mask) & ~(mask - 1)
        lo, hi = pieces(b_lo[first], b_hi[first + mask - 1], chunks)
        rows = table.add(core[:, None], core[a ^ mask][:, None], lo, hi, True)
        _pipe(table, rows)
        read(table, Writes.of(rows, core[:, None], lo, hi), reduces)
        reduces.append(Writes.of(rows, core[a ^ mask][:, None], lo, hi))
        last[mask] = rows[:, -1]
        mask >>= 1
    copies: list[Writes] = []
    mask = 1
    while all_reduce and mask < pof2:
        first = a & ~(mask - 1)
        lo, hi = pieces(b_lo[first], b_hi[first + mask - 1], chunks)
        rows = table.add(core[:, None], core[a ^ mask][:, None], lo, hi, False)
        _pipe(table, rows)
        table.follow(rows[:, 0], last[mask])
        _read_block(table, Writes.of(rows, core[:, None], lo, hi),
                    np.repeat(b_lo, chunks), np.repeat(b_hi, chunks), reduces, copies)
        copies.append(Writes.of(rows, core[a ^ mask][:, None], lo, hi))
        mask <<= 1
    i = np.arange(rem, dtype=np.int64)
    lo, hi = pieces(0, nbytes, chunks) if all_reduce else pieces(bounds[2 * i],
                                                                 bounds[2 * i + 1], chunks)
    rows = _fold(table, rem, lo, hi, False, True)
    _read_block(table, Writes.of(rows, (2 * i + 1)[:, None], lo, hi),
                np.repeat(b_lo[i], chunks), np.repeat(b_hi[i], chunks), reduces, copies)
    return table.columns()


def _read_block(table: Table, reader: Writes, block_lo: np.ndarray, block_hi: np.ndarray,
                reduces: list[Writes], copies: list[Writes]) -> None:
    """The reader's bytes inside its rank's block ``[block_lo, block_hi)`` (per row) were
    only reduced into (every reduce so far waits); the others were last copied in by a
    doubling round."""
    lo = np.broadcast_to(block_lo, reader.rows.shape)
    hi = np.broadcast_to(block_hi, reader.rows.shape)
    inside = Writes(reader.rows, reader.rank, np.maximum(reader.lo, lo),
                    np.minimum(reader.hi, hi))
    read(table, inside, reduces)
    if copies:
        read(table, reader, [join(copies)])
