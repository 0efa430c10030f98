"""All-to-all schedules as numpy columns: each algorithm lists its *hops* (one block, or a run
of blocks of one origin, moved from one rank to another), and :func:`expand` cuts every hop
into pieces and writes the dependencies.

A hop ``h`` moves bytes ``[offset, offset + nbytes)`` of rank ``origin``'s send buffer from
``src`` to ``dst``. It starts after the whole of each hop in ``after[h]`` (a round's lockstep,
or bytes a relay must hold whole) and, piece by piece, after the same piece of ``feed[h]`` (a
relay forwarding what arrives, pipelined). Pieces of one hop go one at a time, each after the
previous one has arrived (:mod:`commsim.algorithms.plan`). Every dependency names an earlier
hop, so rows come out in order.
"""

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import drop_empty, from_pairs
from commsim.schedule import Columns


def layout(ranks: int, nbytes: int, counts: tuple[int, ...] | None
           ) -> tuple[np.ndarray, np.ndarray]:
    """``(sizes, starts)``, each ``(ranks, ranks)``: the bytes rank ``s`` sends rank ``j`` and
    where they start in ``s``'s send buffer. Even (``counts`` None): nccl-tests' split,
    ``[j n // p, (j + 1) n // p)`` for every sender."""
    p = ranks
    if counts is None:
        bounds = np.arange(p + 1, dtype=np.int64) * nbytes // p
        sizes = np.broadcast_to(np.diff(bounds), (p, p))
        return sizes, np.broadcast_to(bounds[:-1], (p, p))
    sizes = np.asarray(counts, dtype=np.int64).reshape(p, p)
    starts = np.zeros((p, p), dtype=np.int64)
    np.cumsum(sizes[:, :-1], axis=1, out=starts[:, 1:])
    return sizes, starts


class Hops:
    """Hops appended in order (see the module docstring); :meth:`columns` expands them."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.count = 0

    def add(self, src: np.ndarray, dst: np.ndarray, offset: np.ndarray, nbytes: np.ndarray,
            origin: np.ndarray, level: int, after: list[np.ndarray] | None = None,
            feed: np.ndarray | None = None) -> np.ndarray:
        """Append hops (arrays of one shape, or broadcast to it; ``after`` arrays and ``feed``
        hold hop ids or -1 for none); return their ids, flat."""
        shape = np.shape(src)
        n = int(np.prod(shape, dtype=np.int64))
        none = np.full(n, -1, dtype=np.int64)

        def flat(column: object) -> np.ndarray:
            if column is None:
                return none
            return np.broadcast_to(np.asarray(column, dtype=np.int64), shape).reshape(-1)

        afters: list[np.ndarray | None] = list(after or [])
        if len(afters) > 2:
            raise ValueError("a hop waits for at most two others")
        afters += [None] * (2 - len(afters))
        self.parts.append((*(flat(c) for c in (src, dst, offset, nbytes, origin, *afters, feed)),
                           np.full(n, level, dtype=np.int64)))
        ids = np.arange(self.count, self.count + n, dtype=np.int64)
        self.count += n
        return ids

    def columns(self, chunks: int) -> Columns:
        """Every hop cut into ``chunks`` pieces, zero-byte pieces dropped (their dependencies
        passed through)."""
        if not self.parts:
            none = np.zeros(0, dtype=np.int64)
            return Columns(none, none, none, none, none.astype(bool), np.zeros(1, np.int64),
                           none, none, none)
        src, dst, offset, nbytes, origin, after0, after1, feed, level = (
            np.concatenate(c) for c in zip(*self.parts, strict=True))
        return expand(src, dst, offset, nbytes, origin, (after0, after1), feed, level, chunks)


def expand(src: np.ndarray, dst: np.ndarray, offset: np.ndarray, nbytes: np.ndarray,
           origin: np.ndarray, after: tuple[np.ndarray, np.ndarray], feed: np.ndarray,
           level: np.ndarray, chunks: int) -> Columns:
    """The hops' pieces as columns: row ``h * chunks + k`` is piece ``k`` of hop ``h``."""
    c = chunks
    hops = len(src)
    k = np.arange(c, dtype=np.int64)
    lo = offset[:, None] + nbytes[:, None] * k // c
    hi = offset[:, None] + nbytes[:, None] * (k + 1) // c
    row = np.arange(hops * c, dtype=np.int64).reshape(hops, c)
    owners, deps = [row[:, 1:].ravel()], [row[:, :-1].ravel()]       # the previous piece
    fed = np.flatnonzero(feed >= 0)
    owners.append(row[fed].ravel())
    deps.append(row[feed[fed]].ravel())                              # the same piece, fed
    for waits in after:
        w = np.flatnonzero(waits >= 0)
        owners.append(row[w, 0])
        deps.append(row[waits[w], c - 1])                            # all of the other hop
    ptr, idx = from_pairs(hops * c, np.concatenate(owners), np.concatenate(deps))

    def rep(a: np.ndarray) -> np.ndarray:
        return np.repeat(a, c)

    cols = Columns(rep(src), rep(dst), lo.ravel(), (hi - lo).ravel(),
                   np.zeros(hops * c, dtype=bool), ptr, idx,
                   (level[:, None] * c + k).ravel(), rep(origin))
    return drop_empty(cols)


