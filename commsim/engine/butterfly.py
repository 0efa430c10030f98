"""Closed-form costs of the butterfly schedules: recursive-doubling all-gather and Rabenseifner.

Both fold the ``rem = p - p'`` ranks beyond the largest power of two ``p'`` into odd neighbours,
run ``log2 p'`` steps among the ``p'`` core ranks, and unfold (Thakur, Rabenseifner & Gropp,
IJHPCA 2005; Rabenseifner, ICCS 2004). With even sizes they cost the textbook
``log2(p) alpha + (p-1)/p n/beta`` (all-gather) and
``2 log2(p) alpha + 2 (p-1)/p n/beta + (p-1)/p n gamma`` (Rabenseifner all-reduce). Uneven
segments and pipelining make the windows' pieces straddle the pieces received earlier, so the
exact longest path tracks, per core rank, which byte ranges arrived when: a recurrence over
(step, piece), vectorised over the ``p'`` core ranks, in which a piece waits for the link's
previous piece and for every earlier write overlapping its bytes (a copy supersedes what it
overwrites; reduces accumulate), exactly as ``commsim.algorithms.plan`` orders them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
from numpy.typing import NDArray

from commsim.engine.closed_forms import Floats, Hop, Ints

#: Writes into each core rank, one entry per pipelined message: the message's bytes
#: ``[start, stop)`` per core rank and its pieces' ends ``times[j, rank]``.
Writes = list[tuple[Ints, Ints, Floats]]

#: Let Rabenseifner's one-piece schedules with no empty block use running maxima (see
#: :class:`_Arrivals`); tests switch it off to prove both give the same times.
NESTED_SHORTCUT = True


def _ready(writes: Writes, start: Ints, stop: Ints) -> Floats:
    """Per core rank, the latest end of a written piece overlapping ``[start, stop)`` (0: none).

    A message's pieces end in order (each waits for the previous one on the link), so the
    latest overlapping piece is the one holding the last overlapping byte: found by arithmetic
    on the floor rule, O(1) array operations per message.
    """
    out = np.zeros(start.shape)
    ranks = np.arange(start.shape[0])
    for s, e, times in writes:
        chunks = times.shape[0]
        hit = np.maximum(s, start) < np.minimum(e, stop)
        if chunks == 1:
            out = np.maximum(out, np.where(hit, times[0], 0.0))
            continue
        length = np.maximum(e - s, 1)
        last = np.minimum(e, stop) - 1 - s  # offset of the last overlapping byte
        j = np.clip((chunks * (last + 1) + length - 1) // length - 1, 0, chunks - 1)
        out = np.maximum(out, np.where(hit, times[j, ranks], 0.0))
    return out


class _Arrivals:
    """The writes into each core rank so far, and the readiness of byte ranges they imply.

    With ``nested``, every write into a rank overlaps every later read from that rank, so the
    readiness of any range is the latest write's end: :meth:`ready` is then a running maximum.
    """

    def __init__(self, lanes: int, nested: bool) -> None:
        self.writes: Writes = []
        self.latest = np.zeros(lanes) if nested else None

    def add(self, writes: Writes) -> None:
        self.writes += writes
        if self.latest is not None:
            for start, stop, times in writes:
                self.latest = np.maximum(self.latest, np.where(stop > start, times[-1], 0.0))

    def ready(self, start: Ints, stop: Ints) -> Floats:
        """Per core rank, the latest end of a write overlapping ``[start, stop)``."""
        if self.latest is not None:
            return self.latest
        return _ready(self.writes, start, stop)


def _nested(chunks: int, nbytes: int, ranks: int) -> bool:
    """Whether Rabenseifner's reads all overlap every earlier write into the same rank.

    NOTE: with one piece per message and every block non-empty (``n >= p``), the halving
    windows of a rank are nested (each step reads half of what the previous one wrote), the
    doubling windows grow over everything written before, and fold, unfold and the final read
    cover the whole range; so the scan over all earlier writes, O(log^2 p) array operations per
    call, reduces to running maxima, O(log p): Rabenseifner on 65,536 ranks takes 0.1 s instead
    of 0.3 s, a fifth of an analytic run at that scale (benchmarks/analytic_scale.py). Tests
    prove both paths equal.
    """
    return NESTED_SHORTCUT and chunks == 1 and nbytes >= ranks


def _piece(start: Ints, stop: Ints, j: int, chunks: int) -> tuple[Ints, Ints]:
    """Piece ``j`` of ``[start, stop)`` by the floor rule, elementwise."""
    length = stop - start
    return start + j * length // chunks, start + (j + 1) * length // chunks


class _Core:
    """The fold's geometry: core ranks, their original ranks and segment boundaries."""

    def __init__(self, ranks: int, nbytes: int) -> None:
        self.pof2 = 1 << (ranks.bit_length() - 1)
        self.rem = ranks - self.pof2
        self.n = nbytes
        self.a = np.arange(self.pof2, dtype=np.int64)
        self.folded = self.a < self.rem
        bounds = (np.arange(ranks + 1, dtype=np.int64) * nbytes) // ranks
        rank = np.where(self.folded, 2 * self.a + 1, self.a + self.rem)
        #: The folded even rank's segment (empty for core ranks that folded nobody in).
        self.even_start = np.where(self.folded, bounds[np.maximum(rank - 1, 0)], 0)
        self.even_stop = np.where(self.folded, bounds[rank], 0)
        #: Bytes each core rank holds once folded: its segment and its even neighbour's.
        self.own_start = np.where(self.folded, self.even_start, bounds[rank])
        self.own_bounds = np.append(self.own_start, nbytes)

    def window(self, bounds: Ints, first: Ints, count: int) -> tuple[Ints, Ints]:
        """Bytes of blocks ``first .. first + count - 1`` for each core rank."""
        return bounds[first], bounds[first + count]

    def pipelined(
        self,
        start: Ints,
        stop: Ints,
        chunks: int,
        hop: Hop,
        reduce: bool,
        ready: Callable[[Ints, Ints], Floats],
        link: Floats | None = None,
        active: NDArray[np.bool_] | None = None,
    ) -> tuple[Floats, Writes]:
        """One message ``[start, stop)`` per core rank in ``chunks`` pieces, one at a time.

        ``ready(ps, pe)`` gives each piece's data readiness. Returns the link's final ends and
        the writes the pieces make at their senders' indices (the caller permutes them).
        """
        if active is not None:
            start, stop = np.where(active, start, 0), np.where(active, stop, 0)
        link = np.zeros(self.pof2) if link is None else link
        ends = []
        for j in range(chunks):
            ps, pe = _piece(start, stop, j, chunks)
            size = pe - ps
            data = ready(ps, pe)
            link = np.where(size > 0, np.maximum(link, data) + hop.costs(size, reduce), link)
            ends.append(link)
        return link, [(start, stop, np.stack(ends))]


