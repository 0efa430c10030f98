"""Build a :class:`~commsim.network.Network` from a validated topology spec.

One builder per kind. Cables are full duplex (two directed links, bandwidth per direction).
Direct cables (ring, torus, fully connected, custom) carry their full latency on each hop;
switch ports (switch, hierarchical) carry half of the port latency on each of their two hops,
so device -> switch -> device costs exactly the port's ``latency``.

>>> from commsim.topology.spec import HierarchicalSpec, LinkSpec
>>> net = build_network(HierarchicalSpec(
...     nodes=2, gpus_per_node=4,
...     intra=LinkSpec(latency_s=2e-6, bandwidth_Bps=450e9),
...     inter=LinkSpec(latency_s=5e-6, bandwidth_Bps=50e9)))
>>> net.ranks, net.host_of(5), net.path_cost(0, 1), net.path_cost(0, 4)
(8, 1, (2e-06, 450000000000.0), (5e-06, 50000000000.0))
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from commsim.devices import DeviceColumns, DeviceTable
from commsim.errors import SpecError
from commsim.links import LinkColumns, LinkTable
from commsim.network import Device, Link, Network, Router, shortest_path_router
from commsim.topology.routing import (
    FullMeshRouter,
    HierarchicalRouter,
    SharedRouter,
    StarRouter,
    TorusRouter,
)
from commsim.topology.spec import (
    CustomSpec,
    FlatSpec,
    FullyConnectedSpec,
    HierarchicalSpec,
    LinkSpec,
    RingSpec,
    SharedSpec,
    SwitchSpec,
    TopologySpec,
    TorusSpec,
)


def build_network(spec: TopologySpec) -> Network:
    """The network a spec describes (ranks, devices, links, router and ``meta``).

    ``meta`` always has ``kind``, ``description`` and ``sources``, plus the kind's parameters:
    ``ranks``/``link`` (flat kinds), ``dims``/``link`` (torus), ``nodes``/``gpus_per_node``/
    ``intra``/``inter`` (hierarchical); links as ``{"latency_s", "bandwidth_Bps"}``.
    """
    if isinstance(spec, TorusSpec):
        return _torus(spec)
    if isinstance(spec, RingSpec):
        return _torus(spec, dims=(spec.ranks,))
    if isinstance(spec, FullyConnectedSpec):
        return _fully_connected(spec)
    if isinstance(spec, SwitchSpec):
        return _switch(spec)
    if isinstance(spec, HierarchicalSpec):
        return _hierarchical(spec)
    if isinstance(spec, CustomSpec):
        return _custom(spec)
    if isinstance(spec, SharedSpec):
        return _shared(spec)
    raise SpecError(f"cannot build a topology from {spec!r}")


def _meta(spec: TopologySpec, **params: object) -> dict[str, object]:
    return {
        "kind": spec.kind,
        "description": spec.description,
        "sources": tuple(spec.sources),
        "algorithms": dict(spec.algorithms),
        **({} if spec.nccl is None else {"nccl": spec.nccl.as_meta()}),
        **({"device": json.loads(spec.device_info)} if spec.device_info else {}),
        **params,
    }


def _cable(
    links: list[Link],
    a: int,
    b: int,
    link: LinkSpec,
    names: tuple[str, str],
    hop_latency_s: float | None = None,
) -> None:
    """Append the two directed links of a full-duplex cable ``a <-> b``."""
    latency = link.latency_s if hop_latency_s is None else hop_latency_s
    links.append(Link(a, b, latency, link.bandwidth_Bps, f"{names[0]}->{names[1]}"))
    links.append(Link(b, a, latency, link.bandwidth_Bps, f"{names[1]}->{names[0]}"))


def _network(
    spec: TopologySpec,
    default_name: str,
    devices: list[Device] | DeviceTable,
    links: list[Link] | LinkTable,
    ranks: tuple[int, ...],
    router: Router,
    meta: dict[str, object],
) -> Network:
    return Network(
        name=spec.name or default_name,
        devices=devices if isinstance(devices, DeviceTable) else tuple(devices),
        links=links if isinstance(links, LinkTable) else tuple(links),
        rank_devices=ranks,
        gamma_s_per_B=spec.gamma_s_per_B,
        router=router,
        meta=meta,
    )


def _torus(spec: TorusSpec | RingSpec, dims: tuple[int, ...] | None = None) -> Network:
    """Row-major devices; a ``+`` cable per device and dimension (one for size 2, none for 1)."""
    dims = spec.dims if isinstance(spec, TorusSpec) else dims
    assert dims is not None
    count = math.prod(dims)
    strides = tuple(math.prod(dims[d + 1 :]) for d in range(len(dims)))
    devices = [Device(f"{spec.device}{i}", spec.device) for i in range(count)]
    table = [[-1] * (2 * len(dims)) for _ in range(count)]
    links: list[Link] = []
    for i in range(count):
        for d, size in enumerate(dims):
            coord = (i // strides[d]) % size
            if size == 1 or (size == 2 and coord == 1):
                continue
            j = i + ((coord + 1) % size - coord) * strides[d]
            forward = len(links)
            _cable(links, i, j, spec.link, (devices[i].name, devices[j].name))
            table[i][2 * d], table[j][2 * d + 1] = forward, forward + 1
            if size == 2:  # one cable is both the + and the - neighbour
                table[i][2 * d + 1], table[j][2 * d] = forward, forward + 1
    router = TorusRouter(dims, strides, tuple(tuple(row) for row in table))
    if isinstance(spec, TorusSpec):
        name = "torus-" + "x".join(map(str, dims))
        meta = _meta(spec, dims=dims, link=spec.link.as_meta())
    else:
        name = f"ring-{count}"
        meta = _meta(spec, ranks=count, link=spec.link.as_meta())
    return _network(spec, name, devices, links, tuple(range(count)), router, meta)


def _flat_devices(spec: FlatSpec) -> list[Device]:
    return [Device(f"{spec.device}{i}", spec.device) for i in range(spec.ranks)]


def _fully_connected(spec: FullyConnectedSpec) -> Network:
    """Link ``i -> j`` for every ordered pair, in (i, j) order (see :class:`FullMeshRouter`)."""
    devices = _flat_devices(spec)
    link = spec.link
    links = [
        Link(i, j, link.latency_s, link.bandwidth_Bps, f"{devices[i].name}->{devices[j].name}")
        for i in range(spec.ranks)
        for j in range(spec.ranks)
        if i != j
    ]
    meta = _meta(spec, ranks=spec.ranks, link=link.as_meta())
    return _network(
        spec,
        f"fully_connected-{spec.ranks}",
        devices,
        links,
        tuple(range(spec.ranks)),
        FullMeshRouter(spec.ranks),
        meta,
    )


def _switch(spec: SwitchSpec) -> Network:
    """Devices 0..ranks-1, then the switch; device i's port is links 2i (up) and 2i+1 (down)."""
    devices = [
        *_flat_devices(spec),
        Device("switch", "switch", reduction_Bps=spec.link.reduction_bandwidth_Bps),
    ]
    hub = spec.ranks
    links: list[Link] = []
    for i in range(spec.ranks):
        _cable(links, i, hub, spec.link, (devices[i].name, "switch"), spec.link.latency_s / 2)
    meta = _meta(spec, ranks=spec.ranks, link=spec.link.as_meta())
    return _network(
        spec,
        f"switch-{spec.ranks}",
        devices,
        links,
        tuple(range(spec.ranks)),
        StarRouter(spec.ranks),
        meta,
    )


