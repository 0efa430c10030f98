"""Hierarchical all-reduce for multi-host calls: rings inside hosts, rails between them.

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

Every step moves its block in ``chunks`` pieces, one at a time per link; the rings of all hosts
(or all ranges) advance in lockstep so links shared by several ranges interleave step by step.
"""

from __future__ import annotations

from bisect import bisect_right

from commsim.algorithms.base import Call
from commsim.algorithms.plan import Plan, Range
from commsim.algorithms.ring import Ring, all_gather_steps, reduce_scatter_steps
from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.schedule import Schedule

NAME = "hierarchical"


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
    """The hierarchical all-reduce of ``call`` (see the module docstring)."""
    if call.collective is not Collective.ALL_REDUCE:
        raise ScheduleError(f"algorithm {NAME!r} cannot run {call.collective.value}")
    if call.hosts is None:
        raise ScheduleError(f"algorithm {NAME!r} needs a multi-host topology")
    p, n = call.ranks, call.nbytes
    chunks = call.chunks or default_chunks(call)
    plan = Plan(p, n)
    groups = host_groups(call.hosts)
    parts = [[segment(i, len(g), n) for i in range(len(g))] for g in groups]
    intra: list[Ring] = list(zip(groups, parts, strict=True))

    reduce_scatter_steps(plan, intra, chunks)
    rails = _rails(groups, parts, n)
    reduce_scatter_steps(plan, rails, chunks)
    all_gather_steps(plan, rails, chunks)
    all_gather_steps(plan, intra, chunks)
    return plan.schedule(call.collective, NAME, p, call.root, chunks)


def _rails(groups: list[list[int]], parts: list[list[Range]], nbytes: int) -> list[Ring]:
    """One ring per range between consecutive part boundaries of all hosts: its owners, and
    the range cut into one sub-range per host."""
    cuts = sorted({a for host_parts in parts for a, _ in host_parts} | {nbytes})
    hosts = len(groups)
    rails: list[Ring] = []
    for start, stop in zip(cuts, cuts[1:], strict=False):
        owners = []
        for group, host_parts in zip(groups, parts, strict=True):
            starts = [a for a, _ in host_parts]
            owners.append(group[bisect_right(starts, start) - 1])
        length = stop - start
        subs = [
            (start + k * length // hosts, start + (k + 1) * length // hosts) for k in range(hosts)
        ]
        rails.append((owners, subs))
    return rails
