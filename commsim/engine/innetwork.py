"""Closed forms of the in-network all-reduces (``nvls``, ``collnet``): exact on networks whose
ranks are alike (every host the same, every port the same), as the DES gives them.

A switch all-reduce of pieces ``m_1..m_c`` (see :func:`switch_all_reduce`) is a two-stage
pipeline: each rank uploads its pieces one at a time (``U_k = U_{k-1} + up(m_k)``), the switch
multicasts piece ``k`` once every upload of it has arrived and the previous piece has reached
the rank (``E_k = max(U_k, E_{k-1}) + down(m_k)``). With equal pieces and ports alike that is
``up + down + (c - 1) max(up, down)``: ``(c + 1)(alpha/2 + n/(c B))`` on a symmetric switch port.
The phases of the multi-host forms are separated by barriers, so their times add up.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.algorithms.hierarchical import host_groups
from commsim.algorithms.innetwork import COLLNET, NVLS, parts
from commsim.algorithms.plan import Range, split
from commsim.engine import closed_forms as cf
from commsim.engine.closed_forms import Hop
from commsim.engine.pairs import UNIFORM_KINDS, PairCosts, alike_kind, touched_ranks
from commsim.errors import SpecError
from commsim.network import Network


def predict(call: Call, network: Network, name: str, chunks: int) -> float:
    """Seconds of the in-network all-reduce ``name`` (network: its reducing view)."""
    p, n = call.ranks, call.nbytes
    if call.hosts is not None:
        groups = host_groups(call.hosts)
    else:
        groups = [list(range(p))] if name == NVLS else [[r] for r in range(p)]
    pairs = PairCosts.of(network, p, call.hosts)
    if name == NVLS:
        assert call.host_switches is not None
        up, down = _port_hops(network, call.host_switches, _port_ranks(network, groups, p))
        time_s = switch_all_reduce(split(0, n, chunks), up, down)
        if len(groups) > 1:
            host_parts = parts(groups, n)
            # the rails are rings over the hosts: each host's rank to the next host's
            heads = [g[0] for g in groups]
            rail = pairs.hop(heads, heads[1:] + heads[:1])
            time_s += max(
                cf.ring_collective(len(groups), hi - lo, 1, len(groups) - 1, len(groups) - 1, 1,
                                  rail, rail)
                for lo, hi in host_parts[0]
            )
            time_s += switch_gather(host_parts[0], chunks, up, down)
        return time_s
    if name == COLLNET:
        assert call.fabric_switch is not None
        size = len(groups[0])
        intra = pairs.hop([r for g in groups for r in g],
                          [g[(i + 1) % size] for g in groups for i in range(size)])
        host_parts = parts(groups, n)
        ring = 0.0
        if size > 1:  # intra-host ring reduce-scatter, then all-gather (barriers between)
            ring = cf.ring_collective(size, n, 1, size - 1, 0, 1, intra, intra)
            ring += cf.ring_collective(size, n, 1, 0, size - 1, 0, intra, intra)
        up, down = _port_hops(network, (call.fabric_switch,) * p,
                              _port_ranks(network, groups, p))
        rails = max(switch_all_reduce(split(lo, hi, chunks), up, down) for lo, hi in host_parts[0])
        return ring + rails
    raise SpecError(f"no in-network closed form for {name!r}")  # pragma: no cover


def switch_all_reduce(pieces: list[Range], up: Hop, down: Hop) -> float:
    """Upload every piece, multicast each once all uploads of it arrived (module docstring)."""
    uploaded = arrived = 0.0
    for lo, hi in pieces:
        if hi > lo:
            uploaded += up.copy(hi - lo)
            arrived = max(uploaded, arrived) + down.copy(hi - lo)
    return arrived


def switch_gather(blocks: list[Range], chunks: int, up: Hop, down: Hop) -> float:
    """All-gather through the switch: owner ``l`` uploads its block's pieces one at a time;
    the switch sends rank ``j`` every other owner's piece ``k`` in (piece, owner) order."""
    pieces = [split(lo, hi, chunks) for lo, hi in blocks]
    uploaded = [[0.0] * chunks for _ in blocks]
    for owner, owned in enumerate(pieces):
        clock = 0.0
        for k, (lo, hi) in enumerate(owned):
            clock += up.copy(hi - lo)
            uploaded[owner][k] = clock
    finish = 0.0
    for rank in range(len(blocks)):
        clock = 0.0
        for k in range(chunks):
            for owner, owned in enumerate(pieces):
                lo, hi = owned[k]
                if owner != rank and hi > lo:
                    clock = max(uploaded[owner][k], clock) + down.copy(hi - lo)
        finish = max(finish, clock)
    return finish


def _port_ranks(network: Network, groups: list[list[int]], ranks: int) -> list[int]:
    """The ranks whose switch ports are looked up: on the kinds whose hosts (and ports) are
    alike by construction, one host's; elsewhere every rank."""
    kind = alike_kind(network)
    alike = kind in UNIFORM_KINDS or (kind == "hierarchical" and len(groups) > 1)
    if not alike:
        return list(range(ranks))
    touched = touched_ranks(network)  # a degraded machine's touched ranks stand for themselves
    return sorted({*groups[0], *touched[touched < ranks].tolist()})


def _port_hops(network: Network, switches: tuple[int, ...],
               ranks: list[int]) -> tuple[Hop, Hop]:
    """The worst rank -> switch and switch -> rank hops (switches as endpoints)."""
    ups = [network.path_cost(r, switches[r]) for r in ranks]
    downs = [network.path_cost(switches[r], r) for r in ranks]
    return (Hop(max(a for a, _ in ups), min(b for _, b in ups)),
            Hop(max(a for a, _ in downs), min(b for _, b in downs)))
