"""NCCL as a machine runs it: its algorithms, protocols, channels and launch latencies, and
the choice its tuner makes (``src/graph/tuning.cc``, ``ncclTopoTuneModel`` / ``getAlgoInfo``).

A topology with an ``nccl:`` block (``arch``, ``channels``) runs NCCL: ``commsim run`` and the
API then time every collective as NCCL would run it, and ``auto`` predicts every (algorithm,
protocol) pair NCCL considers and keeps the fastest, as NCCL does with its own cost model.
``validate --algorithm nccl`` uses the same model on any topology.

**Algorithms.** broadcast, reduce, all_gather and reduce_scatter run NCCL's *ring*; all_reduce
runs *ring*, *tree* (commsim's ``double_binary_tree``), across hosts ``hierarchical_pipelined``
(NCCL's trees, which overlap the host and network phases: commsim's ``hierarchical`` with its
phases pipelined, ``max(host, network) + min(their latencies)``), ``nvls`` where the node
switch reduces (NVLink SHARP) and ``collnet`` where the fabric does (InfiniBand SHARP). Across
hosts NCCL pipelines the phases of NVLS (its NVLS tree) and CollNet too, so they are timed the
same composed way (:meth:`NcclModel.pipelined_in_network`); on one host ``nvls`` is its
schedule.

**Channels.** NCCL's rings are many rings at once, each crossing hosts through another NIC;
commsim's one ring crosses through one, so a ring's network hops carry the bandwidth of all the
host's NICs (:func:`ring_channels`). The ``channels`` of the topology bound the per-channel
bandwidth caps below.

**Protocols.** LL (an 8-byte flag per 8 bytes: lowest latency, half the bandwidth at most),
LL128 (a flag per 128-byte line: ~0.92 of the bandwidth) and Simple (full bandwidth, the
highest per-hop latency). A topology's link latency is read as NCCL's LL per-hop latency and
its bandwidth as Simple's; a protocol scales them by tuning.cc's ratios (NCCL 2.19-2.23):
per-hop latency NVLink/PCIe ring ``{LL 0.6, LL128 1.9, Simple 3.4}`` us, network ring
``{2.7, 4.0, 14.0}`` us; bandwidth ``LL x 0.5``, ``LL128 x 0.92``, ``Simple x 1``. With the
topology's ``arch``, bus bandwidth is also capped as tuning.cc caps it: LL at ``llMaxBw``
(Hopper one node 141 GB/s, Ampere 87.7, Volta 39; two nodes 39, more 20.4) and LL128 at
``channels x`` a per-channel maximum (Hopper 36.7 GB/s, Ampere/Volta 20). NVLS and CollNet run
Simple only.

**Launch latency.** Every call pays the tuner's base latency before its first hop: ring
``{6.6, 14.0, 8.4}`` us and tree ``{6.8, 14.0, 8.4}`` us for LL/LL128/Simple (``baseLat``);
NVLS 25 us and CollNet 30 us (their ``hwLat``, whose ``baseLat`` is 0). Other algorithms
(commsim's textbook ones, named explicitly) pay the ring's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commsim.algorithms import get_algorithm
from commsim.algorithms.base import Call
from commsim.algorithms.calls import make_call
from commsim.collectives import Collective
from commsim.engine.evaluate import Evaluation, evaluate
from commsim.errors import ScheduleError, SpecError
from commsim.network import DerivedLinks, Link, Network

#: The composed (not scheduled) algorithm of this model; see NcclModel.pipelined_hierarchical.
PIPELINED = "hierarchical_pipelined"
#: The note of a composed candidate some of whose phases' DES times were had by symmetry.
COMPOSED_NOTE = ("symmetric phases: the phases whose rings have alike hops sharing no link were "
                 "timed from one representative rank (exact)")


def ring_channels(network: Network, ranks: int) -> int:
    """How many NICs NCCL's rings use in parallel where commsim's one ring crosses a host.

    NCCL runs several rings (channels) at once, each crossing between hosts through another
    GPU's NIC (``src/graph/search.cc`` picks a NIC per channel; on rail-optimized machines
    every GPU's own), so the crossing carries the bandwidth of all the host's NICs while each
    GPU's NVLink port carries what one ring's does. commsim's ``ring`` is one ring, crossing
    through one GPU's NIC: for NCCL's rings, its network hops get the bandwidth of the ranks
    per host NICs (1 on a single host).
    """
    hosts: dict[object, int] = {}
    for rank in range(ranks):
        host = network.host_of(rank)
        hosts[host] = hosts.get(host, 0) + 1
    if len(hosts) < 2 or None in hosts:
        return 1
    return min(hosts.values())


#: The algorithms NCCL's tuner considers for each collective, as commsim algorithms (nvls and
#: collnet only where the topology's switches reduce).
NCCL_ALGORITHMS: dict[Collective, tuple[str, ...]] = {
    Collective.BROADCAST: ("ring",),
    Collective.REDUCE: ("ring",),
    Collective.ALL_GATHER: ("ring",),
    Collective.REDUCE_SCATTER: ("ring",),
    Collective.ALL_REDUCE: ("ring", "double_binary_tree", PIPELINED, "nvls", "collnet"),
}


@dataclass(frozen=True, slots=True)
class Protocol:
    """How one NCCL protocol scales a topology: per-hop latency of host links (NVLink/PCIe)
    and of network links, as ratios to LL's, and the bandwidth factor."""

    name: str
    host_latency: float
    network_latency: float
    bandwidth: float