@dataclass(frozen=True, slots=True)
class HierarchicalNames:
    """The name of device ``i`` of a ``hierarchical`` network: its GPUs, then a node switch
    per node, then the fabric.

    >>> [HierarchicalNames("gpu", 16, 2)(i) for i in (3, 17, 18)]
    ['gpu3', 'nvswitch1', 'fabric']
    """

    gpu: str
    gpus: int
    nodes: int

    def __call__(self, index: int) -> str:
        if index < self.gpus:
            return f"{self.gpu}{index}"
        return "fabric" if index == self.gpus + self.nodes else f"nvswitch{index - self.gpus}"


@dataclass(frozen=True, slots=True)
class HierarchicalLabels:
    """The label of link ``i`` of a ``hierarchical`` network (see :func:`_hierarchical`).

    >>> [HierarchicalLabels("gpu", 8)(i) for i in (36, 37, 38, 39)]
    ['gpu9->nvswitch1', 'nvswitch1->gpu9', 'gpu9->fabric', 'fabric->gpu9']
    """

    gpu: str
    gpus_per_node: int

    def __call__(self, index: int) -> str:
        g, port = divmod(index, 4)
        name, node = f"{self.gpu}{g}", f"nvswitch{g // self.gpus_per_node}"
        return (f"{name}->{node}", f"{node}->{name}", f"{name}->fabric", f"fabric->{name}")[port]


