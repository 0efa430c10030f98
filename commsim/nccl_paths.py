"""How NCCL uses a machine's links: which class each link is to its tuner (NVLink, PCIe,
network), and how its many channels spread over a host's NICs and a GPU's NVLinks where
commsim's one ring would use one (see :mod:`commsim.nccl`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from commsim.engine.evaluate import Evaluation
from commsim.nccl_tables import (
    LL128_PER_CHANNEL,
    LL_MAX_BW,
    TREE_EFFICIENCY,
    NcclConfig,
    Protocol,
    hop_factor,
)
from commsim.network import DerivedLinks, Link, Network
from commsim.schedule import Schedule


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
    hosts: dict[object, int] = {}
    for rank in range(ranks):
        host = network.host_of(rank)
        hosts[host] = hosts.get(host, 0) + 1
    if len(hosts) < 2 or None in hosts:
        return 1
    devices = network.devices
    fabric = {i for i, d in enumerate(devices) if d.kind == "switch" and d.host is None}
    nics: dict[object, set[int]] = {}
    for link in network.links:
        if link.dst in fabric and link.src not in fabric:
            nics.setdefault(devices[link.src].host, set()).add(link.src)
    return min(min(count, len(nics.get(host, ())) or count) for host, count in hosts.items())


def network_links(network: Network) -> frozenset[int]:
    """Indices of the links that belong to the inter-host network: those touching a switch
    that belongs to no host (the ``fabric`` of hierarchical topologies) or a NIC (a device
    of kind ``nic``, :mod:`commsim.topology.server`)."""
    fabric = {
        i for i, d in enumerate(network.devices)
        if (d.kind == "switch" and d.host is None) or d.kind == "nic"
    }
    multi_host = len({d.host for d in network.devices if d.host is not None}) > 1
    if not multi_host:
        return frozenset()
    return frozenset(
        i for i, link in enumerate(network.links) if link.src in fabric or link.dst in fabric
    )


def link_classes(network: Network) -> tuple[str, ...]:
    """NCCL's class of every link (``NCCL_HW_*``): ``net`` for the inter-host network, else
    ``nvlink`` for a direct GPU-GPU cable or a port of an NVSwitch (a device named
    ``nvswitch...``), else ``pcie`` (PCIe switches, CPUs, other switches). Computed once per
    structure (:meth:`~commsim.network.Network.structural`)."""
    return network.structural("nccl_link_classes", lambda: _link_classes(network))


def _link_classes(network: Network) -> tuple[str, ...]:
    net = network_links(network)
    devices = network.devices

    def nvlink_end(i: int) -> bool:
        return devices[i].name.startswith("nvswitch")

    out = []
    for i, link in enumerate(network.ends()):
        a, b = devices[link.src], devices[link.dst]
        if i in net:
            out.append("net")
        elif (a.kind != "switch" and b.kind != "switch" and "cpu" not in (a.kind, b.kind)) \
                or nvlink_end(link.src) or nvlink_end(link.dst):
            out.append("nvlink")
        else:
            out.append("pcie")
    return tuple(out)


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
    ranks = set(network.rank_devices)
    return [i for i, link in enumerate(network.ends()) if link.src in ranks and link.dst in ranks]


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
    for link in network.links:
        if link.src in index and link.dst in index:
            near[index[link.src]].add(index[link.dst])
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


def bandwidth_cap_Bps(network: Network, protocol: Protocol, nodes: int) -> float:
    """The protocol's bus bandwidth cap on this machine (inf without an ``nccl`` arch)."""
    config = NcclConfig.of(network)
    if config.arch is None:
        return float("inf")
    if protocol.name == "LL":
        return LL_MAX_BW[config.arch][min(nodes, 3) - 1 if nodes > 0 else 0] * 1e9
    if protocol.name == "LL128":
        return config.channels * LL128_PER_CHANNEL.get(config.arch, float("inf")) * 1e9
    return float("inf")


def protocol_network(network: Network, protocol: Protocol, family: str = "ring",
                     nodes: int = 1, channels: float = 1, cap_Bps: float = float("inf"),
                     share: float = 1.0, spread: dict[int, float] | None = None) -> Network:
    """``network`` as ``family`` under ``protocol`` sees it: each link's latency x its
    :func:`hop_factor`, its bandwidth x the protocol's factor x ``share`` (the fraction of
    the machine's channels the call runs) x :data:`TREE_EFFICIENCY` for trees (a ring's or
    tree's direct NVLinks at their GPU's whole NVLink bandwidth, ``spread``: by default
    :func:`nvlink_spread` of ``network``), network links also x ``channels`` (NCCL's rings,
    one channel per NIC, see :func:`ring_channels`), every link at most ``cap_Bps``. The
    result is a plain alpha-beta network (its ``nccl`` block dropped), timed as given; each
    link is scaled when first read (:class:`~commsim.network.DerivedLinks`: closed forms
    read a few, a simulation all)."""
    table = NcclConfig.of(network).tables
    classes = link_classes(network)
    efficiency = TREE_EFFICIENCY if family == "tree" else 1.0
    if spread is None:
        spread = nvlink_spread(network) if family in ("ring", "tree") else {}
    # per class: (latency factor, bandwidth x channels for network links)
    per_class = {cls: (hop_factor(table, cls, family, protocol.name, nodes > 1),
                       channels if cls == "net" else 1) for cls in ("net", "nvlink", "pcie")}
    bandwidth = protocol.bandwidth

    def scaled(i: int, link: Link) -> Link:
        factor, times = per_class[classes[i]]
        base = spread.get(i, link.bandwidth_Bps) if spread else link.bandwidth_Bps
        return Link(link.src, link.dst, link.latency_s * factor,
                    min(base * bandwidth * share * efficiency * times, cap_Bps), link.label)

    meta = {k: v for k, v in network.meta.items() if k != "nccl"}
    return network.rebuilt(name=f"{network.name}+{protocol.name}",
                           links=DerivedLinks(network.links, scaled), meta=meta)
