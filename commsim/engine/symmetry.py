"""Exact symmetry: when one rank's view of a ring is every rank's, time one representative.

A ring schedule (:mod:`commsim.algorithms.ring`) sends only along the edges ``i -> i + 1``
(the chains of broadcast and reduce: all but the edge into the root, or out of it). When

* every edge's route has the same cost (summed latency, narrowest bandwidth), and
* no directed link lies on the routes of two edges,

no transfer ever shares a link with another edge's, and every rank does the same thing at the
same moment: the discrete-event simulation of the whole ring is the closed form of one
representative edge (``commsim.engine.closed_forms``), exactly. :func:`symmetric_ring` checks
both conditions on the routes themselves (one route lookup per edge, no schedule built) and
returns the note the output carries; ``tests/engine/test_symmetry.py`` checks the closed form
equals the full simulation wherever the check passes, and that it refuses rings that share a
link (a ring whose hops cross one NIC) or whose hops differ (a ring across hosts).

The hierarchical phases of NCCL's model (a ring inside each host, a ring per rail across the
hosts) are rings among groups of ranks, so each phase is checked the same way.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.network import Network

#: The algorithm whose symmetry is checked (the one the NCCL model and ``auto`` run at scale).
RING = "ring"


def ring_edges(call: Call) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs a ring schedule of ``call`` sends along."""
    p, root = call.ranks, call.root
    if call.collective is Collective.BROADCAST:
        return [((root + k) % p, (root + k + 1) % p) for k in range(p - 1)]
    if call.collective is Collective.REDUCE:
        return [((root + 1 + k) % p, (root + 2 + k) % p) for k in range(p - 1)]
    return [(i, (i + 1) % p) for i in range(p)]


def symmetric_ring(call: Call, network: Network, algorithm: str) -> str | None:
    """The note of an exact one-representative evaluation of ``algorithm`` for ``call`` on
    ``network``, or None when the ring is not symmetric there (or it is no ring).

    Checked once per network, ranks, collective kind and root (sizes and chunks do not
    change the routes)."""
    if algorithm != RING or call.ranks < 2:
        return None
    rooted = call.root if call.collective.rooted else None
    key = ("symmetric ring", call.ranks, call.collective.rooted and call.collective.value, rooted)
    alike = network.derived(key, lambda: _alike_and_disjoint(network, ring_edges(call)))
    if not alike:
        return None
    return (f"symmetric ring: its {call.ranks} hops are alike and share no link, so one "
            "representative rank was evaluated (exact)")


def _alike_and_disjoint(network: Network, edges: list[tuple[int, int]]) -> bool:
    """Whether every edge's route costs the same and no link lies on two edges' routes."""
    links = network.links
    used: set[int] = set()
    first: tuple[float, float] | None = None
    for src, dst in edges:
        route = network.route(src, dst)
        if not route:
            return False
        cost = (sum(links[i].latency_s for i in route), min(links[i].bandwidth_Bps for i in route))
        if first is None:
            first = cost
        elif cost != first:
            return False
        for link in route:
            if link in used:
                return False
            used.add(link)
    return True
