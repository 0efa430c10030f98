"""gloo's own algorithms, as PyTorch's ``ProcessGroupGloo`` runs them on CPUs.

Transcribed from gloo (``gloo/allreduce.cc``, ``reduce.cc``, ``allgather.cc``,
``broadcast.cc``) and PyTorch's ``ProcessGroupGloo.cpp``, so that a model of a CPU host can be
checked against ``commsim measure --backend gloo``:

* **all_reduce**: a ring, rank ``r`` sending to ``r - 1``. The buffer is cut into ``p * S``
  segments of at most 1 MiB, ``S >= 2`` per rank (:func:`ring_segments`); a reduce-scatter
  phase and an all-gather phase each run ``(p - 1) S`` iterations of one segment, with two
  sends and two receives in flight (iteration ``i`` waits for iteration ``i - 2``'s send and
  receive).
* **reduce_scatter**: PyTorch clones the input, all-reduces the whole of it, then copies out
  the rank's chunk: the all_reduce schedule above.
* **reduce**: the same ring reduce-scatter with ``reduce.cc``'s older segmenting
  (:func:`reduce_segments`), whose loop runs ``pS - 2`` iterations: when ``S > 2`` it sends
  ``S - 2`` segments per rank that the ring no longer needs (a finished segment goes round once
  more, into a buffer nobody reads). They are kept, as copies, because their bytes cross the
  wire all the same. Then every rank sends its reduced chunk to the root.
* **all_gather**: a ring, rank ``r`` sending to ``r + 1``, ``2(p - 1)`` iterations of half a
  block each, two in flight.
* **broadcast**: a binomial tree grown from the least significant bit: in round ``i``, virtual
  rank ``v < 2^i`` sends to ``v + 2^i``; a rank posts all its sends at once.

PyTorch's own memory copies are part of the schedule as *local copies* (``src == dst``; see
:class:`~commsim.schedule.Transfer`): ``reduce_scatter_tensor`` clones its input (``n`` bytes)
before the all-reduce and copies the rank's block out after it (``n/p``); ``all_gather_into_tensor``
copies the rank's input into a fresh flat output (``n/p``) and, at the end, the flat output into
the output tensor (``n``). They cost nothing on a network topology and as much as a transfer's
pass over the medium on a ``shared`` host, which is what they are there. A rank's transfers wait
for its first copy; its last copy waits for all its transfers.

Byte ranges follow gloo's segments (bytes, not float elements) and commsim's
``[r*n//p, (r+1)*n//p)`` blocks where gloo's equal blocks would not divide the buffer.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.collectives import BUFFER_COLLECTIVES, Collective
from commsim.schedule import Schedule

NAME = "gloo"
COLLECTIVES = frozenset(BUFFER_COLLECTIVES)
#: gloo's ``AllreduceOptions::kMaxSegmentSize``: the largest message of the ring all-reduce.
MAX_SEGMENT_BYTES = 1 << 20


def ring_segments(nbytes: int, ranks: int) -> tuple[int, int]:
    """``(segment bytes, segments per rank)`` of gloo's ring all-reduce (``allreduce.cc``):
    ``p * S = roundUp(max(ceil(n / 1 MiB), 2p), p)`` segments of ``ceil(n / (p * S))`` bytes.

    >>> ring_segments(16 << 20, 2), ring_segments(1 << 20, 4), ring_segments(5 << 20, 2)
    ((1048576, 8), (131072, 2), (873814, 3))
    """
    count = max(-(-nbytes // MAX_SEGMENT_BYTES), 2 * ranks)
    count = -(-count // ranks) * ranks
    return -(-nbytes // count), count // ranks


def reduce_segments(nbytes: int, ranks: int) -> tuple[int, int]:
    """``(segment bytes, segments per rank)`` of gloo's ring reduce (``reduce.cc``, which keeps
    the older rule): segments of ``min(ceil(n / 2p), 1 MiB)`` bytes, ``roundUp(max(ceil(n /
    segment), 2p), p)`` of them.

    >>> reduce_segments(16 << 20, 2), reduce_segments(1 << 20, 4), reduce_segments(5 << 20, 2)
    ((1048576, 8), (131072, 2), (1048576, 3))
    """
    if nbytes == 0:
        return 0, 2
    seg = min(-(-nbytes // (2 * ranks)), MAX_SEGMENT_BYTES)
    count = max(-(-nbytes // seg), 2 * ranks)
    count = -(-count // ranks) * ranks
    return seg, count // ranks


def default_chunks(call: Call) -> int:
    """gloo's own piece counts: segments per rank of the rings, the two halves of an
    all_gather block, one piece for broadcast. ``--chunks`` overrides them (segments per rank,
    pieces per block, pipelined pieces of the broadcast), which gloo itself never does."""
    if call.collective in (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER):
        return ring_segments(call.nbytes, call.ranks)[1]
    if call.collective is Collective.REDUCE:
        return reduce_segments(call.nbytes, call.ranks)[1]
    if call.collective is Collective.ALL_GATHER:
        return 2
    return 1


def _segments(call: Call, rule: tuple[int, int]) -> tuple[int, int]:
    """gloo's ``rule`` (segment bytes, per rank), or ``call.chunks`` segments per rank."""
    if call.chunks is None:
        return rule
    count = call.ranks * call.chunks
    return -(-call.nbytes // count), call.chunks


def build(call: Call) -> Schedule:
    """The gloo schedule of ``call`` (see the module docstring), built as columns
    (:mod:`commsim.algorithms.gloo_columns`)."""
    from commsim.algorithms import gloo_columns as made
    from commsim.algorithms.rows import Table

    p, n, coll = call.ranks, call.nbytes, call.collective
    chunks = call.chunks or default_chunks(call)
    if p < 2 or n == 0:
        columns = Table().columns()
    elif coll is Collective.ALL_REDUCE or coll is Collective.REDUCE_SCATTER:
        seg, per_rank = _segments(call, ring_segments(n, p))
        columns = made.ring_columns(p, n, seg, per_rank, coll.value)
    elif coll is Collective.REDUCE:
        seg, per_rank = _segments(call, reduce_segments(n, p))
        columns = made.ring_columns(p, n, seg, per_rank, "reduce", call.root)
    elif coll is Collective.ALL_GATHER:
        columns = made.all_gather_columns(p, n, chunks)
    else:
        columns = made.broadcast_columns(p, n, call.root, chunks)
    return Schedule.of_columns(coll, NAME, p, n, call.root, chunks, columns)