def _moved(writes: Writes, perm: Ints) -> Writes:
    """Writes made at senders, re-indexed by receiver (``receiver = perm[sender]``)."""
    return [(s[perm], e[perm], t[:, perm]) for s, e, t in writes]


def recursive_doubling_all_gather(
    ranks: int, nbytes: int, chunks: int, hop_fold: Hop, hop_steps: list[Hop], hop_unfold: Hop
) -> float:
    """Recursive-doubling all-gather with folding, exact longest path.

    Fold: even rank ``2i`` copies its segment to ``2i + 1``. Step ``m``: core rank ``a`` copies
    everything it holds (the ``2^m`` consecutive core blocks around it, one contiguous range)
    to ``a XOR 2^m``. Unfold: odd ``2i + 1`` copies everything but ``2i``'s segment back, in one
    message of up to two ranges sharing the link (``alpha + (x + y)/beta`` per piece). One
    piece and ``p = 2^k`` dividing ``n``: ``log2(p) alpha + (p-1)/p n/beta`` (Thakur et al.).
    """
    if ranks < 2 or nbytes == 0:
        return 0.0
    core = _Core(ranks, nbytes)
    zero = np.zeros(core.pof2)
    writes: Writes = []
    end, fold = core.pipelined(
        core.even_start, core.even_stop, chunks, hop_fold, False, lambda s, e: zero
    )
    writes += fold
    time_s = float(end.max())
    for m, hop in enumerate(hop_steps):
        mask = 1 << m
        start, stop = core.window(core.own_bounds, core.a & ~(mask - 1), mask)
        end, sent = core.pipelined(start, stop, chunks, hop, False, partial(_ready, writes))
        writes += _moved(sent, core.a ^ mask)
        time_s = max(time_s, float(end.max()))
    if core.rem:
        time_s = max(time_s, _unfold_rest(core, writes, chunks, hop_unfold))
    return time_s


