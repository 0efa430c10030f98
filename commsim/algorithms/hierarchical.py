"""Hierarchical all-reduce for multi-host calls: rings inside hosts, rails between them.

Two algorithms share the intra-host phases and differ in the rails: ``hierarchical`` runs a
ring over the hosts (``2(H-1)`` steps), ``hierarchical_rabenseifner`` Rabenseifner's recursive
halving and doubling (``2 log2 H`` steps, non-powers of two folded in), as NCCL switches to
log-depth trees between nodes at scale.

Ranks are grouped by ``call.hosts``; a host's ranks, in ascending order, have local indices
``0..L_h-1`` and hosts are ordered by their lowest rank. Three phases:

1. **intra-host reduce-scatter**: on each host a ring reduce-scatter (``commsim.algorithms.ring``)
   over the host's ranks, the buffer cut into ``L_h`` parts ``segment(l, L_h, n)``; local rank
   ``l`` ends with part ``l`` reduced over its host.
2. **inter-host all-reduce**: the buffer is cut at every part boundary of every host; each
   resulting range is held, reduced over its host, by one rank per host (its *owners*, one per
   host, in host order) and is ring all-reduced among them: cut into ``H`` sub-ranges, ring
   reduce-scatter then ring all-gather, ``2(H-1)`` steps. When hosts are the same size the
   ranges are the parts and the owners of part ``l`` are the ranks of local index ``l``: every
   rail all-reduces its own part, all rails at once.
3. **intra-host all-gather**: on each host a ring all-gather of the parts.

``hierarchical_rabenseifner`` replaces phase 2's rings by Rabenseifner all-reduces of each
range among its owners (``commsim.algorithms.recursive``'s fold, halving, doubling and
unfold, the range cut into ``2^floor(log2 H)`` blocks). Its messages go through each rank's
NIC one at a time: a rank's next inter-host piece waits until its previous one has arrived,
and a piece into a rank waits until the previous piece into that rank has arrived. So a rail
never has two flows on one NIC link (a butterfly step's pieces would otherwise overlap the
next step's, and a folded rank would receive its fold and its first halving message at once),
and with hosts of equal size no two transfers of the schedule share a link.

Every step moves its block in ``chunks`` pieces, one at a time per link; the rings of all hosts
(or all ranges) advance in lockstep so links shared by several ranges interleave step by step.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import Schedule

NAME = "hierarchical"
RABENSEIFNER = "hierarchical_rabenseifner"


def host_groups(hosts: tuple[int, ...]) -> list[list[int]]:
    """Ranks of each host, ascending, hosts ordered by their lowest rank.

    >>> host_groups((0, 0, 1, 1, 1, 2))
    [[0, 1], [2, 3, 4], [5]]
    """
    groups: dict[int, list[int]] = {}
    for rank, host in enumerate(hosts):
        groups.setdefault(host, []).append(rank)
    return sorted(groups.values(), key=lambda g: g[0])


def default_chunks(call: Call) -> int:
    """1: no pipelining unless ``--chunks`` asks for it."""
    return 1


def build(call: Call) -> Schedule:
    """The hierarchical all-reduce of ``call`` with ring rails (see the module docstring),
    built as columns (:mod:`commsim.algorithms.hierarchical_rows`)."""
    return _columns(call, NAME)


def build_rabenseifner(call: Call) -> Schedule:
    """The hierarchical all-reduce of ``call`` with Rabenseifner rails, built as columns."""
    return _columns(call, RABENSEIFNER)


def _columns(call: Call, name: str) -> Schedule:
    if call.collective is not Collective.ALL_REDUCE:
        raise ScheduleError(f"algorithm {name!r} cannot run {call.collective.value}")
    if call.hosts is None:
        raise ScheduleError(f"algorithm {name!r} needs a multi-host topology")
    from commsim.algorithms.hierarchical_rows import hierarchical_columns

    chunks = call.chunks or default_chunks(call)
    columns = hierarchical_columns(host_groups(call.hosts), call.nbytes, chunks,
                                   name == RABENSEIFNER)
    return Schedule.of_columns(call.collective, name, call.ranks, call.nbytes, call.root,
                               chunks, columns)
