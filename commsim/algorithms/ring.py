"""Ring algorithms: rank ``i`` sends only to rank ``i + 1 (mod p)``, as NCCL's rings do.

All-gather and reduce-scatter take ``p - 1`` steps of one segment each; all-reduce is a
reduce-scatter followed by an all-gather (``2(p - 1)`` steps). Broadcast and reduce are
pipelined chains: from the root along the ring, and along the ring into the root.
"""

from __future__ import annotations

from collections.abc import Sequence

from commsim.algorithms.base import Call
from commsim.algorithms.plan import Plan, Range, pipeline_chunks, split
from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.schedule import Columns, OpKind, Schedule

NAME = "ring"
#: Upper bound of the default piece count of the pipelined chains (broadcast, reduce).
MAX_CHAIN_CHUNKS = 64

#: A ring: its ranks in ring order, and the block of bytes each one ends up owning.
Ring = tuple[Sequence[int], Sequence[Range]]


def reduce_scatter_steps(plan: Plan, rings: Sequence[Ring], chunks: int) -> None:
    """Ring reduce-scatter on every ring, steps emitted in lockstep across the rings.

    At step ``s`` (0-based) position ``i`` of a ring of ``m`` ranks reduces block
    ``(i - s - 1) mod m`` into position ``i + 1``, in ``chunks`` pieces; after ``m - 1`` steps
    position ``i`` holds block ``i`` reduced over the whole ring.
    """
    _ring_steps(plan, rings, chunks, OpKind.REDUCE, shift=1)


def all_gather_steps(plan: Plan, rings: Sequence[Ring], chunks: int) -> None:
    """Ring all-gather: at step ``s`` position ``i`` copies block ``(i - s) mod m`` onwards."""
    _ring_steps(plan, rings, chunks, OpKind.COPY, shift=0)


def _ring_steps(plan: Plan, rings: Sequence[Ring], chunks: int, op: OpKind, shift: int) -> None:
    longest = max((len(ranks) for ranks, _ in rings), default=0)
    for step in range(longest - 1):
        for ranks, blocks in rings:
            m = len(ranks)
            if step >= m - 1:
                continue
            for i in range(m):
                block = blocks[(i - step - shift) % m]
                plan.send_pieces(ranks[i], ranks[(i + 1) % m], [block], op, chunks)


#: The ring collectives as phases of :func:`commsim.algorithms.columnar.ring_steps`
#: (``True``: a reduce-scatter phase, ``False``: an all-gather phase).
PHASES = {Collective.ALL_GATHER: (False,), Collective.REDUCE_SCATTER: (True,),
          Collective.ALL_REDUCE: (True, False)}


def default_chunks(call: Call) -> int:
    """1 (one segment per step), except the chains: ``ceil(n / 512 KiB)`` pieces, at most
    ``max(64, 4 (p - 1))`` so that a long chain's fill time stays small beside its pieces."""
    if call.collective.rooted:
        return pipeline_chunks(call.nbytes, max(MAX_CHAIN_CHUNKS, 4 * (call.ranks - 1)))
    return 1


def build(call: Call) -> Schedule:
    """The ring schedule of ``call`` (see the module docstring)."""
    chunks = call.chunks or default_chunks(call)
    from commsim.algorithms.columnar import drop_empty

    columns = _columns(call, chunks)
    assert columns is not None
    return Schedule.of_columns(call.collective, NAME, call.ranks, call.nbytes, call.root,
                               chunks, drop_empty(columns))


def build_objects(call: Call) -> Schedule:
    """:func:`build` one :class:`~commsim.schedule.Transfer` at a time, through a
    :class:`Plan` (where a piece is empty; tests compare it with the columns elsewhere)."""
    p, n = call.ranks, call.nbytes
    chunks = call.chunks or default_chunks(call)
    plan = Plan(p, n)
    ring: Ring = (range(p), [segment(r, p, n) for r in range(p)])
    coll = call.collective
    if coll is Collective.ALL_GATHER:
        all_gather_steps(plan, [ring], chunks)
    elif coll is Collective.REDUCE_SCATTER:
        reduce_scatter_steps(plan, [ring], chunks)
    elif coll is Collective.ALL_REDUCE:
        reduce_scatter_steps(plan, [ring], chunks)
        all_gather_steps(plan, [ring], chunks)
    elif coll is Collective.BROADCAST:
        _chain(plan, [(call.root + k) % p for k in range(p)], n, chunks, OpKind.COPY)
    elif coll is Collective.REDUCE:
        _chain(plan, [(call.root + 1 + k) % p for k in range(p)], n, chunks, OpKind.REDUCE)
    else:  # pragma: no cover - every collective is handled above
        raise ScheduleError(f"algorithm {NAME!r} cannot run {coll.value}")
    return plan.schedule(coll, NAME, p, call.root, chunks)


def _columns(call: Call, chunks: int) -> Columns | None:
    """The schedule :func:`build` describes, made as columns (zero-byte rows kept: never
    None)."""
    import numpy as np  # NOTE: local, so that importing the registry stays cheap

    from commsim.algorithms import columnar

    p, n, coll = call.ranks, call.nbytes, call.collective
    if coll is Collective.BROADCAST or coll is Collective.REDUCE:
        first = call.root if coll is Collective.BROADCAST else call.root + 1
        order = (first + np.arange(p, dtype=np.int64)) % p
        return columnar.chain(order, 0, n, chunks, coll is Collective.REDUCE,
                              keep_empty=True)
    starts, stops = columnar.segments(p, n)
    return columnar.ring_steps(np.arange(p, dtype=np.int64)[None, :], starts[None, :],
                               stops[None, :], chunks, PHASES[coll], keep_empty=True)


def _chain(plan: Plan, order: list[int], nbytes: int, chunks: int, op: OpKind) -> None:
    """Pipelined chain ``order[0] -> order[1] -> ...``: piece ``j`` leaves ``order[k]`` once it
    has arrived there and piece ``j - 1`` has arrived at ``order[k + 1]``."""
    for piece in split(0, nbytes, chunks):
        for k in range(len(order) - 1):
            plan.send(order[k], order[k + 1], [piece], op)