def _unfold_rest(core: _Core, writes: Writes, chunks: int, hop: Hop) -> float:
    """Odd ranks send all but their even neighbour's segment back: ``[0, x)`` and ``[y, n)``,
    merged into ``[0, n)`` when the segment is empty (``plan.runs``)."""
    n = core.n
    has = core.even_stop > core.even_start
    first_stop = np.where(has, core.even_start, n)
    second_start = np.where(has, core.even_stop, n)
    link = np.zeros(core.pof2)
    zero = np.zeros(core.pof2, dtype=np.int64)
    full = np.full(core.pof2, n, dtype=np.int64)
    for j in range(chunks):
        s1, e1 = _piece(zero, first_stop, j, chunks)
        s2, e2 = _piece(second_start, full, j, chunks)
        size = np.where(core.folded, (e1 - s1) + (e2 - s2), 0)
        data = np.maximum(_ready(writes, s1, e1), _ready(writes, s2, e2))
        link = np.where(size > 0, np.maximum(link, data) + hop.costs(size, False), link)
    return float(link.max())


def rabenseifner(
    ranks: int,
    nbytes: int,
    chunks: int,
    all_reduce: bool,
    hop_fold: Hop,
    hop_steps: dict[int, Hop],
    hop_unfold: Hop,
) -> float:
    """Rabenseifner's reduce-scatter (recursive halving) and, for all-reduce, all-gather
    (recursive doubling), with folding; exact longest path.

    Halving at distance ``mask = p'/2, ..., 1``: core rank ``a`` reduces the half of its window
    that ``a XOR mask`` keeps into it. Doubling at ``mask = 1, ..., p'/2``: ``a`` copies its
    window to ``a XOR mask``, after the same pair's halving message (link order). All-reduce
    blocks are ``segment(a, p', n)``; reduce-scatter blocks are the segments core rank ``a``
    stands for. One piece, ``p = 2^k`` dividing ``n``:
    ``2 log2(p) alpha + 2 (p-1)/p n/beta + (p-1)/p n gamma``.
    """
    if ranks < 2 or nbytes == 0:
        return 0.0
    core = _Core(ranks, nbytes)
    pof2, a = core.pof2, core.a
    if all_reduce:
        bounds = (np.arange(pof2 + 1, dtype=np.int64) * nbytes) // pof2
    else:
        bounds = core.own_bounds
    own_start, own_stop = bounds[:-1], bounds[1:]
    nested = _nested(chunks, nbytes, ranks)
    reduces, copies = _Arrivals(pof2, nested), _Arrivals(pof2, nested)
    zeros = np.zeros(pof2, dtype=np.int64)
    full = np.full(pof2, nbytes, dtype=np.int64)
    end, fold = core.pipelined(
        zeros, full, chunks, hop_fold, True, lambda s, e: np.zeros(pof2), active=core.folded
    )
    reduces.add(fold)
    time_s = float(end.max())
    pair_end: dict[int, Floats] = {}
    mask = pof2 >> 1
    while mask:
        partner = a ^ mask
        start, stop = core.window(bounds, partner & ~(mask - 1), mask)
        end, sent = core.pipelined(start, stop, chunks, hop_steps[mask], True, reduces.ready)
        pair_end[mask] = end
        reduces.add(_moved(sent, partner))
        time_s = max(time_s, float(end.max()))
        mask >>= 1

    def ready_all(s: Ints, e: Ints) -> Floats:
        # bytes outside the own block were overwritten by copies; inside, reduces accumulated
        mine = reduces.ready(np.maximum(s, own_start), np.minimum(e, own_stop))
        return np.maximum(mine, copies.ready(s, e))

    if all_reduce:
        mask = 1
        while mask < pof2:
            start, stop = core.window(bounds, a & ~(mask - 1), mask)
            end, sent = core.pipelined(
                start, stop, chunks, hop_steps[mask], False, ready_all, link=pair_end[mask]
            )
            copies.add(_moved(sent, a ^ mask))
            time_s = max(time_s, float(end.max()))
            mask <<= 1
        if core.rem:
            end, _ = core.pipelined(
                zeros, full, chunks, hop_unfold, False, ready_all, active=core.folded
            )
            time_s = max(time_s, float(end.max()))
    elif core.rem:
        end, _ = core.pipelined(
            core.even_start,
            core.even_stop,
            chunks,
            hop_unfold,
            False,
            reduces.ready,
        )
        time_s = max(time_s, float(end.max()))
    return time_s


