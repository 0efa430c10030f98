"""Binomial-tree algorithms (MPICH's), over ranks relative to the root: ``v = (r - root) mod p``.

The parent of ``v > 0`` is ``v`` with its lowest set bit cleared; the children of ``v`` are
``v + 2^i`` for every ``2^i`` below ``v``'s lowest set bit (any ``2^i`` for the root) that is
``< p``. Broadcast sends down the tree, reduce reduces up it, all-reduce is a reduce to the root
followed by a broadcast from it. Every piece follows the whole tree; pieces are pipelined.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import Schedule

NAME = "binomial_tree"
COLLECTIVES = frozenset({Collective.BROADCAST, Collective.REDUCE, Collective.ALL_REDUCE})


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
