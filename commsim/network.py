"""The built network: devices, directed links, ranks placed on devices, and routes.

Topology builders (``commsim.topology``) produce a :class:`Network`; engines read it. Links are
directed; a full-duplex cable is two links. A transfer over a path costs the sum of the hop
latencies plus its size over the narrowest hop's bandwidth, when uncontended.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TypeVar

from commsim.errors import SpecError

#: Maps (source device, destination device) to the link indices of the path between them.
Router = Callable[["Network", int, int], tuple[int, ...]]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Device:
    """A chip (``gpu``/``tpu``/``cpu``) or a ``switch``; ``host`` groups chips in one server."""

    name: str
    kind: str
    host: int | None = None


@dataclass(frozen=True, slots=True)
class Link:
    """A directed link ``src -> dst`` (device indices), bandwidth per direction."""

    src: int
    dst: int
    latency_s: float
    bandwidth_Bps: float
    label: str = ""


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
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    rank_devices: tuple[int, ...]
    gamma_s_per_B: float = 0.0
    router: Router = shortest_path_router
    meta: dict[str, object] = field(default_factory=dict, compare=False)
    _routes: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _out: list[list[int]] = field(default_factory=list, compare=False, repr=False)
    _derived: dict[Hashable, object] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ranks(self) -> int:
        return len(self.rank_devices)

    @property
    def out_links(self) -> list[list[int]]:
        """Link indices leaving each device, in index order (built once)."""
        if not self._out:
            out: list[list[int]] = [[] for _ in self.devices]
            for index, link in enumerate(self.links):
                out[link.src].append(index)
            self._out.extend(out)
        return self._out

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
            return tuple(int(self.host_of(r) or 0) for r in range(self.ranks))

        return self.derived("rank_hosts", make)

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

    def route(self, src_rank: int, dst_rank: int) -> tuple[int, ...]:
        """Link indices from rank ``src_rank``'s device to ``dst_rank``'s (cached)."""
        key = (self.rank_devices[src_rank], self.rank_devices[dst_rank])
        path = self._routes.get(key)
        if path is None:
            path = self.router(self, key[0], key[1])
            self._routes[key] = path
        return path

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
        return Network(
            self.name,
            self.devices,
            self.links,
            self.rank_devices[:ranks],
            self.gamma_s_per_B,
            self.router,
            dict(self.meta),
        )
