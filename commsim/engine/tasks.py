"""Time a task graph: network transfers and fixed-duration delays, in one discrete-event run.

A training step lowers to this (``commsim.replay``): compute on a rank is a :class:`Delay`
(it takes its duration and uses no link), a collective is its schedule's transfers remapped to
global ranks, and zero-length delays mark where a collective may begin and when it has ended.
Transfers are timed exactly as :func:`commsim.engine.des.simulate_des` times them (max-min fair
sharing of every link, then the route's latency), so collectives that run at the same time
contend for the links they share.

A :class:`Routed` transfer runs on a *view* of the network: the same links with the latency and
bandwidth an NCCL protocol or an in-network reduction gives them. Alone it takes exactly what
the DES gives it on that view; sharing a link with other flows, each of its bytes takes
``bandwidth / view bandwidth`` of the link's capacity (weighted max-min fairness), so a
protocol that moves a byte less efficiently also leaves less for the others.

>>> from commsim.topology import load_topology
>>> from commsim.schedule import OpKind, Transfer
>>> net = load_topology({"kind": "ring", "ranks": 2, "link": {"latency": 0, "bandwidth": "1B/s"}})
>>> t = simulate_items([Delay(2.0), Transfer(0, 1, 0, 3, OpKind.COPY, (0,)), Delay(1.0, (1,))], net)
>>> t.start_s.tolist(), t.end_s.tolist()
([0.0, 2.0, 5.0], [2.0, 5.0, 6.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commsim.engine.des import NORMAL, Timing, _Drained, _Flow, _Simulation
from commsim.network import Network
from commsim.schedule import OpKind, Transfer


@dataclass(frozen=True, slots=True)
class Delay:
    """Lasts ``duration_s`` once its ``deps`` (item indices) have ended; uses no link."""

    duration_s: float
    deps: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Routed:
    """A transfer (fields as :class:`~commsim.schedule.Transfer`) timed on ``views[view]``
    of :func:`simulate_items`; ``src``/``dst`` are endpoints of that view (ranks, then its
    reducing switches)."""

    src: int
    dst: int
    offset: int
    nbytes: int
    op: OpKind
    deps: tuple[int, ...]
    view: int


Item = Transfer | Routed | Delay


class _TaskSimulation(_Simulation):
    """The DES, where an item may also be a :class:`Delay` or a :class:`Routed` transfer."""

    def __init__(self, items: Sequence[Item], network: Network,
                 views: Sequence[Network] = ()) -> None:
        super().__init__(items, network)  # type: ignore[arg-type]
        self.views = views
        # (view, src, dst) -> (links, latency, narrowest view bandwidth, weights)
        self.view_routes: dict[tuple[int, int, int], tuple[tuple[int, ...], float, float,
                                                           dict[int, float]]] = {}

    def _start(self, index: int) -> None:
        item = self.transfers[index]
        if isinstance(item, Delay):
            self.start[index] = float(self.env.now)
            event = self.env.timeout(item.duration_s)
            event.callbacks.append(lambda _e, i=index: self._end(i))
            return
        if isinstance(item, Routed):
            self._start_routed(index, item)
            return
        super()._start(index)

    def _view_route(self, item: Routed) -> tuple[tuple[int, ...], float, float, dict[int, float]]:
        key = (item.view, item.src, item.dst)
        route = self.view_routes.get(key)
        if route is None:
            view = self.views[item.view]
            path = view.route(item.src, item.dst)
            links = view.links
            weights = {i: self.capacity[i] / links[i].bandwidth_Bps for i in path}
            route = (path, sum(links[i].latency_s for i in path),
                     min((links[i].bandwidth_Bps for i in path), default=0.0), weights)
            self.view_routes[key] = route
        return route

    def _start_routed(self, index: int, item: Routed) -> None:
        now = self.env.now
        self.start[index] = float(now)
        path, latency, narrowest, weights = self._view_route(item)
        if not path:
            self._arrive(index, latency=latency)
            return
        flow = _Flow(index, path, float(item.nbytes), now)
        flow.weights = weights
        flow.latency = latency
        idle = True
        for link in path:
            flows = self.on_link[link]
            if flows:
                idle = False
            flows[index] = flow
        if idle and self.fast_path:  # alone: the view's narrowest bandwidth, as in _start
            flow.rate = narrowest
            flow.version = 1
            self._schedule(_Drained(self._on_drained, flow), NORMAL,
                           max(flow.remaining, 0.0) / narrowest)
            return
        self._reshare(path)


def simulate_items(items: Sequence[Item], network: Network,
                   views: Sequence[Network] = ()) -> Timing:
    """Start and end of every item; an item starts when all its ``deps`` have ended.

    ``deps`` must point to earlier items (the list is in a topological order). ``views`` are
    networks with ``network``'s links (other latencies and bandwidths) that :class:`Routed`
    items run on.
    """
    ranks = network.ranks
    for view in views:
        if len(view.links) != len(network.links):
            raise ValueError(f"view {view.name!r} has other links than {network.name!r}")
    for index, item in enumerate(items):
        if any(not 0 <= dep < index for dep in item.deps):
            raise ValueError(f"item {index}: deps must be earlier items, got {item.deps}")
        if isinstance(item, Transfer) and not (0 <= item.src < ranks and 0 <= item.dst < ranks):
            raise ValueError(f"item {index}: rank out of range for {ranks} ranks")
        if isinstance(item, Routed) and not 0 <= item.view < len(views):
            raise ValueError(f"item {index}: no view {item.view}")
        if isinstance(item, Delay) and not item.duration_s >= 0:
            raise ValueError(f"item {index}: duration must be >= 0, got {item.duration_s}")
    return _TaskSimulation(items, network, views).run()