def _hierarchical(spec: HierarchicalSpec) -> Network:
    """GPUs (node-major), then one ``nvswitch<n>`` per node, then the ``fabric`` switch."""
    gpus, nodes = spec.nodes * spec.gpus_per_node, spec.nodes
    rates = (spec.intra.reduction_bandwidth_Bps, spec.inter.reduction_bandwidth_Bps)
    intra_rate, inter_rate = (np.nan if r is None else r for r in rates)
    devices = DeviceTable(
        DeviceColumns(
            np.array(["gpu"] * gpus + ["switch"] * (nodes + 1)),
            np.concatenate([np.arange(gpus) // spec.gpus_per_node, np.arange(nodes), [-1]]),
            np.concatenate([np.full(gpus, np.nan), np.full(nodes, intra_rate), [inter_rate]]),
        ),
        HierarchicalNames(spec.gpu, gpus, nodes),
    )
    fabric = len(devices) - 1
    # The four links of each GPU g, numbered 4g.. (HierarchicalRouter relies on it): to its
    # node switch, back, to the fabric, back; as numpy columns (65,536 GPUs are 262,144 links,
    # and an analytic run reads a few of them: commsim.links.LinkTable).
    gpu = np.arange(gpus, dtype=np.int64)
    switch, hub = gpus + gpu // spec.gpus_per_node, np.full(gpus, fabric, dtype=np.int64)
    intra_s, inter_s = spec.intra.latency_s / 2, spec.inter.latency_s / 2
    links = LinkTable(
        LinkColumns(
            np.stack([gpu, switch, gpu, hub], axis=1).ravel(),
            np.stack([switch, gpu, hub, gpu], axis=1).ravel(),
            np.tile([intra_s, intra_s, inter_s, inter_s], gpus),
            np.tile([spec.intra.bandwidth_Bps] * 2 + [spec.inter.bandwidth_Bps] * 2, gpus),
        ),
        HierarchicalLabels(spec.gpu, spec.gpus_per_node),
    )
    meta = _meta(
        spec,
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        intra=spec.intra.as_meta(),
        inter=spec.inter.as_meta(),
    )
    return _network(
        spec,
        f"hierarchical-{spec.nodes}x{spec.gpus_per_node}",
        devices,
        links,
        tuple(range(gpus)),
        HierarchicalRouter(gpus, spec.gpus_per_node),
        meta,
    )


def _shared(spec: SharedSpec) -> Network:
    """Rank devices (host 0), then ``medium-in`` and ``medium-out``; see :class:`SharedRouter`
    for the link layout (ports, then a medium and a latency link per rank count)."""
    count = spec.ranks
    devices = [Device(f"{spec.device}{i}", spec.device, 0) for i in range(count)]
    devices += [Device("medium-in", "switch"), Device("medium-out", "switch")]
    hub_in, hub_out = count, count + 1
    links: list[Link] = []
    port = spec.link.bandwidth_Bps
    for i in range(count):
        name = devices[i].name
        links.append(Link(i, hub_in, 0.0, port, f"{name}->medium"))
        links.append(Link(hub_out, i, 0.0, port, f"medium->{name}"))
    for q in range(1, count + 1):
        links.append(Link(hub_in, hub_out, 0.0, spec.medium_Bps, f"medium@{q}"))
        links.append(Link(hub_in, hub_out, spec.latency_at(q), math.inf, f"latency@{q}"))
    meta = _meta(
        spec,
        ranks=count,
        link=spec.link.as_meta(),
        medium_bandwidth_Bps=spec.medium_Bps,
        latency_per_rank_s=spec.latency_per_rank_s,
        cores=spec.cores,
    )
    return _network(
        spec, f"shared-{count}", devices, links, tuple(range(count)), SharedRouter(count), meta
    )


def _custom(spec: CustomSpec) -> Network:
    """Devices and links as listed (duplex links add the reverse right after); BFS routing."""
    index = {d.name: i for i, d in enumerate(spec.devices)}
    devices = [Device(d.name, d.kind, d.host) for d in spec.devices]
    links: list[Link] = []
    for link in spec.links:
        a, b = index[link.src], index[link.dst]
        links.append(Link(a, b, link.latency_s, link.bandwidth_Bps, f"{link.src}->{link.dst}"))
        if link.duplex:
            links.append(Link(b, a, link.latency_s, link.bandwidth_Bps, f"{link.dst}->{link.src}"))
    ranks = tuple(index[name] for name in spec.rank_names)
    _check_connected(devices, links, ranks)
    meta = _meta(spec, ranks=len(ranks))
    return _network(spec, "custom", devices, links, ranks, shortest_path_router, meta)


def _reachable(start: int, adjacency: list[list[int]]) -> set[int]:
    seen, queue = {start}, deque([start])
    while queue:
        for nxt in adjacency[queue.popleft()]:
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def _check_connected(devices: list[Device], links: list[Link], ranks: tuple[int, ...]) -> None:
    """Every rank must reach every other: rank 0 reaches all, and all reach rank 0."""
    forward: list[list[int]] = [[] for _ in devices]
    backward: list[list[int]] = [[] for _ in devices]
    for link in links:
        forward[link.src].append(link.dst)
        backward[link.dst].append(link.src)
    first = devices[ranks[0]].name
    for adjacency, outward in ((forward, True), (backward, False)):
        seen = _reachable(ranks[0], adjacency)
        for rank, device in enumerate(ranks):
            if device not in seen:
                name = devices[device].name
                ends = (f"{first!r} (rank 0)", f"{name!r} (rank {rank})")
                src, dst = ends if outward else ends[::-1]
                raise SpecError(f"links: no path from {src} to {dst}")