#: tuning.cc ring hwLat ratios to LL, and bandwidth factors (see the module docstring).
PROTOCOLS = (
    Protocol("LL", 1.0, 1.0, 0.5),
    Protocol("LL128", 1.9 / 0.6, 4.0 / 2.7, 0.92),
    Protocol("Simple", 3.4 / 0.6, 14.0 / 2.7, 1.0),
)
PROTOCOL_NAMES = tuple(p.name for p in PROTOCOLS)
#: NVLS and CollNet run Simple only (tuning.cc).
SIMPLE_ONLY = frozenset({"nvls", "collnet"})

#: Launch latency in us per algorithm family and protocol (tuning.cc baseLat; NVLS/CollNet:
#: their hwLat, see the module docstring).
BASE_LATENCY_US: dict[str, dict[str, float]] = {
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
    "nvls": {"Simple": 25.0},
    "collnet": {"Simple": 30.0},
}

#: LL bus bandwidth caps in GB/s (tuning.cc llMaxBws): one node by GPU generation; two and
#: more nodes (x86 Intel hosts' row).
LL_MAX_BW_ONE_NODE = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
LL_MAX_BW_NODES = (39.0, 20.4)
#: LL128 per-channel bus bandwidth caps in GB/s (tuning.cc perChMaxRingLL128Bws).
LL128_PER_CHANNEL = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 73.4}


def base_latency_s(algorithm: str, protocol: str) -> float:
    """Seconds every call of ``algorithm`` under ``protocol`` pays before its first hop."""
    # NCCL's pipelined trees are its tree; commsim's own algorithms pay the ring's
    name = "tree" if algorithm == PIPELINED else get_algorithm(algorithm).nccl_family
    family = BASE_LATENCY_US[name or "ring"]
    return family.get(protocol, family.get("Simple", 0.0)) * 1e-6


def bandwidth_cap_Bps(network: Network, protocol: Protocol, nodes: int) -> float:
    """The protocol's bus bandwidth cap on this machine (inf without an ``nccl`` arch)."""
    nccl = network.meta.get("nccl")
    if not isinstance(nccl, dict):
        return float("inf")
    arch, channels = str(nccl.get("arch")), int(nccl.get("channels", 16))  # type: ignore[call-overload]
    if protocol.name == "LL":
        if nodes <= 1:
            return LL_MAX_BW_ONE_NODE.get(arch, float("inf")) * 1e9
        return LL_MAX_BW_NODES[0 if nodes == 2 else 1] * 1e9
    if protocol.name == "LL128":
        return channels * LL128_PER_CHANNEL.get(arch, float("inf")) * 1e9
    return float("inf")