def pairwise(sizes: np.ndarray, starts: np.ndarray) -> Hops:
    """p - 1 rounds; in round ``k`` rank ``r`` sends its block for ``r XOR k`` (a power of two
    of ranks) or ``r + k`` (the shifted pairing, any count) and receives the matching one,
    after both of its exchanges of the round before (``MPI_Sendrecv``'s lockstep)."""
    p = len(sizes)
    r = np.arange(p, dtype=np.int64)
    xor = p & (p - 1) == 0
    hops = Hops()
    last: np.ndarray | None = None
    for k in range(1, p):
        peer = r ^ k if xor else (r + k) % p
        after = None
        if last is not None:
            came = r ^ (k - 1) if xor else (r - (k - 1)) % p    # who sent to r last round
            after = [last, last[came]]
        last = hops.add(r, peer, starts[r, peer], sizes[r, peer], r, k - 1, after)
    return hops


def bruck(sizes: np.ndarray, starts: np.ndarray) -> Hops:
    """Bruck et al. (1997), in ceil(log2 p) rounds. Rank ``r`` keeps its blocks in slots
    ``i = (dst - r) mod p``; in round ``k`` it sends every slot with bit ``k`` set to
    ``r + 2^k``, which keeps it in the same slot. A slot's block at round ``k`` came from
    ``r - (i mod 2^k)``; it goes on once the hop that brought it has arrived, and a round
    starts once the round before has brought ``r`` its first slot (the lockstep)."""
    p = len(sizes)
    r = np.arange(p, dtype=np.int64)
    hops = Hops()
    ids: list[np.ndarray] = []             # per round: hop id, shape (p, slots of the round)
    where: list[np.ndarray] = []           # per round: slot -> column in ids (-1: not sent)
    k = 0
    while (1 << k) < p:
        step = 1 << k
        slots = np.flatnonzero(np.arange(p) & step)
        low = slots & (step - 1)
        origin = (r[:, None] - low[None, :]) % p
        dest = (origin + slots[None, :]) % p
        feed = np.full(origin.shape, -1, dtype=np.int64)
        moved = low > 0
        if moved.any():
            h = np.floor(np.log2(np.maximum(low, 1))).astype(np.int64)   # last round it moved
            for last in np.unique(h[moved]).tolist():
                cols = np.flatnonzero(moved & (h == last))
                sender = (r[:, None] - (1 << last)) % p
                feed[:, cols] = ids[last][sender, where[last][slots[cols]][None, :]]
        after = None
        if k:
            prev = (r - (step >> 1)) % p           # brought r slot 2^(k-1) last round
            after = [np.broadcast_to(ids[k - 1][prev, where[k - 1][step >> 1]][:, None],
                                     origin.shape)]
        src = np.broadcast_to(r[:, None], origin.shape)
        made = hops.add(src, (src + step) % p, starts[origin, dest], sizes[origin, dest],
                        origin, k, after, feed)
        ids.append(made.reshape(p, len(slots)))
        col = np.full(p, -1, dtype=np.int64)
        col[slots] = np.arange(len(slots))
        where.append(col)
        k += 1
    return hops


def all_pairs(sizes: np.ndarray, starts: np.ndarray) -> Hops:
    """Every pair at once (NCCL's grouped send/receive): ``s -> j`` for all ``s != j``,
    listed by shift ``(j - s) mod p``."""
    p = len(sizes)
    shift, s = np.divmod(np.arange(p, p * p, dtype=np.int64), p)
    j = (s + shift) % p
    hops = Hops()
    hops.add(s, j, starts[s, j], sizes[s, j], s, 0)
    return hops


def pxn(sizes: np.ndarray, starts: np.ndarray, host: np.ndarray, local: np.ndarray,
        members: np.ndarray) -> Hops:
    """NCCL's PXN: every pair at once; to a rank on another host, through the rank of the
    sender's host on the destination's rail (same local index), which forwards each piece as
    it arrives; directly where the sender is on that rail. ``members[h, l]``: rank of host
    ``h`` with local index ``l``."""
    p = len(sizes)
    shift, s = np.divmod(np.arange(p, p * p, dtype=np.int64), p)
    j = (s + shift) % p
    relay = members[host[s], local[j]]
    via = (host[s] != host[j]) & (relay != s)
    hops = Hops()
    straight = np.flatnonzero(~via)
    hops.add(s[straight], j[straight], starts[s[straight], j[straight]],
             sizes[s[straight], j[straight]], s[straight], 0)
    v = np.flatnonzero(via)
    a, b, m = s[v], j[v], relay[v]
    first = hops.add(a, m, starts[a, b], sizes[a, b], a, 0)
    hops.add(m, b, starts[a, b], sizes[a, b], a, 1, feed=first)
    return hops


