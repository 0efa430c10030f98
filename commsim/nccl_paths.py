"""How NCCL uses a machine's links: which class each link is to its tuner (NVLink, PCIe,
network), and how its many channels spread over a host's NICs and a GPU's NVLinks where
commsim's one ring would use one (see :mod:`commsim.nccl`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import numpy as np

from commsim.engine.evaluate import Evaluation
from commsim.nccl_caps import bandwidth_factor, bus_cap, ll128_cap, ll_max_bw
from commsim.nccl_tables import NcclConfig, Protocol, hop_factor
from commsim.network import DerivedLinks, LinkColumns, Network
from commsim.schedule import Schedule

#: Hops of each kind (within a host, across hosts) :func:`ring_hop_scales` samples.
MAX_HOPS = 64


def ring_channels(network: Network, ranks: int) -> int:
    """How many NICs NCCL's rings use in parallel where commsim's one ring crosses a host.

    NCCL runs several rings (channels) at once, each crossing between hosts through another
    GPU's NIC (``src/graph/search.cc`` picks a NIC per channel; on rail-optimized machines
    every GPU's own), so the crossing carries the bandwidth of all the host's NICs while each
    GPU's NVLink port carries what one ring's does. commsim's ``ring`` is one ring, crossing
    through one GPU's NIC: for NCCL's rings, its network hops get the bandwidth of as many
    NICs as a host has in use (its ranks, at most its NICs: the devices of the host cabled to
    the fabric; 1 on a single host).
    """
    host_ids, counts = np.unique(network.device_hosts()[network.rank_device_array()[:ranks]],
                                 return_counts=True)
    if len(host_ids) < 2 or host_ids[0] < 0:  # one host, or ranks of no host
        return 1
    kind, host = network.device_columns()[:2]
    fabric = (kind == "switch") & (host < 0)
    ends = network.end_columns()
    cabled = np.unique(ends.src[fabric[ends.dst] & ~fabric[ends.src]])
    nic_hosts, nics = np.unique(network.device_hosts()[cabled], return_counts=True)
    per_host = dict(zip(nic_hosts.tolist(), nics.tolist(), strict=True))
    return min(min(count, per_host.get(host, 0) or count)
               for host, count in zip(host_ids.tolist(), counts.tolist(), strict=True))


def rail_floor_Bps(network: Network) -> np.ndarray:
    """For every link into or out of the fabric (a rail: a NIC's port), the bandwidth of the
    slowest rail of its host in the same direction; NaN for the other links. NCCL splits a
    call evenly over its channels, one NIC each, so its rings cross a host at the pace of its
    slowest NIC (a NIC at half speed halves them all); on a healthy machine every rail of a
    host is alike and this is each link's own bandwidth."""
    ends = network.end_columns()
    kind, host = network.device_columns()[:2]
    fabric = (kind == "switch") & (host < 0)
    up, down = fabric[ends.dst] & ~fabric[ends.src], fabric[ends.src] & ~fabric[ends.dst]
    bandwidth = network.link_values(np.arange(len(ends.src))).bandwidth_Bps
    floor = np.full(len(ends.src), np.nan)
    for rails, side in ((up, ends.src), (down, ends.dst)):
        at = np.flatnonzero(rails)
        if not at.size:
            continue
        hosts = host[side[at]]
        slowest = np.full(int(hosts.max(initial=0)) + 2, np.inf)
        np.minimum.at(slowest, hosts, bandwidth[at])
        floor[at] = slowest[hosts]
    return floor


def network_links(network: Network) -> frozenset[int]:
    """Indices of the links that belong to the inter-host network: those touching a switch
    that belongs to no host (the ``fabric`` of hierarchical topologies) or a NIC (a device
    of kind ``nic``, :mod:`commsim.topology.server`)."""
    return frozenset(np.flatnonzero(_network_link_mask(network)).tolist())


def _network_link_mask(network: Network) -> np.ndarray:
    """:func:`network_links` as a mask over the links."""
    ends = network.end_columns()
    kind, host = network.device_columns()[:2]
    if len(np.unique(host[host >= 0])) < 2:  # one host: no network
        return np.zeros(len(ends.src), dtype=bool)
    fabric = ((kind == "switch") & (host < 0)) | (kind == "nic")
    return fabric[ends.src] | fabric[ends.dst]


def link_classes(network: Network) -> tuple[str, ...]:
    """NCCL's class of every link (``NCCL_HW_*``): ``net`` for the inter-host network, else
    ``nvlink`` for a direct GPU-GPU cable or a port of an NVSwitch (a device named
    ``nvswitch...``), else ``pcie`` (PCIe switches, CPUs, other switches). Computed once per
    structure (:meth:`~commsim.network.Network.structural`)."""
    return network.structural("nccl_link_classes", lambda: tuple(
        np.array(LINK_CLASSES)[link_class_codes(network)].tolist()))


#: NCCL's link classes; :func:`link_class_codes` gives each link's index in it.
LINK_CLASSES = ("net", "nvlink", "pcie")


def link_class_codes(network: Network) -> np.ndarray:
    """:func:`link_classes` as indices into :data:`LINK_CLASSES` (computed once per
    structure)."""
    return network.structural("nccl_link_class_codes", lambda: _link_class_codes(network))


def _link_class_codes(network: Network) -> np.ndarray:
    ends = network.end_columns()
    src, dst = ends.src, ends.dst
    kind = network.device_columns().kind
    special = (kind == "switch") | (kind == "cpu")
    net, nvlink = _network_link_mask(network), ~special[src] & ~special[dst]
    # the rest are NVLink where an end is named nvswitch...: names read only where needed
    named = np.zeros(len(kind), dtype=bool)
    for ask in (special, ~special):
        pending = ~net & ~nvlink & ~named[src] & ~named[dst]
        at = np.unique(np.concatenate([src[pending][ask[src[pending]]],
                                       dst[pending][ask[dst[pending]]]]))
        named[at] = [network.devices[i].name.startswith("nvswitch") for i in at.tolist()]
    nvlink |= named[src] | named[dst]
    return np.where(net, 0, np.where(nvlink, 1, 2)).astype(np.int8)


def nvlink_spread(network: Network, devices: Collection[int] | None = None
                  ) -> dict[int, float]:
    """For every direct GPU-GPU cable (NVLink between two ranks' devices; only those among
    ``devices`` when given), the bandwidth of all its source GPU's direct NVLinks (among
    them). NCCL's rings (one per channel, in several orders) together use every NVLink of a
    GPU, as they use every NIC of a host (:func:`ring_channels`); commsim's one ring uses one:
    its NVLink hops get them all."""
    links = network.links
    direct = network.derived("nccl_direct_links", lambda: _direct_links(network))
    if devices is not None:
        direct = [i for i in direct if links[i].src in devices and links[i].dst in devices]
    total: dict[int, float] = {}
    for i in direct:
        link = links[i]
        total[link.src] = total.get(link.src, 0.0) + link.bandwidth_Bps
    return {i: total[links[i].src] for i in direct}


def _direct_links(network: Network) -> list[int]:
    ends = network.end_columns()
    ranks = np.zeros(len(network.devices), dtype=bool)
    ranks[network.rank_device_array()] = True
    return np.flatnonzero(ranks[ends.src] & ranks[ends.dst]).tolist()


def ring_order(network: Network, ranks: int) -> tuple[int, ...]:
    """The order NCCL's ring visits the first ``ranks`` ranks in, on one host whose GPUs are
    cabled to each other (NVLink pairs): the first cycle through direct cables only, found
    depth-first from rank 0 in rank order (NCCL searches its rings over the NVLink graph,
    ``src/graph/search.cc``, rather than following rank numbers). Rank order where no such
    cycle exists, across hosts, or beyond 16 ranks.

    >>> from commsim.topology import load_topology
    >>> ring_order(load_topology("dgx1-v100"), 8)
    (0, 1, 2, 3, 7, 5, 6, 4)
    """
    plain = tuple(range(ranks))
    devices = network.rank_devices[:ranks]
    if ranks < 3 or ranks > 16 or len({network.host_of(r) for r in plain}) > 1:
        return plain
    index = {d: r for r, d in enumerate(devices)}
    near: dict[int, set[int]] = {r: set() for r in plain}
    ends = network.end_columns()
    among = np.isin(ends.src, devices) & np.isin(ends.dst, devices)
    for src, dst in zip(ends.src[among].tolist(), ends.dst[among].tolist(), strict=True):
        near[index[src]].add(index[dst])
    if all(len(v) == ranks - 1 for v in near.values()):
        return plain  # fully connected (or behind a switch): every order is a ring
    path, seen = [0], {0}

    def extend() -> bool:
        if len(path) == ranks:
            return 0 in near[path[-1]]
        for nxt in sorted(near[path[-1]] - seen):
            path.append(nxt)
            seen.add(nxt)
            if extend():
                return True
            seen.discard(path.pop())
        return False

    return tuple(path) if extend() else plain


def ring_hop_scales(network: Network, nodes: int, inter_share: float,
                    intra_floor_s: float = 0.0) -> tuple[float, float]:
    """What the host links and the network links of NCCL's ring across ``nodes`` hosts scale
    their latency by, so that the ring's steps cost what NCCL's tuner charges them.

    ``network`` is the ring's protocol network, its ranks in ring order, latencies unscaled.
    commsim's ring moves in lockstep: each of its ``S`` steps lasts as long as its slowest hop,
    so a ring that crosses hosts would pay the network hop's latency at every step. NCCL keeps
    ``NCCL_STEPS`` steps of a channel in flight, and its tuner charges a ring
    ``(S - S_inter) x intraLat + S_inter x interLat`` (tuning.cc, every release read), where
    ``intraLat`` is at least ``intra_floor_s`` (from 2.18, the network overhead of an
    intra-node step, :func:`~commsim.nccl_tables.net_overhead_s`) and ``inter_share`` is
    ``S_inter / S`` (:func:`~commsim.nccl_tables.ring_inter_steps`). The host links are scaled
    to give the intra-node hop its floor, and the network links so that the step that crosses
    hosts lasts ``intra + inter_share x (inter - intra)``; (1, 1) where no hop stays in a host
    or none leaves it (the slowest hop of each kind counts, at most :data:`MAX_HOPS` sampled of
    each).

    >>> from commsim.topology import hierarchical
    >>> net = hierarchical(2, 4, intra=("1us", "100GB/s"), inter=("8us", "10GB/s"))
    >>> ring_hop_scales(net, 2, 1 / 7)  # the crossing: 1 + (8 - 1) / 7 = 2 us, of 8
    (1.0, 0.25)
    >>> ring_hop_scales(net, 2, 1 / 7, 2e-6)  # intra-node steps at least 2 us: 2 + 6 / 7 us
    (2.0, 0.357143)
    """
    hosts = network.rank_hosts()
    if hosts is None or nodes < 2:
        return 1.0, 1.0
    ranks = len(hosts)
    src = np.arange(ranks, dtype=np.int64)
    dst = np.roll(src, -1)
    host = np.asarray(hosts, dtype=np.int64)
    cross = host[src] != host[dst]
    if cross.all() or not cross.any():
        return 1.0, 1.0
    net_mask = link_class_codes(network) == LINK_CLASSES.index("net")

    def slowest(which: np.ndarray) -> tuple[float, float]:
        """(route latency, its network links' part) of the slowest sampled hop."""
        at = np.flatnonzero(which)
        at = at[np.linspace(0, len(at) - 1, min(len(at), MAX_HOPS)).astype(np.int64)]
        found = []
        for k in np.unique(at).tolist():
            path = np.asarray(network.route(int(src[k]), int(dst[k])), dtype=np.int64)
            latency = network.link_values(path).latency_s
            found.append((float(latency.sum()), float(latency[net_mask[path]].sum())))
        return max(found)

    intra, _ = slowest(~cross)
    inter, inter_net = slowest(cross)
    host_scale = max(1.0, intra_floor_s / intra) if intra > 0.0 else 1.0
    if inter_net <= 0.0:
        return round(host_scale, 6), 1.0
    intra *= host_scale
    step = intra + inter_share * (inter - intra)
    net_scale = (step - (inter - inter_net) * host_scale) / inter_net
    return round(host_scale, 6), round(min(1.0, max(0.0, net_scale)), 6)


def relabel(done: Evaluation, order: tuple[int, ...], network: Network) -> Evaluation:
    """``done``, timed with rank ``r`` on the GPU of rank ``order[r]``, told with the ranks'
    own numbers, on ``network`` (the same links, ranks in their own order)."""
    if done.schedule is None:
        return replace(done, network=network)
    import numpy as np

    schedule = done.schedule
    cols = schedule.columns
    # endpoints beyond the ranks (switches) stay
    ends = max(int(cols.src.max(initial=0)), int(cols.dst.max(initial=0)), schedule.root) + 1
    table = np.arange(max(len(order), ends), dtype=np.int64)
    table[:len(order)] = order
    relabelled = Schedule.of_columns(
        schedule.collective, schedule.algorithm, schedule.ranks, schedule.nbytes,
        int(table[schedule.root]), schedule.chunks,
        replace(cols, src=table[cols.src], dst=table[cols.dst]), schedule.endpoints)
    return replace(done, schedule=relabelled, network=network)


def bandwidth_cap_Bps(network: Network, protocol: Protocol, nodes: int, family: str = "ring",
                      collective: str = "all_reduce") -> float:
    """The bus bandwidth cap of ``family`` (ring or tree) running ``collective`` under
    ``protocol`` on this machine (:mod:`commsim.nccl_caps`, this release; inf without an
    ``nccl`` arch): LL at ``llMaxBw``, LL128 at ``channels x`` its per-channel cap, every
    protocol at the release's bus cap of the GPU generation."""
    config = NcclConfig.of(network)
    if config.arch is None:
        return float("inf")
    cap = bus_cap(config.version, config.arch)
    if protocol.name == "LL":
        cap = min(cap, ll_max_bw(config.version, config.arch, config.cpu, max(nodes, 1)))
    elif protocol.name == "LL128":
        cap = min(cap, config.channels * ll128_cap(config.version, config.arch,
                                                   "tree" if family == "tree" else "ring",
                                                   nodes, collective))
    return cap * 1e9


def protocol_network(network: Network, protocol: Protocol, family: str = "ring",
                     nodes: int = 1, channels: float = 1, cap_Bps: float = float("inf"),
                     share: float = 1.0, spread: dict[int, float] | None = None,
                     factor: float | None = None, latency: float = 1.0,
                     hop_scales: tuple[float, float] = (1.0, 1.0),
                     one_per_node: bool = False) -> Network:
    """``network`` as ``family`` under ``protocol`` sees it: each link's latency x its
    :func:`hop_factor`, its bandwidth x ``factor`` (by default
    :func:`~commsim.nccl_caps.bandwidth_factor` of an all_reduce: the protocol's, a tree's
    efficiency) x ``share`` (the fraction of the machine's channels the call runs), a ring's or
    tree's direct NVLinks at their GPU's whole NVLink bandwidth (``spread``: by default
    :func:`nvlink_spread` of ``network``), network links also x ``channels`` (NCCL's rings,
    one channel per NIC, see :func:`ring_channels`), every link at most ``cap_Bps``; every
    latency also x ``latency`` (a chain's, :func:`~commsim.nccl_tables.chain_latency_scale`),
    the host links' and the network links' also x ``hop_scales`` (a ring's across hosts,
    :func:`ring_hop_scales`); ``one_per_node``: one rank per host (NCCL's ``ppn == 1``). The
    result is a plain alpha-beta network (its ``nccl`` block dropped), timed as given; each
    link is scaled when first read (:class:`~commsim.network.DerivedLinks`: closed forms
    read a few, a simulation all)."""
    config = NcclConfig.of(network)
    table = config.tables
    codes = link_class_codes(network)
    bw_factor = factor if factor is not None else bandwidth_factor(
        config.version, family, protocol, nodes > 1, True, one_per_node)
    if spread is None:
        spread = nvlink_spread(network) if family in ("ring", "tree") else {}
    # per class: (latency factor, bandwidth x channels for network links)
    per_class = {cls: (hop_factor(table, cls, family, protocol.name, nodes > 1, one_per_node)
                       * latency * hop_scales[cls == "net"],
                       channels if cls == "net" else 1) for cls in LINK_CLASSES}
    hop = np.array([per_class[cls][0] for cls in LINK_CLASSES])
    times = np.array([per_class[cls][1] for cls in LINK_CLASSES], dtype=np.float64)
    spread_at = np.array(sorted(spread), dtype=np.int64)
    spread_Bps = np.array([spread[i] for i in spread_at.tolist()], dtype=np.float64)
    # several channels cross a host on its NICs together, at the slowest one's pace
    rails = rail_floor_Bps(network) if channels > 1 else None

    def scaled(links: LinkColumns, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cls, base = codes[at], links.bandwidth_Bps
        if rails is not None:
            base = np.where(np.isnan(rails[at]), base, np.fmin(rails[at], base))
        if spread:
            pos = np.minimum(np.searchsorted(spread_at, at), len(spread_at) - 1)
            base = np.where(spread_at[pos] == at, spread_Bps[pos], base)
        return links.latency_s * hop[cls], np.minimum(
            base * bw_factor * share * times[cls], cap_Bps)

    meta = {k: v for k, v in network.meta.items() if k != "nccl"}
    return network.rebuilt(name=f"{network.name}+{protocol.name}",
                           links=DerivedLinks(network.links, scaled), meta=meta)