def network_links(network: Network) -> frozenset[int]:
    """Indices of the links that belong to the inter-host network: those touching a switch
    that belongs to no host (the ``fabric`` of hierarchical topologies)."""
    fabric = {
        i for i, d in enumerate(network.devices) if d.kind == "switch" and d.host is None
    }
    multi_host = len({d.host for d in network.devices if d.host is not None}) > 1
    if not multi_host:
        return frozenset()
    return frozenset(
        i for i, link in enumerate(network.links) if link.src in fabric or link.dst in fabric
    )


def protocol_network(
    network: Network,
    protocol: Protocol,
    collective: Collective,
    multi_host: bool,
    channels: int = 1,
    cap_Bps: float = float("inf"),
) -> Network:
    """``network`` with latencies and bandwidths scaled for ``protocol``; network links also
    carry ``channels`` x their bandwidth (NCCL's rings, one channel per NIC, see
    :func:`ring_channels`); every link at most ``cap_Bps``. The result is a plain alpha-beta
    network (its ``nccl`` block dropped), so it is timed as given."""
    del collective, multi_host  # the same factors for every collective since NCCL 2.19
    net_links = network_links(network)

    def scaled(i: int, link: Link) -> Link:
        on_net = i in net_links
        return Link(
            link.src,
            link.dst,
            link.latency_s * (protocol.network_latency if on_net else protocol.host_latency),
            min(link.bandwidth_Bps * protocol.bandwidth * (channels if on_net else 1), cap_Bps),
            link.label,
        )

    # each link is scaled when first read: closed forms read a few, a simulation all
    links = DerivedLinks(network.links, scaled)
    meta = {k: v for k, v in network.meta.items() if k != "nccl"}
    return network.rebuilt(name=f"{network.name}+{protocol.name}", links=links, meta=meta)


def _hosts(network: Network, ranks: int) -> list[list[int]]:
    """The first ``ranks`` ranks grouped by host, hosts in order of their lowest rank."""
    groups: dict[object, list[int]] = {}
    for rank in range(ranks):
        groups.setdefault(network.host_of(rank), []).append(rank)
    return list(groups.values())


