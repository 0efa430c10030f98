"""Closed forms of the all-to-all algorithms (:mod:`commsim.algorithms.alltoall`).

* ``pairwise``: the sum over its p - 1 rounds of the round's worst pair moving the round's
  largest block; exact where the pairs are alike and no link is shared (a switch, a fully
  connected machine), as every round then runs in lockstep.
* ``bruck``: the sum over its rounds of the worst pair ``r -> r + 2^k`` moving the most bytes
  a rank sends that round (its blocks share the one link, so they take their total over its
  bandwidth, whatever their number); exact for equal blocks on alike pairs.
* ``all_pairs``: every flow at once, so the busiest link carries its bytes at full speed:
  the worst pair's latency plus the busiest link's bytes over its bandwidth (max-min sharing
  keeps that link busy to the end when its flows are equal; a lower bound of the DES else).
* ``pxn``: the same over the relayed flows (the NVLink hop and the rail hop both loaded),
  with both hops' latencies: an estimate, as its two hops overlap piece by piece.
* ``torus`` / ``hierarchical``: the sum over the axes of the phase's worst pair latency plus
  its busiest link.

With ``chunks`` pieces a block's pieces go one after another, each paying the latency.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from commsim.algorithms import alltoall
from commsim.algorithms import alltoall_columns as ac
from commsim.algorithms.base import Call
from commsim.engine.closed_forms import Hop
from commsim.engine.pairs import PairCosts

#: Above this many distinct block sizes in a phase, link loads are counted route by route
#: (each route looked up once) instead of one vectorised count per size.
MAX_SIZE_GROUPS = 64


def _layout(call: Call) -> tuple[np.ndarray, np.ndarray]:
    return ac.layout(call.ranks, call.nbytes, call.counts)


def _pieces(nbytes: int, chunks: int) -> list[int]:
    return [nbytes * (k + 1) // chunks - nbytes * k // chunks for k in range(chunks)]


def _serial(hop: Hop, nbytes: int, chunks: int) -> float:
    """A block's pieces one after another over ``hop``."""
    return sum(hop.copy(piece) for piece in _pieces(nbytes, chunks))


def _serial_each(hop: Hop, nbytes: np.ndarray, chunks: int) -> np.ndarray:
    """:func:`_serial` of every block of ``nbytes`` (an empty piece costs nothing)."""
    out = np.zeros(len(nbytes))
    for piece in _pieces_of(nbytes, chunks):
        out += np.where(piece > 0, hop.alpha_s + piece / hop.beta_Bps, 0.0)
    return out


def pairwise(call: Call, chunks: int, pairs: PairCosts) -> float:
    """Round by round, each rank's exchange after both of its exchanges of the round before
    (the schedule's lockstep; an empty block waits for nothing of its own)."""
    p = call.ranks
    sizes, _ = _layout(call)
    r = np.arange(p, dtype=np.int64)
    xor = p & (p - 1) == 0
    peers = [r ^ k if xor else (r + k) % p for k in range(1, p)]
    hops = pairs.memo(("a2a pairwise", xor), lambda: [pairs.hop(r, q) for q in peers])
    sent = np.zeros(p)          # when each rank's last exchange ended
    for k, (hop, q) in enumerate(zip(hops, peers, strict=True), start=1):
        start = sent
        if k > 1:
            came = r ^ (k - 1) if xor else (r - (k - 1)) % p
            start = np.maximum(sent, sent[came])
        sent = start + _serial_each(hop, sizes[r, q], chunks)
    return float(sent.max(initial=0.0)) if p > 1 else 0.0


def bruck(call: Call, chunks: int, pairs: PairCosts) -> float:
    p = call.ranks
    sizes, _ = _layout(call)
    r = np.arange(p, dtype=np.int64)
    total, k = 0.0, 0
    while (1 << k) < p:
        step = 1 << k
        hop = pairs.memo(("a2a bruck", k), partial(_hop, pairs, r, (r + step) % p))
        slots = np.flatnonzero(np.arange(p) & step)
        origin = (r[:, None] - (slots & (step - 1))[None, :]) % p
        block = sizes[origin, (origin + slots[None, :]) % p]
        waves = np.zeros((p, chunks), dtype=np.int64)
        for j, piece in enumerate(_pieces_of(block, chunks)):
            waves[:, j] = piece.sum(axis=1)
        total += sum(hop.copy(int(w)) for w in waves.max(axis=0))
        k += 1
    return total


def _hop(pairs: PairCosts, src: np.ndarray, dst: np.ndarray) -> Hop:
    return pairs.hop(src, dst)


