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
from commsim.algorithms.plan import split
from commsim.collectives import Collective, segment
from commsim.schedule import NONE, Handle, OpKind, Schedule, ScheduleBuilder, join

NAME = "gloo"
COLLECTIVES = frozenset(Collective)
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


def build_objects(call: Call) -> Schedule:
    """:func:`build` one transfer at a time (tests compare the two)."""
    p, n = call.ranks, call.nbytes
    builder = ScheduleBuilder()
    coll = call.collective
    chunks = call.chunks or default_chunks(call)
    if p > 1 and n > 0:
        if coll is Collective.ALL_REDUCE:
            ring = _Ring(builder, p, n, *_segments(call, ring_segments(n, p)))
            ring.reduce_scatter(redundant=False)
            ring.all_gather()
        elif coll is Collective.REDUCE_SCATTER:
            ring = _Ring(builder, p, n, *_segments(call, ring_segments(n, p)))
            ring.gate = [builder.add(r, r, 0, n, OpKind.COPY) for r in range(p)]  # clone
            ring.reduce_scatter(redundant=False)
            ring.all_gather()
            for r in range(p):  # copy out the rank's block
                start, stop = segment(r, p, n)
                builder.add(r, r, start, stop - start, OpKind.COPY, ring.touching[r])
        elif coll is Collective.REDUCE:
            ring = _Ring(builder, p, n, *_segments(call, reduce_segments(n, p)))
            ring.reduce_scatter(redundant=True)
            ring.gather(call.root)
        elif coll is Collective.ALL_GATHER:
            _all_gather(builder, p, n, chunks)
        else:
            _broadcast(builder, p, n, call.root, chunks)
    return builder.build(coll, NAME, p, n, call.root, chunks)


class _Ring:
    """gloo's segmented ring (``allreduce.cc``/``reduce.cc``): rank ``r`` sends to ``r - 1``."""

    def __init__(
        self, builder: ScheduleBuilder, ranks: int, nbytes: int, seg: int, per_rank: int
    ) -> None:
        self.b = builder
        self.p = ranks
        self.n = nbytes
        self.seg, self.per_rank = seg, per_rank
        self.count = ranks * self.per_rank
        # holder[r][k]: what must end before rank r's segment k may be read
        self.holder: list[list[Handle]] = [[NONE] * self.count for _ in range(ranks)]
        # sent[r]: rank r's sends so far, one handle per loop iteration, both phases
        self.sent: list[list[Handle]] = [[] for _ in range(ranks)]
        # gate[r]: what every transfer from or to rank r waits for (its local copy, if any)
        self.gate: list[Handle] = [NONE] * ranks
        # touching[r]: every transfer from or to rank r so far
        self.touching: list[list[Handle]] = [[] for _ in range(ranks)]

    def _range(self, k: int) -> tuple[int, int]:
        start = min(k * self.seg, self.n)
        return start, min(start + self.seg, self.n) - start

    def _loop(self, r: int, i: int) -> list[Handle]:
        """What iteration ``i`` of rank ``r``'s loop waits for: the send and the receive of
        iteration ``i - 2`` (``waitSend``/``waitRecv``); both, at a phase's first two."""
        sent, recv = self.sent[r], self.sent[(r + 1) % self.p]
        if i >= 2:
            return [sent[-2], recv[-2]]
        return [*sent[-2:], *recv[-2:]]

    def _phase(self, first: int, iterations: int, op: OpKind) -> None:
        """One loop: at iteration ``i`` rank r sends segment ``((r + first) S + i) mod pS``; the
        first ``(p - 1) S`` iterations carry ``op``, any further ones re-send finished segments
        (as copies)."""
        p, count = self.p, self.count
        needed = (p - 1) * self.per_rank
        for i in range(iterations):
            step: list[tuple[int, int, Handle, OpKind]] = []
            for r in range(p):
                k = ((r + first) * self.per_rank + i) % count
                start, length = self._range(k)
                kind = op if i < needed else OpKind.COPY
                dst = (r - 1) % p
                deps = [self.holder[r][k], *self._loop(r, i), self.gate[r], self.gate[dst]]
                handle = self.b.add(r, dst, start, length, kind, deps)
                step.append((dst, k, handle, kind))
            for r, (dst, k, handle, kind) in enumerate(step):
                self.sent[r].append(handle)
                self.touching[r].append(handle)
                self.touching[dst].append(handle)
                if kind is OpKind.REDUCE:
                    self.holder[dst][k] = join(self.holder[dst][k], handle)
                else:
                    self.holder[dst][k] = handle

    def reduce_scatter(self, *, redundant: bool) -> None:
        """Rank ``r`` ends holding chunk ``r`` (segments ``rS .. rS+S-1``) reduced.

        ``redundant``: run ``pS - 2`` iterations as ``reduce.cc`` does, instead of the
        ``(p - 1) S`` the ring needs (``allreduce.cc``)."""
        needed = (self.p - 1) * self.per_rank
        iterations = max(self.count - 2, needed) if redundant else needed
        self._phase(1, iterations, OpKind.REDUCE)

    def all_gather(self) -> None:
        """Every rank ends holding every chunk: ``(p - 1) S`` iterations."""
        self._phase(0, (self.p - 1) * self.per_rank, OpKind.COPY)

    def gather(self, root: int) -> None:
        """Each rank sends its reduced chunk to ``root`` once its loop is done (the root
        posts its receives once its own loop is done)."""
        S, p = self.per_rank, self.p
        for r in range(p):
            if r == root:
                continue
            first, _ = self._range(r * S)
            stop = sum(self._range((r + 1) * S - 1))
            deps = [
                *(self.holder[r][r * S + s] for s in range(S)),
                *self._loop(r, 0),
                *self._loop(root, 0),
            ]
            self.b.add(r, root, first, stop - first, OpKind.COPY, deps)


