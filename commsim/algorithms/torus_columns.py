"""``torus`` (:mod:`commsim.algorithms.torus`) built as columns.

Each axis phase is :func:`~commsim.algorithms.columnar.ring_steps` over the bidirectional rings
of every line of the axis; across phases the rules (:mod:`commsim.algorithms.plan`) add what is
spelled out here:

* a phase's first piece on a link follows the last piece an earlier phase sent on it (the
  all-gather along an axis after its reduce-scatter);
* a reduce-scatter piece also waits for every earlier reduce of its bytes into its source
  (reduces add up), and an all-gather's first step for what last wrote the block it sends:
  the reduces into the rank's own segment, the earlier all-gathers' copies elsewhere.
"""

from __future__ import annotations

import math

import numpy as np

from commsim.algorithms.columnar import ring_steps
from commsim.algorithms.rows import Table, Writes, join, read
from commsim.schedule import Columns


def axis_rings(dims: tuple[int, ...], axis: int,
               nbytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bidirectional rings of every line along ``axis`` (:mod:`commsim.algorithms.torus`):
    every ring's ranks and byte ranges, shape ``(R, m)``; one ring per line below 3 ranks.

    >>> [x.tolist() for x in axis_rings((2, 3), 1, 600)[0][2:4]]
    [[3, 4, 5], [3, 5, 4]]
    """
    p = math.prod(dims)
    m = dims[axis]
    stride = math.prod(dims[axis + 1:])
    r = np.arange(p, dtype=np.int64)
    start = r[(r // stride) % m == 0]
    x = np.arange(m, dtype=np.int64)
    ranks = start[:, None] + x * stride                                   # (L, m)
    base = (start - start % (stride * m))[:, None]
    lo, hi = (base + x * stride) * nbytes // p, (base + (x + 1) * stride) * nbytes // p
    if m < 3:
        return ranks, lo, hi
    mid = lo + (hi - lo) // 2
    ccw = -x % m
    rings = np.stack([ranks, ranks[:, ccw]], axis=1).reshape(-1, m)
    los = np.stack([lo, mid[:, ccw]], axis=1).reshape(-1, m)
    his = np.stack([mid, hi[:, ccw]], axis=1).reshape(-1, m)
    return rings, los, his


def torus_columns(dims: tuple[int, ...], nbytes: int, chunks: int, reduce_scatter: bool,
                  all_gather: bool) -> Columns:
    """Reduce-scatter axis by axis, then all-gather in the reverse order (either or both)."""
    p = math.prod(dims)
    order = [a for a, d in enumerate(dims) if d > 1]
    phases = ([(a, True) for a in order] if reduce_scatter else []) + (
        [(a, False) for a in reversed(order)] if all_gather else [])
    table = Table()
    reduces: list[Writes] = []
    copies: list[Writes] = []
    last: dict[int, np.ndarray] = {}               # per axis: its last step's final pieces
    own = np.arange(p + 1, dtype=np.int64) * nbytes // p
    for axis, reduce in phases:
        rings, lo, hi = axis_rings(dims, axis, nbytes)
        cols = ring_steps(rings, lo, hi, chunks, (reduce,))
        rows = table.extend(cols).reshape(-1, *rings.shape, chunks)      # (steps, R, m, c)
        if axis in last:
            table.follow(rows[0, :, :, 0], last[axis])
        last[axis] = rows[-1, :, :, -1]
        src, dst = cols.src.reshape(rows.shape), cols.dst.reshape(rows.shape)
        start, stop = cols.offset.reshape(rows.shape), (cols.offset + cols.nbytes).reshape(
            rows.shape)
        if reduce:
            read(table, Writes.of(rows, src, start, stop), reduces)
        else:
            first = (rows[0], src[0], start[0], stop[0])
            reader = Writes.of(*first)
            inside = Writes(reader.rows, reader.rank, np.maximum(reader.lo, own[reader.rank]),
                            np.minimum(reader.hi, own[reader.rank + 1]))
            read(table, inside, reduces)
            if copies:
                read(table, reader, [join(copies)])
        (reduces if reduce else copies).append(Writes.of(rows, dst, start, stop))
    return table.columns()