def _pieces_of(block: np.ndarray, chunks: int) -> list[np.ndarray]:
    return [block * (j + 1) // chunks - block * j // chunks for j in range(chunks)]


def link_seconds(pairs: PairCosts, src: np.ndarray, dst: np.ndarray,
                 weights: np.ndarray, key: object = None) -> float:
    """Seconds the busiest link needs for every flow ``src[k] -> dst[k]`` of ``weights[k]``
    bytes at once; ``key`` names the flows (``src``, ``dst``) for ``pairs.memo``: when every
    weight is one positive value, the routes' link counts are kept under it, so the next size
    (or piece) costs no route look-up."""
    net = pairs.network
    if key is not None and weights.size and weights.min() == weights.max() > 0:
        # NOTE: 256-rank all-to-alls (deepseek-v3's planner search): 65,536 routes a size
        used, count, bandwidth = pairs.memo(("link counts", key),
                                            lambda: _link_counts(pairs, src, dst))
        if not used.size:
            return 0.0
        return float((count * float(weights[0]) / bandwidth).max())
    keep = (src != dst) & (weights > 0)
    src, dst, weights = src[keep], dst[keep], weights[keep]
    if not src.size:
        return 0.0
    load = np.zeros(len(net.links))
    values, which = np.unique(weights, return_inverse=True)
    if len(values) <= MAX_SIZE_GROUPS:
        for v, value in enumerate(values.tolist()):
            mine = which == v
            links = net.route_links(src[mine], dst[mine])
            load += np.bincount(links, minlength=len(load)) * float(value)
    else:
        for a, b, w in zip(src.tolist(), dst.tolist(), weights.tolist(), strict=True):
            load[list(net.route(a, b))] += w
    used = np.flatnonzero(load)
    return float((load[used] / net.link_values(used).bandwidth_Bps).max())


def _link_counts(pairs: PairCosts, src: np.ndarray,
                 dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The links the flows ``src[k] -> dst[k]`` cross (a rank to itself: none), how many
    flows cross each, and each one's bandwidth."""
    net = pairs.network
    keep = src != dst
    links = net.route_links(src[keep], dst[keep]) if keep.any() else np.zeros(0, np.int64)
    count = np.bincount(links, minlength=len(net.links))
    used = np.flatnonzero(count)
    return used, count[used], net.link_values(used).bandwidth_Bps


def _at_once(pairs: PairCosts, hop: Hop, src: np.ndarray, dst: np.ndarray,
             weights: np.ndarray, chunks: int, key: object = None) -> float:
    """Flows that all start together, cut in ``chunks`` waves of pieces (``key``: the flows'
    name, :func:`link_seconds`)."""
    return sum(hop.alpha_s + link_seconds(pairs, src, dst, piece, key)
               for piece in _pieces_of(weights, chunks) if (piece > 0).any())


def all_pairs(call: Call, chunks: int, pairs: PairCosts) -> float:
    p = call.ranks
    sizes, _ = _layout(call)
    s, j = np.divmod(np.arange(p * p, dtype=np.int64), p)
    hop = pairs.memo("a2a all pairs", lambda: pairs.hop(s, j))
    return _at_once(pairs, hop, s, j, sizes[s, j], chunks, "a2a all pairs")


def pxn(call: Call, chunks: int, pairs: PairCosts) -> float:
    p = call.ranks
    sizes, _ = _layout(call)
    host, local, members = alltoall.host_grid(call)
    s, j = np.divmod(np.arange(p * p, dtype=np.int64), p)
    relay = members[host[s], local[j]]
    via = (host[s] != host[j]) & (relay != s)
    first = np.where(via, relay, j)
    src = np.concatenate([s, relay[via]])
    dst = np.concatenate([first, j[via]])
    weights = np.concatenate([sizes[s, j], sizes[s, j][via]])

    def hops() -> tuple[Hop, Hop]:
        return pairs.hop(s, first), pairs.hop(relay[via], j[via])

    near, far = pairs.memo("a2a pxn", hops)
    latency = near.alpha_s + (far.alpha_s if via.any() else 0.0)
    return sum(latency + link_seconds(pairs, src, dst, piece, "a2a pxn")
               for piece in _pieces_of(weights, chunks) if (piece > 0).any())


def axes(call: Call, chunks: int, pairs: PairCosts) -> float:
    dims = alltoall.grid_dims(call)
    sizes, starts = _layout(call)
    hops = ac.axes(sizes, starts, dims)
    total = 0.0
    for a, part in enumerate(hops.parts):
        src, dst, nbytes = part[0], part[1], part[3]
        hop = pairs.memo(("a2a axes", dims, a), partial(_hop, pairs, src, dst))
        total += _at_once(pairs, hop, src, dst, nbytes, chunks, ("a2a axes", dims, a))
    return total
