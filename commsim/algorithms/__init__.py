"""The algorithm registry: every named algorithm, its collectives and its schedule builder.

>>> from commsim.collectives import Collective
>>> call = Call(collective=Collective.ALL_REDUCE, ranks=4, nbytes=1024)
>>> len(build_schedule(call, "ring"))        # 2(p-1) steps of 4 transfers
24
>>> candidates(call)  # doctest: +NORMALIZE_WHITESPACE
['ring', 'binomial_tree', 'recursive_doubling', 'rabenseifner', 'double_binary_tree',
 'ring_bidirectional']
"""

from __future__ import annotations

from dataclasses import replace

from commsim.algorithms import (
    bidirectional,
    double_binary_tree,
    gloo,
    hierarchical,
    innetwork,
    recursive,
    ring,
    torus,
    tree,
)
from commsim.algorithms.base import Algorithm, Call
from commsim.collectives import Collective
from commsim.errors import ScheduleError, SpecError
from commsim.gcpause import paused_gc
from commsim.schedule import Schedule

__all__ = [
    "ALGORITHMS",
    "SCHEDULED",
    "UNSCHEDULED",
    "Algorithm",
    "Call",
    "build_schedule",
    "candidates",
    "get_algorithm",
]

ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm(
            name=ring.NAME,
            collectives=frozenset(Collective),
            build=ring.build,
            default_chunks=ring.default_chunks,
            nccl_family="ring",
            summary="NCCL-style ring; pipelined chains for broadcast and reduce",
        ),
        Algorithm(
            name=tree.NAME,
            collectives=tree.COLLECTIVES,
            build=tree.build,
            default_chunks=tree.default_chunks,
            summary="binomial tree (MPICH); all-reduce = reduce to the root, then broadcast",
        ),
        Algorithm(
            name=recursive.DOUBLING,
            collectives=recursive.DOUBLING_COLLECTIVES,
            build=recursive.build_recursive_doubling,
            default_chunks=recursive.default_chunks,
            summary="recursive doubling, non-powers of two folded in (Thakur et al. 2005)",
        ),
        Algorithm(
            name=recursive.RABENSEIFNER,
            collectives=recursive.RABENSEIFNER_COLLECTIVES,
            build=recursive.build_rabenseifner,
            default_chunks=recursive.default_chunks,
            summary="reduce-scatter by recursive halving, then all-gather by recursive doubling",
        ),
        Algorithm(
            name=double_binary_tree.NAME,
            collectives=frozenset({Collective.ALL_REDUCE}),
            build=double_binary_tree.build,
            default_chunks=double_binary_tree.default_chunks,
            nccl_family="tree",
            summary="NCCL's two complementary binary trees, each all-reducing half the buffer",
        ),
        Algorithm(
            name=bidirectional.NAME,
            collectives=frozenset(Collective),
            build=bidirectional.build,
            default_chunks=bidirectional.default_chunks,
            summary="half of every block clockwise, half counter-clockwise, both rings at once; "
            "two opposite chains for broadcast and reduce",
        ),
        Algorithm(
            name=torus.NAME,
            collectives=torus.COLLECTIVES,
            build=torus.build,
            default_chunks=torus.default_chunks,
            needs_torus=True,
            summary="a bidirectional ring along each torus axis in turn (reduce-scatter axis 0 "
            "first, all-gather last axis first), as TPU pods run them",
        ),
        Algorithm(
            name=hierarchical.NAME,
            collectives=frozenset({Collective.ALL_REDUCE}),
            build=hierarchical.build,
            default_chunks=hierarchical.default_chunks,
            needs_hosts=True,
            summary="intra-host ring reduce-scatter, inter-host rail all-reduce, intra-host "
            "ring all-gather",
        ),
        Algorithm(
            name=hierarchical.RABENSEIFNER,
            collectives=frozenset({Collective.ALL_REDUCE}),
            build=hierarchical.build_rabenseifner,
            default_chunks=hierarchical.default_chunks,
            needs_hosts=True,
            summary="hierarchical with Rabenseifner rails: 2 log2(hosts) inter-host steps "
            "instead of 2 (hosts - 1)",
        ),
        Algorithm(
            name=innetwork.NVLS,
            collectives=frozenset({Collective.ALL_REDUCE}),
            build=innetwork.build_nvls,
            default_chunks=innetwork.default_chunks,
            reduces_in=innetwork.REDUCES_IN[innetwork.NVLS],
            nccl_family="nvls",
            summary="NVLink SHARP: reduced inside the node switch and multicast back; "
            "across hosts, rails between the in-switch phases",
        ),
        Algorithm(
            name=innetwork.COLLNET,
            collectives=frozenset({Collective.ALL_REDUCE}),
            build=innetwork.build_collnet,
            default_chunks=innetwork.default_chunks,
            reduces_in=innetwork.REDUCES_IN[innetwork.COLLNET],
            nccl_family="collnet",
            summary="NCCL CollNet over SHARP: intra-host ring reduce-scatter, rails reduced "
            "inside the fabric switch, intra-host ring all-gather",
        ),
        Algorithm(
            name=gloo.NAME,
            collectives=gloo.COLLECTIVES,
            build=gloo.build,
            default_chunks=gloo.default_chunks,
            automatic=False,
            closed_form=False,
            summary="PyTorch ProcessGroupGloo's own algorithms and copies (CPU hosts)",
        ),
    )
}

#: Collectives commsim names but cannot schedule yet: no algorithm offers them, whatever its
#: ``collectives`` say, so ``run``, ``validate`` and ``auto`` refuse them in one line. (The
#: all-to-all schedules come with the sixth collective's timing; this set goes then.)
UNSCHEDULED = frozenset({Collective.ALL_TO_ALL})
#: Every other collective, in :class:`Collective`'s order.
SCHEDULED = tuple(c for c in Collective if c not in UNSCHEDULED)
ALGORITHMS = {
    name: replace(a, collectives=a.collectives - UNSCHEDULED) for name, a in ALGORITHMS.items()
}


def get_algorithm(name: str) -> Algorithm:
    """The algorithm called ``name`` (``-`` accepted for ``_``, any case).

    >>> get_algorithm("Binomial-Tree").name
    'binomial_tree'
    """
    key = str(name).strip().lower().replace("-", "_")
    try:
        return ALGORITHMS[key]
    except KeyError:
        known = ", ".join(ALGORITHMS)
        raise SpecError(f"unknown algorithm {name!r} (known: {known})") from None


def build_schedule(call: Call, algorithm_name: str) -> Schedule:
    """Lower ``call`` with the named algorithm; ScheduleError if it cannot run it."""
    algorithm = get_algorithm(algorithm_name)
    algorithm.check_supports(call)
    # NOTE: a schedule is many small long-lived objects; see commsim.gcpause for the cost
    # of letting the cyclic collector rescan them while they are made.
    with paused_gc():
        return algorithm.build(call)


def candidates(call: Call) -> list[str]:
    """Names of the algorithms able to run ``call`` (what ``auto`` chooses among), in registry
    order (``ring`` first, so ties go to it). ``hierarchical`` is offered only when the ranks
    span more than one host: on a single host it is the ring. Algorithms that are not
    ``automatic`` (``gloo``) are left out: a topology maps collectives to them."""
    out = []
    for name, algorithm in ALGORITHMS.items():
        if not algorithm.automatic:
            continue
        try:
            algorithm.check_supports(call)
        except ScheduleError:
            continue
        if algorithm.needs_hosts and len(set(call.hosts or ())) < 2:
            continue
        out.append(name)
    return out
