"""Apply a what-if (:mod:`commsim.topology.what_if`) to a network: the same machine with some
links slower, later or failed, and NCCL's block changed.

Changed links keep their ends and labels (a :class:`~commsim.links.DerivedLinks` view, so the
routes and every structural value are shared with the healthy network). Failed links are
taken out: the degraded network has only the links that remain, and its router
(:class:`FailoverRouter`) keeps the healthy route of every pair whose route survives and
finds the fewest-hop route that remains for the others. On a GPU server that is what NCCL
does when a NIC is gone: the GPU's traffic crosses NVLink to a peer GPU and leaves through
that GPU's NIC (PXN), and the host's rings run on the NICs that remain. A failure that leaves
some rank without a route to another is a one-line error naming the cut.

>>> from commsim.topology import load_topology
>>> from commsim.topology.what_if import what_if_from_dict
>>> net = load_topology("dgx-h100x2")
>>> slow = degrade(net, what_if_from_dict({"links": {"gpu3->fabric": {"failed": True}}}))
>>> [slow.links[i].label for i in slow.route(3, 8)]
['gpu3->nvswitch0', 'nvswitch0->gpu0', 'gpu0->fabric', 'fabric->gpu8']
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from os import PathLike
from typing import Any

import numpy as np

from commsim.devices import Device, device_columns
from commsim.errors import SpecError
from commsim.links import DerivedLinks, LinkColumns, LinkTable, link_columns
from commsim.network import Network, shortest_path_router
from commsim.topology.what_if import WhatIf, WhatIfSource, load_what_if

#: The ``meta`` key a degraded network carries: the what-if's name. Code that assumes a
#: kind's hosts and links are alike by construction (one representative pair per class)
#: reads it and looks at every pair instead.
META_KEY = "what_if"
#: The ``meta`` key of the devices at either end of a changed or failed link (sorted), so that
#: code which times one representative pair per class also times the pairs they touch.
DEVICES_KEY = "what_if_devices"


def link_labels(network: Network) -> list[str]:
    """Every link's label, in link order (``gpu3->fabric``; ``src->dst`` device names where
    a builder gave none)."""
    names = [d.name for d in network.devices]
    ends = network.end_columns()
    return [link.label or f"{names[s]}->{names[d]}"
            for link, s, d in zip(network.ends(), ends.src.tolist(), ends.dst.tolist(),
                                  strict=True)]


def degrade(network: Network, what_if: WhatIf) -> Network:
    """``network`` as ``what_if`` changes it (only its links and NCCL block; the compute
    factors are read by replay and plan). A pattern that matches no link, or failures that
    disconnect ranks, are SpecErrors naming them."""
    degraded = _degrade_links(network, what_if)
    if dict(what_if.nccl).get("p2p", True):
        return degraded
    return _without_p2p(degraded)


def _degrade_links(network: Network, what_if: WhatIf) -> Network:
    """:func:`degrade` but for ``nccl: {p2p: false}``."""
    meta = {**network.meta, META_KEY: what_if.name}
    if what_if.nccl:
        meta["nccl"] = _nccl_block(network, what_if)
    devices = _devices(network, what_if)
    if not what_if.links:
        return Network(network.name, devices, network.links, network.rank_devices,
                       network.gamma_s_per_B, network.router, meta)
    labels = link_labels(network)
    latency, bandwidth, failed = _link_values(network, what_if, labels)
    meta[DEVICES_KEY] = _touched(network, latency, bandwidth, failed)
    if not failed.any():
        def change(base: LinkColumns, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return latency[at], bandwidth[at]

        return Network(network.name, devices, DerivedLinks(network.links, change),
                       network.rank_devices, network.gamma_s_per_B, network.router, meta)
    keep = np.flatnonzero(~failed)
    index = np.full(len(failed), -1, dtype=np.int64)
    index[keep] = np.arange(len(keep))
    ends = network.end_columns()
    kept = tuple(labels[i] for i in keep.tolist())
    links = LinkTable(LinkColumns(ends.src[keep], ends.dst[keep], latency[keep], bandwidth[keep]),
                      kept.__getitem__)
    degraded = Network(network.name, devices, links, network.rank_devices,
                       network.gamma_s_per_B, FailoverRouter(network, index), meta)
    _check_connected(degraded, network, np.flatnonzero(failed))
    return degraded


def apply_what_if(network: Network, source: WhatIfSource) -> tuple[Network, WhatIf]:
    """Load the what-if ``source`` (a file, a mapping or a :class:`WhatIf`) and apply it to
    ``network``: the degraded network and the what-if. Errors name the file."""
    what_if = load_what_if(source)
    try:
        return degrade(network, what_if), what_if
    except SpecError as exc:
        if isinstance(source, str | PathLike):
            raise SpecError(f"{source}: {exc}") from None
        raise


def _link_values(network: Network, what_if: WhatIf, labels: list[str]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every link's latency and bandwidth under the what-if, and which have failed; the
    changes in file order (a later entry acts on what an earlier one left)."""
    columns = link_columns(network.links)
    latency = columns.latency_s.copy()
    bandwidth = columns.bandwidth_Bps.copy()
    failed = np.zeros(len(labels), dtype=bool)
    for change in what_if.links:
        hit = np.fromiter((fnmatchcase(label, change.pattern) for label in labels), bool,
                          len(labels))
        if not hit.any():
            raise SpecError(
                f"links.{change.pattern}: matches no link of topology {network.name!r} "
                f"('commsim topologies {network.name} --links' lists them)")
        if change.failed:
            failed |= hit
        if change.bandwidth_factor is not None:
            bandwidth[hit] *= change.bandwidth_factor
        if change.bandwidth_Bps is not None:
            bandwidth[hit] = change.bandwidth_Bps
        latency[hit] += change.added_latency_s
    return latency, bandwidth, failed


