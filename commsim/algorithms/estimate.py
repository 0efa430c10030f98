"""How many transfers an algorithm's schedule would have, without building it.

The discrete-event engine costs time and memory per transfer, so the timing layer asks here
before building a schedule and refuses a simulation that would not finish in seconds
(:func:`commsim.engine.evaluate.evaluate`). Each estimate is an upper bound on
``len(build_schedule(call, name))`` within a small factor (``tests/algorithms/
test_estimate.py`` checks both on many calls); zero-byte pieces, which builders drop, are
counted.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

from commsim.algorithms.base import Call
from commsim.collectives import Collective


def _ring(call: Call, chunks: int) -> int:
    p = call.ranks
    if call.collective.rooted:
        return (p - 1) * chunks
    steps = 2 * (p - 1) if call.collective is Collective.ALL_REDUCE else p - 1
    return steps * p * chunks


def _bidirectional(call: Call, chunks: int) -> int:
    return 2 * _ring(call, chunks)


def _pairs(call: Call, chunks: int) -> int:
    """All-to-all block by block: ``pairwise``, ``all_pairs``; ``pxn`` relays some twice."""
    return call.ranks * (call.ranks - 1) * chunks


def _pxn(call: Call, chunks: int) -> int:
    return 2 * _pairs(call, chunks)


def _bruck(call: Call, chunks: int) -> int:
    p, k, slots = call.ranks, 0, 0
    while (1 << k) < p:
        slots += sum(1 for i in range(p) if i >> k & 1)
        k += 1
    return p * slots * chunks


def _axes(call: Call, chunks: int) -> int:
    """All-to-all one phase per axis: per rank, peer and origin run of the axes before."""
    dims = call.torus_dims or (len(_host_sizes(call)), max(_host_sizes(call)))
    return call.ranks * sum((d - 1) * math.prod(dims[:a]) for a, d in enumerate(dims)) * chunks


def _torus(call: Call, chunks: int) -> int:
    if call.collective is Collective.ALL_TO_ALL:
        return _axes(call, chunks)
    p, dims = call.ranks, call.torus_dims or (call.ranks,)
    phases = 2 if call.collective is Collective.ALL_REDUCE else 1
    return phases * 2 * p * sum(d - 1 for d in dims) * chunks


def _tree(call: Call, chunks: int) -> int:
    phases = 2 if call.collective is Collective.ALL_REDUCE else 1
    return phases * (call.ranks - 1) * chunks


def _butterfly(call: Call, chunks: int) -> int:
    p = call.ranks
    steps = max(1, math.ceil(math.log2(p))) + 2  # + fold and unfold of non-powers of two
    phases = 2 if call.collective is Collective.ALL_REDUCE else 1
    return phases * p * steps * chunks


def _double_binary_tree(call: Call, chunks: int) -> int:
    return 4 * (call.ranks - 1) * chunks


def _host_sizes(call: Call) -> list[int]:
    return list(Counter(call.hosts or (0,) * call.ranks).values())


def _hierarchical(call: Call, chunks: int, rail_steps: Callable[[int], int]) -> int:
    sizes = _host_sizes(call)
    hosts, widest = len(sizes), max(sizes)
    intra = sum(2 * s * (s - 1) for s in sizes) * chunks
    return intra + widest * hosts * rail_steps(hosts) * chunks


def _hierarchical_ring(call: Call, chunks: int) -> int:
    if call.collective is Collective.ALL_TO_ALL:
        return _axes(call, chunks)
    return _hierarchical(call, chunks, lambda h: 2 * (h - 1))


def _hierarchical_butterfly(call: Call, chunks: int) -> int:
    return _hierarchical(call, chunks, lambda h: 2 * (max(1, math.ceil(math.log2(h))) + 2))


def _rails(call: Call, chunks: int) -> int:
    """Ring all-reduces among the hosts, one per local rank (none on one host)."""
    sizes = _host_sizes(call)
    hosts = len(sizes)
    return max(sizes) * hosts * 2 * (hosts - 1) * chunks


def _nvls(call: Call, chunks: int) -> int:
    """Up to the node switch and multicast back; across hosts then the rails, and each part
    up again and multicast to the host's other ranks."""
    sizes = _host_sizes(call)
    if len(sizes) == 1:
        return 2 * call.ranks * chunks
    return (2 + max(sizes)) * call.ranks * chunks + _rails(call, chunks)


def _collnet(call: Call, chunks: int) -> int:
    """Intra-host ring reduce-scatter and all-gather around a reduction in the fabric (no
    intra-host phases on a flat machine: every rank is its own host)."""
    sizes = _host_sizes(call) if call.hosts is not None else [1]
    intra = sum(2 * s * (s - 1) for s in sizes) * chunks
    return intra + 2 * call.ranks * chunks


def _gloo(call: Call, chunks: int) -> int:
    """gloo's chain broadcast; its other algorithms exchange up to twice every pair, with a
    staging copy per rank and piece."""
    p = call.ranks
    if call.collective is Collective.BROADCAST:
        return (p - 1) * chunks
    return 2 * p * p * chunks + 4 * p


#: Upper bound of the transfers of each registered algorithm's schedule (call, chunks).
ESTIMATES: dict[str, Callable[[Call, int], int]] = {
    "ring": _ring,
    "ring_bidirectional": _bidirectional,
    "torus": _torus,
    "binomial_tree": _tree,
    "recursive_doubling": _butterfly,
    "rabenseifner": _butterfly,
    "double_binary_tree": _double_binary_tree,
    "hierarchical": _hierarchical_ring,
    "hierarchical_rabenseifner": _hierarchical_butterfly,
    "nvls": _nvls,
    "collnet": _collnet,
    "gloo": _gloo,
    "pairwise": _pairs,
    "bruck": _bruck,
    "all_pairs": _pairs,
    "pxn": _pxn,
}


#: Memory one transfer costs a discrete-event simulation, schedule and records included
#: (measured: a 512-rank ring all-reduce, 523,264 transfers, peaks ~255 MB above the
#: interpreter's start; 256 ranks ~450 B per transfer).
DES_BYTES_PER_TRANSFER = 500


def estimate_des_bytes(transfers: int) -> int:
    """Bytes a discrete-event simulation of ``transfers`` transfers needs (an estimate)."""
    return transfers * DES_BYTES_PER_TRANSFER


def estimate_transfers(call: Call, algorithm: str, chunks: int) -> int:
    """An upper bound of the transfers ``algorithm``'s schedule of ``call`` would have."""
    if call.ranks < 2:
        return 0
    return ESTIMATES[algorithm](call, chunks)
