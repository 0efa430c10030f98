"""NCCL as a machine runs it: its algorithms, protocols, channels, the fixed costs of a call
(the *floor*), and the choice its tuner makes (``src/graph/tuning.cc``, ``src/enqueue.cc``).

A topology with an ``nccl:`` block (``arch``, ``channels``, ``version``, ``gpus_per_thread``)
runs NCCL: ``commsim run`` and the API then time every collective as NCCL would run it, and
``auto`` predicts every (algorithm, protocol) pair NCCL considers and keeps the fastest, as
NCCL does with its own cost model. ``validate --algorithm nccl`` uses the same model on any
topology. docs/nccl.md explains every part with its source; the constants are in
:mod:`commsim.nccl_tables`, per NCCL release.

**Algorithms.** broadcast, reduce, all_gather and reduce_scatter run NCCL's *ring* (broadcast
and reduce as a pipelined chain along it); all_reduce runs *ring*, *tree* (commsim's
``double_binary_tree``), across hosts ``hierarchical_pipelined`` (NCCL's trees, which overlap
the host and network phases), ``nvls`` where the node switch reduces (NVLink SHARP) and
``collnet`` where the fabric does (InfiniBand SHARP). Across hosts all three run as schedules
in pipelined pieces (:mod:`commsim.nccl_tree`), their closed form the composed estimate
``max(host, network) + min(their latencies)`` (:mod:`commsim.nccl_composed`).

**The floor** of a call (:meth:`NcclModel.floor`) is the sum of named parts: the launch
(``base``: tuning.cc ``baseLat`` of the algorithm family and protocol), the hops of its
schedule (each link's latency scaled by tuning.cc's ``hwLat`` of its class, NVLink, PCIe or
network, for the family and protocol, per NCCL release), and the host's issue time that the
device cannot hide (nccl-tests' timing loop: a call costs the larger of what one host thread
spends issuing it to its GPUs and what the GPUs spend running it).

**The ramp.** NCCL runs fewer channels on small calls (enqueue.cc: while the call has fewer
than ``channels x threads x threshold`` bytes, one channel less); a call on ``c`` of the
machine's ``C`` channels moves at ``c / C`` of the link bandwidth. Chains (broadcast, reduce)
pipeline in Simple steps of 512 KiB per channel, or line by line under LL and LL128.

**Protocols** scale bandwidth (LL128 x 0.92, Simple x 1; LL as tuning.cc's refinements of the
release: :func:`~commsim.nccl_caps.bandwidth_factor`) and, with the topology's
``arch``, cap bus bandwidth as tuning.cc does (LL at ``llMaxBw``, LL128 at ``channels x`` a
per-channel maximum, the tree at ``channels x perChMaxTreeBws``; :mod:`commsim.nccl_caps`).
NVLS and CollNet run Simple only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from commsim.algorithms import get_algorithm
from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.engine.evaluate import Evaluation, evaluate
from commsim.errors import ScheduleError, SpecError
from commsim.nccl_caps import bandwidth_factor, ll128_enabled
from commsim.nccl_composed import PIPELINED, ComposedTimer
from commsim.nccl_paths import (
    LINK_CLASSES,
    bandwidth_cap_Bps,
    link_class_codes,
    nvlink_spread,
    protocol_network,
    relabel,
    ring_channels,
    ring_hop_scales,
    ring_order,
)
from commsim.nccl_tables import (
    DEFAULT_VERSION,
    PROTOCOL_NAMES,
    PROTOCOLS,
    Floor,
    NcclConfig,
    Protocol,
    active_channels,
    chain_chunks,
    chain_latency_scale,
    net_overhead_s,
    ring_inter_steps,
    ring_plateau,
    tables,
    tree_correction,
)
from commsim.nccl_tree import evaluate_tree
from commsim.network import Network

#: The algorithms NCCL's tuner considers for each collective, as commsim algorithms (nvls and
#: collnet only where the topology's switches reduce).
NCCL_ALGORITHMS: dict[Collective, tuple[str, ...]] = {
    Collective.BROADCAST: ("ring",),
    Collective.REDUCE: ("ring",),
    Collective.ALL_GATHER: ("ring",),
    Collective.REDUCE_SCATTER: ("ring",),
    Collective.ALL_REDUCE: ("ring", "double_binary_tree", PIPELINED, "nvls", "collnet"),
    Collective.ALL_TO_ALL: ("pxn", "all_pairs"),
}

#: NCCL runs a point-to-point operation (all-to-all is grouped ncclSend/ncclRecv) with LL up to
#: this many bytes per peer, Simple beyond: NCCL_P2P_LL_THRESHOLD's default (NCCL env docs).
P2P_LL_THRESHOLD = 16384


#: NVLS and CollNet run Simple only (tuning.cc).
SIMPLE_ONLY = frozenset({"nvls", "collnet"})

#: Launch (base) latency in us per algorithm family and protocol of the default release
#: (tuning.cc baseLat; NVLS/CollNet: their hwLat, as their baseLat is 0).
BASE_LATENCY_US: dict[str, dict[str, float]] = {
    "ring": dict(tables().base_us["ring"]),
    "tree": dict(tables().base_us["tree"]),
    "nvls": {"Simple": tables().hop_us["nvlink"]["nvls"]["Simple"]},
    "collnet": {"Simple": tables().hop_us["net"]["collnet"]["Simple"]},
}


def with_nccl(network: Network, **settings: object) -> Network:
    """``network`` with these keys of its ``nccl:`` block set (``version``,
    ``gpus_per_thread``, ...): the same machine as a run drove it."""
    nccl = network.meta.get("nccl")
    nccl = dict(nccl) if isinstance(nccl, dict) else {}
    return network.rebuilt(meta={**network.meta, "nccl": {**nccl, **settings}})


def with_gpus_per_thread(network: Network, gpus: int) -> Network:
    """``network`` run as nccl-tests ``-g gpus`` runs it: one host thread issuing each call
    to ``gpus`` GPUs (the floor's ``host`` part). How a log's ``# nThread 1 nGpus N`` line
    is to be predicted."""
    return with_nccl(network, gpus_per_thread=gpus)


def family_of(algorithm: str) -> str:
    """NCCL's algorithm family of a commsim algorithm (its pipelined trees are its tree;
    commsim's own algorithms count as rings)."""
    if algorithm == PIPELINED:
        return "tree"
    try:
        return get_algorithm(algorithm).nccl_family or "ring"
    except SpecError:
        return "ring"  # "send": point-to-point runs ring-like Simple


def base_latency_s(algorithm: str, protocol: str, version: str = DEFAULT_VERSION) -> float:
    """Seconds every call of ``algorithm`` under ``protocol`` pays before its first hop
    (tuning.cc ``baseLat``; NVLS and CollNet: their own ``hwLat``, their ``baseLat`` being 0)."""
    table = tables(version)
    family = family_of(algorithm)
    if family == "nvls":
        return table.hop_us["nvlink"]["nvls"]["Simple"] * 1e-6
    if family == "collnet":
        return table.hop_us["net"]["collnet"]["Simple"] * 1e-6
    row = table.base_us[family]
    return row.get(protocol, row["Simple"]) * 1e-6


def p2p_block(call: Call) -> int:
    """The largest block one rank sends one peer in an all-to-all ``call``."""
    if call.counts is not None:
        return max(call.counts, default=0)
    return -(-call.nbytes // max(call.ranks, 1))


def _hosts(network: Network, ranks: int) -> list[list[int]]:
    """The first ``ranks`` ranks grouped by host, hosts in order of their lowest rank."""
    hosts = network.device_hosts()[network.rank_device_array()[:ranks]]  # -1: no host
    order = np.argsort(hosts, kind="stable")  # by host, ranks ascending within one
    starts = np.flatnonzero(np.diff(hosts[order], prepend=-2))
    groups = np.split(order, starts[1:]) if ranks else []
    return [g.tolist() for g in sorted(groups, key=lambda g: int(g[0]))]


class NcclModel:
    """How NCCL runs calls on the first ranks of ``network`` (see the module docstring): which
    (algorithm, protocol) candidates its tuner weighs, the network each runs on at each size,
    its launch and floor; the composed candidates across hosts are timed on its phase networks
    by :class:`~commsim.nccl_composed.ComposedTimer`.

    It times one candidate at a time; choosing among them is :mod:`commsim.timing`'s job.
    Networks scaled per (ranks, protocol, family, channels) are built once and kept.
    """

    def __init__(self, network: Network) -> None:
        self.network = network
        self.config = NcclConfig.of(network)
        self._cache: dict[tuple[object, ...], Network] = {}
        self._memo: dict[tuple[object, ...], Any] = {}

    @classmethod
    def of(cls, network: Network) -> NcclModel:
        """The model kept with ``network``."""
        return network.derived("nccl_model", lambda: cls(network))

    def hosts(self, ranks: int) -> list[list[int]]:
        """The first ``ranks`` ranks grouped by host, hosts in order of their lowest rank."""
        key = ("hosts", ranks)
        if key not in self._memo:
            self._memo[key] = _hosts(self.network, ranks)
        return self._memo[key]  # type: ignore[return-value]

    def _nodes(self, ranks: int) -> int:
        """Hosts the first ``ranks`` ranks span."""
        key = ("nodes", ranks)
        if key not in self._memo:
            hosts = self.network.device_hosts()[self.network.rank_device_array()[:ranks]]
            self._memo[key] = len(np.unique(hosts[hosts >= 0]))
        return self._memo[key]  # type: ignore[no-any-return]

    def ring_channels(self, ranks: int) -> int:
        """:func:`~commsim.nccl_paths.ring_channels` of the first ``ranks`` ranks: the NICs
        of a host NCCL's rings cross through at once."""
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

    def phase_network(self, ranks: tuple[int, ...], protocol: Protocol, family: str = "ring",
                      channels: float = 1, active: int | None = None,
                      collective: Collective = Collective.ALL_REDUCE, latency: float = 1.0,
                      scale: float = 1.0, hop_scales: tuple[float, float] = (1.0, 1.0),
                      nodes: int | None = None) -> Network:
        """The protocol network of ``ranks`` for ``family`` running ``collective``,
        ``active`` of the machine's channels running (all by default), network links x
        ``channels``, hop latencies x ``latency`` (host and network links' also x
        ``hop_scales``), bandwidths x ``scale`` (a tree's
        :func:`~commsim.nccl_tables.tree_correction`); as NCCL scales a call over ``nodes``
        hosts (by default those ``ranks`` span: a host phase of a composed call, 1)."""
        active = self.config.channels if active is None else active
        nodes = self._nodes(max(ranks) + 1) if nodes is None else nodes
        one_per_node = nodes > 1 and max(ranks) + 1 == nodes
        factor = bandwidth_factor(self.config.version, family, protocol, nodes > 1,
                                  collective in (Collective.ALL_REDUCE, Collective.REDUCE),
                                  one_per_node) * scale
        cap = self._cap(protocol, nodes, family, collective)
        key = (ranks, protocol.name, family, channels, active, factor, cap, latency, hop_scales,
               nodes > 1)
        if key not in self._cache:
            # a ring's or tree's channels spread over all of a GPU's direct NVLinks; a
            # point-to-point send (all-to-all) crosses only the links of its pair
            spread = self._spread(ranks) if family in ("ring", "tree") \
                and collective is not Collective.ALL_TO_ALL else {}
            scaled = self._scaled(protocol, family, nodes, one_per_node, channels,
                                  cap, active / self.config.channels, spread, factor,
                                  latency, hop_scales)
            # The same devices and links, scaled: every protocol's network of the same ranks
            # shares one structure (routes, out-links, hosts, reducing switches, ...).
            devices, routes, structure = self._structure(ranks)
            self._cache[key] = Network(
                scaled.name, scaled.devices, scaled.links, devices, scaled.gamma_s_per_B,
                scaled.router, dict(scaled.meta),
                _routes=routes, _out=self.network._out, _structure=structure)
        return self._cache[key]

    def _cap(self, protocol: Protocol, nodes: int, family: str,
             collective: Collective) -> float:
        """:func:`~commsim.nccl_paths.bandwidth_cap_Bps` of this machine, once per kind of
        call (it is asked for every protocol network)."""
        key = ("cap", protocol.name, nodes, family, collective)
        if key not in self._memo:
            self._memo[key] = bandwidth_cap_Bps(self.network, protocol, nodes, family,
                                                collective.value)
        return self._memo[key]  # type: ignore[no-any-return]

    def _structure(self, ranks: tuple[int, ...]) -> tuple[tuple[int, ...], dict[Any, Any],
                                                           dict[Any, Any]]:
        """The devices of ``ranks`` and the route and structure caches their views share."""
        key = ("structure", ranks)
        if key not in self._memo:
            devices = self.network.rank_device_array()[np.asarray(ranks, dtype=np.int64)]
            self._memo[key] = (tuple(devices.tolist()), {}, {})
        return self._memo[key]  # type: ignore[no-any-return]

    def _scaled(self, protocol: Protocol, family: str, nodes: int, one_per_node: bool,
                channels: float, cap: float, share: float, spread: dict[int, float],
                factor: float, latency: float = 1.0,
                hop_scales: tuple[float, float] = (1.0, 1.0)) -> Network:
        """The whole network scaled for ``protocol`` and ``family`` on ``nodes`` hosts
        (``one_per_node``: one rank on each), built once per such scaling: at 65,536 ranks a
        quarter million links, shared by every group of ranks whose direct NVLinks spread
        alike."""
        multi_host = nodes > 1
        key = ("scaled", protocol.name, family, multi_host, one_per_node and multi_host,
               channels, cap, share, tuple(sorted(spread.items())), factor, latency,
               hop_scales)
        if key not in self._memo:
            self._memo[key] = protocol_network(self.network, protocol, family,
                                               2 if multi_host else 1, channels, cap, share,
                                               spread, factor, latency, hop_scales,
                                               one_per_node and multi_host)
        return self._memo[key]  # type: ignore[no-any-return]

    def _spread(self, ranks: tuple[int, ...]) -> dict[int, float]:
        """:func:`nvlink_spread` of the network running only ``ranks``."""
        key = ("spread", ranks)
        if key not in self._memo:
            self._memo[key] = nvlink_spread(self.network, set(self._structure(ranks)[0]))
        return self._memo[key]  # type: ignore[no-any-return]

    def network_for(self, ranks: int, name: str, protocol: str, nbytes: int | None = None,
                    collective: Collective = Collective.ALL_REDUCE, latency: float = 1.0
                    ) -> Network:
        """The alpha-beta network ``name`` under ``protocol`` runs ``collective`` on (first
        ``ranks`` ranks), with the channels NCCL runs a call of ``nbytes`` on (all when
        None), hop latencies x ``latency`` (a chain's, :func:`chain_latency_scale`), a ring's
        hops paid as NCCL's tuner pays them (:meth:`_ring_hop_scales`); a tree's
        bandwidth x NCCL's correction at that size (:func:`tree_correction`)."""
        family = family_of(name)
        channels = self.ring_channels(ranks) if name == "ring" else 1
        active, scale = None, 1.0
        if nbytes is not None:
            active = active_channels(nbytes, ranks, family, protocol, self.config.channels)[0]
            scale = self.tree_scale(family, protocol, nbytes)
        order = self.ring_order(ranks) if name == "ring" else tuple(range(ranks))
        hop_scales = (1.0, 1.0)
        if name == "ring" and not collective.rooted:
            hop_scales = self._ring_hop_scales(ranks, protocol, collective)
        return self.phase_network(order, self.protocol(protocol), family, channels, active,
                                  collective, latency, scale, hop_scales)

    def _ring_hop_scales(self, ranks: int, protocol: str,
                         collective: Collective) -> tuple[float, float]:
        """:func:`~commsim.nccl_paths.ring_hop_scales` of the ring over the first ``ranks``
        ranks running ``collective`` under ``protocol``: its intra-node steps at least NCCL's
        network overhead, its network hop paid on NCCL's inter-node steps ((1, 1) on one
        host)."""
        reducing = collective is Collective.ALL_REDUCE
        key = ("ring hop scales", ranks, protocol, reducing)
        if key not in self._memo:
            nodes = self._nodes(ranks)
            version = self.config.version
            steps = 2 * (ranks - 1) if reducing else ranks - 1
            self._memo[key] = (1.0, 1.0) if nodes < 2 else ring_hop_scales(
                self.phase_network(self.ring_order(ranks), self.protocol(protocol), "ring"), nodes,
                ring_inter_steps(version, reducing, nodes) / steps,
                net_overhead_s(version, self.config.cpu, protocol))
        return self._memo[key]  # type: ignore[no-any-return]

    def tree_scale(self, family: str, protocol: str, nbytes: int) -> float:
        """What NCCL's tree (only) moves of its modelled bandwidth on a call of ``nbytes``
        (:func:`~commsim.nccl_tables.tree_correction`, this release)."""
        if family != "tree":
            return 1.0
        return tree_correction(self.config.version, protocol, nbytes)

    def ring_order(self, ranks: int) -> tuple[int, ...]:
        """The first ``ranks`` ranks in the order of NCCL's ring
        (:func:`~commsim.nccl_paths.ring_order`)."""
        key = ("order", ranks)
        if key not in self._memo:
            self._memo[key] = ring_order(self.network, ranks)
        return self._memo[key]  # type: ignore[return-value]

    def candidates(self, call: Call) -> list[tuple[str, str]]:
        """(algorithm, protocol) pairs NCCL would consider for ``call`` (on the first
        ``call.ranks`` ranks), in NCCL's order."""
        key = ("candidates", call.collective, call.ranks, call.host_switches, call.fabric_switch)
        if key not in self._memo:
            self._memo[key] = self._candidates(call)
        out = list(self._memo[key])  # type: ignore[call-overload]
        if call.collective is Collective.ALL_TO_ALL:
            protocol = "LL" if p2p_block(call) <= P2P_LL_THRESHOLD else "Simple"
            out = [x for x in out if x[1] == protocol]
        return out

    def _candidates(self, call: Call) -> list[tuple[str, str]]:
        ranks = call.ranks
        groups = self.hosts(ranks)
        multi = len(groups) > 1 and bool(
            (self.network.device_hosts()[self.network.rank_device_array()[:ranks]] >= 0).all())
        even = len({len(g) for g in groups}) == 1
        out: list[tuple[str, str]] = []
        if call.collective is Collective.ALL_TO_ALL:
            # grouped send/receive: through PXN's rail relays across hosts of alike GPUs
            # (NCCL 2.12+ default), else every pair directly
            # (paths.cc: PXN relays through a GPU reached over NVLink only; on PCIe no PXN)
            name = "pxn" if multi and even and max(map(len, groups)) > 1 \
                and self._nvlink(ranks) else "all_pairs"
            return [(name, "LL"), (name, "Simple")]
        for name in NCCL_ALGORITHMS[call.collective]:
            if name == PIPELINED and not (multi and even):
                continue
            if name == "double_binary_tree" and len(groups) == 1:
                continue  # NCCL's tree inside a host is a chain: the ring's hops, no faster
            if name == "nvls" and max(map(len, groups)) < 2:
                continue  # NVLink SHARP reduces a host's GPUs in its switch: one has none
            if name in SIMPLE_ONLY:
                try:
                    get_algorithm(name).check_supports(call)
                except ScheduleError:
                    continue
            out.extend((name, protocol) for protocol in self.protocols_of(name)
                       if protocol != "LL128" or self._ll128(ranks, len(groups) > 1))
        return out

    def _ll128(self, ranks: int, multi_node: bool) -> bool:
        """Whether NCCL runs LL128 on the first ``ranks`` ranks: its ring over NVLink (or the
        network) only, and :func:`~commsim.nccl_caps.ll128_enabled` for this GPU, release and
        path to the NICs."""
        config = self.config
        return self._nvlink(ranks) and ll128_enabled(config.version, config.arch,
                                                     config.nic_path, multi_node)

    def _nvlink(self, ranks: int) -> bool:
        """Whether NCCL's ring over the first ``ranks`` ranks goes over NVLink (or the
        network) only, never PCIe inside a host: NCCL enables LL128 by default only there
        (tuning.cc; elsewhere it may corrupt data silently)."""
        key = ("nvlink", ranks)
        if key not in self._memo:
            classes = link_class_codes(self.network)
            pcie = LINK_CLASSES.index("pcie")
            order = np.asarray(self.ring_order(ranks), dtype=np.int64)
            self._memo[key] = not (classes == pcie).any() or not (
                classes[self.network.route_links(order, np.roll(order, -1))] == pcie).any()
        return bool(self._memo[key])

    def composed(self, name: str, ranks: int) -> bool:
        """Whether NCCL's ``name`` on the first ``ranks`` ranks runs as pipelined phases
        (:meth:`_composed`): its tree across hosts, and NVLS or CollNet across hosts."""
        if name == PIPELINED:
            return True
        return name in SIMPLE_ONLY and len(self.hosts(ranks)) > 1

    # -- the floor ------------------------------------------------------------------------
    def base_s(self, name: str, protocol: str) -> float:
        """tuning.cc's baseLat of ``name``'s family under ``protocol``, this release."""
        return base_latency_s(name, protocol, self.config.version)

    def host_s(self) -> float:
        """What one host thread spends issuing a call to the GPUs it drives."""
        return self.config.gpus_per_thread * self.config.host_per_gpu_s

    def launch_s(self, name: str, protocol: str, device_s: float) -> float:
        """The time before the first transfer of a call whose schedule takes ``device_s``:
        its base latency and the machine's overhead, plus the host's issue time the device
        does not hide (nccl-tests' loop: per call, the larger of the host's time and the
        device's)."""
        fixed = self.base_s(name, protocol) + self.config.overhead_s
        return fixed + max(0.0, self.host_s() - fixed - device_s)

    def floor(self, call: Call, name: str, protocol: str, engine: str = "des") -> Floor:
        """The fixed cost of ``call``'s size class under (``name``, ``protocol``): the call
        timed on one byte per rank, in named parts (see :class:`Floor`)."""
        tiny = replace(call, nbytes=call.ranks, chunks=None)
        hops = self.evaluate(tiny, name, protocol, engine).time_s
        base, overhead = self.base_s(name, protocol), self.config.overhead_s
        return Floor(base, overhead, hops, max(0.0, self.host_s() - base - overhead - hops))

    # -- timing ---------------------------------------------------------------------------
    def evaluate(self, call: Call, name: str, protocol: str, engine: str,
                 records: bool = False) -> Evaluation:
        """``call`` (on the first ``call.ranks`` ranks) run by ``name`` under ``protocol``,
        on the channels NCCL runs it with, NCCL's trees no faster than its tuner's tree cap
        (:func:`~commsim.nccl_caps.tree_cap_Bps`); launch NOT included (:meth:`launch_s`).
        A composed candidate has no schedule: its evaluation carries the time only."""
        proto = self.protocol(protocol)
        if self.composed(name, call.ranks):
            return self._composed(call, name, proto, engine)
        latency = 1.0
        if call.collective.rooted and name == "ring":
            # NCCL's chain: pieces as fine as its steps (or lines), a hop's latency paid once
            if call.chunks is None:
                nc = active_channels(call.nbytes, call.ranks, "ring", proto.name,
                                     self.config.channels)[0]
                call = replace(call, chunks=chain_chunks(call.nbytes, call.ranks, proto.name,
                                                         nc))
            latency = chain_latency_scale(call.ranks, call.chunks or 1)
        elif name == "ring" and proto.name == "Simple" and self._nodes(call.ranks) > 1 \
                and call.collective is Collective.ALL_REDUCE:
            latency = ring_plateau(self.config.version, self.config.arch, call.nbytes,
                                   call.ranks, self.config.channels)
        # point-to-point (all-to-all) spreads over every channel: no collective's ramp
        ramp = None if call.collective is Collective.ALL_TO_ALL else call.nbytes
        net = self.network_for(call.ranks, name, proto.name, ramp, call.collective, latency)
        order = self.ring_order(call.ranks) if name == "ring" else tuple(range(call.ranks))
        if order == tuple(range(call.ranks)):
            return evaluate(call, net, name, engine, records)
        # NCCL's ring order: run the ring on the GPUs in that order, then name the ranks back
        done = evaluate(replace(call, root=order.index(call.root)), net, name, engine, records)
        active = active_channels(call.nbytes, call.ranks, family_of(name), proto.name,
                                 self.config.channels)[0]
        plain = self.phase_network(tuple(range(call.ranks)), proto, family_of(name),
                                   self.ring_channels(call.ranks) if name == "ring" else 1,
                                   active, call.collective, latency)
        return relabel(done, order, plain)

    def composed_estimate(self, call: Call, name: str, protocol: str,
                          engine: str) -> Evaluation:
        """The composed estimate of a composed candidate (its phases timed by ``engine``), what
        ``auto`` ranks it by (:class:`~commsim.nccl_composed.ComposedTimer`)."""
        return ComposedTimer(self, engine).evaluate(call.collective, call.ranks, call.nbytes,
                                                    name, self.protocol(protocol))

    def _composed(self, call: Call, name: str, proto: Protocol, engine: str) -> Evaluation:
        """A composed candidate (NCCL's tree, NVLS or CollNet across hosts): under the DES,
        while its schedule fits the DES's budget, that schedule simulated
        (:func:`~commsim.nccl_tree.evaluate_tree`); else its closed form, the composed
        estimate of its phases (:class:`~commsim.nccl_composed.ComposedTimer`)."""
        done = evaluate_tree(self, call, name, proto) if engine == "des" else None
        if done is not None:
            return done
        return self.composed_estimate(call, name, proto.name, engine)
