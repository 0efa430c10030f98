"""What NCCL would run: its algorithms per collective and its three protocols, for ``validate``.

An nccl-tests log was produced by NCCL, so predicting it with commsim's ``auto`` (the fastest of
*every* algorithm, recursive doubling included) compares the log with a library that does not
exist. ``algorithm="nccl"`` instead mimics NCCL's tuner (``src/graph/tuning.cc``,
``ncclTopoTuneModel`` / ``getAlgoInfo``): it predicts every (algorithm, protocol) pair NCCL
considers and keeps the fastest, as NCCL does with its own cost model.

**Algorithms** (tuning.cc skips every other pair): broadcast, reduce, all_gather and
reduce_scatter run only NCCL's *ring* (NVLS and CollNet aside, which commsim does not model);
all_reduce runs *ring* or *tree* (commsim's ``double_binary_tree``) and, across hosts,
``hierarchical_pipelined`` stands in for NCCL's trees (and NVLS trees), which keep every NIC
busy *and overlap* the host and network phases: it is commsim's ``hierarchical`` (intra-host
reduce-scatter, one rail per GPU between hosts, intra-host all-gather) with its phases
pipelined, timed as ``max(host phases, network phase)`` plus the smaller one's latency
(:meth:`NcclModel.pipelined_hierarchical`). NCCL pipelines every algorithm in chunks, so the
phases of its tree run at once; commsim's ``hierarchical`` schedule runs them one after the
other, which on two A3 Mega hosts doubles the time of a large all-reduce.

**Channels:** NCCL's rings are many rings at once, each crossing hosts through
another NIC; commsim's one ring crosses through one, so in this model a ring's network hops
carry the bandwidth of all the host's NICs (:func:`ring_channels`).

**Protocols.** NCCL moves data with LL (8-byte flag per 8 bytes of data: lowest latency, a
quarter of the bandwidth), LL128 (a flag per 128-byte line: ~0.92 of the bandwidth, more
latency) or Simple (full bandwidth, the highest per-hop latency). A preset's link latency is
read as the LL latency (as the presets' comments say: NCCL's 0.6 us LL NVLink hop plus a
share of the base latency) and its bandwidth as Simple's; each protocol scales them by the
ratios of tuning.cc's tables (NCCL 2.18): per-hop latency, NVLink/PCIe ring
``{LL 0.6, LL128 1.9, Simple 3.4}`` us and network ring ``{2.7, 4.0, 14.0}`` us; bandwidth
``LL x 1/4`` (all-reduce or several hosts; 1/3 otherwise), ``LL128 x 0.92``, ``Simple x 1``.
Base latencies, per-channel caps and NVLS/CollNet/SHARP are not modelled (issue 7).
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.collectives import Collective
from commsim.errors import SpecError
from commsim.network import Link, Network

#: The composed (not scheduled) algorithm of this model; see NcclModel.pipelined_hierarchical.
PIPELINED = "hierarchical_pipelined"

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


#: The algorithms NCCL's tuner considers for each collective, as commsim algorithms.
NCCL_ALGORITHMS: dict[Collective, tuple[str, ...]] = {
    Collective.BROADCAST: ("ring",),
    Collective.REDUCE: ("ring",),
    Collective.ALL_GATHER: ("ring",),
    Collective.REDUCE_SCATTER: ("ring",),
    Collective.ALL_REDUCE: ("ring", "double_binary_tree", PIPELINED),
}


@dataclass(frozen=True, slots=True)
class Protocol:
    """How one NCCL protocol scales a topology: per-hop latency of host links (NVLink/PCIe)
    and of network links, and bandwidth (all-reduce or multi-host / otherwise)."""

    name: str
    host_latency: float
    network_latency: float
    bandwidth: float
    bandwidth_single_host_non_all_reduce: float


#: tuning.cc (NCCL 2.18) ring hwLat ratios to LL, and bandwidth factors (see module docstring).
PROTOCOLS = (
    Protocol("LL", 1.0, 1.0, 1 / 4, 1 / 3),
    Protocol("LL128", 1.9 / 0.6, 4.0 / 2.7, 0.92, 0.92),
    Protocol("Simple", 3.4 / 0.6, 14.0 / 2.7, 1.0, 1.0),
)
PROTOCOL_NAMES = tuple(p.name for p in PROTOCOLS)


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
) -> Network:
    """``network`` with latencies and bandwidths scaled for ``protocol``; network links also
    carry ``channels`` x their bandwidth (NCCL's rings, one channel per NIC, see
    :func:`ring_channels`)."""
    net_links = network_links(network)
    factor = protocol.bandwidth
    if not multi_host and collective is not Collective.ALL_REDUCE:
        factor = protocol.bandwidth_single_host_non_all_reduce
    links = tuple(
        Link(
            link.src,
            link.dst,
            link.latency_s
            * (protocol.network_latency if i in net_links else protocol.host_latency),
            link.bandwidth_Bps * factor * (channels if i in net_links else 1),
            link.label,
        )
        for i, link in enumerate(network.links)
    )
    return Network(
        f"{network.name}+{protocol.name}", network.devices, links, network.rank_devices,
        network.gamma_s_per_B, network.router, dict(network.meta),
    )


def _hosts(network: Network, ranks: int) -> list[list[int]]:
    """The first ``ranks`` ranks grouped by host, hosts in order of their lowest rank."""
    groups: dict[object, list[int]] = {}
    for rank in range(ranks):
        groups.setdefault(network.host_of(rank), []).append(rank)
    return list(groups.values())


class NcclModel:
    """Times calls the way NCCL would run them on ``network`` (see the module docstring).

    Networks scaled per (ranks, protocol, collective, channels) are built once and kept.
    """

    def __init__(self, network: Network) -> None:
        self.network = network
        self._cache: dict[tuple[object, ...], Network] = {}

    @staticmethod
    def protocol(name: str) -> Protocol:
        """The protocol called ``name`` (any case)."""
        for protocol in PROTOCOLS:
            if protocol.name.lower() == name.lower():
                return protocol
        raise SpecError(f"unknown NCCL protocol {name!r} (known: {', '.join(PROTOCOL_NAMES)})")

    def check(self, algorithm: str) -> None:
        """Validate ``ALGORITHM+PROTOCOL``."""
        from commsim.algorithms import get_algorithm

        name, _, protocol = algorithm.partition("+")
        if name != PIPELINED:
            get_algorithm(name)
        self.protocol(protocol)

    def _net(
        self, ranks: tuple[int, ...], protocol: Protocol, collective: Collective, channels: int
    ) -> Network:
        key = (ranks, protocol.name, collective, channels)
        if key not in self._cache:
            base = self.network
            if ranks != tuple(range(len(ranks))):
                base = Network(
                    base.name, base.devices, base.links,
                    tuple(base.rank_devices[r] for r in ranks), base.gamma_s_per_B,
                    base.router, dict(base.meta),
                )
            else:
                base = base.with_ranks(len(ranks))
            multi = len({self.network.host_of(r) for r in ranks} - {None}) > 1
            self._cache[key] = protocol_network(base, protocol, collective, multi, channels)
        return self._cache[key]

    def _run(self, collective: Collective, ranks: tuple[int, ...], nbytes: int, name: str,
             protocol: Protocol, engine: str, channels: int = 1,
             scaled_as: Collective | None = None) -> float:
        from commsim.api import simulate

        net = self._net(ranks, protocol, scaled_as or collective, channels)
        return simulate(collective, net, nbytes, algorithm=name, engine=engine).time_s

    def time(self, collective: Collective, ranks: int, nbytes: int, algorithm: str,
             engine: str) -> float:
        """Seconds for ``ALGORITHM+PROTOCOL`` on the first ``ranks`` ranks."""
        name, _, protocol_name = algorithm.partition("+")
        protocol = self.protocol(protocol_name)
        if name == PIPELINED:
            return self.pipelined_hierarchical(collective, ranks, nbytes, protocol, engine)
        channels = ring_channels(self.network, ranks) if name == "ring" else 1
        return self._run(collective, tuple(range(ranks)), nbytes, name, protocol, engine,
                         channels)

    def candidates(self, collective: Collective, ranks: int) -> list[str]:
        """``ALGORITHM+PROTOCOL`` pairs NCCL would consider for this call."""
        groups = _hosts(self.network, ranks)
        multi = len(groups) > 1 and None not in {self.network.host_of(r) for r in range(ranks)}
        even = len({len(g) for g in groups}) == 1
        out: list[str] = []
        for name in NCCL_ALGORITHMS[collective]:
            if name == PIPELINED and not (multi and even):
                continue
            out.extend(f"{name}+{p.name}" for p in PROTOCOLS)
        return out

    def fastest(self, collective: Collective, ranks: int, nbytes: int, engine: str
                ) -> tuple[float, str]:
        """The fastest candidate: (seconds, ``ALGORITHM+PROTOCOL``); ties: first listed."""
        best: tuple[float, str] | None = None
        for candidate in self.candidates(collective, ranks):
            time_s = self.time(collective, ranks, nbytes, candidate, engine)
            if best is None or time_s < best[0]:
                best = (time_s, candidate)
        assert best is not None
        return best

    def pipelined_hierarchical(self, collective: Collective, ranks: int, nbytes: int,
                               protocol: Protocol, engine: str) -> float:
        """All-reduce over equal hosts of L ranks, phases pipelined as NCCL's tree does.

        Host phase ``A``: ring reduce-scatter plus ring all-gather of the buffer on one host
        (they share the GPUs' ports, so they add up). Network phase ``B``: ring all-reduce of
        ``nbytes / L`` among one rank per host (every rail does the same at once, each over
        its own NICs). Pipelined in many chunks, the call takes the slower phase plus the
        faster one's latency (its time at 1 byte per rank): ``max(A, B) + min(A0, B0)``.
        """
        if collective is not Collective.ALL_REDUCE:
            raise SpecError(f"{PIPELINED} runs all_reduce only, not {collective.value}")
        groups = _hosts(self.network, ranks)
        if len(groups) < 2 or len({len(g) for g in groups}) != 1:
            raise SpecError(f"{PIPELINED} needs several hosts with as many ranks each")
        host, rail = tuple(groups[0]), tuple(g[0] for g in groups)
        per_host = len(host)

        def phases(n: int) -> tuple[float, float]:
            a = 0.0
            if per_host > 1:
                for coll in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
                    a += self._run(coll, host, n, "ring", protocol, engine,
                                   scaled_as=Collective.ALL_REDUCE)
            b = self._run(Collective.ALL_REDUCE, rail, max(n // per_host, 1), "ring",
                          protocol, engine)
            return a, b

        a, b = phases(nbytes)
        a0, b0 = phases(ranks)
        return max(a, b) + min(a0, b0)
