"""Exact symmetry: when one rank's view of a ring is every rank's, time one representative.

A ring schedule (:mod:`commsim.algorithms.ring`) sends only along the edges ``i -> i + 1``
(the chains of broadcast and reduce: all but the edge into the root, or out of it). When

* every edge's route has the same cost (summed latency, narrowest bandwidth), and
* no directed link lies on the routes of two edges,

no transfer ever shares a link with another edge's, and every rank does the same thing at the
same moment: the discrete-event simulation of the whole ring is the closed form of one
representative edge (``commsim.engine.closed_forms``), exactly. :func:`symmetric_note` checks
both conditions on the routes themselves (one route lookup per edge, no schedule built) and
returns the note the output carries; ``tests/engine/test_symmetry.py`` checks the closed form
equals the full simulation wherever the check passes, and that it refuses rings that share a
link (a ring whose hops cross one NIC) or whose hops differ (a ring across hosts).

``hierarchical`` over hosts of one size is rings too: a ring inside each host, then a ring
per rail across the hosts, then the host rings again. When each phase's hops are alike and no
link lies on two hops of any phase, every host and every rail runs the same schedule at the
same moments, and its closed form is the DES's, exactly. The phases of NCCL's composed
candidates (a ring inside a host, a ring per rail) are rings among groups of ranks, checked as
rings on their own networks.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.algorithms.hierarchical import host_groups
from commsim.collectives import Collective
from commsim.network import Network

#: The algorithms whose symmetry is checked: the ring (NCCL's, and the phases of its composed
#: candidates) and the hierarchical all-reduce's host rings and rail rings.
RING, HIERARCHICAL = "ring", "hierarchical"


def ring_edges(call: Call) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs a ring schedule of ``call`` sends along."""
    p, root = call.ranks, call.root
    if call.collective is Collective.BROADCAST:
        return [((root + k) % p, (root + k + 1) % p) for k in range(p - 1)]
    if call.collective is Collective.REDUCE:
        return [((root + 1 + k) % p, (root + 2 + k) % p) for k in range(p - 1)]
    return [(i, (i + 1) % p) for i in range(p)]


def symmetric_note(call: Call, network: Network, algorithm: str) -> str | None:
    """The note of an exact one-representative evaluation of ``algorithm`` for ``call`` on
    ``network``, or None when its rings are not symmetric there (or it has none): ``ring``,
    and ``hierarchical`` over hosts of one size (its host rings and its rail rings, each
    phase's hops alike, no link on two hops of any phase).

    Checked once per network, ranks, collective kind and root (sizes and chunks do not
    change the routes)."""
    if algorithm not in (RING, HIERARCHICAL) or call.ranks < 2:
        return None
    rooted = call.root if call.collective.rooted else None
    key = ("symmetric", algorithm, call.ranks, call.collective.rooted and call.collective.value,
           rooted, call.hosts)
    phases = ring_phases(call, algorithm)
    # costs, not only routes: kept with this network, not shared with its views
    alike = phases is not None and network.derived(
        key, lambda: _alike_and_disjoint(network, phases))
    if not alike:
        return None
    if algorithm == RING:
        return (f"symmetric ring: its {call.ranks} hops are alike and share no link, so one "
                "representative rank was evaluated (exact)")
    return ("symmetric hosts: the host rings' hops and the rails' hops are alike and share no "
            "link, so one representative rank was evaluated (exact)")


def ring_phases(call: Call, algorithm: str) -> list[list[tuple[int, int]]] | None:
    """The hops of each ring phase of ``algorithm``'s schedule of ``call`` (None: its phases
    are not rings alike by construction, e.g. hosts of different sizes)."""
    if algorithm == RING:
        return [ring_edges(call)]
    if call.hosts is None:
        return None
    groups = host_groups(call.hosts)
    size, hosts = len(groups[0]), len(groups)
    if hosts < 2 or any(len(g) != size for g in groups):
        return None
    inside = [(g[i], g[(i + 1) % size]) for g in groups for i in range(size)] if size > 1 else []
    rails = [(groups[h][lo], groups[(h + 1) % hosts][lo])
             for lo in range(size) for h in range(hosts)]
    return [phase for phase in (inside, rails) if phase]


def _alike_and_disjoint(network: Network, phases: list[list[tuple[int, int]]]) -> bool:
    """Whether every hop of each phase costs the same as the phase's others and no link lies
    on two hops (of any phase: phases that overlap in time never meet)."""
    routes = [[network.route(src, dst) for src, dst in edges] for edges in phases]
    latency, bandwidth = network.link_costs(route for phase in routes for route in phase)
    used: set[int] = set()
    for phase in routes:
        first: tuple[float, float] | None = None
        for route in phase:
            if not route:
                return False
            cost = (sum(latency[i] for i in route), min(bandwidth[i] for i in route))
            if first is None:
                first = cost
            elif cost != first:
                return False
            for link in route:
                if link in used:
                    return False
                used.add(link)
    return True
