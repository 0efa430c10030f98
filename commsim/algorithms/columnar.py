"""Vectorised builders: ring and chain schedules made as :class:`~commsim.schedule.Columns`.

They give exactly the transfers, in the same order and with the same dependencies, that
:class:`~commsim.algorithms.plan.Plan` gives one object at a time (tests compare the two), in
a few numpy operations per schedule instead of several Python calls per transfer. Two
dependencies per transfer are all a ring or chain has: the previous piece on its link and the
piece that brought the data (the ``Plan`` rules).

A zero-byte piece is dropped by ``Plan`` and stands for its own dependencies; these builders
return None when any piece would be empty (a buffer smaller than ``ranks x chunks`` bytes,
small and quick to build the object way) so that every row here is a real transfer.
"""

from __future__ import annotations

import numpy as np

from commsim.schedule import Columns


def _pieces(starts: np.ndarray, stops: np.ndarray, chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and sizes of the floor pieces (``plan.split``) of ranges, shape ``(..., chunks)``."""
    length = (stops - starts)[..., None]
    j = np.arange(chunks + 1, dtype=np.int64)
    cuts = starts[..., None] + j * length // chunks
    return cuts[..., :-1], np.diff(cuts, axis=-1)


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


def ring_steps(ranks: int, nbytes: int, chunks: int, phases: tuple[bool, ...]) -> Columns | None:
    """Ring reduce-scatter (phase ``True``) and/or all-gather (``False``) steps, one after the
    other, as ``commsim.algorithms.ring`` emits them on the ring ``0 -> 1 -> ... -> p-1 -> 0``.

    Transfer ``(g, i, j)`` (global step ``g``, rank ``i``, piece ``j``) is row
    ``(g p + i) c + j``; it follows piece ``j - 1`` (or the previous step's last piece) on its
    link and the same piece from rank ``i - 1`` one step earlier.
    """
    p, c = ranks, chunks
    steps = p - 1
    if steps < 1:
        return None
    g = np.arange(steps * len(phases), dtype=np.int64)[:, None]          # (G, 1)
    i = np.arange(p, dtype=np.int64)[None, :]                             # (1, p)
    local = g % steps
    reduce_step = np.repeat(np.array(phases, dtype=bool), steps)[:, None]
    block = np.where(reduce_step, i - local - 1, i - local) % p           # (G, p)
    bounds = np.arange(p + 1, dtype=np.int64) * nbytes // p               # the segments
    offset, size = _pieces(bounds[:-1], bounds[1:], c)                    # (p, c) per block
    offset, size = offset[block], size[block]
    if size.min() <= 0:
        return None
    shape = size.shape                                                    # (G, p, c)
    row = np.arange(size.size, dtype=np.int64).reshape(shape)
    link_prev = row - 1                                                   # (g, i, j - 1)
    link_prev[1:, :, 0] = row[:-1, :, c - 1]                              # (g - 1, i, c - 1)
    link_prev[0, :, 0] = -1
    data = np.full(shape, -1, dtype=np.int64)
    data[1:] = np.roll(row[:-1], 1, axis=1)                               # (g - 1, i - 1, j)
    ptr, idx = _deps(link_prev.ravel(), data.ravel())
    src = np.broadcast_to(i[..., None], shape)
    level = np.broadcast_to(g[..., None] * c + np.arange(c), shape)
    return Columns(
        src.ravel(), ((src + 1) % p).ravel(), offset.ravel(), size.ravel(),
        np.broadcast_to(reduce_step[..., None], shape).ravel(), ptr, idx, level.ravel(),
    )


def chain(order: np.ndarray, nbytes: int, chunks: int, reduce: bool) -> Columns | None:
    """The pipelined chain ``order[0] -> order[1] -> ...`` of ``commsim.algorithms.ring``:
    row ``j (m - 1) + k`` moves piece ``j`` from ``order[k]`` to ``order[k + 1]`` after piece
    ``j - 1`` on the same link and piece ``j`` into ``order[k]``."""
    hops = len(order) - 1
    if hops < 1:
        return None
    offset, size = _pieces(np.zeros(1, dtype=np.int64), np.full(1, nbytes, dtype=np.int64),
                           chunks)
    if size.min() <= 0:
        return None
    shape = (chunks, hops)
    row = np.arange(chunks * hops, dtype=np.int64).reshape(shape)
    link_prev = np.full(shape, -1, dtype=np.int64)
    link_prev[1:] = row[:-1]
    data = np.full(shape, -1, dtype=np.int64)
    data[:, 1:] = row[:, :-1]
    ptr, idx = _deps(link_prev.ravel(), data.ravel())
    k = np.broadcast_to(np.arange(hops, dtype=np.int64), shape)
    level = k + np.arange(chunks, dtype=np.int64)[:, None]
    return Columns(
        order[:-1][k].ravel(), order[1:][k].ravel(),
        np.broadcast_to(offset.reshape(chunks, 1), shape).ravel(),
        np.broadcast_to(size.reshape(chunks, 1), shape).ravel(),
        np.full(chunks * hops, reduce, dtype=bool), ptr, idx, level.ravel(),
    )
