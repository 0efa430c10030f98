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

from bisect import bisect_right
from collections.abc import Callable, Sequence

from commsim.algorithms.base import Call
from commsim.algorithms.plan import Plan, Range, split_all
from commsim.algorithms.recursive import fold
from commsim.algorithms.ring import Ring, all_gather_steps, reduce_scatter_steps
from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.schedule import NONE, Handle, OpKind, Schedule, join

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


def build_objects(call: Call) -> Schedule:
    """:func:`build` one transfer at a time through a :class:`Plan` (tests compare the two)."""
    return _build(call, NAME, _ring_rails)


def build_rabenseifner_objects(call: Call) -> Schedule:
    """:func:`build_rabenseifner` one transfer at a time through a :class:`Plan` (tests
    compare the two)."""
    return _build(call, RABENSEIFNER, _rabenseifner_rails)


def _build(call: Call, name: str, rails_phase: Callable[[Plan, list[Ring], int], None]) -> Schedule:
    if call.collective is not Collective.ALL_REDUCE:
        raise ScheduleError(f"algorithm {name!r} cannot run {call.collective.value}")
    if call.hosts is None:
        raise ScheduleError(f"algorithm {name!r} needs a multi-host topology")
    p, n = call.ranks, call.nbytes
    chunks = call.chunks or default_chunks(call)
    plan = Plan(p, n)
    groups = host_groups(call.hosts)
    parts = [[segment(i, len(g), n) for i in range(len(g))] for g in groups]
    intra: list[Ring] = list(zip(groups, parts, strict=True))

    reduce_scatter_steps(plan, intra, chunks)
    rails_phase(plan, _rails(groups, parts, n), chunks)
    all_gather_steps(plan, intra, chunks)
    return plan.schedule(call.collective, name, p, call.root, chunks)


def _ring_rails(plan: Plan, rails: list[Ring], chunks: int) -> None:
    reduce_scatter_steps(plan, rails, chunks)
    all_gather_steps(plan, rails, chunks)


class _Nics:
    """Sends inter-host messages one piece at a time per NIC direction.

    ``sent[r]`` / ``received[r]``: the handle of the last piece rank ``r`` sent / received.
    Pieces into a rank form one chain, so of the pieces into ``src`` that its data waits for
    only the latest is kept as a dependency: the others are its ancestors (same times, same
    checker verdict), and a rank's data would otherwise wait on ``O(log H)`` reduces.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.first = len(plan.builder.transfers)  # transfers from here on are inter-host
        self.sent: dict[int, Handle] = {}
        self.received: dict[int, Handle] = {}

    def send(self, src: int, dst: int, ranges: Sequence[Range], op: OpKind, chunks: int) -> None:
        for part in split_all(ranges, chunks):
            after = join(self.sent.get(src, NONE), self.received.get(dst, NONE))
            data = self.plan.ready(src, part)
            mine = [i for i in data if i >= self.first]
            if len(mine) > 1:
                data = frozenset(i for i in data if i < self.first) | {max(mine)}
            handle = self.plan.send(src, dst, part, op, after=after, data=data)
            self.sent[src] = self.received[dst] = handle


def _rabenseifner_rails(plan: Plan, rails: list[Ring], chunks: int) -> None:
    """Rabenseifner all-reduce of every rail's range among its owners, stages in lockstep."""
    if not rails or len(rails[0][0]) < 2:
        return
    nics = _Nics(plan)
    core, pairs = fold(len(rails[0][0]))
    pof2 = len(core)
    # per rail: owners, the full range, and the core ranks' blocks
    plans = []
    for owners, subs in rails:
        start, stop = subs[0][0], subs[-1][1]
        cuts = [segment(k, pof2, stop - start) for k in range(pof2)]
        blocks = [(start + a, start + b) for a, b in cuts]
        plans.append((owners, [(start, stop)], blocks))

    def window(blocks: list[Range], first: int, count: int) -> list[Range]:
        return [(blocks[first][0], blocks[first + count - 1][1])]

    for owners, full, _ in plans:
        for even, odd in pairs:
            nics.send(owners[even], owners[odd], full, OpKind.REDUCE, chunks)
    mask = pof2 >> 1
    while mask:  # recursive halving: hand the partner's half of my window to the partner
        for owners, _, blocks in plans:
            for a in range(pof2):
                b = a ^ mask
                ranges = window(blocks, b & ~(mask - 1), mask)
                nics.send(owners[core[a]], owners[core[b]], ranges, OpKind.REDUCE, chunks)
        mask >>= 1
    mask = 1
    while mask < pof2:  # recursive doubling: send my window, receive my partner's
        for owners, _, blocks in plans:
            for a in range(pof2):
                ranges = window(blocks, a & ~(mask - 1), mask)
                nics.send(owners[core[a]], owners[core[a ^ mask]], ranges, OpKind.COPY, chunks)
        mask <<= 1
    for owners, full, _ in plans:
        for even, odd in pairs:
            nics.send(owners[odd], owners[even], full, OpKind.COPY, chunks)


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