def rail_rabenseifner(
    hosts: int, nbytes: int, chunks: int, ready: Floats, hop: Hop
) -> tuple[Floats, float]:
    """Rabenseifner all-reduce of one rail of ``hierarchical_rabenseifner``, exact longest path.

    The rail's ``hosts`` ranks (one per host) all-reduce ``nbytes`` bytes whose floor piece
    ``j`` (of ``chunks``) is ready at every rank at ``ready[j]``: fold, halving, doubling and
    unfold as :func:`rabenseifner` for all-reduce, blocks ``segment(a, p', n)``, except that a
    rank's NIC carries one piece at a time each way: a message ``a -> b`` starts after the last
    piece ``a`` sent and the last piece ``b`` received (``max(sent[a], received[b])``) instead of
    after the pair's previous piece. Returns, per floor piece ``j`` of the range, the latest time
    over the rail's ranks at which it is final (what the intra-host all-gather waits for), and
    the latest end.
    """
    core = _Core(hosts, nbytes)
    pof2, a, folded = core.pof2, core.a, core.folded
    bounds = (np.arange(pof2 + 1, dtype=np.int64) * nbytes) // pof2
    own_start, own_stop = bounds[:-1], bounds[1:]
    zeros = np.zeros(pof2, dtype=np.int64)
    full = np.full(pof2, nbytes, dtype=np.int64)
    initial: Writes = [(zeros, full, np.repeat(ready[:, None], pof2, axis=1))]
    nested = _nested(chunks, nbytes, hosts)
    reduces, copies = _Arrivals(pof2, nested), _Arrivals(pof2, nested)
    reduces.add(initial)
    sent, received = np.zeros(pof2), np.zeros(pof2)  # the core ranks' NICs
    time_s = 0.0

    def ready_all(s: Ints, e: Ints) -> Floats:
        mine = reduces.ready(np.maximum(s, own_start), np.minimum(e, own_stop))
        return np.maximum(mine, copies.ready(s, e))

    if core.rem:  # even ranks (idle NICs) reduce everything into their odd neighbours
        end, fold = core.pipelined(
            zeros, full, chunks, hop, True, partial(_ready, initial), link=received, active=folded
        )
        reduces.add(fold)
        received = np.where(folded, end, received)
        time_s = float(end.max())
    mask = pof2 >> 1
    while mask:
        partner = a ^ mask
        start, stop = core.window(bounds, partner & ~(mask - 1), mask)
        link = np.maximum(sent, received[partner])
        end, moved = core.pipelined(start, stop, chunks, hop, True, reduces.ready, link=link)
        reduces.add(_moved(moved, partner))
        sent, received = end, end[partner]
        time_s = max(time_s, float(end.max()))
        mask >>= 1
    mask = 1
    while mask < pof2:
        partner = a ^ mask
        start, stop = core.window(bounds, a & ~(mask - 1), mask)
        link = np.maximum(sent, received[partner])
        end, moved = core.pipelined(start, stop, chunks, hop, False, ready_all, link=link)
        copies.add(_moved(moved, partner))
        sent, received = end, end[partner]
        time_s = max(time_s, float(end.max()))
        mask <<= 1
    unfold: Writes = []
    if core.rem:  # the even ranks' NICs have received nothing yet
        end, unfold = core.pipelined(
            zeros, full, chunks, hop, False, ready_all, link=sent, active=folded
        )
        time_s = max(time_s, float(end.max()))
    final = np.empty(chunks)
    for j in range(chunks):
        ps, pe = _piece(zeros, full, j, chunks)
        at = float(ready_all(ps, pe).max())
        if core.rem:
            at = max(at, float(_ready(unfold, ps, pe)[folded].max()))
        final[j] = at
    return final, time_s
