"""Binomial-tree algorithms (MPICH's), over ranks relative to the root: ``v = (r - root) mod p``.

The parent of ``v > 0`` is ``v`` with its lowest set bit cleared; the children of ``v`` are
``v + 2^i`` for every ``2^i`` below ``v``'s lowest set bit (any ``2^i`` for the root) that is
``< p``. Broadcast sends down the tree, reduce reduces up it, all-reduce is a reduce to the root
followed by a broadcast from it. Every piece follows the whole tree; pieces are pipelined.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.algorithms.plan import Plan, split
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import OpKind, Schedule

NAME = "binomial_tree"
COLLECTIVES = frozenset({Collective.BROADCAST, Collective.REDUCE, Collective.ALL_REDUCE})


def children(v: int, ranks: int) -> list[int]:
    """Children of relative rank ``v``, largest subtree first.

    >>> children(0, 16), children(4, 16), children(12, 13)
    ([8, 4, 2, 1], [6, 5], [])
    """
    low = v & -v if v else 1 << max(ranks - 1, 0).bit_length()
    out = []
    mask = low >> 1
    while mask:
        if v + mask < ranks:
            out.append(v + mask)
        mask >>= 1
    return out


def parent(v: int) -> int:
    """Parent of relative rank ``v > 0``: ``v`` with its lowest set bit cleared."""
    return v & (v - 1)


def default_chunks(call: Call) -> int:
    """1: no pipelining unless ``--chunks`` asks for it."""
    return 1


def build(call: Call) -> Schedule:
    """The binomial-tree schedule of ``call``, built as columns
    (:func:`commsim.algorithms.tree_columns.binomial_columns`)."""
    if call.collective not in COLLECTIVES:
        raise ScheduleError(f"algorithm {NAME!r} cannot run {call.collective.value}")
    from commsim.algorithms.tree_columns import binomial_columns

    chunks = call.chunks or default_chunks(call)
    coll = call.collective
    columns = binomial_columns(call.ranks, call.nbytes, call.root, chunks,
                               up=coll is not Collective.BROADCAST,
                               down=coll is not Collective.REDUCE)
    return Schedule.of_columns(coll, NAME, call.ranks, call.nbytes, call.root, chunks, columns)


def build_objects(call: Call) -> Schedule:
    """:func:`build` one transfer at a time through a :class:`Plan` (tests compare the two)."""
    if call.collective not in COLLECTIVES:
        raise ScheduleError(f"algorithm {NAME!r} cannot run {call.collective.value}")
    p, n, root = call.ranks, call.nbytes, call.root
    chunks = call.chunks or default_chunks(call)
    plan = Plan(p, n)
    for piece in split(0, n, chunks):
        if call.collective is not Collective.BROADCAST:
            tree_reduce(plan, p, root, piece)
        if call.collective is not Collective.REDUCE:
            tree_broadcast(plan, p, root, piece)
    return plan.schedule(call.collective, NAME, p, root, chunks)


def tree_reduce(plan: Plan, p: int, root: int, piece: tuple[int, int]) -> None:
    """Reduce ``piece`` up the tree: ``v`` sends once all its children's partials arrived."""
    for v in range(p - 1, 0, -1):
        plan.send((v + root) % p, (parent(v) + root) % p, [piece], OpKind.REDUCE)


def tree_broadcast(plan: Plan, p: int, root: int, piece: tuple[int, int]) -> None:
    """Copy ``piece`` down the tree: ``v`` forwards to its children once it has it."""
    for v in range(p):
        for child in children(v, p):
            plan.send((v + root) % p, (child + root) % p, [piece], OpKind.COPY)