def _touched(network: Network, latency: np.ndarray, bandwidth: np.ndarray,
             failed: np.ndarray) -> tuple[int, ...]:
    """The devices at either end of a link the what-if changes."""
    columns = link_columns(network.links)
    changed = failed | (latency != columns.latency_s) | (bandwidth != columns.bandwidth_Bps)
    return tuple(np.unique(np.concatenate([columns.src[changed], columns.dst[changed]])).tolist())


def _nccl_block(network: Network, what_if: WhatIf) -> dict[str, object]:
    """The network's ``nccl`` block with the what-if's keys set (``nvls`` is not NCCL's
    block: it turns the host switches' reduction off, :func:`_devices`)."""
    block = network.meta.get("nccl")
    out: dict[str, Any] = dict(block) if isinstance(block, dict) else {}
    for key, value in what_if.nccl:
        if key not in ("nvls", "p2p"):
            out[key] = value
    if "version" in out:
        from commsim.topology.nccl_spec import parse_nccl_version

        parse_nccl_version(str(out["version"]))
    return out


def _devices(network: Network, what_if: WhatIf) -> Any:
    """The devices, with NVLink SHARP off (``nccl: {nvls: false}``): the switches of a host
    no longer reduce (a fabric's, SHARP's, still does)."""
    if dict(what_if.nccl).get("nvls", True):
        return network.devices
    columns = device_columns(network.devices)
    return tuple(
        Device(d.name, d.kind, d.host, None if host >= 0 else d.reduction_Bps)
        for d, host in zip(network.devices, columns.host.tolist(), strict=True))


def _without_p2p(network: Network) -> Network:
    """``network`` without GPU peer-to-peer (``nccl: {p2p: false}``, NCCL_P2P_DISABLE=1):
    two GPUs of one host exchange through host memory, NCCL's SHM transport. Their route
    goes up to the host's CPU nearest the sender and down to the receiver
    (:class:`HostMemoryRouter`; NCCL's ``paths.cc`` routes such a pair through the CPU the
    same way). A host with two or more GPUs and no CPU device is a SpecError naming it."""
    columns = device_columns(network.devices)
    kinds = [str(d.kind) for d in network.devices]
    hosts = columns.host.tolist()
    cpus: dict[int, list[int]] = {}
    for index, (kind, host) in enumerate(zip(kinds, hosts, strict=True)):
        if kind == "cpu" and host >= 0:
            cpus.setdefault(host, []).append(index)
    gpus = [i for i, kind in enumerate(kinds) if kind == "gpu" and hosts[i] >= 0]
    via: dict[int, int] = {}
    for gpu in gpus:
        near = cpus.get(hosts[gpu])
        if not near:
            if sum(hosts[g] == hosts[gpu] for g in gpus) < 2:
                continue
            raise SpecError(
                f"nccl.p2p: false sends a host's GPU traffic through host memory, but "
                f"topology {network.name!r} has no CPU device on the host of "
                f"{network.devices[gpu].name}")
        via[gpu] = min(near, key=lambda cpu: (len(network.router(network, gpu, cpu)), cpu))
    touched = sorted({*network.meta.get(DEVICES_KEY, ()), *via, *via.values()})  # type: ignore[misc]
    meta = {**network.meta, DEVICES_KEY: tuple(touched)}
    return Network(network.name, network.devices, network.links, network.rank_devices,
                   network.gamma_s_per_B, HostMemoryRouter(network.router, via, hosts), meta)


class HostMemoryRouter:
    """Routes without GPU peer-to-peer: a GPU's traffic to another GPU of its host goes
    through ``via[src]`` (the CPU holding the host memory it is staged in), each half by the
    ``inner`` router; every other pair as ``inner`` routes it."""

    __slots__ = ("hosts", "inner", "via")

    def __init__(self, inner: Any, via: dict[int, int], hosts: list[int]) -> None:
        self.inner, self.via, self.hosts = inner, via, hosts

    def __call__(self, network: Network, src: int, dst: int) -> tuple[int, ...]:
        cpu = self.via.get(src)
        if cpu is None or dst not in self.via or self.hosts[src] != self.hosts[dst] \
                or src == dst:
            return tuple(self.inner(network, src, dst))
        return (*self.inner(network, src, cpu), *self.inner(network, cpu, dst))


