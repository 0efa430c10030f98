"""Recursive doubling and Rabenseifner's algorithm (Thakur, Rabenseifner & Gropp, 2005).

Both run on ``p' = 2^floor(log2 p)`` *core* ranks and fold the ``rem = p - p'`` others in, as
MPICH does: for ``i < rem``, even rank ``2i`` first hands its data to odd rank ``2i + 1`` and sits
out; the core ranks are then numbered ``a = 0..p'-1``, core rank ``a`` being rank ``2a + 1`` for
``a < rem`` and rank ``a + rem`` otherwise; at the end each odd ``2i + 1`` hands the result back
to ``2i``. Core rank ``a``'s partner at distance ``m`` is ``a XOR m``.

* ``recursive_doubling``: all-reduce exchanges the whole buffer at distances 1, 2, 4, ...;
  all-gather exchanges what each rank has gathered so far, doubling every step.
* ``rabenseifner``: reduce-scatter by recursive halving (distances p'/2, ..., 1; each rank keeps
  the half of its window holding its own block and reduces the other half into its partner),
  then, for all-reduce, all-gather by recursive doubling (distances 1, ..., p'/2).
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.algorithms.plan import Plan, Range, runs
from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.schedule import OpKind, Schedule

DOUBLING = "recursive_doubling"
DOUBLING_COLLECTIVES = frozenset({Collective.ALL_REDUCE, Collective.ALL_GATHER})
RABENSEIFNER = "rabenseifner"
RABENSEIFNER_COLLECTIVES = frozenset({Collective.ALL_REDUCE, Collective.REDUCE_SCATTER})


def fold(ranks: int) -> tuple[list[int], list[tuple[int, int]]]:
    """Core ranks (rank of each core index) and the ``(even, odd)`` pairs folded together.

    >>> fold(6)
    ([1, 3, 4, 5], [(0, 1), (2, 3)])
    """
    pof2 = 1 << (ranks.bit_length() - 1)
    rem = ranks - pof2
    core = [2 * a + 1 if a < rem else a + rem for a in range(pof2)]
    return core, [(2 * i, 2 * i + 1) for i in range(rem)]


def default_chunks(call: Call) -> int:
    """1: no pipelining unless ``--chunks`` asks for it."""
    return 1


def build_recursive_doubling(call: Call) -> Schedule:
    """Recursive-doubling all-reduce or all-gather (see the module docstring), built as
    columns (:mod:`commsim.algorithms.recursive_columns`)."""
    if call.collective not in DOUBLING_COLLECTIVES:
        raise ScheduleError(f"algorithm {DOUBLING!r} cannot run {call.collective.value}")
    from commsim.algorithms import recursive_columns

    chunks = call.chunks or default_chunks(call)
    make = (recursive_columns.doubling_all_reduce if call.collective is Collective.ALL_REDUCE
            else recursive_columns.doubling_all_gather)
    return Schedule.of_columns(call.collective, DOUBLING, call.ranks, call.nbytes, call.root,
                               chunks, make(call.ranks, call.nbytes, chunks))


def build_rabenseifner(call: Call) -> Schedule:
    """Rabenseifner all-reduce or reduce-scatter (see the module docstring), built as columns
    (:func:`commsim.algorithms.recursive_columns.rabenseifner`)."""
    if call.collective not in RABENSEIFNER_COLLECTIVES:
        raise ScheduleError(f"algorithm {RABENSEIFNER!r} cannot run {call.collective.value}")
    from commsim.algorithms import recursive_columns

    chunks = call.chunks or default_chunks(call)
    columns = recursive_columns.rabenseifner(call.ranks, call.nbytes, chunks,
                                             call.collective is Collective.ALL_REDUCE)
    return Schedule.of_columns(call.collective, RABENSEIFNER, call.ranks, call.nbytes,
                               call.root, chunks, columns)


def build_recursive_doubling_objects(call: Call) -> Schedule:
    """:func:`build_recursive_doubling` one transfer at a time through a :class:`Plan` (tests
    compare the two)."""
    if call.collective not in DOUBLING_COLLECTIVES:
        raise ScheduleError(f"algorithm {DOUBLING!r} cannot run {call.collective.value}")
    p, n = call.ranks, call.nbytes
    chunks = call.chunks or default_chunks(call)
    plan = Plan(p, n)
    core, pairs = fold(p)
    full = [(0, n)]
    if call.collective is Collective.ALL_REDUCE:
        for even, odd in pairs:
            plan.send_pieces(even, odd, full, OpKind.REDUCE, chunks)
        mask = 1
        while mask < len(core):
            for a in range(len(core)):
                if a < a ^ mask:
                    plan.exchange(core[a], core[a ^ mask], full, OpKind.REDUCE, chunks)
            mask <<= 1
        for even, odd in pairs:
            plan.send_pieces(odd, even, full, OpKind.COPY, chunks)
    else:
        segs = [segment(r, p, n) for r in range(p)]
        for even, odd in pairs:
            plan.send_pieces(even, odd, [segs[even]], OpKind.COPY, chunks)
        # owned[a]: the segments core rank a holds before the core starts.
        owned = [
            [segs[r - 1], segs[r]] if a < len(pairs) else [segs[r]] for a, r in enumerate(core)
        ]
        mask = 1
        while mask < len(core):
            for a in range(len(core)):
                window = a & ~(mask - 1)
                held = runs(s for b in range(window, window + mask) for s in owned[b])
                plan.send_pieces(core[a], core[a ^ mask], held, OpKind.COPY, chunks)
            mask <<= 1
        for even, odd in pairs:
            rest = [(0, segs[even][0]), (segs[even][1], n)]
            plan.send_pieces(odd, even, runs(rest), OpKind.COPY, chunks)
    return plan.schedule(call.collective, DOUBLING, p, call.root, chunks)


def build_rabenseifner_objects(call: Call) -> Schedule:
    """:func:`build_rabenseifner` one transfer at a time through a :class:`Plan` (tests
    compare the two)."""
    if call.collective not in RABENSEIFNER_COLLECTIVES:
        raise ScheduleError(f"algorithm {RABENSEIFNER!r} cannot run {call.collective.value}")
    p, n = call.ranks, call.nbytes
    chunks = call.chunks or default_chunks(call)
    plan = Plan(p, n)
    core, pairs = fold(p)
    pof2 = len(core)
    full = [(0, n)]
    segs = [segment(r, p, n) for r in range(p)]
    blocks: list[Range]
    if call.collective is Collective.ALL_REDUCE:
        blocks = [segment(a, pof2, n) for a in range(pof2)]
    else:  # core rank a ends with the segments of the rank(s) it stands for
        blocks = [
            (segs[r - 1][0], segs[r][1]) if a < len(pairs) else segs[r] for a, r in enumerate(core)
        ]

    def window(first: int, count: int) -> list[Range]:
        return [(blocks[first][0], blocks[first + count - 1][1])]

    for even, odd in pairs:
        plan.send_pieces(even, odd, full, OpKind.REDUCE, chunks)
    mask = pof2 >> 1
    while mask:  # recursive halving: hand the partner's half of my window to the partner
        for a in range(pof2):
            b = a ^ mask
            plan.send_pieces(core[a], core[b], window(b & ~(mask - 1), mask), OpKind.REDUCE, chunks)
        mask >>= 1
    if call.collective is Collective.ALL_REDUCE:
        mask = 1
        while mask < pof2:  # recursive doubling: send my window, receive my partner's
            for a in range(pof2):
                plan.send_pieces(
                    core[a], core[a ^ mask], window(a & ~(mask - 1), mask), OpKind.COPY, chunks
                )
            mask <<= 1
        for even, odd in pairs:
            plan.send_pieces(odd, even, full, OpKind.COPY, chunks)
    else:
        for even, odd in pairs:
            plan.send_pieces(odd, even, [segs[even]], OpKind.COPY, chunks)
    return plan.schedule(call.collective, RABENSEIFNER, p, call.root, chunks)
