"""Closed-form alpha-beta(-gamma) costs of the ring and tree schedules, on byte sizes alone.

Every function here is the exact longest path of the dependency graph its algorithm's builder
(``commsim.algorithms``) emits, with each transfer of ``x > 0`` bytes costing
``alpha + x / beta`` (plus ``gamma * x`` for a reduce) and zero-byte transfers dropped (their
dependencies pass through). On an uncontended network whose pairs all cost the same, the DES
gives these times to rounding. The graphs are regular, so the longest paths reduce to short
recurrences over (step, piece) or over the shape of a subtree, never over individual transfers.
Nothing here knows about networks: the caller picks one :class:`Hop` per phase.

Sources of the textbook forms the recurrences generalise: Hockney (1994) for the per-message
cost; Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in
MPICH" (IJHPCA 2005) for the ring, binomial-tree and recursive-doubling costs; Chan, Heimlich,
Purkayastha & van de Geijn, "Collective communication: theory, practice, and experience"
(CCPE 2007) for the pipelined chain; Sanders, Speck & Träff, "Two-tree algorithms for full
bandwidth broadcast, reduction and scan" (Parallel Computing 2009) for the double binary tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsim.algorithms.tree_columns import tree_depths

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]

#: Above this many (step x piece x position) cells a ring recurrence is replaced by its
#: link-chain upper bound (exact whenever all pieces have the same size).
RING_DP_BUDGET = 20_000_000


@dataclass(frozen=True, slots=True)
class Hop:
    """Cost of one transfer over a pair: ``alpha + x / beta`` (+ ``gamma * x`` if a reduce)."""

    alpha_s: float
    beta_Bps: float
    gamma_s_per_B: float = 0.0

    def copy(self, nbytes: int) -> float:
        """Seconds to copy ``nbytes`` (0 for an empty, dropped transfer)."""
        return self.alpha_s + nbytes / self.beta_Bps if nbytes > 0 else 0.0

    def reduce(self, nbytes: int) -> float:
        """Seconds to reduce ``nbytes`` into the destination (0 when empty)."""
        if nbytes <= 0:
            return 0.0
        return self.alpha_s + nbytes / self.beta_Bps + self.gamma_s_per_B * nbytes

    def cost(self, nbytes: int, reduce: bool) -> float:
        """:meth:`reduce` or :meth:`copy`."""
        return self.reduce(nbytes) if reduce else self.copy(nbytes)

    def costs(self, nbytes: Ints, reduce: bool) -> Floats:
        """Elementwise :meth:`cost` of an array of sizes."""
        x = nbytes.astype(np.float64)
        per = self.alpha_s + x / self.beta_Bps
        if reduce:
            per = per + self.gamma_s_per_B * x
        return np.where(nbytes > 0, per, 0.0)


def piece_sizes(length: int, chunks: int) -> list[int]:
    """Sizes of the ``chunks`` floor pieces of ``length`` bytes (``plan.split``'s rule).

    >>> piece_sizes(10, 3)
    [3, 3, 4]
    """
    return [(j + 1) * length // chunks - j * length // chunks for j in range(chunks)]


def piece_table(lengths: Ints, chunks: int) -> Ints:
    """``lengths[..., None]`` cut into ``chunks`` floor pieces: shape ``lengths.shape + (c,)``."""
    j = np.arange(chunks + 1, dtype=np.int64)
    cuts = (lengths[..., None] * j) // chunks
    return np.diff(cuts, axis=-1)


def segment_lengths(ranks: int, nbytes: int) -> Ints:
    """Bytes of each rank's segment ``[r*n//p, (r+1)*n//p)``."""
    r = np.arange(ranks + 1, dtype=np.int64)
    return np.diff((r * nbytes) // ranks)


def _chained(
    sizes: list[int], ready: list[float], hop: Hop, reduce: bool, link: float = 0.0
) -> list[float]:
    """Ends of the pieces of one pipelined message on one pair.

    Piece ``j`` starts once piece ``j - 1`` ended (link order) and its data is ready at
    ``ready[j]``; an empty piece ends when its predecessor did (its dependencies pass through).
    """
    out = []
    for size, data in zip(sizes, ready, strict=True):
        if size > 0:
            link = max(link, data) + hop.cost(size, reduce)
        out.append(link)
    return out


# -- ring ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RingOutcome:
    """A ring phase's result: the latest end, the link chains' ends and the last step's ends.

    ``link[r, i]`` is when the last piece on pair ``(i, i + 1)`` of ring ``r`` ended (its
    predecessor's end if empty); ``last[r, i, j]`` when piece ``j`` of position ``i``'s last
    step ended.
    """

    time_s: float
    link: Floats
    last: Floats


def ring_steps(
    sizes: Ints,
    reduce_steps: int,
    copy_steps: int,
    shift: int,
    hop_reduce: Hop,
    hop_copy: Hop,
    init_ready: Floats | None = None,
    init_link: Floats | None = None,
) -> RingOutcome:
    """Longest path of ``R`` lockstep rings of ``P`` positions, block ``b`` cut into ``c`` pieces.

    ``sizes[r, b, j]`` is piece ``j`` of block ``b`` of ring ``r``. At global step ``t`` position
    ``i`` sends block ``(i - t - shift) mod P`` to ``i + 1``, piece by piece: piece ``j`` waits
    for the link's previous piece and for the same piece's arrival at ``i`` one step earlier
    (``init_ready[r, b, j]`` at step 0). The first ``reduce_steps`` steps reduce, the rest copy.
    This is ``commsim.algorithms.ring``'s reduce-scatter (``shift = 1``) followed by all-gather
    (which continues the same block formula), or an all-gather alone (``shift = 0``).

    The recurrence ``T[i, t, j] = max(T[i, t, j - 1], T[i - 1, t - 1, j]) + w`` runs over
    (step, piece), vectorised over rings and positions: O(steps x pieces) array operations.
    """
    rings, positions, chunks = sizes.shape
    steps = reduce_steps + copy_steps
    link = np.zeros((rings, positions)) if init_link is None else init_link.astype(np.float64)
    ready0 = np.zeros(sizes.shape) if init_ready is None else init_ready
    pos = np.arange(positions)
    prev: list[Floats] = []
    for t in range(steps):
        block = (pos - t - shift) % positions
        reduce = t < reduce_steps
        hop = hop_reduce if reduce else hop_copy
        cur = []
        for j in range(chunks):
            size = sizes[:, block, j]
            data = ready0[:, block, j] if t == 0 else np.roll(prev[j], 1, axis=1)
            link = np.where(size > 0, np.maximum(link, data) + hop.costs(size, reduce), link)
            cur.append(link)
        prev = cur
    last = np.stack(prev, axis=-1) if prev else np.zeros((rings, positions, chunks))
    return RingOutcome(float(link.max(initial=0.0)), link, last)


def ring_collective(
    positions: int,
    nbytes: int,
    chunks: int,
    reduce_steps: int,
    copy_steps: int,
    shift: int,
    hop_reduce: Hop,
    hop_copy: Hop,
) -> float:
    """Ring all-gather / reduce-scatter / all-reduce over ``positions`` ranks of ``nbytes``.

    With one piece per step (``chunks = 1``, the default) a path holds at most one transfer per
    step and the data chain of the largest segment holds one in every step, so
    ``T = S_r * (alpha + m/beta + gamma m) + S_c * (alpha + m/beta)``, ``m = ceil(n/p)`` the largest
    segment: Thakur et al.'s ``2(p-1) alpha + 2(p-1)/p n/beta (+ (p-1)/p n gamma)`` when ``p``
    divides ``n``. With ``c`` pieces the pair ``(i, i+1)`` carries ``N = S c`` pieces in link
    order; a path that ever follows data instead skips ``c - 1`` of them, so when the longest
    link chain ``L = max_i sum(its pieces)`` is at least ``(N - c + 1) * w_max`` it is the
    answer; otherwise the (step, piece) recurrence of :func:`ring_steps` decides.
    """
    if positions < 2 or nbytes == 0:
        return 0.0
    return ring_blocks(
        segment_lengths(positions, nbytes), chunks, reduce_steps, copy_steps, shift,
        hop_reduce, hop_copy,
    )


def ring_chain(ranks: int, nbytes: int, chunks: int, hop: Hop, reduce: bool) -> float:
    """Pipelined chain (ring broadcast from, or reduce into, the root) of ``c`` pieces.

    Piece ``j`` crosses the ``p - 1`` hops in order, each hop once it arrived and the previous
    piece left that hop: a (hop, piece) grid whose longest path visits every piece once and the
    heaviest piece ``p - 2`` more times: ``T = (p - 2) max_j w_j + sum_j w_j``, i.e.
    ``(p - 2 + c)(alpha + n/(c beta))`` for equal pieces (Chan et al. 2007, the pipelined chain).
    """
    if ranks < 2:
        return 0.0
    w = [hop.cost(size, reduce) for size in piece_sizes(nbytes, chunks)]
    return (ranks - 2) * max(w) + sum(w)


# -- trees -----------------------------------------------------------------------------------
def _broadcast_levels(depth: int, root_ready: list[float], sizes: list[int], hop: Hop) -> float:
    """Pipelined copy down ``depth`` levels: a rank forwards piece ``j`` to a child once it has
    it and the previous piece reached that child. Ranks at one depth all finish together."""
    level = root_ready
    for _ in range(depth):
        level = _chained(sizes, level, hop, False)
    return max(level, default=0.0)


def binomial_tree(
    ranks: int,
    nbytes: int,
    chunks: int,
    hop_reduce: Hop,
    hop_copy: Hop,
    reduce: bool,
    broadcast: bool,
) -> float:
    """MPICH's binomial tree: reduce to the root and/or broadcast from it, ``c`` pieces.

    Reduce: a rank sends piece ``j`` up once its children's partials of ``j`` arrived and its
    piece ``j - 1`` left; the subtree of relative rank ``v`` is ``[v, v + lowbit(v)) cap [0, p)``,
    so the recurrence runs over subtree *sizes* (O(log p) of them), with children of sizes
    ``min(2^i, s - 2^i)`` for every ``2^i < s``. Broadcast: all ranks at depth ``d`` finish
    together; the depth is ``max(popcount(p - 1), bitlength(p - 1) - 1)``. With one piece this
    is ``ceil-ish(log2 p) (alpha + n/beta)``: Thakur et al.'s ``log2(p) (alpha + n beta)``.
    """
    if ranks < 2:
        return 0.0
    sizes = piece_sizes(nbytes, chunks)
    memo: dict[int, list[float]] = {}

    def arrivals(s: int) -> list[float]:
        """Per piece, when every child partial of a subtree of ``s`` ranks reached its top."""
        out = [0.0] * chunks
        bit = 1
        while bit < s:
            child = sent(min(bit, s - bit))
            out = [max(a, b) for a, b in zip(out, child, strict=True)]
            bit <<= 1
        return out

    def sent(s: int) -> list[float]:
        if s not in memo:
            memo[s] = _chained(sizes, arrivals(s), hop_reduce, True)
        return memo[s]

    root_ready = arrivals(ranks) if reduce else [0.0] * chunks
    time_s = max(root_ready, default=0.0)
    if broadcast:
        top = ranks - 1
        depth = max(bin(top).count("1"), top.bit_length() - 1)
        time_s = max(time_s, _broadcast_levels(depth, root_ready, sizes, hop_copy))
    return time_s


@dataclass(frozen=True, slots=True)
class TreeLevels:
    """A tree (``parents[root] = -1``) level by level, deepest first, for
    :func:`tree_all_reduce`: per level its ranks grouped by parent, each parent once
    (``parents``) and where its children start (``starts``), so that a level's partials
    reduce into their parents with one ``maximum.reduceat``. Size-independent: kept and
    reused for every size and hop (:func:`tree_levels`)."""

    ranks: int
    root: int
    top: int
    levels: tuple[tuple[Ints, Ints, Ints], ...]  # (members, parents, starts), deepest first


def tree_levels(parents: list[int] | Ints) -> TreeLevels:
    """The :class:`TreeLevels` of a tree.

    >>> levels = tree_levels([-1, 0, 0, 1])
    >>> levels.top, [m.tolist() for m, _, _ in levels.levels]
    (2, [[3], [1, 2]])
    """
    par = np.asarray(parents, dtype=np.int64)
    dep = tree_depths(par)
    top = int(dep.max()) if len(par) else 0
    by_depth = np.argsort(dep, kind="stable")
    bounds = np.searchsorted(dep[by_depth], np.arange(top + 2))
    levels = []
    for level in range(top, 0, -1):
        members = by_depth[bounds[level]:bounds[level + 1]]
        members = members[np.argsort(par[members], kind="stable")]  # children by parent
        up = par[members]
        starts = np.flatnonzero(np.diff(up, prepend=-1))
        levels.append((members, up[starts], starts))
    root = int(np.flatnonzero(par < 0)[0]) if len(par) else 0
    return TreeLevels(len(par), root, top, tuple(levels))


def tree_all_reduce(
    parents: list[int] | Ints | TreeLevels, nbytes: int, chunks: int, hop_reduce: Hop,
    hop_copy: Hop
) -> float:
    """Pipelined reduce-then-broadcast all-reduce on one tree (``parents[root] = -1``, or its
    :class:`TreeLevels`).

    Per piece: a rank reduces into its parent once its children's partials arrived (and its
    previous piece left); the root copies the piece down once all its children's partials
    arrived; ranks forward it once they have it. The reduce recurrence runs level by level,
    vectorised over the ranks of a level; the broadcast only depends on the depth.
    """
    tree = parents if isinstance(parents, TreeLevels) else tree_levels(parents)
    if tree.ranks < 2:
        return 0.0
    sizes = piece_sizes(nbytes, chunks)
    arrived = np.zeros((tree.ranks, chunks))  # per rank and piece: children's partials all in
    w = [hop_reduce.reduce(size) for size in sizes]
    for members, up, starts in tree.levels:
        link = np.zeros(len(members))
        sent = np.empty((len(members), chunks))
        for j, size in enumerate(sizes):
            if size > 0:
                link = np.maximum(link, arrived[members, j]) + w[j]
            sent[:, j] = link
        arrived[up] = np.maximum(arrived[up], np.maximum.reduceat(sent, starts, axis=0))
    root_ready = [float(x) for x in arrived[tree.root]]
    return max(max(root_ready), _broadcast_levels(tree.top, root_ready, sizes, hop_copy))


# -- recursive doubling all-reduce ---------------------------------------------------------
def recursive_doubling_all_reduce(
    ranks: int, nbytes: int, chunks: int, hop_fold: Hop, hop_steps: list[Hop], hop_unfold: Hop
) -> float:
    """Recursive-doubling all-reduce, non-powers of two folded in (Thakur et al. 2005).

    ``rem = p - 2^floor(log2 p)`` even ranks first reduce the whole buffer into their odd
    neighbour (pipelined, ``F``); the ``p'`` core ranks then exchange the whole buffer at
    distances 1, 2, ..., ``p'/2`` (step ``m``, ``hop_steps[m]``), piece ``j`` of step ``m``
    waiting for piece ``j - 1`` of the same exchange and piece ``j`` of step ``m - 1`` on either
    side; finally the odd ranks copy the result back (``U``). Every pair of a step is alike, and
    the butterfly lets any path reach any rank, so per piece the recurrence is
    ``M[m, j] = max(M[m, j-1], M[m-1, j]) + w_m(j)``. One piece, ``p`` a power of two:
    ``log2(p) (alpha + n/beta + n gamma)``.
    """
    if ranks < 2:
        return 0.0
    pof2 = 1 << (ranks.bit_length() - 1)
    rem = ranks - pof2
    sizes = piece_sizes(nbytes, chunks)
    level = _chained(sizes, [0.0] * chunks, hop_fold, True) if rem else [0.0] * chunks
    time_s = max(level)
    for hop in hop_steps:
        level = _chained(sizes, level, hop, True)
    time_s = max(time_s, max(level))
    if rem:
        time_s = max(time_s, max(_chained(sizes, level, hop_unfold, False)))
    return time_s


# -- rings of explicit blocks: bidirectional rings and torus axes ----------------------------
def ring_blocks(
    lengths: Ints,
    chunks: int,
    reduce_steps: int,
    copy_steps: int,
    shift: int,
    hop_reduce: Hop,
    hop_copy: Hop,
) -> float:
    """:func:`ring_collective` for a ring whose position ``i`` owns a block of ``lengths[i]``
    bytes (any sizes, zeros included): one direction of ``ring_bidirectional``.

    One piece: the data chain of the largest block ``M`` holds a transfer in every step and no
    path holds more, so ``T = S_r w_r(M) + S_c w_c(M)``. More pieces: the longest link chain
    when it dominates, else the (step, piece) recurrence, as :func:`ring_collective`.
    """
    positions = len(lengths)
    if positions < 2 or int(lengths.sum()) == 0:
        return 0.0
    if chunks == 1:
        top = int(lengths.max())
        return reduce_steps * hop_reduce.reduce(top) + copy_steps * hop_copy.copy(top)
    table = piece_table(lengths.astype(np.int64), chunks)
    per_block_r = hop_reduce.costs(table, True).sum(axis=1)
    per_block_c = hop_copy.costs(table, False).sum(axis=1)
    chain = np.zeros(positions)
    i = np.arange(positions)
    if reduce_steps:
        chain += per_block_r.sum() - per_block_r[(i - shift + 1) % positions]
    if copy_steps:
        chain += per_block_c.sum() - per_block_c[(i - shift + 1 - reduce_steps) % positions]
    best_chain = float(chain.max())
    top = int(table.max())
    w_max = max(
        hop_reduce.reduce(top) if reduce_steps else 0.0, hop_copy.copy(top) if copy_steps else 0.0
    )
    pieces = (reduce_steps + copy_steps) * chunks
    if best_chain >= (pieces - chunks + 1) * w_max:
        return best_chain
    if pieces * positions > RING_DP_BUDGET:
        return pieces * w_max
    outcome = ring_steps(table[None], reduce_steps, copy_steps, shift, hop_reduce, hop_copy)
    return outcome.time_s
