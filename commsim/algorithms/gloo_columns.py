"""gloo's algorithms (:mod:`commsim.algorithms.gloo`) built as columns.

gloo's transfers carry their dependencies whole (``ScheduleBuilder``: a zero-byte transfer,
such as a segment past the end of the buffer, stands for all of them), so every dependency here
is a :meth:`~commsim.algorithms.rows.Table.follow`. Per ring iteration ``i`` and rank ``r``
(sending to ``r - 1``): the last write of the segment it sends into ``r``, the sends of
iteration ``i - 2`` of ``r`` and of ``r + 1`` (both of the last two, at a phase's first two
iterations), and the ranks' local copies (gates).
"""

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import pieces
from commsim.algorithms.rows import Table
from commsim.schedule import Columns


class _Ring:
    """gloo's segmented ring: ``p`` ranks, ``per_rank`` segments of ``seg`` bytes each."""

    def __init__(self, table: Table, ranks: int, nbytes: int, seg: int, per_rank: int,
                 gate: np.ndarray | None) -> None:
        self.table, self.p, self.n, self.seg, self.s = table, ranks, nbytes, seg, per_rank
        self.gate = gate
        self.phases: list[tuple[int, np.ndarray]] = []     # (first, rows (I, p))

    def bounds(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = np.minimum(k * self.seg, self.n)
        return start, np.minimum(start + self.seg, self.n)

    def history(self) -> np.ndarray:
        """Every send so far, by iteration (rows ``(I, p)``)."""
        if not self.phases:
            return np.zeros((0, self.p), dtype=np.int64)
        return np.concatenate([rows for _, rows in self.phases])

    def phase(self, first: int, iterations: int, reduce: bool) -> None:
        """At iteration ``i`` rank ``r`` sends segment ``((r + first) S + i) mod pS``; past
        the ``(p - 1) S`` the ring needs, as copies."""
        p, s, t = self.p, self.s, self.table
        i = np.arange(iterations, dtype=np.int64)[:, None]
        r = np.arange(p, dtype=np.int64)[None, :]
        start, stop = self.bounds(((r + first) * s + i) % (p * s))
        before = self.history()
        rows = t.add(r, (r - 1) % p, start, stop, reduce & (i < (p - 1) * s))
        up = (r + 1) % p
        shape = rows.shape
        # the last write of the segment into r: from r + 1, S iterations ago, or before
        own = i >= s
        t.follow(rows[np.broadcast_to(own, shape)], rows[(i - s) % iterations, up][
            np.broadcast_to(own, shape)])
        if self.phases:
            back, prev = self.phases[-1]
            j = ((first - 1 - back) * s + i) % (p * s)
            ok = np.broadcast_to((~own) & (j < len(prev)), shape)
            t.follow(rows[ok], prev[np.minimum(j, len(prev) - 1), up][ok])
        # the sends of iteration i - 2 (and i - 1 at a phase's first two) of r and r + 1
        hist = np.concatenate([before, rows])
        g = len(before) + i
        for lag in (1, 2):
            ok = np.broadcast_to((g - lag >= 0) & ((lag == 2) | (i < 2)), shape)
            for who in (r, up):
                t.follow(rows[ok], np.broadcast_to(hist[np.maximum(g - lag, 0), who], shape)[ok])
        if self.gate is not None:
            t.follow(rows, self.gate[r])
            t.follow(rows, self.gate[(r - 1) % p])
        self.phases.append((first, rows))

    def touching(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(rank, row) of every send from or to each rank."""
        hist = self.history()
        r = np.broadcast_to(np.arange(self.p, dtype=np.int64), hist.shape)
        return [(r, hist), ((r - 1) % self.p, hist)]

    def gather(self, root: int) -> None:
        """Each rank but ``root`` sends its reduced chunk to ``root`` after its loop."""
        p, s, t = self.p, self.s, self.table
        rest = np.array([r for r in range(p) if r != root], dtype=np.int64)
        lo, _ = self.bounds(rest * s)
        _, hi = self.bounds((rest + 1) * s - 1)
        rows = t.add(rest, root, lo, hi, False)
        hist = self.history()
        k = np.arange(s, dtype=np.int64)
        t.follow(rows[:, None], hist[(p - 2) * s + k][:, (rest + 1) % p].T)
        for who in (rest, (rest + 1) % p, np.full_like(rest, root), np.full_like(rest,
                                                                                 (root + 1) % p)):
            for lag in (1, 2):
                if len(hist) >= lag:
                    t.follow(rows, hist[len(hist) - lag, who])


def ring_columns(ranks: int, nbytes: int, seg: int, per_rank: int, kind: str,
                 root: int = 0) -> Columns:
    """``all_reduce``, ``reduce_scatter`` (with the clone and the copy out) or ``reduce``
    (``reduce.cc``'s redundant iterations, then the gather to ``root``)."""
    table = Table()
    p, s = ranks, per_rank
    gate = None
    if kind == "reduce_scatter":
        gate = table.add(np.arange(p), np.arange(p), 0, nbytes, False)     # the clones
    ring = _Ring(table, p, nbytes, seg, s, gate)
    needed = (p - 1) * s
    ring.phase(1, max(p * s - 2, needed) if kind == "reduce" else needed, True)
    if kind == "reduce":
        ring.gather(root)
        return table.columns()
    ring.phase(0, needed, False)
    if kind == "reduce_scatter":
        bounds = np.arange(p + 1, dtype=np.int64) * nbytes // p
        out = table.add(np.arange(p), np.arange(p), bounds[:-1], bounds[1:], False)
        for who, rows in ring.touching():
            table.follow(out[who], rows)
    return table.columns()


def all_gather_columns(ranks: int, nbytes: int, chunks: int) -> Columns:
    """PyTorch's copy in, gloo's ring all-gather (``r`` sends to ``r + 1``, piece
    ``i mod chunks`` of block ``r - i // chunks`` at iteration ``i``), the copy out."""
    table = Table()
    p, c = ranks, chunks
    r = np.arange(p, dtype=np.int64)
    bounds = r * nbytes // p
    ends = (r + 1) * nbytes // p
    gate = table.add(r, r, bounds, ends, False)
    lo, hi = pieces(bounds, ends, c)                                      # (p, c)
    i = np.arange(c * (p - 1), dtype=np.int64)[:, None]
    block, half = (r - i // c) % p, np.broadcast_to(i % c, (len(i), p))
    rows = table.add(r, (r + 1) % p, lo[block, half], hi[block, half], False)
    shape = rows.shape
    down = (r - 1) % p
    has = np.broadcast_to(i >= c, shape)
    table.follow(rows[has], rows[(i - c) % len(i), down][has])
    table.follow(rows, gate[r])
    table.follow(rows, gate[(r + 1) % p])
    old = np.broadcast_to(i >= 2, shape)
    table.follow(rows[old], rows[(i - 2) % len(i), r][old])
    table.follow(rows[old], rows[(i - 2) % len(i), down][old])
    out = table.add(r, r, 0, nbytes, False)
    table.follow(out, gate)
    table.follow(np.broadcast_to(out, shape), rows)
    table.follow(np.broadcast_to(out, shape), rows[:, down])
    return table.columns()


def broadcast_columns(ranks: int, nbytes: int, root: int, chunks: int) -> Columns:
    """gloo's binomial broadcast, piece by piece: round ``t`` (``2^t``), virtual rank
    ``v < 2^t`` sends to ``v + 2^t`` once it has the piece and the previous piece left on
    the same pair."""
    table = Table()
    p = ranks
    lo, hi = pieces(0, nbytes, chunks)
    v = np.arange(1, p, dtype=np.int64)                                   # receivers
    step = np.ones_like(v)                       # the round v receives in: 2^floor(log2 v)
    while np.any(2 * step <= v):
        step = np.where(2 * step <= v, step << 1, step)
    sender = v - step
    order = np.lexsort((sender, step))                                    # round, then v
    pos = np.empty(p, dtype=np.int64)
    pos[v[order]] = np.arange(p - 1)                                      # by receiver
    j = np.arange(chunks, dtype=np.int64)[:, None]
    rows = table.add(((sender[order] + root) % p)[None, :], ((v[order] + root) % p)[None, :],
                     lo[:, None], hi[:, None], False)                     # (c, p - 1)
    fed = sender[order] > 0
    table.follow(rows[:, fed], rows[j, pos[sender[order][fed]]])
    table.follow(rows[1:], rows[:-1])
    return table.columns()
