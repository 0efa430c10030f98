"""NCCL's composed candidates: the all-reduces it runs as pipelined phases across hosts, timed
phase by phase. This is their closed form (``--engine analytic``, and where their pipelined
schedule, :mod:`commsim.nccl_tree`, is beyond the DES's budget); under the DES the schedule
answers (see :mod:`commsim.nccl`).

Its tree across hosts (``hierarchical_pipelined``) reduces inside each host while each rail of
GPUs, one per host, reduces across the network; NVLS across hosts reduces inside each host's
NVSwitch and along the rails the same way; CollNet reduces inside each host and in the fabric's
switches. Each phase is a schedule commsim times on the phase's own protocol network (the
model's :meth:`~PhaseNetworks.phase_network`); the call, pipelined in many chunks, takes the
slower phase plus the faster one's latency, and the NVLS tree, in NCCL's loops, the faster
phase's bytes of one loop too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol as Interface

import numpy as np

from commsim.algorithms import get_algorithm
from commsim.algorithms.calls import make_call
from commsim.algorithms.estimate import estimate_transfers
from commsim.collectives import Collective
from commsim.engine.evaluate import Evaluation, evaluate
from commsim.errors import SpecError
from commsim.links import link_columns
from commsim.nccl_caps import tree_cap_Bps
from commsim.nccl_tables import NcclConfig, Protocol, active_channels, nvls_tree_loop_bytes
from commsim.network import Network
from commsim.topology.degrade import META_KEY

#: The composed algorithm of NCCL's trees across hosts (see :meth:`ComposedTimer.hierarchical`).
PIPELINED = "hierarchical_pipelined"
#: How NCCL's trees (and NVLS trees) cross hosts: a double binary tree among one rank per
#: host (tuning.cc counts ``log2(nodes)`` network hops each way).
RAIL_TREE = "double_binary_tree"
#: The most transfers one phase of a composed candidate may simulate (a phase's DES time had by
#: symmetry simulates none). A composed candidate simulates up to eight phases, and a tree's
#: phase is contended (its two trees share every rank's links): measured about 65 us per
#: transfer for the double binary tree among 512 to 4096 hosts of dgx-h100 on two cores, so
#: this keeps a composed DES within seconds; beyond it the call is refused in one line.
MAX_PHASE_DES_TRANSFERS = 50_000
#: The note of a composed candidate on a degraded machine some of whose phases were beyond the
#: DES's size without a symmetric representative.
DEGRADED_NOTE = ("degraded phases beyond the simulator's size were timed by their closed forms "
                 "(the worst hop: exact for rings whose hops share no link)")
#: The note of a composed candidate some of whose phases' DES times were had by symmetry.
COMPOSED_NOTE = ("symmetric phases: the phases whose rings have alike hops sharing no link were "
                 "timed from one representative rank (exact)")


def _pipelined(phases: Callable[[int, bool], tuple[float, float]], nbytes: int, ranks: int,
               loop_bytes: int = 0) -> float:
    """Two phases pipelined in many chunks: the slower phase plus the faster one's latency
    (its time at one byte per rank), ``max(A, B) + min(A0, B0)``. In loops of ``loop_bytes``
    (each chunk moved whole by one phase before the next takes it), the faster phase's
    bytes of one loop show too: ``+ (min(A, B) - min(A0, B0)) x loop / bytes`` (at most
    ``A + B``: one loop). In ``L`` whole loops that is the faster phase over ``L``; a last,
    smaller loop hides no more than a whole one, so the time never drops as the size grows.
    ``phases(n, only_min)`` gives (A, B) at ``n`` bytes; with ``only_min`` only ``min(A, B)``
    is read, so B may be given as ``min(B, A)`` (its simulations stop at A)."""
    a, b = phases(nbytes, False)
    a0, b0 = phases(ranks, True)
    latency = min(a0, b0)
    share = min(1.0, loop_bytes / nbytes) if loop_bytes and nbytes else 0.0
    return max(a, b) + latency + max(min(a, b) - latency, 0.0) * share


class PhaseNetworks(Interface):
    """What composing phases needs of NCCL's model of a machine
    (:class:`~commsim.nccl.NcclModel` provides it)."""

    network: Network
    config: NcclConfig

    def hosts(self, ranks: int) -> list[list[int]]: ...

    def ring_channels(self, ranks: int) -> int: ...

    def ring_order(self, ranks: int) -> tuple[int, ...]: ...

    def tree_scale(self, family: str, protocol: str, nbytes: int) -> float: ...

    def phase_network(self, ranks: tuple[int, ...], protocol: Protocol, family: str = "ring",
                      channels: float = 1, active: int | None = None,
                      collective: Collective = Collective.ALL_REDUCE, latency: float = 1.0,
                      scale: float = 1.0, hop_scales: tuple[float, float] = (1.0, 1.0),
                      nodes: int | None = None) -> Network: ...


class ComposedTimer:
    """Times composed candidates on ``model``'s phase networks with ``engine``, noting whether
    any phase's DES time was had by symmetry. Launch latency is never included."""

    def __init__(self, model: PhaseNetworks, engine: str) -> None:
        self.model = model
        self.engine = engine
        #: The notes of the phases timed so far (see :meth:`_run`).
        self.notes: list[str | None] = []

    def evaluate(self, collective: Collective, ranks: int, nbytes: int, name: str,
                 protocol: Protocol) -> Evaluation:
        """The composed candidate ``name`` (NCCL's trees, NVLS or CollNet across hosts) on the
        first ``ranks`` ranks: its composed time (no transfers), noted when some of its phases' DES
        times were had by symmetry. The trees go no faster than NCCL's tree cap
        (:func:`~commsim.nccl_caps.tree_cap_Bps`)."""
        self.notes = []
        if name == PIPELINED:
            time_s = self.hierarchical(collective, ranks, nbytes, protocol)
            config, groups = self.model.config, self.model.hosts(ranks)
            cap = tree_cap_Bps(config.version, config.arch, len(groups), protocol.name,
                               config.channels, config.cpu, len(groups[0]) == 1
                               ) * self.model.tree_scale("tree", protocol.name, nbytes)
            time_s = max(time_s, nbytes * collective.busbw_factor(ranks) / cap)
        else:
            time_s = self.in_network(name, ranks, nbytes, protocol)
        symmetric = self.engine == "des" and any(self.notes)
        if DEGRADED_NOTE in self.notes:
            return Evaluation(time_s, 1, self.model.network, note=DEGRADED_NOTE)
        return Evaluation(time_s, 1, self.model.network,
                          note=COMPOSED_NOTE if symmetric else None)

    def hierarchical(self, collective: Collective, ranks: int, nbytes: int,
                     protocol: Protocol) -> float:
        """All-reduce over equal hosts of L ranks, phases pipelined as NCCL's tree does.

        Host phase ``A``: ring reduce-scatter plus ring all-gather of the buffer on one host
        (they share the GPUs' ports, so they add up). Network phase ``B``: all-reduce of
        ``nbytes / L`` among one rank per host (:meth:`_rail`; every rail does the same at
        once, over its own NICs or its share of them). Pipelined in many chunks, the call
        takes the slower phase plus the faster one's latency (its time at 1 byte per rank):
        ``max(A, B) + min(A0, B0)``.
        """
        if collective is not Collective.ALL_REDUCE:
            raise SpecError(f"{PIPELINED} runs all_reduce only, not {collective.value}")
        groups = self.model.hosts(ranks)
        if len(groups) < 2 or len({len(g) for g in groups}) != 1:
            raise SpecError(f"{PIPELINED} needs several hosts with as many ranks each")
        hosts, rails = self._hosts_and_rails(ranks)
        scale = self.model.tree_scale("tree", protocol.name, nbytes)

        def phases(n: int, only_min: bool) -> tuple[float, float]:
            a = max(self._host_rings(host, n, protocol, "tree", scale) for host in hosts)
            b = max(self._rail(rail, max(n // len(hosts[0]), 1), protocol, ranks, "tree", scale,
                               a if only_min else None)
                    for rail in rails)
            return a, b

        return _pipelined(phases, nbytes, ranks)

    def in_network(self, name: str, ranks: int, nbytes: int, protocol: Protocol) -> float:
        """NVLS or CollNet across equal hosts of L ranks, phases pipelined as NCCL runs them
        (NVLS tree, CollNet chain/direct): ``max(A, B) + min(A0, B0)`` as
        :meth:`hierarchical`, with host phase ``A`` the in-switch all-reduce of the buffer
        (nvls) or a ring reduce-scatter plus all-gather (collnet), and network phase ``B``
        each rail's all-reduce of ``nbytes / L``: among the hosts (nvls, :meth:`_rail`) or
        reduced inside the fabric switch (collnet)."""
        hosts, rails = self._hosts_and_rails(ranks)
        host = hosts[0]

        def phases(n: int, only_min: bool) -> tuple[float, float]:
            rail_bytes = max(n // len(host), 1)
            if name == "nvls":
                a = max(self._run(Collective.ALL_REDUCE, h, n, "nvls", protocol, family="nvls")
                        for h in hosts)
            else:
                a = max(self._host_rings(h, n, protocol, name) for h in hosts)
            cap = a if only_min else None
            if name == "nvls":
                b = max(self._rail(rail, rail_bytes, protocol, ranks, name, cap=cap)
                        for rail in rails)
            else:
                b = max(self._run(Collective.ALL_REDUCE, rail, rail_bytes, "collnet", protocol,
                                  self._rail_share(ranks), family=name, cap=cap)
                        for rail in rails)
            return a, b

        loop = 0
        if name == "nvls":
            config = self.model.config
            loop = nvls_tree_loop_bytes(nbytes, config.channels, len(host),
                                        len(self.model.hosts(ranks)), config.version)
        return _pipelined(phases, nbytes, ranks, loop)

    def _hosts_and_rails(self, ranks: int
                         ) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        """The hosts (their ranks) and the rails (the k-th rank of every host) whose phases
        are timed: on a machine built alike, the first of each stands for all; on a degraded
        one (a what-if), every host and rail whose links differ, since the slowest of them
        paces the call (:func:`distinct_groups`)."""
        groups = self.model.hosts(ranks)
        hosts = [tuple(g) for g in groups]
        rails = [tuple(g[k] for g in groups) for k in range(len(groups[0]))]
        network = self.model.network
        if META_KEY not in network.meta:
            return hosts[:1], rails[:1]
        return (distinct_groups(network, hosts, within_host=True),
                distinct_groups(network, rails))

    def _host_rings(self, host: tuple[int, ...], nbytes: int, protocol: Protocol, family: str,
                    scale: float = 1.0) -> float:
        """The host phase of NCCL's trees and CollNet: a ring reduce-scatter plus a ring
        all-gather of ``nbytes`` on one host (they share the GPUs' ports, so they add up);
        nothing for one GPU per host."""
        if len(host) < 2:
            return 0.0
        return sum(self._run(coll, host, nbytes, "ring", protocol, family=family, scale=scale)
                   for coll in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER))

    def _rail(self, rail: tuple[int, ...], nbytes: int, protocol: Protocol, ranks: int,
              family: str, scale: float = 1.0, cap: float | None = None) -> float:
        """One rail's all-reduce of ``nbytes`` among the hosts, as NCCL's trees cross them: a
        double binary tree (``log2(hosts)`` network hops each way), pipelined in NCCL's
        chunks up to the ring's bandwidth, which commsim's few-piece tree schedule does not
        reach: the faster of the tree and a ring among the hosts. Beyond two hosts a tree is
        no faster than each NIC carrying the rail's bytes twice (up and down the tree), as
        NCCL's tuner counts it (tuning.cc: a tree's bandwidth across more than two nodes is
        the network's, ``bwInter``, and the NVLS tree's doubles only for two nodes; the
        all-reduce's algorithm bandwidth is half that): a 2-host ring of twice the bytes.
        With ``cap``, ``min(time, cap)`` (:meth:`_run`)."""
        share = self._rail_share(ranks)
        time = min(self._run(Collective.ALL_REDUCE, rail, nbytes, name, protocol, share,
                             family=family, scale=scale, cap=cap) for name in (RAIL_TREE, "ring"))
        if len(rail) > 2:
            time = max(time, self._run(Collective.ALL_REDUCE, rail[:2], 2 * nbytes, "ring",
                                       protocol, share, family=family, scale=scale, cap=cap))
        return time

    def _rail_share(self, ranks: int) -> float:
        """The share of a NIC one rail gets: 1 where every GPU has its own, 1/2 where two
        GPUs share one (every rail runs at once)."""
        per_host = len(self.model.hosts(ranks)[0])
        return min(1.0, self.model.ring_channels(ranks) / per_host)

    def _run(self, collective: Collective, ranks: tuple[int, ...], nbytes: int, name: str,
             protocol: Protocol, channels: float = 1, family: str = "tree",
             scale: float = 1.0, cap: float | None = None) -> float:
        """One phase: ``name`` among ``ranks`` on their protocol network (``family``'s hop
        latencies, the channels a call of ``nbytes`` runs, bandwidths x ``scale``), its note
        kept. With ``cap``, ``min(time, cap)``, its DES skipped where its schedule provably
        takes ``cap`` or longer (:func:`~commsim.engine.evaluate.evaluate`'s ``cap``)."""
        active = active_channels(nbytes, len(ranks), family, protocol.name,
                                 self.model.config.channels)[0]
        if name == "ring" and ranks == tuple(range(len(ranks))):
            ranks = self.model.ring_order(len(ranks))
        net = self.model.phase_network(ranks, protocol, family, channels, active, collective,
                                       scale=scale)
        call = make_call(collective, net, nbytes)
        engine = self.engine
        if (engine == "des" and META_KEY in self.model.network.meta
                and estimate_transfers(call, name, get_algorithm(name).default_chunks(call))
                > MAX_PHASE_DES_TRANSFERS):
            # a degraded ring's hops may differ, so no representative stands for it; its
            # closed form (the worst hop) is its DES where its hops share no link
            engine = "analytic"
        done = evaluate(call, net, name, engine, max_transfers=MAX_PHASE_DES_TRANSFERS, cap=cap)
        self.notes.append(DEGRADED_NOTE if engine != self.engine else done.note)
        return done.time_s if cap is None else min(done.time_s, cap)


def distinct_groups(network: Network, groups: list[tuple[int, ...]], *,
                    within_host: bool = False) -> list[tuple[int, ...]]:
    """The first of every set of rank groups whose ranks' devices have the same links (those
    with an end on the device, or with ``within_host`` those of a host phase, both ends on the
    device's host: their count, latencies and bandwidths): the groups that can time
    differently on a degraded network."""
    keys = network.derived(("rank_link_keys", within_host),
                           lambda: _rank_link_keys(network, within_host))
    seen: dict[tuple[bytes, ...], tuple[int, ...]] = {}
    for group in groups:
        seen.setdefault(tuple(sorted(keys[r] for r in group)), group)
    return list(seen.values())


def _rank_link_keys(network: Network, within_host: bool) -> list[bytes]:
    """Per rank, the sorted (latency, bandwidth) of its device's links, as bytes."""
    ends = network.end_columns()
    values = link_columns(network.links)
    keep = np.ones(len(ends.src), dtype=bool)
    if within_host:
        host = network.device_hosts()
        keep = (host[ends.src] == host[ends.dst]) & (host[ends.src] >= 0)
    at = np.concatenate([np.flatnonzero(keep)] * 2)
    device = np.concatenate([ends.src[keep], ends.dst[keep]])
    order = np.lexsort((values.bandwidth_Bps[at], values.latency_s[at], device))
    device, at = device[order], at[order]
    bounds = np.searchsorted(device, np.arange(len(network.devices) + 1))
    pairs = np.stack([values.latency_s[at], values.bandwidth_Bps[at]], axis=1)
    return [pairs[bounds[d]:bounds[d + 1]].tobytes()
            for d in network.rank_device_array().tolist()]
