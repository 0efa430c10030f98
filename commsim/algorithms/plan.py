"""Shared machinery of the builders: byte pieces, per-link order and data readiness.

Every builder emits its messages through a :class:`Plan` in the algorithm's natural order. The
plan gives each transfer exactly two kinds of dependency, which is all the engine ever honours:

* **data**: a transfer reading bytes ``[a, b)`` of ``src`` waits for the transfers that last
  wrote any of those bytes into ``src``: the last copy there, plus every reduce into them since
  that copy (concurrent reduces commute, so a rank waits for all of them);
* **link order**: a transfer waits for the previous message piece on the same ordered pair
  ``(src, dst)`` (and channel), so a rank sends its pieces over a link one at a time, each after
  the previous one has arrived.

A message may have several byte ranges (parts of one message, e.g. non-contiguous segments):
its parts share their dependencies and run concurrently, and the next piece on the link waits
for all of them. Zero-byte parts vanish (``ScheduleBuilder`` passes their dependencies through),
so builders never special-case uneven or tiny sizes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

from commsim.collectives import Collective
from commsim.schedule import NONE, Handle, OpKind, Schedule, ScheduleBuilder, join

#: Pipelined algorithms (ring broadcast/reduce, double binary tree) aim at pieces of this size by
#: default: NCCL's Simple protocol moves a 4 MiB buffer in 8 steps of 512 KiB.
PIPELINE_PIECE_BYTES = 512 * 1024

Range = tuple[int, int]


def split(start: int, stop: int, chunks: int) -> list[Range]:
    """``[start, stop)`` cut into ``chunks`` pieces by the floor formula (some may be empty).

    >>> split(0, 10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    length = stop - start
    return [
        (start + j * length // chunks, start + (j + 1) * length // chunks) for j in range(chunks)
    ]


def pipeline_chunks(nbytes: int, limit: int) -> int:
    """Default piece count: ``ceil(nbytes / PIPELINE_PIECE_BYTES)``, clamped to ``[1, limit]``.

    >>> pipeline_chunks(1000, 64), pipeline_chunks(8 * 2**20, 64), pipeline_chunks(2**30, 64)
    (1, 16, 64)
    """
    return max(1, min(limit, -(-nbytes // PIPELINE_PIECE_BYTES)))


def runs(ranges: Iterable[Range]) -> list[Range]:
    """Sorted byte ranges with adjacent ones merged into maximal contiguous runs.

    >>> runs([(4, 6), (0, 2), (2, 3)])
    [(0, 3), (4, 6)]
    """
    out: list[Range] = []
    for start, stop in sorted(r for r in ranges if r[1] > r[0]):
        if out and out[-1][1] == start:
            out[-1] = (out[-1][0], stop)
        else:
            out.append((start, stop))
    return out


class Plan:
    """Emits transfers in natural order, adding data and link-order dependencies.

    >>> plan = Plan(ranks=3, nbytes=8)
    >>> h = plan.send(0, 1, [(0, 8)], OpKind.COPY)
    >>> plan.send(1, 2, [(0, 8)], OpKind.COPY)   # waits for the bytes to reach rank 1
    frozenset({1})
    >>> plan.builder.transfers[1].deps
    (0,)
    """

    __slots__ = ("builder", "nbytes", "endpoints", "_bounds", "_ready", "_last")

    def __init__(self, ranks: int, nbytes: int, endpoints: int = 0) -> None:
        self.builder = ScheduleBuilder()
        self.nbytes = nbytes
        #: reducing switches addressed after the ranks (see Schedule.endpoints)
        self.endpoints = endpoints
        # Per endpoint: sorted cut points and, for [cut[i], cut[i+1]), the handle its bytes
        # await.
        self._bounds: list[list[int]] = [[0] for _ in range(ranks + endpoints)]
        self._ready: list[list[Handle]] = [[NONE] for _ in range(ranks + endpoints)]
        self._last: dict[tuple[int, int, int], Handle] = {}

    # -- readiness ------------------------------------------------------------------------------
    def ready(self, rank: int, ranges: Iterable[Range]) -> Handle:
        """The transfers that must end before ``rank`` may send the bytes of ``ranges``."""
        bounds, ready = self._bounds[rank], self._ready[rank]
        out: set[int] = set()
        for start, stop in ranges:
            if stop <= start:
                continue
            i = bisect_right(bounds, start) - 1
            while i < len(bounds) and bounds[i] < stop:
                out.update(ready[i])
                i += 1
        return frozenset(out)

    def _cut(self, rank: int, at: int) -> int:
        """Index of the piece of ``rank``'s map starting at ``at`` (splitting one if needed)."""
        bounds = self._bounds[rank]
        if at >= self.nbytes:
            return len(bounds)
        i = bisect_right(bounds, at) - 1
        if bounds[i] != at:
            bounds.insert(i + 1, at)
            self._ready[rank].insert(i + 1, self._ready[rank][i])
            i += 1
        return i

    def _wrote(self, rank: int, start: int, stop: int, op: OpKind, handle: Handle) -> None:
        if stop <= start:
            return
        lo = self._cut(rank, start)
        hi = self._cut(rank, stop)
        if op is OpKind.COPY:
            self._bounds[rank][lo:hi] = [start]
            self._ready[rank][lo:hi] = [handle]
        else:
            ready = self._ready[rank]
            for i in range(lo, hi):
                ready[i] = ready[i] | handle

    def fence(self, endpoints: Iterable[int], handle: Handle) -> None:
        """Every later read from ``endpoints`` also waits for ``handle``: a phase barrier
        (it adds dependencies only, so it never makes a correct schedule wrong)."""
        if not handle:
            return
        for endpoint in endpoints:
            ready = self._ready[endpoint]
            for i in range(len(ready)):
                ready[i] = ready[i] | handle

    def mark(self) -> int:
        """The number of transfers emitted so far (see :meth:`since`)."""
        return len(self.builder.transfers)

    def since(self, mark: int) -> Handle:
        """The handle of every transfer emitted after ``mark``."""
        return frozenset(range(mark, len(self.builder.transfers)))

    # -- emission -------------------------------------------------------------------------------
    def _emit(
        self, src: int, dst: int, ranges: Sequence[Range], op: OpKind, deps: Handle, channel: int
    ) -> list[Handle]:
        handles = [self.builder.add(src, dst, a, b - a, op, [deps]) for a, b in ranges]
        self._last[(src, dst, channel)] = join(*handles) if handles else deps
        return handles

    def _commit(self, dst: int, ranges: Sequence[Range], op: OpKind, handles: list[Handle]) -> None:
        for (start, stop), handle in zip(ranges, handles, strict=True):
            self._wrote(dst, start, stop, op, handle)

    def last(self, src: int, dst: int, channel: int = 0) -> Handle:
        """The previous piece on link ``src -> dst`` (``NONE`` before the first)."""
        return self._last.get((src, dst, channel), NONE)

    def send(
        self,
        src: int,
        dst: int,
        ranges: Sequence[Range],
        op: OpKind,
        *,
        channel: int = 0,
        after: Handle = NONE,
        data: Handle | None = None,
    ) -> Handle:
        """One message piece: a transfer per byte range, after the link's previous piece, after
        the data of ``ranges`` reached ``src`` (``data``, by default :meth:`ready`; a caller may
        pass a smaller handle with the same ancestors) and after ``after``; returns the handle
        of all its parts (of its dependencies if it is empty)."""
        if data is None:
            data = self.ready(src, ranges)
        deps = join(self.last(src, dst, channel), data, after)
        handles = self._emit(src, dst, ranges, op, deps, channel)
        self._commit(dst, ranges, op, handles)
        return join(*handles) if handles else deps

    def send_pieces(
        self,
        src: int,
        dst: int,
        ranges: Sequence[Range],
        op: OpKind,
        chunks: int,
        *,
        channel: int = 0,
    ) -> None:
        """A message pipelined in ``chunks`` pieces: piece ``j`` holds the ``j``-th floor
        piece of every range in ``ranges``; pieces go one at a time over the link."""
        for part in split_all(ranges, chunks):
            self.send(src, dst, part, op, channel=channel)

    def exchange(self, a: int, b: int, ranges: Sequence[Range], op: OpKind, chunks: int) -> None:
        """``a`` and ``b`` swap ``ranges`` in ``chunks`` pieces, like ``MPI_Sendrecv``.

        Both directions of piece ``j`` wait for the same set: both links' previous pieces and
        the data of both ranks. They therefore start together, and each reads its source before
        the other's piece arrives in it: the rendezvous a receive into a temporary buffer gives.
        """
        for part in split_all(ranges, chunks):
            deps = join(self.last(a, b), self.last(b, a), self.ready(a, part), self.ready(b, part))
            to_b = self._emit(a, b, part, op, deps, 0)
            to_a = self._emit(b, a, part, op, deps, 0)
            self._commit(b, part, op, to_b)
            self._commit(a, part, op, to_a)

    def schedule(
        self, collective: Collective, algorithm: str, ranks: int, root: int, chunks: int
    ) -> Schedule:
        """The finished schedule."""
        return self.builder.build(
            collective, algorithm, ranks, self.nbytes, root, chunks, self.endpoints
        )


def split_all(ranges: Sequence[Range], chunks: int) -> list[list[Range]]:
    """Piece ``j`` of a multi-range message: the ``j``-th floor piece of every range."""
    cut = [split(a, b, chunks) for a, b in ranges]
    return [[parts[j] for parts in cut] for j in range(chunks)]