class FailoverRouter:
    """The healthy network's route where it survives the failures, else the fewest hops over
    the links that remain (:func:`~commsim.network.shortest_path_router`: ties by the lowest
    link index). ``index[k]`` is healthy link ``k``'s index among the remaining links, -1 for
    a failed one."""

    __slots__ = ("found", "healthy", "index")

    def __init__(self, healthy: Network, index: np.ndarray) -> None:
        self.healthy, self.index = healthy, index
        #: The fewest-hop routes found so far, by (src, dst): they depend on the link ends
        #: only, which every view of the degraded network (protocol scalings) shares.
        self.found: dict[tuple[int, int], tuple[int, ...]] = {}

    def __call__(self, network: Network, src: int, dst: int) -> tuple[int, ...]:
        path = self.healthy.router(self.healthy, src, dst)
        mapped = self.index[list(path)] if path else np.empty(0, dtype=np.int64)
        if (mapped < 0).any():
            if (src, dst) not in self.found:
                self.found[src, dst] = fewest_hops(network, src, dst)
            return self.found[src, dst]
        return tuple(mapped.tolist())

    def paths(self, network: Network, src: np.ndarray,
              dst: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The healthy router's vectorised routes (lengths, links) where none crosses a
        failed link (None otherwise: the routes are then looked up pair by pair)."""
        paths = getattr(self.healthy.router, "paths", None)
        found = paths(self.healthy, src, dst) if paths is not None else None
        if found is None:
            return None
        mapped = self.index[np.asarray(found[1], dtype=np.int64)]
        return None if (mapped < 0).any() else (found[0], mapped)


def fewest_hops(network: Network, src: int, dst: int) -> tuple[int, ...]:
    """:func:`~commsim.network.shortest_path_router`'s route (fewest hops, ties by the lowest
    link index), found a breadth at a time in numpy: a frontier's devices in the order that
    router queues them, each one's out-links in index order, the first link to reach a device
    its parent, as the router's queue makes it. On thousands of ranks the router's pass over
    every link in Python takes a tenth of a second a route; this, milliseconds."""
    if src == dst:
        return ()
    ends = network.end_columns()
    order, bounds = network.structural("out_csr", lambda: _out_csr(ends.src, len(network.devices)))
    parent = np.full(len(network.devices), -1, dtype=np.int64)
    seen = np.zeros(len(network.devices), dtype=bool)
    seen[src] = True
    frontier = np.asarray([src], dtype=np.int64)
    while frontier.size and not seen[dst]:
        starts, counts = bounds[frontier], bounds[frontier + 1] - bounds[frontier]
        at = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        links = order[at]
        reached = ends.dst[links]
        new = ~seen[reached]
        links, reached = links[new], reached[new]
        _, first = np.unique(reached, return_index=True)
        first.sort()
        frontier = reached[first]
        parent[frontier] = links[first]
        seen[frontier] = True
    if not seen[dst]:
        return shortest_path_router(network, src, dst)  # its one-line error names the pair
    path = []
    device = dst
    while device != src:
        link = int(parent[device])
        path.append(link)
        device = int(ends.src[link])
    return tuple(reversed(path))


def _out_csr(src: np.ndarray, devices: int) -> tuple[np.ndarray, np.ndarray]:
    """The links leaving each device in index order (``order[bounds[d]:bounds[d + 1]]``), as
    :attr:`~commsim.network.Network.out_links` lists them."""
    order = np.argsort(src, kind="stable")
    return order, np.searchsorted(src[order], np.arange(devices + 1))


def _reach(src: np.ndarray, dst: np.ndarray, devices: int, start: int) -> np.ndarray:
    """The devices reachable from ``start`` over the directed links ``src -> dst``, a
    frontier at a time (as many numpy passes as the longest fewest-hop route)."""
    seen = np.zeros(devices, dtype=bool)
    seen[start] = True
    frontier = seen.copy()
    while frontier.any():
        nxt = np.zeros(devices, dtype=bool)
        nxt[dst[frontier[src]]] = True
        frontier = nxt & ~seen
        seen |= frontier
    return seen


def _check_connected(degraded: Network, healthy: Network, failed: np.ndarray) -> None:
    """SpecError naming the failed links and a rank they cut off, when some rank can no
    longer reach rank 0 or be reached from it."""
    ends = degraded.end_columns()
    devices = degraded.rank_device_array()
    count = len(degraded.devices)
    forward = _reach(ends.src, ends.dst, count, int(devices[0]))
    backward = _reach(ends.dst, ends.src, count, int(devices[0]))
    cut = np.flatnonzero(~(forward[devices] & backward[devices]))
    if not cut.size:
        return
    labels = link_labels(healthy)
    named = [labels[i] for i in failed.tolist()]
    shown = ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")
    rank = int(cut[0])
    names = [d.name for d in degraded.devices]
    raise SpecError(
        f"what-if: the failed links ({shown}) cut rank {rank} ({names[devices[rank]]}) off "
        f"from rank 0 ({names[devices[0]]}): no route remains"
        + (f", nor for {cut.size - 1} other ranks" if cut.size > 1 else ""))
