"""Bidirectional rings: half of every block goes clockwise, the other half counter-clockwise.

A full-duplex ring (or a torus axis) has a link in each direction between neighbours; the
plain ``ring`` uses only the ``i -> i + 1`` one. ``ring_bidirectional`` cuts each rank's block
``[a, b)`` at ``a + floor((b - a) / 2)``: the first half runs the ring schedule of
:mod:`commsim.algorithms.ring` clockwise (rank ``i`` sends to ``i + 1``), the second half the
same schedule counter-clockwise (``i`` sends to ``i - 1``), both at once, so every step moves
half a block over each of the two links of a rank. All-reduce is a reduce-scatter then an
all-gather on both rings. Broadcast and reduce are two pipelined chains, the first half of the
buffer along ``root, root + 1, ...`` and the second along ``root, root - 1, ...`` (reduce: the
same chains towards the root).

On one or two ranks both directions would use the same ordered pairs, so the schedule is the
plain ring's (one ring, whole blocks: on two ranks the ring already uses both directions of the
single link). Zero-byte halves and pieces vanish.

TPU pods run these rings along each torus axis (the JAX scaling book, "How to Scale Your
Model", jax-ml.github.io/scaling-book); the ring schedule itself is Patarasuk & Yuan,
"Bandwidth optimal all-reduce algorithms for clusters of workstations" (JPDC 2009).
"""

from __future__ import annotations

from commsim.algorithms import ring
from commsim.algorithms.base import Call
from commsim.algorithms.plan import Range, pipeline_chunks
from commsim.collectives import Collective
from commsim.schedule import Columns, Schedule

NAME = "ring_bidirectional"


def halves(block: Range) -> tuple[Range, Range]:
    """``[a, b)`` cut at ``a + floor((b - a) / 2)``: the clockwise and counter-clockwise halves.

    >>> halves((10, 15))
    ((10, 12), (12, 15))
    """
    a, b = block
    mid = a + (b - a) // 2
    return (a, mid), (mid, b)


def default_chunks(call: Call) -> int:
    """As ``ring``: 1 for the ring collectives; for the chains ``ceil(n / 2 / 512 KiB)``
    pieces per half (each chain carries half the buffer), at most ``max(64, 4 (p - 1))``."""
    if call.collective.rooted:
        limit = max(ring.MAX_CHAIN_CHUNKS, 4 * (call.ranks - 1))
        return pipeline_chunks(-(-call.nbytes // 2), limit)
    return 1


def build(call: Call) -> Schedule:
    """The bidirectional ring schedule of ``call`` (see the module docstring)."""
    chunks = call.chunks or default_chunks(call)
    return ring.as_schedule(call, NAME, chunks, _columns(call, chunks))


def _columns(call: Call, chunks: int) -> Columns:
    """The schedule :func:`build` describes, made as columns (zero-byte rows kept)."""
    import numpy as np  # NOTE: local, so that importing the registry stays cheap

    from commsim.algorithms import columnar

    p, n, coll, root = call.ranks, call.nbytes, call.collective, call.root
    k = np.arange(p, dtype=np.int64)
    if coll.rooted:
        reduce = coll is Collective.REDUCE
        cw = (root + reduce + k) % p
        if p < 3:
            return columnar.chain(cw, 0, n, chunks, reduce)
        ccw = (root - reduce - k) % p
        first, second = halves((0, n))
        one = columnar.chain(cw, *first, chunks, reduce)
        two = columnar.chain(ccw, *second, chunks, reduce)
        return columnar.concat([one, two])
    starts, stops = columnar.segments(p, n)
    if p < 3:
        rings, lo, hi = k[None, :], starts[None, :], stops[None, :]
    else:
        mid = starts + (stops - starts) // 2                      # halves() of every block
        ccw = -k % p               # counter-clockwise position i holds index -i mod p
        rings = np.stack([k, ccw])
        lo, hi = np.stack([starts, mid[ccw]]), np.stack([mid, stops[ccw]])
    return columnar.ring_steps(rings, lo, hi, chunks, ring.PHASES[coll])