def axes(sizes: np.ndarray, starts: np.ndarray, dims: tuple[int, ...]) -> Hops:
    """One phase per axis of the row-major grid ``dims`` (a torus's, or hosts x ranks per
    host). Before phase ``a`` the block ``(o, j)`` sits on the rank with ``j``'s coordinates
    on the axes before ``a`` and ``o``'s from ``a`` on; in phase ``a`` each rank sends each
    other rank on its axis-``a`` line, per origin, the run of blocks for the destinations
    with that rank's coordinate on axis ``a`` (contiguous in the origin's buffer), once the
    hop that brought them has arrived, and once the phase before has brought it its
    neighbour's own blocks (the lockstep)."""
    p = len(sizes)
    dims = tuple(int(d) for d in dims)
    stride = [int(np.prod(dims[a + 1:], dtype=np.int64)) for a in range(len(dims))]
    coord = [(np.arange(p) // stride[a]) % dims[a] for a in range(len(dims))]
    ends = np.zeros((p, p + 1), dtype=np.int64)
    np.cumsum(sizes, axis=1, out=ends[:, 1:])
    hops = Hops()
    phases: dict[int, tuple[int, int]] = {}   # axis -> (first id, origins per pair)
    for a, d in enumerate(dims):
        if d < 2:
            continue
        r, t, u = _phase_grid(p, dims, a)
        peer_coord = (coord[a][r] + 1 + t) % d
        q = r + (peer_coord - coord[a][r]) * stride[a]
        below = stride[a] * d                     # ranks sharing the coordinates before a
        origin = (u * below) + r % below          # o's axes >= a are r's
        dest0 = (r // below) * below + peer_coord * stride[a]    # dests: j[<a] = r[<a]
        nb = ends[origin, dest0 + stride[a]] - ends[origin, dest0]
        after = [_brought(phases, dims, stride, coord, a, r, origin)]
        lock = _lockstep(phases, dims, stride, coord, a, r)
        if lock is not None:
            after.append(lock)
        ids = hops.add(r, q, starts[origin, dest0], nb, origin, a, after)
        phases[a] = (int(ids[0]), len(np.unique(u)))
    return hops


def _phase_grid(p: int, dims: tuple[int, ...], a: int) -> tuple[np.ndarray, ...]:
    """Phase ``a``'s hops as flat arrays (rank, peer step, origin index), in that order."""
    d = dims[a]
    origins = int(np.prod(dims[:a], dtype=np.int64))
    r, t, u = np.meshgrid(np.arange(p), np.arange(d - 1), np.arange(origins), indexing="ij")
    return r.ravel(), t.ravel(), u.ravel()


def _hop_id(phases: dict[int, tuple[int, int]], dims: tuple[int, ...], b: int,
            sender: np.ndarray, receiver_coord: np.ndarray, sender_coord: np.ndarray,
            origin: np.ndarray, stride: list[int]) -> np.ndarray:
    """Id of phase ``b``'s hop from ``sender`` to the rank whose axis-``b`` coordinate is
    ``receiver_coord``, carrying ``origin``'s blocks."""
    base, origins = phases[b]
    d = dims[b]
    t = (receiver_coord - sender_coord - 1) % d
    u = origin // (stride[b] * d)
    return base + (sender * (d - 1) + t) * origins + u


def _brought(phases: dict[int, tuple[int, int]], dims: tuple[int, ...],
             stride: list[int], coord: list[np.ndarray], a: int, r: np.ndarray,
             origin: np.ndarray) -> np.ndarray:
    """The hop that brought ``origin``'s blocks to ``r`` (the last phase before ``a`` whose
    axis they crossed), -1 for ``r``'s own."""
    out = np.full(len(r), -1, dtype=np.int64)
    for b in range(a):
        if b not in phases:
            continue
        moved = coord[b][origin] != coord[b][r]
        sender = r + (coord[b][origin] - coord[b][r]) * stride[b]
        ids = _hop_id(phases, dims, b, sender, coord[b][r], coord[b][origin], origin, stride)
        out = np.where(moved, ids, out)
    return out


def _lockstep(phases: dict[int, tuple[int, int]], dims: tuple[int, ...],
              stride: list[int], coord: list[np.ndarray], a: int,
              r: np.ndarray) -> np.ndarray | None:
    """The previous phase's hop that brought ``r`` its axis neighbour's own blocks."""
    done = [b for b in phases if b < a]
    if not done:
        return None
    b = max(done)
    d = dims[b]
    prev = (coord[b][r] - 1) % d
    sender = r + (prev - coord[b][r]) * stride[b]
    return _hop_id(phases, dims, b, sender, coord[b][r], prev, sender, stride)
