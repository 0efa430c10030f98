"""Vectorised builders: ring and chain schedules made as :class:`~commsim.schedule.Columns`.

They follow the rules of :mod:`commsim.algorithms.plan` in a few numpy operations per
schedule. Two dependencies per transfer are all a ring or chain has: the previous piece on its
link and the piece that brought the data.

A zero-byte piece is made as a row and then dropped, standing for its own dependencies
(:func:`drop_empty`); :func:`assemble` does both for a builder's rows.
"""

from __future__ import annotations

import numpy as np

from commsim.schedule import Columns


def pieces(lo: np.ndarray | int, hi: np.ndarray | int,
           chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``plan.split`` pieces of ranges ``[lo, hi)``: their bounds, shape ``(..., chunks)``.

    >>> [x.tolist() for x in pieces(0, 10, 3)]
    [[0, 3, 6], [3, 6, 10]]
    """
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    j = np.arange(chunks + 1, dtype=np.int64)
    cuts = lo[..., None] + j * (hi - lo)[..., None] // chunks
    return cuts[..., :-1], cuts[..., 1:]


def _pieces(starts: np.ndarray, stops: np.ndarray, chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and sizes of :func:`pieces`."""
    lo, hi = pieces(starts, stops, chunks)
    return lo, hi - lo


def _deps(link_prev: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of at most two dependencies per transfer (-1: none), each row sorted."""
    one = (link_prev < 0) | (data < 0)
    pair = np.empty((len(data), 2), dtype=np.int64)
    np.minimum(link_prev, data, out=pair[:, 0])
    np.maximum(link_prev, data, out=pair[:, 1])
    pair[one, 0] = -1                     # a missing one is -1: the other is the maximum
    counts = 2 - one - (pair[:, 1] < 0)
    ptr = np.zeros(len(pair) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    flat = pair.ravel()
    return ptr, flat[flat >= 0]


def ring_steps(rings: np.ndarray, starts: np.ndarray, stops: np.ndarray, chunks: int,
               phases: tuple[bool, ...]) -> Columns:
    """Reduce-scatter (phase ``True``) and/or all-gather (``False``) steps on rings of equal
    length ``m``, one phase after the other, emitted in lockstep across the rings as
    :mod:`commsim.algorithms.lockstep` describes them (a ring at a time per step).

    ``rings[r]`` lists ring ``r``'s ranks in ring order; position ``k`` of it owns the bytes
    ``[starts[r, k], stops[r, k])``. The rings must use distinct ordered pairs and disjoint
    bytes (a ring's or a bidirectional ring's), so that a piece waits only on its own ring.
    Transfer ``(g, r, i, j)`` (global step, ring, position, piece) is row
    ``((g R + r) m + i) c + j``; it follows piece ``j - 1`` (or the previous step's last
    piece) on its link and the same piece from position ``i - 1`` one step earlier.

    Where a piece is empty its zero-byte rows are made all the same (reading nothing: no data
    dependency), for :func:`drop_empty` to drop.
    """
    c = chunks
    n_rings, m = rings.shape
    steps = m - 1
    if steps < 1:
        return nothing()
    g = np.arange(steps * len(phases), dtype=np.int64)[:, None, None]    # (G, 1, 1)
    i = np.arange(m, dtype=np.int64)[None, None, :]                       # (1, 1, m)
    r = np.arange(n_rings, dtype=np.int64)[None, :, None]                 # (1, R, 1)
    local = g % steps
    reduce_step = np.repeat(np.array(phases, dtype=bool), steps)[:, None, None]
    block = np.where(reduce_step, i - local - 1, i - local) % m          # (G, 1, m)
    offset, size = _pieces(starts, stops, c)                              # (R, m, c)
    offset, size = offset[r, block], size[r, block]                       # (G, R, m, c)
    shape = size.shape
    row = np.arange(size.size, dtype=np.int64).reshape(shape)
    link_prev = row - 1                                                   # (g, r, i, j - 1)
    link_prev[1:, :, :, 0] = row[:-1, :, :, c - 1]                        # (g - 1, r, i, c - 1)
    link_prev[0, :, :, 0] = -1
    data = np.full(shape, -1, dtype=np.int64)
    data[1:] = np.roll(row[:-1], 1, axis=2)                               # (g - 1, r, i - 1, j)
    data[size <= 0] = -1
    ptr, idx = _deps(link_prev.ravel(), data.ravel())
    src = np.broadcast_to(rings[r, i][..., None], shape)
    dst = np.broadcast_to(rings[r, (i + 1) % m][..., None], shape)
    level = np.broadcast_to(g[..., None] * c + np.arange(c), shape)
    return Columns(
        src.ravel(), dst.ravel(), offset.ravel(), size.ravel(),
        np.broadcast_to(reduce_step[..., None], shape).ravel(), ptr, idx, level.ravel(),
    )


def nothing() -> Columns:
    """A schedule of no transfers."""
    none = np.zeros(0, dtype=np.int64)
    return Columns(none, none, none, none, none.astype(bool), np.zeros(1, dtype=np.int64), none,
                   none)


def concat(parts: list[Columns]) -> Columns:
    """Schedules one after the other in row order (later rows' dependencies shifted)."""
    shift = np.cumsum([0] + [len(part) for part in parts[:-1]])
    ptr_shift = np.cumsum([0] + [len(part.dep_idx) for part in parts[:-1]])
    levels = [part.level for part in parts]

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(part, name) for part in parts])

    return Columns(
        joined("src"), joined("dst"), joined("offset"), joined("nbytes"), joined("reduce"),
        np.concatenate([parts[0].dep_ptr[:1]] + [part.dep_ptr[1:] + k
                                                 for part, k in zip(parts, ptr_shift,
                                                                    strict=True)]),
        np.concatenate([part.dep_idx + k for part, k in zip(parts, shift, strict=True)]),
        None if any(level is None for level in levels) else joined("level"),
    )


def segments(ranks: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Every rank's segment ``[r n // p, (r + 1) n // p)`` (``collectives.segment``)."""
    bounds = np.arange(ranks + 1, dtype=np.int64) * nbytes // ranks
    return bounds[:-1], bounds[1:]


def chain(order: np.ndarray, start: int, stop: int, chunks: int,
          reduce: bool) -> Columns:
    """The pipelined chain of bytes ``[start, stop)`` along ``order[0] -> order[1] -> ...``
    of ``commsim.algorithms.ring``: row ``j (m - 1) + k`` moves piece ``j`` from
    ``order[k]`` to ``order[k + 1]`` after piece ``j - 1`` on the same link and piece ``j``
    into ``order[k]`` (empty pieces: as :func:`ring_steps`)."""
    hops = len(order) - 1
    if hops < 1:
        return nothing()
    offset, size = _pieces(np.full(1, start, dtype=np.int64), np.full(1, stop, dtype=np.int64),
                           chunks)
    shape = (chunks, hops)
    row = np.arange(chunks * hops, dtype=np.int64).reshape(shape)
    link_prev = np.full(shape, -1, dtype=np.int64)
    link_prev[1:] = row[:-1]
    data = np.full(shape, -1, dtype=np.int64)
    data[:, 1:] = row[:, :-1]
    data[size.reshape(chunks) <= 0] = -1
    ptr, idx = _deps(link_prev.ravel(), data.ravel())
    k = np.broadcast_to(np.arange(hops, dtype=np.int64), shape)
    level = k + np.arange(chunks, dtype=np.int64)[:, None]
    return Columns(
        order[:-1][k].ravel(), order[1:][k].ravel(),
        np.broadcast_to(offset.reshape(chunks, 1), shape).ravel(),
        np.broadcast_to(size.reshape(chunks, 1), shape).ravel(),
        np.full(chunks * hops, reduce, dtype=bool), ptr, idx, level.ravel(),
    )


def from_pairs(rows: int, owner: np.ndarray, deps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the dependencies ``deps[k]`` of rows ``owner[k]`` over ``rows`` rows, each row's
    list sorted and without repeats."""
    key = np.sort(owner.astype(np.int64) * max(rows, 1) + deps)
    if len(key) > 1:
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]       # one per pair
    owner, deps = np.divmod(key, max(rows, 1))
    ptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=rows), out=ptr[1:])
    return ptr, deps


Pairs = list[tuple[np.ndarray, np.ndarray]]


def assemble(src: np.ndarray, dst: np.ndarray, offset: np.ndarray, nbytes: np.ndarray,
             reduce: np.ndarray, link: Pairs, data: Pairs) -> Columns:
    """Rows and their dependencies (:mod:`commsim.algorithms.plan`'s rules), zero-byte rows
    included; then
    :func:`drop_empty`. ``link`` and ``data`` are ``(rows, deps)`` pairs: the previous piece on
    a row's link (or what it must follow), and the transfers that last wrote its bytes
    (ignored for a zero-byte row, which reads no byte)."""
    rows = len(src)
    real = nbytes > 0
    data = [(r[real[r]], d[real[r]]) for r, d in data]
    pairs = [(r, d) for r, d in link + data if len(r)]
    owner = np.concatenate([r for r, _ in pairs]) if pairs else np.zeros(0, dtype=np.int64)
    deps = np.concatenate([d for _, d in pairs]) if pairs else np.zeros(0, dtype=np.int64)
    ptr, idx = from_pairs(rows, owner.astype(np.int64), deps.astype(np.int64))
    return drop_empty(Columns(src, dst, offset, nbytes, reduce, ptr, idx))


def drop_empty(cols: Columns) -> Columns:
    """``cols`` without its zero-byte rows, each standing for its own dependencies as
    ``ScheduleBuilder`` has it (rows renumbered, lists kept sorted)."""
    empty = cols.nbytes <= 0
    if not empty.any():
        return cols
    ptr, idx = cols.dep_ptr.tolist(), cols.dep_idx.tolist()
    hollow = empty.tolist()
    through: dict[int, list[int]] = {}
    for row in np.flatnonzero(empty).tolist():  # in order: a row's deps come first
        out: set[int] = set()
        for dep in idx[ptr[row]:ptr[row + 1]]:
            if hollow[dep]:
                out.update(through[dep])
            else:
                out.add(dep)
        through[row] = sorted(out)
    owner = np.repeat(np.arange(len(cols), dtype=np.int64), np.diff(cols.dep_ptr))
    kept = ~empty[owner]
    direct = kept & ~empty[cols.dep_idx]
    hit = np.flatnonzero(kept & empty[cols.dep_idx])
    lists = [through[d] for d in cols.dep_idx[hit].tolist()]
    extra = np.fromiter((d for lst in lists for d in lst), dtype=np.int64,
                        count=sum(map(len, lists)))
    extra_owner = np.repeat(owner[hit], [len(lst) for lst in lists])
    renumber = np.cumsum(~empty) - 1
    keep_rows = np.flatnonzero(~empty)
    ptr2, idx2 = from_pairs(len(keep_rows),
                            renumber[np.concatenate([owner[direct], extra_owner])],
                            renumber[np.concatenate([cols.dep_idx[direct], extra])])
    return Columns(cols.src[keep_rows], cols.dst[keep_rows], cols.offset[keep_rows],
                   cols.nbytes[keep_rows], cols.reduce[keep_rows], ptr2, idx2,
                   None if cols.level is None else cols.level[keep_rows],
                   None if cols.origin is None else cols.origin[keep_rows])
