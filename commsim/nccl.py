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
the host and network phases: ``max(host, network) + min(their latencies)``), ``nvls`` where
the node switch reduces (NVLink SHARP) and ``collnet`` where the fabric does (InfiniBand
SHARP); across hosts NVLS and CollNet are composed the same pipelined way.

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
from commsim.algorithms.calls import make_call
from commsim.collectives import Collective
from commsim.engine.evaluate import Evaluation, evaluate
from commsim.errors import ScheduleError, SpecError
from commsim.nccl_caps import bandwidth_factor, ll128_enabled, tree_cap_Bps
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
    HOST_LAUNCH_US,
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
from commsim.network import Network

#: The composed (not scheduled) algorithm of this model; see NcclModel.pipelined_hierarchical.
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
#: The note of a composed candidate some of whose phases' DES times were had by symmetry.
COMPOSED_NOTE = ("symmetric phases: the phases whose rings have alike hops sharing no link were "
                 "timed from one representative rank (exact)")


#: The algorithms NCCL's tuner considers for each collective, as commsim algorithms (nvls and
#: collnet only where the topology's switches reduce).
NCCL_ALGORITHMS: dict[Collective, tuple[str, ...]] = {
    Collective.BROADCAST: ("ring",),
    Collective.REDUCE: ("ring",),
    Collective.ALL_GATHER: ("ring",),
    Collective.REDUCE_SCATTER: ("ring",),
    Collective.ALL_REDUCE: ("ring", "double_binary_tree", PIPELINED, "nvls", "collnet"),
}


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
    its launch and floor, and the composed time of the pipelined phases across hosts.

    It times one candidate at a time; choosing among them is :mod:`commsim.timing`'s job.
    Networks scaled per (ranks, protocol, family, channels) are built once and kept.
    """

    def __init__(self, network: Network) -> None:
        self.network = network
        self.config = NcclConfig.of(network)
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

    def _nodes(self, ranks: int) -> int:
        """Hosts the first ``ranks`` ranks span."""
        key = ("nodes", ranks)
        if key not in self._memo:
            hosts = self.network.device_hosts()[self.network.rank_device_array()[:ranks]]
            self._memo[key] = len(np.unique(hosts[hosts >= 0]))
        return self._memo[key]  # type: ignore[no-any-return]

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

    def _net(self, ranks: tuple[int, ...], protocol: Protocol, family: str = "ring",
             channels: float = 1, active: int | None = None,
             collective: Collective = Collective.ALL_REDUCE, latency: float = 1.0,
             scale: float = 1.0, hop_scales: tuple[float, float] = (1.0, 1.0)) -> Network:
        """The protocol network of ``ranks`` for ``family`` running ``collective``,
        ``active`` of the machine's channels running (all by default), network links x
        ``channels``, hop latencies x ``latency`` (host and network links' also x
        ``hop_scales``), bandwidths x ``scale`` (a tree's
        :func:`~commsim.nccl_tables.tree_correction`)."""
        active = self.config.channels if active is None else active
        nodes = self._nodes(max(ranks) + 1)
        one_per_node = nodes > 1 and max(ranks) + 1 == nodes
        factor = bandwidth_factor(self.config.version, family, protocol, nodes > 1,
                                  collective in (Collective.ALL_REDUCE, Collective.REDUCE),
                                  one_per_node) * scale
        cap = self._cap(protocol, nodes, family, collective)
        key = (ranks, protocol.name, family, channels, active, factor, cap, latency, hop_scales)
        if key not in self._cache:
            spread = self._spread(ranks) if family in ("ring", "tree") else {}
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
        channels = self._channels(ranks) if name == "ring" else 1
        active, scale = None, 1.0
        if nbytes is not None:
            active = active_channels(nbytes, ranks, family, protocol, self.config.channels)[0]
            scale = self._tree_scale(family, protocol, nbytes)
        order = self._ring_order(ranks) if name == "ring" else tuple(range(ranks))
        hop_scales = (1.0, 1.0)
        if name == "ring" and not collective.rooted:
            hop_scales = self._ring_hop_scales(ranks, protocol, collective)
        return self._net(order, self.protocol(protocol), family, channels, active, collective,
                         latency, scale, hop_scales)

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
                self._net(self._ring_order(ranks), self.protocol(protocol), "ring"), nodes,
                ring_inter_steps(version, reducing, nodes) / steps,
                net_overhead_s(version, self.config.cpu, protocol))
        return self._memo[key]  # type: ignore[no-any-return]

    def _tree_scale(self, family: str, protocol: str, nbytes: int) -> float:
        """What NCCL's tree (only) moves of its modelled bandwidth on a call of ``nbytes``
        (:func:`~commsim.nccl_tables.tree_correction`, this release)."""
        if family != "tree":
            return 1.0
        return tree_correction(self.config.version, protocol, nbytes)

    def _ring_order(self, ranks: int) -> tuple[int, ...]:
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
        return list(self._memo[key])  # type: ignore[call-overload]

    def _candidates(self, call: Call) -> list[tuple[str, str]]:
        ranks = call.ranks
        groups = self._hosts(ranks)
        multi = len(groups) > 1 and bool(
            (self.network.device_hosts()[self.network.rank_device_array()[:ranks]] >= 0).all())
        even = len({len(g) for g in groups}) == 1
        out: list[tuple[str, str]] = []
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
            order = np.asarray(self._ring_order(ranks), dtype=np.int64)
            self._memo[key] = not (classes == pcie).any() or not (
                classes[self.network.route_links(order, np.roll(order, -1))] == pcie).any()
        return bool(self._memo[key])

    def composed(self, name: str, ranks: int) -> bool:
        """Whether NCCL's ``name`` on the first ``ranks`` ranks is timed as pipelined phases
        (no single schedule): its tree across hosts, and NVLS or CollNet across hosts."""
        if name == PIPELINED:
            return True
        return name in SIMPLE_ONLY and len(self._hosts(ranks)) > 1

    # -- the floor ------------------------------------------------------------------------
    def base_s(self, name: str, protocol: str) -> float:
        """tuning.cc's baseLat of ``name``'s family under ``protocol``, this release."""
        return base_latency_s(name, protocol, self.config.version)

    def host_s(self) -> float:
        """What one host thread spends issuing a call to the GPUs it drives."""
        return self.config.gpus_per_thread * HOST_LAUNCH_US * 1e-6

    def launch_s(self, name: str, protocol: str, device_s: float) -> float:
        """The time before the first transfer of a call whose schedule takes ``device_s``:
        its base latency, plus the host's issue time the device does not hide (nccl-tests'
        loop: per call, the larger of the host's time and the device's)."""
        base = self.base_s(name, protocol)
        return base + max(0.0, self.host_s() - base - device_s)

    def floor(self, call: Call, name: str, protocol: str, engine: str = "des") -> Floor:
        """The fixed cost of ``call``'s size class under (``name``, ``protocol``): the call
        timed on one byte per rank, in named parts (see :class:`Floor`)."""
        tiny = replace(call, nbytes=call.ranks, chunks=None)
        hops = self.evaluate(tiny, name, protocol, engine).time_s
        base = self.base_s(name, protocol)
        return Floor(base, hops, max(0.0, self.host_s() - base - hops))

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
        net = self.network_for(call.ranks, name, proto.name, call.nbytes, call.collective,
                               latency)
        order = self._ring_order(call.ranks) if name == "ring" else tuple(range(call.ranks))
        if order == tuple(range(call.ranks)):
            return evaluate(call, net, name, engine, records)
        # NCCL's ring order: run the ring on the GPUs in that order, then name the ranks back
        done = evaluate(replace(call, root=order.index(call.root)), net, name, engine, records)
        plain = self._net(tuple(range(call.ranks)), proto, family_of(name),
                          self._channels(call.ranks) if name == "ring" else 1,
                          active_channels(call.nbytes, call.ranks, family_of(name), proto.name,
                                          self.config.channels)[0], call.collective, latency)
        return relabel(done, order, plain)

    def _composed(self, call: Call, name: str, proto: Protocol, engine: str) -> Evaluation:
        """A composed candidate's time (no schedule), noted when some of its phases' DES
        times were had by symmetry."""
        self._phase_notes = []
        if name == PIPELINED:
            time_s = self.pipelined_hierarchical(call.collective, call.ranks, call.nbytes,
                                                 proto, engine)
            groups = self._hosts(call.ranks)
            cap = tree_cap_Bps(self.config.version, self.config.arch, len(groups), proto.name,
                               self.config.channels, self.config.cpu, len(groups[0]) == 1
                               ) * self._tree_scale("tree", proto.name, call.nbytes)
            bus = call.nbytes * call.collective.busbw_factor(call.ranks)
            time_s = max(time_s, bus / cap)
        else:
            time_s = self.pipelined_in_network(name, call.ranks, call.nbytes, proto, engine)
        symmetric = engine == "des" and any(self._phase_notes)
        return Evaluation(time_s, 1, self.network, note=COMPOSED_NOTE if symmetric else None)

    def _rail(self, rail: tuple[int, ...], nbytes: int, protocol: Protocol, engine: str,
              ranks: int, family: str, scale: float = 1.0) -> float:
        """One rail's all-reduce of ``nbytes`` among the hosts, as NCCL's trees cross them: a
        double binary tree (``log2(hosts)`` network hops each way), pipelined in NCCL's
        chunks up to the ring's bandwidth, which commsim's few-piece tree schedule does not
        reach: the faster of the tree and a ring among the hosts. Beyond two hosts a tree is
        no faster than each NIC carrying the rail's bytes twice (up and down the tree), as
        NCCL's tuner counts it (tuning.cc: a tree's bandwidth across more than two nodes is
        the network's, ``bwInter``, and the NVLS tree's doubles only for two nodes; the
        all-reduce's algorithm bandwidth is half that): a 2-host ring of twice the bytes."""
        share = self._rail_share(ranks)
        time = min(self._run(Collective.ALL_REDUCE, rail, nbytes, name, protocol, engine,
                             share, family=family, scale=scale) for name in (RAIL_TREE, "ring"))
        if len(rail) > 2:
            time = max(time, self._run(Collective.ALL_REDUCE, rail[:2], 2 * nbytes, "ring",
                                       protocol, engine, share, family=family, scale=scale))
        return time

    def _rail_share(self, ranks: int) -> float:
        """The share of a NIC one rail gets: 1 where every GPU has its own, 1/2 where two
        GPUs share one (every rail runs at once)."""
        per_host = len(self._hosts(ranks)[0])
        return min(1.0, self._channels(ranks) / per_host)

    def _run(self, collective: Collective, ranks: tuple[int, ...], nbytes: int, name: str,
             protocol: Protocol, engine: str, channels: float = 1, family: str = "tree",
             scale: float = 1.0) -> float:
        """One phase of a composed candidate: ``name`` among ``ranks`` on their protocol
        network (``family``'s hop latencies, the channels a call of ``nbytes`` runs,
        bandwidths x ``scale``; whether its DES time was had by symmetry is noted for
        :meth:`_composed`)."""
        active = active_channels(nbytes, len(ranks), family, protocol.name,
                                 self.config.channels)[0]
        if name == "ring" and ranks == tuple(range(len(ranks))):
            ranks = self._ring_order(len(ranks))
        net = self._net(ranks, protocol, family, channels, active, collective, scale=scale)
        done = evaluate(make_call(collective, net, nbytes), net, name, engine,
                        max_transfers=MAX_PHASE_DES_TRANSFERS)
        self._phase_notes.append(done.note)
        return done.time_s

    def pipelined_in_network(self, name: str, ranks: int, nbytes: int, protocol: Protocol,
                             engine: str) -> float:
        """NVLS or CollNet across equal hosts of L ranks, phases pipelined as NCCL runs them
        (NVLS tree, CollNet chain/direct): ``max(A, B) + min(A0, B0)`` as
        :meth:`pipelined_hierarchical`, with host phase ``A`` the in-switch all-reduce of the
        buffer (nvls) or a ring reduce-scatter plus all-gather (collnet), and network phase
        ``B`` each rail's all-reduce of ``nbytes / L``: among the hosts (nvls, :meth:`_rail`)
        or reduced inside the fabric switch (collnet). Launch latency not included."""
        groups = self._hosts(ranks)
        host, rail = tuple(groups[0]), tuple(g[0] for g in groups)
        per_host = len(host)

        def phases(n: int) -> tuple[float, float]:
            a = 0.0
            if name == "nvls":
                a = self._run(Collective.ALL_REDUCE, host, n, "nvls", protocol, engine,
                              family="nvls")
            elif per_host > 1:
                for coll in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
                    a += self._run(coll, host, n, "ring", protocol, engine, family=name)
            if name == "nvls":
                b = self._rail(rail, max(n // per_host, 1), protocol, engine, ranks, name)
            else:
                b = self._run(Collective.ALL_REDUCE, rail, max(n // per_host, 1), "collnet",
                              protocol, engine, self._rail_share(ranks), family=name)
            return a, b

        a, b = phases(nbytes)
        a0, b0 = phases(ranks)
        return max(a, b) + min(a0, b0)

    def pipelined_hierarchical(self, collective: Collective, ranks: int, nbytes: int,
                               protocol: Protocol, engine: str) -> float:
        """All-reduce over equal hosts of L ranks, phases pipelined as NCCL's tree does.

        Host phase ``A``: ring reduce-scatter plus ring all-gather of the buffer on one host
        (they share the GPUs' ports, so they add up). Network phase ``B``: all-reduce of
        ``nbytes / L`` among one rank per host (:meth:`_rail`; every rail does the same at
        once, over its own NICs or its share of them). Pipelined in many chunks, the call
        takes the slower phase plus the faster one's latency (its time at 1 byte per rank):
        ``max(A, B) + min(A0, B0)``.
        Launch latency is not included (:func:`base_latency_s` gives it).
        """
        if collective is not Collective.ALL_REDUCE:
            raise SpecError(f"{PIPELINED} runs all_reduce only, not {collective.value}")
        groups = self._hosts(ranks)
        if len(groups) < 2 or len({len(g) for g in groups}) != 1:
            raise SpecError(f"{PIPELINED} needs several hosts with as many ranks each")
        host, rail = tuple(groups[0]), tuple(g[0] for g in groups)
        per_host = len(host)
        scale = self._tree_scale("tree", protocol.name, nbytes)

        def phases(n: int) -> tuple[float, float]:
            a = 0.0
            if per_host > 1:
                for coll in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
                    a += self._run(coll, host, n, "ring", protocol, engine, scale=scale)
            b = self._rail(rail, max(n // per_host, 1), protocol, engine, ranks, "tree", scale)
            return a, b

        a, b = phases(nbytes)
        a0, b0 = phases(ranks)
        return max(a, b) + min(a0, b0)
