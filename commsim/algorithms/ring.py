"""Ring algorithms: rank ``i`` sends only to rank ``i + 1 (mod p)``, as NCCL's rings do.

All-gather and reduce-scatter take ``p - 1`` steps of one segment each; all-reduce is a
reduce-scatter followed by an all-gather (``2(p - 1)`` steps). Broadcast and reduce are
pipelined chains: from the root along the ring, and along the ring into the root.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.algorithms.plan import pipeline_chunks
from commsim.collectives import Collective
from commsim.schedule import Columns, Schedule

NAME = "ring"
#: Upper bound of the default piece count of the pipelined chains (broadcast, reduce).
MAX_CHAIN_CHUNKS = 64


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
    return as_schedule(call, NAME, chunks, _columns(call, chunks))


def as_schedule(call: Call, name: str, chunks: int, columns: Columns) -> Schedule:
    """``columns`` (zero-byte rows kept) as the schedule of ``call`` by ``name``: the
    zero-byte rows dropped, standing for their dependencies."""
    from commsim.algorithms.columnar import drop_empty

    return Schedule.of_columns(call.collective, name, call.ranks, call.nbytes, call.root,
                               chunks, drop_empty(columns))


def _columns(call: Call, chunks: int) -> Columns:
    """The schedule :func:`build` describes, made as columns (zero-byte rows kept)."""
    import numpy as np  # NOTE: local, so that importing the registry stays cheap

    from commsim.algorithms import columnar

    p, n, coll = call.ranks, call.nbytes, call.collective
    if coll is Collective.BROADCAST or coll is Collective.REDUCE:
        first = call.root if coll is Collective.BROADCAST else call.root + 1
        order = (first + np.arange(p, dtype=np.int64)) % p
        return columnar.chain(order, 0, n, chunks, coll is Collective.REDUCE)
    starts, stops = columnar.segments(p, n)
    return columnar.ring_steps(np.arange(p, dtype=np.int64)[None, :], starts[None, :],
                               stops[None, :], chunks, PHASES[coll])
