"""All-to-all (and all-to-allv): every rank sends a block to every other rank.

As nccl-tests' ``alltoall_perf``: ``nbytes`` is each rank's whole send buffer, and rank ``s``
sends bytes ``[j n // p, (j + 1) n // p)`` of it to rank ``j`` (all-to-allv: ``Call.counts``,
each rank's blocks back to back). A transfer's ``offset`` indexes the send buffer of the rank
whose bytes it carries (``Columns.origin``: a relay forwards another rank's bytes). The block a
rank keeps for itself is a local copy, free on the network kinds, and not listed.

* ``pairwise``: p - 1 rounds of one exchange per rank (XOR pairing for a power of two of
  ranks, else the shifted pairing ``r -> r + k``), the MPI classic for large messages.
* ``bruck``: ceil(log2 p) rounds, each sending about half the buffer to ``r + 2^k``
  (Bruck et al., IEEE TPDS 1997), for small messages. Its two local rotations (slot order in,
  rank order out) are copies within a rank's memory, which commsim, like for every local copy
  on a network topology, does not charge: this schedule addresses blocks where they are, so
  it needs no rotation at all.
* ``all_pairs``: every pair at once, as NCCL's grouped ``ncclSend``/``ncclRecv`` (nccl-tests'
  alltoall) runs it without PXN.
* ``pxn``: NCCL's PXN (2.12+, on by default: ``NCCL_PXN_DISABLE=0``, ``NCCL_P2P_PXN_LEVEL=2``):
  a block for another host goes over NVLink to the sender host's GPU on the destination's
  rail, whose NIC sends it rail-aligned; pieces forwarded as they arrive.
* ``torus`` and ``hierarchical`` run all-to-all as one phase per axis (of the torus, or of
  hosts x ranks per host: rails first, then inside the host): :func:`axes`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from commsim.algorithms import alltoall_columns as ac
from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import Schedule

PAIRWISE = "pairwise"
BRUCK = "bruck"
ALL_PAIRS = "all_pairs"
PXN = "pxn"
COLLECTIVES = frozenset({Collective.ALL_TO_ALL})

#: NCCL_P2P_NET_CHUNKSIZE's default, 128 KiB (NCCL env docs, 2.12+): the piece a PXN relay
#: forwards at a time.
P2P_NET_CHUNK = 128 * 1024
#: At most this many pieces per relayed block by default (schedules stay ~p^2 rows).
MAX_PXN_CHUNKS = 4


def default_chunks(call: Call) -> int:
    """1: each block whole, unless ``--chunks`` asks for pieces."""
    return 1


def pxn_chunks(call: Call) -> int:
    """PXN's relay forwards NCCL_P2P_NET_CHUNKSIZE pieces: the largest block's pieces, at most
    :data:`MAX_PXN_CHUNKS`."""
    sizes, _ = ac.layout(call.ranks, call.nbytes, call.counts)
    largest = int(sizes.max(initial=0))
    return max(1, min(MAX_PXN_CHUNKS, -(-largest // P2P_NET_CHUNK)))


def _schedule(call: Call, name: str, hops: ac.Hops, chunks: int) -> Schedule:
    cols = hops.columns(chunks)
    return Schedule.of_columns(call.collective, name, call.ranks, call.nbytes, 0, chunks, cols,
                               counts=call.counts)


def _check(call: Call) -> None:
    if call.collective is not Collective.ALL_TO_ALL:
        raise ScheduleError(f"not an all-to-all: {call.collective.value}")


def build_pairwise(call: Call) -> Schedule:
    """:func:`~commsim.algorithms.alltoall_columns.pairwise`."""
    _check(call)
    hops = ac.pairwise(*ac.layout(call.ranks, call.nbytes, call.counts))
    return _schedule(call, PAIRWISE, hops, call.chunks or 1)


def build_bruck(call: Call) -> Schedule:
    """:func:`~commsim.algorithms.alltoall_columns.bruck`."""
    _check(call)
    hops = ac.bruck(*ac.layout(call.ranks, call.nbytes, call.counts))
    return _schedule(call, BRUCK, hops, call.chunks or 1)


def build_all_pairs(call: Call) -> Schedule:
    """:func:`~commsim.algorithms.alltoall_columns.all_pairs`."""
    _check(call)
    hops = ac.all_pairs(*ac.layout(call.ranks, call.nbytes, call.counts))
    return _schedule(call, ALL_PAIRS, hops, call.chunks or 1)


def host_grid(call: Call) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(host, local index, members) of the call's ranks: ``members[h, l]`` is host ``h``'s
    ``l``-th rank. ScheduleError unless every host has as many ranks."""
    hosts = np.asarray(call.hosts if call.hosts is not None else (0,) * call.ranks)
    _, host = np.unique(hosts, return_inverse=True)
    counts = np.bincount(host)
    if len(set(counts.tolist())) > 1:
        raise ScheduleError(
            f"all-to-all across hosts by rails needs as many ranks on every host, got "
            f"{sorted(set(counts.tolist()))}"
        )
    order = np.argsort(host, kind="stable")
    local = np.empty(call.ranks, dtype=np.int64)
    local[order] = np.arange(call.ranks) % int(counts[0])
    return host, local, order.reshape(len(counts), int(counts[0]))


def check_pxn(call: Call) -> None:
    """ScheduleError unless the hosts have as many ranks each (rails line up)."""
    if call.collective is Collective.ALL_TO_ALL:
        host_grid(call)


def build_pxn(call: Call) -> Schedule:
    """:func:`~commsim.algorithms.alltoall_columns.pxn` on the call's hosts."""
    _check(call)
    host, local, members = host_grid(call)
    sizes, starts = ac.layout(call.ranks, call.nbytes, call.counts)
    return _schedule(call, PXN, ac.pxn(sizes, starts, host, local, members),
                     call.chunks or pxn_chunks(call))


def grid_dims(call: Call) -> tuple[int, ...]:
    """The grid ``axes`` runs on: the torus's dims, else (hosts, ranks per host) with the
    ranks in host order (ScheduleError otherwise)."""
    if call.torus_dims is not None:
        return call.torus_dims
    host, local, members = host_grid(call)
    if not np.array_equal(members.ravel(), np.arange(call.ranks)):
        raise ScheduleError("all-to-all by rails needs the ranks numbered host by host")
    return members.shape


def check_grid(call: Call) -> None:
    """ScheduleError unless :func:`grid_dims` has a grid for an all-to-all call."""
    if call.collective is Collective.ALL_TO_ALL:
        grid_dims(call)


def build_axes(call: Call, name: str) -> Schedule:
    """One phase per axis of :func:`grid_dims`."""
    _check(call)
    dims = grid_dims(call)
    hops = ac.axes(*ac.layout(call.ranks, call.nbytes, call.counts), dims)
    return _schedule(call, name, hops, call.chunks or 1)


def or_axes(name: str, build: Callable[[Call], Schedule],
            chunks: Callable[[Call], int]) -> tuple[Callable[[Call], Schedule],
                                                    Callable[[Call], int]]:
    """The builder and default pieces of an algorithm (``torus``, ``hierarchical``) that runs
    all-to-all by :func:`build_axes` and its other collectives as before."""

    def build_any(call: Call) -> Schedule:
        if call.collective is Collective.ALL_TO_ALL:
            return build_axes(call, name)
        return build(call)

    def chunks_any(call: Call) -> int:
        return default_chunks(call) if call.collective is Collective.ALL_TO_ALL else chunks(call)

    return build_any, chunks_any
