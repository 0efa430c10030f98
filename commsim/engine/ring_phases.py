"""The exact recurrence of lockstep ring phases over explicit blocks (the torus collectives:
one phase per axis, each a clockwise and a counter-clockwise ring per line), with its bound
when the walk would be too long. See ``docs/closed-forms.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commsim.engine.closed_forms import RING_DP_BUDGET, Floats, Ints, piece_table


@dataclass(frozen=True, slots=True)
class RingPhase:
    """One phase of lockstep rings over explicit ranks and byte blocks (a torus axis).

    ``ranks[r, i]`` is the rank at position ``i`` of ring ``r`` (it sends to position
    ``i + 1``); it owns bytes ``[starts[r, i], starts[r, i] + lengths[r, i])``. The phase runs
    ``reduce_steps`` ring reduce-scatter steps then ``copy_steps`` all-gather steps (block
    formula of :func:`ring_steps`, ``shift`` 1 with reduce steps, else 0). Ring ``r``'s pairs
    cost ``alpha[r] + x / beta[r]`` (+ ``gamma x`` reduced). Phases with equal ``key`` use the
    same ordered pairs: the later one continues the earlier one's link chains.
    """

    ranks: Ints
    starts: Ints
    lengths: Ints
    reduce_steps: int
    copy_steps: int
    alpha: Floats
    beta: Floats
    key: object = None

    @property
    def shift(self) -> int:
        return 1 if self.reduce_steps else 0


class _ReadyMap:
    """When each byte of each rank is ready: the builder's data rule over all phases so far.

    Bytes are numbered globally (``rank * n + byte``); ``cuts[k]`` starts a run of bytes that
    is ready at ``times[k]`` (the last copy into it, and every reduce since: their latest end).
    """

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.cuts = np.zeros(1, dtype=np.int64)
        self.times = np.zeros(1)
        self.padded = np.array([0.0, -np.inf])  # times and a sentinel for reduceat

    def query(self, ranks: Ints, start: Ints, stop: Ints) -> Floats:
        """Latest readiness over ``[start, stop)`` of each rank (0 for empty ranges)."""
        out = np.zeros(start.shape)
        keep = stop > start
        if not keep.any():
            return out
        base = ranks[keep] * self.nbytes
        lo = np.searchsorted(self.cuts, base + start[keep], side="right") - 1
        hi = np.searchsorted(self.cuts, base + stop[keep], side="left")
        padded = self.padded
        idx = np.empty(2 * lo.size, dtype=np.int64)
        idx[0::2], idx[1::2] = lo, hi
        out[keep] = np.maximum.reduceat(padded, idx)[0::2]
        return out

    def write(self, gstart: Ints, gstop: Ints, ends: Floats, reduce: bool) -> None:
        """Disjoint writes ``[gstart, gstop)`` ending at ``ends``: a copy replaces the bytes'
        readiness, a reduce adds to it."""
        if gstart.size == 0:
            return
        order = np.argsort(gstart, kind="stable")
        gstart, gstop, ends = gstart[order], gstop[order], ends[order]
        cuts = np.concatenate([self.cuts, gstart, gstop])
        cuts.sort()
        cuts = cuts[np.concatenate([[True], cuts[1:] != cuts[:-1]])]
        old = self.times[np.searchsorted(self.cuts, cuts, side="right") - 1]
        k = np.searchsorted(gstart, cuts, side="right") - 1
        hit = (k >= 0) & (gstop[np.maximum(k, 0)] > cuts)
        new = ends[np.maximum(k, 0)]
        if reduce:
            new = np.maximum(new, old)
        times = np.where(hit, new, old)
        keep = np.concatenate([[True], times[1:] != times[:-1]])  # merge equal neighbours
        self.cuts, self.times = cuts[keep], times[keep]
        self.padded = np.append(self.times, -np.inf)


def ring_phases(
    nbytes: int, chunks: int, phases: list[RingPhase], gamma: float, budget: int = RING_DP_BUDGET
) -> float:
    """Longest path of a sequence of :class:`RingPhase` (the ``torus`` algorithm's graph).

    Within a phase the (step, piece) recurrence of :func:`ring_steps` runs, vectorised over
    rings and positions; a transfer also waits for its bytes' readiness left by the earlier
    phases (every reduce step reads it, as does the first step after them), which
    :class:`_ReadyMap` keeps per byte range. Above ``budget`` transfers the phases are summed,
    each as ``steps x pieces`` of its heaviest piece: an upper bound.
    """
    cells = sum(
        ph.ranks.size * (ph.reduce_steps + ph.copy_steps) * chunks
        for ph in phases
        if ph.ranks.shape[1] > 1
    )
    if cells > budget:
        return _ring_phases_bound(chunks, phases, gamma)
    ready = _ReadyMap(nbytes)
    links: dict[object, Floats] = {}
    time_s = 0.0
    j = np.arange(chunks + 1, dtype=np.int64)
    for ph in phases:
        rings, m = ph.ranks.shape
        if m < 2:
            continue
        cut = ph.starts[..., None] + (ph.lengths[..., None] * j) // chunks  # (R, m, c + 1)
        alpha, beta = ph.alpha[:, None], ph.beta[:, None]
        link = links.get(ph.key, np.zeros((rings, m)))
        dst = np.roll(ph.ranks, -1, axis=1)
        pos = np.arange(m)
        prev: list[Floats] = []
        written: dict[bool, list[tuple[Ints, Ints, Floats]]] = {True: [], False: []}
        for t in range(ph.reduce_steps + ph.copy_steps):
            reduce = t < ph.reduce_steps
            block = (pos - t - ph.shift) % m
            cur = []
            for jj in range(chunks):
                a, b = cut[:, block, jj], cut[:, block, jj + 1]
                size = b - a
                data = ready.query(ph.ranks, a, b) if t <= ph.reduce_steps else 0.0
                if t:
                    data = np.maximum(data, np.roll(prev[jj], 1, axis=1))
                cost = alpha + size / beta + (gamma * size if reduce else 0.0)
                link = np.where(size > 0, np.maximum(link, data) + cost, link)
                cur.append(link)
                full = size > 0
                written[reduce].append(
                    (dst[full] * nbytes + a[full], dst[full] * nbytes + b[full], link[full])
                )
            prev = cur
        links[ph.key] = link
        time_s = max(time_s, float(link.max()))
        for reduce in (True, False):
            if written[reduce]:
                gs, ge, ends = (np.concatenate(x) for x in zip(*written[reduce], strict=True))
                ready.write(gs, ge, ends, reduce)
    return time_s


def _ring_phases_bound(chunks: int, phases: list[RingPhase], gamma: float) -> float:
    time_s = 0.0
    for ph in phases:
        if ph.ranks.shape[1] < 2:
            continue
        top = piece_table(ph.lengths, chunks).max(axis=(1, 2))  # per ring
        copy = ph.alpha + top / ph.beta
        reduce = copy + gamma * top
        w_r = float(np.where(top > 0, reduce, 0.0).max())
        w_c = float(np.where(top > 0, copy, 0.0).max())
        time_s += chunks * (ph.reduce_steps * w_r + ph.copy_steps * w_c)
    return time_s