def _all_gather(builder: ScheduleBuilder, p: int, n: int, pieces: int) -> None:
    """PyTorch's copy of the input into a flat output, gloo's ring allgather (rank ``r`` sends to
    ``r + 1``; iteration ``i`` moves piece ``i % pieces`` (a half, by default) of block
    ``r - i // pieces``, after iteration ``i - 2``'s send and receive), then the copy of the
    flat output into the output tensor."""
    halves: list[list[tuple[int, int]]] = []
    for block in range(p):
        start, stop = segment(block, p, n)
        halves.append([(a, b - a) for a, b in (split(start, stop, pieces))])
    gate = []
    for r in range(p):
        start, stop = segment(r, p, n)
        gate.append(builder.add(r, r, start, stop - start, OpKind.COPY))
    holder: dict[tuple[int, int, int], Handle] = {}
    sent: list[list[Handle]] = [[] for _ in range(p)]
    touching: list[list[Handle]] = [[] for _ in range(p)]
    for i in range(pieces * (p - 1)):
        step = []
        for r in range(p):
            block, half = (r - i // pieces) % p, i % pieces
            start, length = halves[block][half]
            dst = (r + 1) % p
            deps = [holder.get((r, block, half), NONE), gate[r], gate[dst]]
            if i >= 2:
                deps += [sent[r][i - 2], sent[(r - 1) % p][i - 2]]
            step.append((dst, block, half, builder.add(r, dst, start, length, OpKind.COPY, deps)))
        for r, (dst, block, half, handle) in enumerate(step):
            sent[r].append(handle)
            touching[r].append(handle)
            touching[dst].append(handle)
            holder[(dst, block, half)] = handle
    for r in range(p):
        builder.add(r, r, 0, n, OpKind.COPY, [gate[r], *touching[r]])


def _broadcast(builder: ScheduleBuilder, p: int, n: int, root: int, pieces: int) -> None:
    """gloo's binomial broadcast: round ``i``, virtual rank ``v < 2^i`` sends to ``v + 2^i``
    (each of ``pieces`` pieces in turn, a piece after the previous one on the same pair)."""
    last: dict[tuple[int, int], Handle] = {}
    for start, stop in split(0, n, pieces):
        have: list[Handle] = [NONE] * p  # by virtual rank
        step = 1
        while step < p:
            for v in range(min(step, p - step)):
                deps = [have[v], last.get((v, v + step), NONE)]
                src, dst = (v + root) % p, (v + step + root) % p
                have[v + step] = builder.add(src, dst, start, stop - start, OpKind.COPY, deps)
                last[(v, v + step)] = have[v + step]
            step *= 2
