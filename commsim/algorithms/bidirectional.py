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
single link). Zero-byte halves and pieces vanish in :class:`~commsim.algorithms.plan.Plan`.

TPU pods run these rings along each torus axis (the JAX scaling book, "How to Scale Your
Model", jax-ml.github.io/scaling-book); the ring schedule itself is Patarasuk & Yuan,
"Bandwidth optimal all-reduce algorithms for clusters of workstations" (JPDC 2009).
"""

from __future__ import annotations

from collections.abc import Sequence

from commsim.algorithms import ring
from commsim.algorithms.base import Call
from commsim.algorithms.plan import Plan, Range, pipeline_chunks, split
from commsim.algorithms.ring import Ring, all_gather_steps, reduce_scatter_steps
from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.schedule import Columns, OpKind, Schedule

NAME = "ring_bidirectional"


def halves(block: Range) -> tuple[Range, Range]:
    """``[a, b)`` cut at ``a + floor((b - a) / 2)``: the clockwise and counter-clockwise halves.

    >>> halves((10, 15))
    ((10, 12), (12, 15))
    """
    a, b = block
    mid = a + (b - a) // 2
    return (a, mid), (mid, b)


def counter_clockwise(m: int) -> list[int]:
    """Ring position ``i`` of the counter-clockwise ring holds index ``-i mod m``.

    >>> counter_clockwise(4)
    [0, 3, 2, 1]
    """
    return [(-i) % m for i in range(m)]


def bidirectional_rings(ranks: Sequence[int], blocks: Sequence[Range]) -> list[Ring]:
    """The two rings of a bidirectional ring over ``ranks`` (in ``+`` order), where
    ``ranks[k]`` owns ``blocks[k]``; one ring of whole blocks when ``len(ranks) < 3``."""
    m = len(ranks)
    if m < 3:
        return [(list(ranks), list(blocks))]
    ccw = counter_clockwise(m)
    return [
        (list(ranks), [halves(b)[0] for b in blocks]),
        ([ranks[k] for k in ccw], [halves(blocks[k])[1] for k in ccw]),
    ]


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
    from commsim.algorithms.columnar import drop_empty

    columns = _columns(call, chunks)
    assert columns is not None
    return Schedule.of_columns(call.collective, NAME, call.ranks, call.nbytes, call.root,
                               chunks, drop_empty(columns))


def _columns(call: Call, chunks: int) -> Columns | None:
    """The schedule :func:`build` describes, made as columns (zero-byte rows kept: never
    None)."""
    import numpy as np  # NOTE: local, so that importing the registry stays cheap

    from commsim.algorithms import columnar

    p, n, coll, root = call.ranks, call.nbytes, call.collective, call.root
    k = np.arange(p, dtype=np.int64)
    if coll.rooted:
        reduce = coll is Collective.REDUCE
        cw = (root + reduce + k) % p
        if p < 3:
            return columnar.chain(cw, 0, n, chunks, reduce, keep_empty=True)
        ccw = (root - reduce - k) % p
        first, second = halves((0, n))
        one = columnar.chain(cw, *first, chunks, reduce, keep_empty=True)
        two = columnar.chain(ccw, *second, chunks, reduce, keep_empty=True)
        assert one is not None and two is not None
        return columnar.concat([one, two])
    starts, stops = columnar.segments(p, n)
    if p < 3:
        rings, lo, hi = k[None, :], starts[None, :], stops[None, :]
    else:
        mid = starts + (stops - starts) // 2                      # halves() of every block
        ccw = -k % p                                              # counter_clockwise(p)
        rings = np.stack([k, ccw])
        lo, hi = np.stack([starts, mid[ccw]]), np.stack([mid, stops[ccw]])
    return columnar.ring_steps(rings, lo, hi, chunks, ring.PHASES[coll], keep_empty=True)


def build_objects(call: Call) -> Schedule:
    """:func:`build` one transfer at a time through a :class:`Plan` (where a piece is empty;
    tests compare it with the columns elsewhere)."""
    p, n = call.ranks, call.nbytes
    chunks = call.chunks or default_chunks(call)
    plan = Plan(p, n)
    coll = call.collective
    rings = bidirectional_rings(range(p), [segment(r, p, n) for r in range(p)])
    if coll is Collective.ALL_GATHER:
        all_gather_steps(plan, rings, chunks)
    elif coll is Collective.REDUCE_SCATTER:
        reduce_scatter_steps(plan, rings, chunks)
    elif coll is Collective.ALL_REDUCE:
        reduce_scatter_steps(plan, rings, chunks)
        all_gather_steps(plan, rings, chunks)
    elif coll.rooted:
        root = call.root
        if coll is Collective.BROADCAST:
            cw = [(root + k) % p for k in range(p)]
            ccw = [(root - k) % p for k in range(p)]
            op = OpKind.COPY
        else:
            cw = [(root + 1 + k) % p for k in range(p)]
            ccw = [(root - 1 - k) % p for k in range(p)]
            op = OpKind.REDUCE
        if p < 3:
            _chain(plan, cw, (0, n), chunks, op)
        else:
            first, second = halves((0, n))
            _chain(plan, cw, first, chunks, op)
            _chain(plan, ccw, second, chunks, op)
    else:  # pragma: no cover - every collective is handled above
        raise ScheduleError(f"algorithm {NAME!r} cannot run {coll.value}")
    return plan.schedule(coll, NAME, p, call.root, chunks)


def _chain(plan: Plan, order: list[int], block: Range, chunks: int, op: OpKind) -> None:
    """Pipelined chain of ``block`` along ``order`` (as ``ring``'s chains)."""
    for piece in split(block[0], block[1], chunks):
        for k in range(len(order) - 1):
            plan.send(order[k], order[k + 1], [piece], op)
