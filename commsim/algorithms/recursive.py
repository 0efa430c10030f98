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
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import Schedule

DOUBLING = "recursive_doubling"
DOUBLING_COLLECTIVES = frozenset({Collective.ALL_REDUCE, Collective.ALL_GATHER})
RABENSEIFNER = "rabenseifner"
RABENSEIFNER_COLLECTIVES = frozenset({Collective.ALL_REDUCE, Collective.REDUCE_SCATTER})


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
