"""The built network: devices, directed links, ranks placed on devices, and routes.

Topology builders (``commsim.topology``) produce a :class:`Network`; engines read it. Links are
directed; a full-duplex cable is two links. A transfer over a path costs the sum of the hop
latencies plus its size over the narrowest hop's bandwidth, when uncontended.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, TypeVar

import numpy as np

from commsim.devices import Device, DeviceColumns, device_columns
from commsim.errors import SpecError
from commsim.links import DerivedLinks, Link, LinkColumns, link_columns, link_values

__all__ = ["DerivedLinks", "Device", "DeviceColumns", "Link", "LinkColumns", "Network", "Router",
           "shortest_path_router"]

#: Maps (source device, destination device) to the link indices of the path between them.
Router = Callable[["Network", int, int], tuple[int, ...]]

T = TypeVar("T")


def shortest_path_router(network: Network, src: int, dst: int) -> tuple[int, ...]:
    """Fewest hops (BFS), ties broken by the lowest link index: deterministic."""
    if src == dst:
        return ()
    out = network.out_links
    parent: dict[int, int] = {src: -1}
    queue = deque([src])
    while queue:
        device = queue.popleft()
        for link_id in out[device]:
            nxt = network.links[link_id].dst
            if nxt in parent:
                continue
            parent[nxt] = link_id
            if nxt == dst:
                path = []
                while nxt != src:
                    link_id = parent[nxt]
                    path.append(link_id)
                    nxt = network.links[link_id].src
                return tuple(reversed(path))
            queue.append(nxt)
    raise SpecError(
        f"topology {network.name!r}: no path from {network.devices[src].name} "
        f"to {network.devices[dst].name}"
    )


@dataclass(frozen=True, slots=True)
class Network:
    """Devices and links of a machine, and which device each rank runs on.

    ``meta`` carries the topology's parameters (kind, dims, nodes, gpus_per_node, ...) so that
    hierarchical algorithms and closed forms can read the structure without re-deriving it.
    """

    name: str
    devices: Sequence[Device]
    links: Sequence[Link]
    rank_devices: tuple[int, ...]
    gamma_s_per_B: float = 0.0
    router: Router = shortest_path_router
    meta: dict[str, object] = field(default_factory=dict, compare=False)
    _routes: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _out: list[list[int]] = field(default_factory=list, compare=False, repr=False)
    _derived: dict[Hashable, object] = field(default_factory=dict, compare=False, repr=False)
    #: What depends only on the structure (devices, link ends, ranks, router), shared with the
    #: views :meth:`rebuilt` makes of the same structure (see :meth:`structural`).
    _structure: dict[Hashable, object] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ranks(self) -> int:
        return len(self.rank_devices)

    @property
    def out_links(self) -> list[list[int]]:
        """Link indices leaving each device, in index order (built once)."""
        if not self._out:
            src = self.end_columns().src
            order = np.argsort(src, kind="stable").tolist()
            bounds = np.searchsorted(src[order], np.arange(len(self.devices) + 1)).tolist()
            self._out.extend(order[a:b] for a, b in zip(bounds, bounds[1:], strict=False))
        return self._out

    def ends(self) -> Sequence[Link]:
        """Links with this network's ends (``src``, ``dst``), for structure only: derived
        links' base, so that reading the structure makes no derived link."""
        links = self.links
        return links.ends if isinstance(links, DerivedLinks) else links

    def end_columns(self) -> LinkColumns:
        """:meth:`ends` as columns (built once per structure; read ``src`` and ``dst`` only)."""
        return self.structural("end_columns", lambda: link_columns(self.ends()))

    def link_values(self, at: np.ndarray) -> LinkColumns:
        """The links at indices ``at`` as columns (a view computes only those)."""
        return link_values(self.links, at)

    def link_costs(self, routes: Iterable[Sequence[int]]
                   ) -> tuple[dict[int, float], dict[int, float]]:
        """(latency_s, bandwidth_Bps) of every link on ``routes``, by link index: for code
        that reads many links one by one, without making a :class:`Link` of each."""
        ids = np.unique(np.fromiter(chain.from_iterable(routes), np.int64))
        values, keys = self.link_values(ids), ids.tolist()
        return (dict(zip(keys, values.latency_s.tolist(), strict=True)),
                dict(zip(keys, values.bandwidth_Bps.tolist(), strict=True)))

    def device_columns(self) -> DeviceColumns:
        """The devices as columns (kept by a device table; built once per structure
        otherwise)."""
        return self.structural("device_columns", lambda: device_columns(self.devices))

    def device_hosts(self) -> np.ndarray:
        """The host of every device, -1 for none."""
        return self.device_columns().host

    def rank_device_array(self) -> np.ndarray:
        """:attr:`rank_devices` as an array (built once per structure)."""
        return self.structural("rank_device_array",
                               lambda: np.asarray(self.rank_devices, dtype=np.int64))

    def host_of(self, rank: int) -> int | None:
        """The host (server) of a rank's device, or None for a flat topology."""
        return self.devices[self.rank_devices[rank]].host

    def rank_hosts(self) -> tuple[int, ...] | None:
        """The host of every rank (None for a flat topology or a single rank), built once.

        >>> from commsim.topology import hierarchical
        >>> hierarchical(2, 2, intra=("1us", "1GB/s"), inter=("2us", "1GB/s")).rank_hosts()
        (0, 0, 1, 1)
        """

        def make() -> tuple[int, ...] | None:
            if self.ranks < 2 or self.host_of(0) is None:
                return None
            hosts = self.device_hosts()[self.rank_device_array()]
            return tuple(np.maximum(hosts, 0).tolist())  # a host-less rank counts as host 0

        return self.structural("rank_hosts", make)

    def structural(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, computed once per ``key`` for this network and every view of the same
        structure (a protocol's or a reducing switch's scaled links on the same ranks): for
        values that depend on the routes and link ends only, never on latencies or
        bandwidths."""
        try:
            return self._structure[key]  # type: ignore[return-value]
        except KeyError:
            value = self._structure[key] = make()
            return value

    def derived(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, computed once per ``key`` and kept with this network.

        For values that depend only on the (immutable) network, such as the analytic engine's
        pair costs, so that a sweep over sizes and algorithms computes them once.
        """
        try:
            return self._derived[key]  # type: ignore[return-value]
        except KeyError:
            value = self._derived[key] = make()
            return value

    @property
    def reduction_switches(self) -> tuple[int, ...]:
        """Device indices of the switches that reduce in-network, in device order.

        A schedule addresses them as endpoints after the ranks: endpoint ``ranks + k`` is
        ``reduction_switches[k]`` (see :meth:`endpoint_device`).
        """
        return self.structural(
            "reduction_switches",
            lambda: tuple(np.flatnonzero(~np.isnan(self.device_columns().reduction_Bps)).tolist()),
        )

    def endpoint_device(self, endpoint: int) -> int:
        """The device of a schedule endpoint: a rank, or (from ``ranks`` on) a reducing switch."""
        if endpoint < self.ranks:
            return self.rank_devices[endpoint]
        if endpoint - self.ranks >= len(self.reduction_switches):
            raise SpecError(
                f"endpoint {endpoint}: network {self.name!r} has {self.ranks} ranks and "
                f"{len(self.reduction_switches)} reducing switches"
            )
        return self.reduction_switches[endpoint - self.ranks]

    def rebuilt(
        self,
        *,
        name: str | None = None,
        links: Sequence[Link] | None = None,
        rank_devices: tuple[int, ...] | None = None,
        meta: dict[str, object] | None = None,
    ) -> Network:
        """A fresh network (its own caches) like this one, with the given parts replaced; with
        the same ranks and links derived from these (:class:`DerivedLinks`), it shares this
        one's structure: routes, out-links and :meth:`structural` values."""
        same = rank_devices is None and (
            links is None or (isinstance(links, DerivedLinks) and links.ends is self.ends()))
        shared: dict[str, Any] = (
            {"_routes": self._routes, "_out": self._out, "_structure": self._structure}
            if same else {})
        return Network(
            self.name if name is None else name,
            self.devices,
            self.links if links is None else links,
            self.rank_devices if rank_devices is None else rank_devices,
            self.gamma_s_per_B,
            self.router,
            dict(self.meta) if meta is None else meta,
            **shared,
        )

    def reducing_view(self, switches: frozenset[int]) -> Network:
        """This network as in-network reduction sees it: every port of the reducing switches
        ``switches`` (device indices) carries the switch's ``reduction_Bps``; other links are
        unchanged."""

        def make() -> Network:
            rate = np.zeros(len(self.devices))
            at = np.array(sorted(switches), dtype=np.int64)
            rate[at] = np.nan_to_num(self.device_columns().reduction_Bps[at])

            def ports(links: LinkColumns, _: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                reduce = np.where(rate[links.src] > 0, rate[links.src], rate[links.dst])
                return links.latency_s, np.where(reduce > 0, reduce, links.bandwidth_Bps)

            return self.rebuilt(links=DerivedLinks(self.links, ports))

        return self.derived(("reducing_view", switches), make)

    def reducing_switches_of(self) -> tuple[tuple[int, ...] | None, int | None]:
        """(``host_switches``, ``fabric_switch``) of a call on all ranks, as endpoints (see
        :class:`~commsim.algorithms.base.Call`): each rank's reducing switch one port away on
        its own host, and a reducing switch of no host one port away from every rank of a
        multi-host network."""

        def make() -> tuple[tuple[int, ...] | None, int | None]:
            reducing = self.reduction_switches
            if not reducing or self.ranks < 2:
                return None, None
            endpoint = np.full(len(self.devices), -1, dtype=np.int64)
            endpoint[list(reducing)] = self.ranks + np.arange(len(reducing))
            on_rank = np.zeros(len(self.devices), dtype=bool)
            devices = self.rank_device_array()
            on_rank[devices] = True
            ends, host = self.end_columns(), self.device_hosts()
            port = on_rank[ends.src] & (endpoint[ends.dst] >= 0)  # a rank's device -> switch
            src, dst = ends.src[port], ends.dst[port]
            own = host[src] == host[dst]  # the switch of its own host (or both of none)
            nearest = np.full(len(self.devices), len(self.devices), dtype=np.int64)
            np.minimum.at(nearest, src[own], dst[own])
            mine = nearest[devices]
            hosts = (tuple(endpoint[mine].tolist()) if (mine < len(self.devices)).all()
                     else None)
            # the switches of no host one port away from every rank's device
            shared = np.unique(np.stack([dst, src])[:, host[dst] < 0], axis=1)
            reach = np.bincount(shared[0], minlength=len(self.devices))
            fabric = np.flatnonzero(reach == len(np.unique(devices)))
            multi_host = self.rank_hosts() is not None and len(set(self.rank_hosts() or ())) > 1
            fabric_switch = int(endpoint[fabric[0]]) if fabric.size and multi_host else None
            return hosts, fabric_switch

        return self.structural("reducing_switches_of", make)

    def route(self, src_rank: int, dst_rank: int) -> tuple[int, ...]:
        """Link indices from endpoint ``src_rank``'s device to ``dst_rank``'s (cached);
        endpoints are ranks, then reducing switches (:meth:`endpoint_device`)."""
        key = (self.endpoint_device(src_rank), self.endpoint_device(dst_rank))
        path = self._routes.get(key)
        if path is None:
            path = self.router(self, key[0], key[1])
            self._routes[key] = path
        return path

    def route_csr(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The routes ``src[k] -> dst[k]`` (endpoint arrays) as CSR rows: ``links[ptr[k]:
        ptr[k + 1]]`` is route ``k``, in hop order. In numpy where the router has a vectorised
        form (``router.paths``, given device arrays: each route's length and the links, or None
        where it does not apply), else one lookup per pair."""
        ptr = np.zeros(len(src) + 1, dtype=np.int64)
        paths = getattr(self.router, "paths", None)
        if paths is not None and (src < self.ranks).all() and (dst < self.ranks).all():
            devices = self.rank_device_array()
            found = paths(self, devices[src], devices[dst])
            if found is not None:
                np.cumsum(found[0], out=ptr[1:])
                return ptr, np.asarray(found[1], dtype=np.int64)
        routes = [self.route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True)]
        np.cumsum([len(r) for r in routes], out=ptr[1:])
        return ptr, np.fromiter(chain.from_iterable(routes), np.int64, int(ptr[-1]))

    def route_links(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The links of every route ``src[k] -> dst[k]`` (rank arrays), concatenated: a link
        appears once per route that crosses it (:meth:`route_csr`'s links)."""
        return self.route_csr(src, dst)[1]

    def path_cost(self, src_rank: int, dst_rank: int) -> tuple[float, float]:
        """(latency_s, bandwidth_Bps) of the uncontended path: summed latency, narrowest hop."""
        path = self.route(src_rank, dst_rank)
        if not path:
            return 0.0, float("inf")
        links = self.links
        return sum(links[i].latency_s for i in path), min(links[i].bandwidth_Bps for i in path)

    def with_ranks(self, ranks: int) -> Network:
        """The same machine running only its first ``ranks`` ranks (filling hosts in order)."""
        if ranks < 1:
            raise SpecError(f"--ranks must be >= 1, got {ranks}")
        if ranks > self.ranks:
            raise SpecError(
                f"--ranks {ranks} exceeds the {self.ranks} ranks of topology {self.name!r}"
            )
        if ranks == self.ranks:
            return self
        return self.rebuilt(rank_devices=self.rank_devices[:ranks])

    def on_hosts(self, hosts: Sequence[int]) -> Network | None:
        """The same machine running ``len(hosts)`` ranks placed as a measured run placed
        them: rank ``k`` on the ``hosts[k]``-th of the machine's hosts (hosts numbered in the
        order of their first rank; each host's ranks taken in order). None where the machine
        cannot hold that placement (fewer hosts, or fewer ranks on one of them).

        >>> from commsim.topology import load_topology
        >>> net = load_topology("dgx-h100x2").on_hosts([0, 1])  # one GPU on each of 2 hosts
        >>> [net.host_of(r) for r in range(net.ranks)], net.rank_devices
        ([0, 1], (0, 8))
        """
        pools: dict[int, list[int]] = {}
        for rank, host in enumerate(self.device_hosts()[self.rank_device_array()].tolist()):
            pools.setdefault(host, []).append(rank)
        order = list(pools.values())
        taken = [0] * len(order)
        chosen = []
        for host in hosts:
            if not 0 <= host < len(order) or taken[host] >= len(order[host]):
                return None
            chosen.append(order[host][taken[host]])
            taken[host] += 1
        if chosen == list(range(len(chosen))):
            return self.with_ranks(len(chosen))
        return self.rebuilt(rank_devices=tuple(self.rank_devices[r] for r in chosen))