class NcclModel:
    """How NCCL runs calls on the first ranks of ``network`` (see the module docstring): which
    (algorithm, protocol) candidates its tuner weighs, the network each runs on, its launch
    latency, and the composed time of the pipelined phases across hosts.

    It times one candidate at a time; choosing among them is :mod:`commsim.timing`'s job.
    Networks scaled per (ranks, protocol, channels) are built once and kept.
    """

    def __init__(self, network: Network) -> None:
        self.network = network
        self._cache: dict[tuple[object, ...], Network] = {}
        self._memo: dict[tuple[object, ...], Any] = {}
        #: The notes of the phases of the composed candidate being timed (see _run).
        self._phase_notes: list[str | None] = []

    @classmethod
    def of(cls, network: Network) -> NcclModel:
        """The model kept with ``network``."""
        return network.derived("nccl_model", lambda: cls(network))

    def _hosts(self, ranks: int) -> list[list[int]]:
        key = ("hosts", ranks)
        if key not in self._memo:
            self._memo[key] = _hosts(self.network, ranks)
        return self._memo[key]  # type: ignore[return-value]

    def _channels(self, ranks: int) -> int:
        key = ("channels", ranks)
        if key not in self._memo:
            self._memo[key] = ring_channels(self.network, ranks)
        return self._memo[key]  # type: ignore[return-value]

    @staticmethod
    def protocol(name: str) -> Protocol:
        """The protocol called ``name`` (any case)."""
        for protocol in PROTOCOLS:
            if protocol.name.lower() == name.lower():
                return protocol
        raise SpecError(f"unknown NCCL protocol {name!r} (known: {', '.join(PROTOCOL_NAMES)})")

    @staticmethod
    def protocols_of(name: str) -> tuple[str, ...]:
        """The protocols NCCL runs ``name`` with."""
        return ("Simple",) if name in SIMPLE_ONLY else PROTOCOL_NAMES

    def check(self, algorithm: str) -> None:
        """Validate ``ALGORITHM+PROTOCOL``."""
        name, _, protocol = algorithm.partition("+")
        if name != PIPELINED:
            name = get_algorithm(name).name
        if self.protocol(protocol).name not in self.protocols_of(name):
            raise SpecError(f"NCCL runs {name} with the Simple protocol only, not {protocol!r}")

    def _net(self, ranks: tuple[int, ...], protocol: Protocol, channels: int) -> Network:
        key = (ranks, protocol.name, channels)
        if key not in self._cache:
            nodes = len({self.network.host_of(r) for r in range(max(ranks) + 1)} - {None})
            cap = bandwidth_cap_Bps(self.network, protocol, nodes)
            scaled = self._scaled(protocol, channels, cap)
            # The same devices and links, scaled: every protocol's network of the same ranks
            # shares one structure (routes, out-links, hosts, reducing switches, ...).
            routes, structure = self._memo.setdefault(("structure", ranks), ({}, {}))
            net = Network(scaled.name, scaled.devices, scaled.links,
                          tuple(self.network.rank_devices[r] for r in ranks),
                          scaled.gamma_s_per_B, scaled.router, dict(scaled.meta),
                          _routes=routes, _out=self.network.out_links, _structure=structure)
            self._cache[key] = net
        return self._cache[key]

    def _scaled(self, protocol: Protocol, channels: int, cap: float) -> Network:
        """The whole network scaled for ``protocol`` (built once per protocol, channels and
        cap: at 65,536 ranks a quarter million links, shared by every group of ranks)."""
        key = ("scaled", protocol.name, channels, cap)
        if key not in self._memo:
            self._memo[key] = protocol_network(self.network, protocol, Collective.ALL_REDUCE,
                                               True, channels, cap)
        return self._memo[key]  # type: ignore[return-value]

    def network_for(self, ranks: int, name: str, protocol: str) -> Network:
        """The alpha-beta network ``name`` under ``protocol`` runs on (first ``ranks`` ranks)."""
        channels = self._channels(ranks) if name == "ring" else 1
        return self._net(tuple(range(ranks)), self.protocol(protocol), channels)

    def candidates(self, call: Call) -> list[tuple[str, str]]:
        """(algorithm, protocol) pairs NCCL would consider for ``call`` (on the first
        ``call.ranks`` ranks), in NCCL's order."""
        key = ("candidates", call.collective, call.ranks, call.host_switches, call.fabric_switch)
        if key not in self._memo:
            self._memo[key] = self._candidates(call)
        return list(self._memo[key])  # type: ignore[call-overload]

    def _candidates(self, call: Call) -> list[tuple[str, str]]:
        ranks = call.ranks
        groups = self._hosts(ranks)
        multi = len(groups) > 1 and None not in {self.network.host_of(r) for r in range(ranks)}
        even = len({len(g) for g in groups}) == 1
        out: list[tuple[str, str]] = []
        for name in NCCL_ALGORITHMS[call.collective]:
            if name == PIPELINED and not (multi and even):
                continue
            if name in SIMPLE_ONLY:
                try:
                    get_algorithm(name).check_supports(call)
                except ScheduleError:
                    continue
            out.extend((name, protocol) for protocol in self.protocols_of(name))
        return out

    def composed(self, name: str, ranks: int) -> bool:
        """Whether NCCL's ``name`` on the first ``ranks`` ranks is timed as pipelined phases
        (no single schedule): its tree across hosts, and NVLS or CollNet across hosts."""
        if name == PIPELINED:
            return True
        return name in SIMPLE_ONLY and len(self._hosts(ranks)) > 1

    def evaluate(self, call: Call, name: str, protocol: str, engine: str,
                 records: bool = False) -> Evaluation:
        """``call`` (on the first ``call.ranks`` ranks) run by ``name`` under ``protocol``,
        launch latency NOT included (:func:`base_latency_s` gives it). A composed candidate
        has no schedule: its evaluation carries the time only."""
        proto = self.protocol(protocol)
        if not self.composed(name, call.ranks):
            return evaluate(call, self.network_for(call.ranks, name, proto.name), name, engine,
                            records)
        self._phase_notes = []
        if name == PIPELINED:
            time_s = self.pipelined_hierarchical(call.collective, call.ranks, call.nbytes,
                                                 proto, engine)
        else:
            time_s = self.pipelined_in_network(name, call.ranks, call.nbytes, proto, engine)
        symmetric = engine == "des" and any(self._phase_notes)
        return Evaluation(time_s, 1, self.network, note=COMPOSED_NOTE if symmetric else None)

    def _run(self, collective: Collective, ranks: tuple[int, ...], nbytes: int, name: str,
             protocol: Protocol, engine: str, channels: int = 1) -> float:
        """One phase of a composed candidate: ``name`` among ``ranks`` on their protocol
        network (whether its DES time was had by symmetry is noted for :meth:`evaluate`)."""
        net = self._net(ranks, protocol, channels)
        done = evaluate(make_call(collective, net, nbytes), net, name, engine)
        self._phase_notes.append(done.note)
        return done.time_s

    def pipelined_in_network(self, name: str, ranks: int, nbytes: int, protocol: Protocol,
                             engine: str) -> float:
        """NVLS or CollNet across equal hosts of L ranks, phases pipelined as NCCL runs them
        (NVLS tree, CollNet chain/direct): ``max(A, B) + min(A0, B0)`` as
        :meth:`pipelined_hierarchical`, with host phase ``A`` the in-switch all-reduce of the
        buffer (nvls) or a ring reduce-scatter plus all-gather (collnet), and network phase
        ``B`` each rail's all-reduce of ``nbytes / L``: a ring among the hosts (nvls) or
        reduced inside the fabric switch (collnet). Launch latency not included."""
        groups = self._hosts(ranks)
        host, rail = tuple(groups[0]), tuple(g[0] for g in groups)
        per_host = len(host)

        def phases(n: int) -> tuple[float, float]:
            a = 0.0
            if name == "nvls":
                a = self._run(Collective.ALL_REDUCE, host, n, "nvls", protocol, engine)
            elif per_host > 1:
                for coll in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
                    a += self._run(coll, host, n, "ring", protocol, engine)
            rail_algorithm = "ring" if name == "nvls" else "collnet"
            b = self._run(Collective.ALL_REDUCE, rail, max(n // per_host, 1), rail_algorithm,
                          protocol, engine)
            return a, b

        a, b = phases(nbytes)
        a0, b0 = phases(ranks)
        return max(a, b) + min(a0, b0)

    def pipelined_hierarchical(self, collective: Collective, ranks: int, nbytes: int,
                               protocol: Protocol, engine: str) -> float:
        """All-reduce over equal hosts of L ranks, phases pipelined as NCCL's tree does.

        Host phase ``A``: ring reduce-scatter plus ring all-gather of the buffer on one host
        (they share the GPUs' ports, so they add up). Network phase ``B``: ring all-reduce of
        ``nbytes / L`` among one rank per host (every rail does the same at once, each over
        its own NICs). Pipelined in many chunks, the call takes the slower phase plus the
        faster one's latency (its time at 1 byte per rank): ``max(A, B) + min(A0, B0)``.
        Launch latency is not included (:func:`base_latency_s` gives it).
        """
        if collective is not Collective.ALL_REDUCE:
            raise SpecError(f"{PIPELINED} runs all_reduce only, not {collective.value}")
        groups = self._hosts(ranks)
        if len(groups) < 2 or len({len(g) for g in groups}) != 1:
            raise SpecError(f"{PIPELINED} needs several hosts with as many ranks each")
        host, rail = tuple(groups[0]), tuple(g[0] for g in groups)
        per_host = len(host)

        def phases(n: int) -> tuple[float, float]:
            a = 0.0
            if per_host > 1:
                for coll in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
                    a += self._run(coll, host, n, "ring", protocol, engine)
            b = self._run(Collective.ALL_REDUCE, rail, max(n // per_host, 1), "ring",
                          protocol, engine)
            return a, b

        a, b = phases(nbytes)
        a0, b0 = phases(ranks)
        return max(a, b) + min(a0, b0)
