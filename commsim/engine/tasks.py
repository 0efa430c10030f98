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

The lowering of a step writes its items as columns (:class:`ItemTable`, built by
:class:`Items`: a collective's schedule goes in as one block of arrays); a list of
:class:`Delay`, :class:`~commsim.schedule.Transfer` and :class:`Routed` objects reads as the
same table.

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

import numpy as np

from commsim.engine.des import NORMAL, Timing, _Drained, _Flow, _Simulation
from commsim.network import Network
from commsim.schedule import Columns, OpKind, Transfer


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
#: :attr:`ItemTable.view` of a transfer on the network itself, and of a delay.
NETWORK, DELAY = -1, -2


@dataclass(frozen=True, slots=True, eq=False)
class ItemTable:
    """Items as columns: ``columns`` holds every item's src, dst, nbytes, op and dependencies
    (a delay's are zeros); ``view`` says what each item is (a view's index, :data:`NETWORK`
    or :data:`DELAY`) and ``duration_s`` a delay's duration."""

    columns: Columns
    view: np.ndarray
    duration_s: np.ndarray

    @staticmethod
    def of(items: Sequence[Item]) -> ItemTable:
        """The table of a list of items."""
        out = Items()
        for index, item in enumerate(items):
            if isinstance(item, Routed) and item.view < 0:
                raise ValueError(f"item {index}: no view {item.view}")
            if isinstance(item, Delay):
                out.delay(item.duration_s, item.deps)
            else:
                out.transfer(item.src, item.dst, item.nbytes, item.op is OpKind.REDUCE,
                             item.deps, item.view if isinstance(item, Routed) else NETWORK)
        return out.table()


class Items:
    """An :class:`ItemTable` being written, one item or one block of transfers at a time
    (rows kept as tuples and blocks as arrays, each placed at its index by :meth:`table`)."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, int, int, bool, int, float, int]] = []
        self._row_at: list[int] = []
        self._deps: list[int] = []
        #: (first index, src, dst, nbytes, reduce, view, dependency counts, dependencies)
        self._blocks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int,
                                 np.ndarray, np.ndarray]] = []
        self.count = 0

    def _add(self, row: tuple[int, int, int, bool, int, float, int], deps: Sequence[int]) -> int:
        self._rows.append(row)
        self._row_at.append(self.count)
        self._deps.extend(deps)
        self.count += 1
        return self.count - 1

    def delay(self, duration_s: float, deps: Sequence[int] = ()) -> int:
        """Append a delay; its index."""
        return self._add((0, 0, 0, False, DELAY, duration_s, len(deps)), deps)

    def transfer(self, src: int, dst: int, nbytes: int, reduce: bool, deps: Sequence[int],
                 view: int = NETWORK) -> int:
        """Append a transfer (on ``views[view]``, or on the network); its index."""
        return self._add((src, dst, nbytes, reduce, view, float("nan"), len(deps)), deps)

    def block(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, reduce: np.ndarray,
              view: int, dep_ptr: np.ndarray, dep_idx: np.ndarray) -> int:
        """Append transfers (all on one view) as columns, dependencies CSR with item
        indices; the index of the first."""
        self._blocks.append((self.count, src, dst, nbytes, reduce, view, np.diff(dep_ptr),
                             dep_idx))
        self.count += len(src)
        return self.count - len(src)

    def table(self) -> ItemTable:
        """Every item so far, as columns."""
        n = self.count
        src, dst, nbytes = (np.zeros(n, dtype=np.int64) for _ in range(3))
        reduce = np.zeros(n, dtype=bool)
        view = np.zeros(n, dtype=np.int64)
        duration = np.full(n, np.nan)
        counts = np.zeros(n, dtype=np.int64)
        rows = np.array(self._row_at, dtype=np.int64)
        if self._rows:
            fields = list(zip(*self._rows, strict=True))
            for out, values in zip((src, dst, nbytes, reduce, view, duration, counts), fields,
                                   strict=True):
                out[rows] = values
        blocks = self._blocks
        starts = np.array([b[0] for b in blocks], dtype=np.int64)
        sizes = np.array([len(b[1]) for b in blocks], dtype=np.int64)
        at = _spread(starts, sizes)
        if blocks:
            for k, out in ((1, src), (2, dst), (3, nbytes), (4, reduce), (6, counts)):
                out[at] = np.concatenate([b[k] for b in blocks])
            view[at] = np.repeat(np.array([b[5] for b in blocks], dtype=np.int64), sizes)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        deps = np.zeros(int(ptr[-1]), dtype=np.int64)
        deps[_spread(ptr[rows], counts[rows])] = self._deps
        if blocks:
            deps[_spread(ptr[at], counts[at])] = np.concatenate([b[7] for b in blocks])
        columns = Columns(src, dst, np.zeros(n, np.int64), nbytes, reduce, ptr, deps)
        return ItemTable(columns, view, duration)


def _spread(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The indices ``starts[k], ..., starts[k] + sizes[k] - 1`` of every ``k``, in order."""
    return (np.repeat(starts - np.cumsum(sizes) + sizes, sizes)
            + np.arange(int(sizes.sum()), dtype=np.int64))


class _TaskSimulation(_Simulation):
    """The DES, where an item may also be a delay or a transfer on a view."""

    #: Re-share a contended link's flows once at the end of each instant (as the plain
    #: transfers' DES does); False: at every routed start, the slower way before it
    #: (benchmarks/replay_reshare.py times both; the times they give are the same).
    batch_reshare = True

    def __init__(self, items: ItemTable, network: Network,
                 views: Sequence[Network] = ()) -> None:
        super().__init__(items.columns, network, eager_routes=False)
        self.views = views
        self.view: list[int] = items.view.tolist()
        self.duration: list[float] = items.duration_s.tolist()
        # (view, src, dst) -> (links, latency, narrowest view bandwidth, weights)
        self.view_routes: dict[tuple[int, int, int], tuple[tuple[int, ...], float, float,
                                                           dict[int, float]]] = {}

    def _start(self, index: int) -> None:
        view = self.view[index]
        if view == DELAY:
            self.start[index] = float(self.env.now)
            event = self.env.timeout(self.duration[index])

            def ended(_event: object, i: int = index) -> None:
                self._end(i)

            event.callbacks.append(ended)
            return
        if view >= 0:
            self._start_routed(index, view)
            return
        super()._start(index)

    def _view_route(self, view_no: int, src: int,
                    dst: int) -> tuple[tuple[int, ...], float, float, dict[int, float]]:
        key = (view_no, src, dst)
        route = self.view_routes.get(key)
        if route is None:
            view = self.views[view_no]
            path = view.route(src, dst)
            links = view.links
            weights = {i: self.capacity[i] / links[i].bandwidth_Bps for i in path}
            route = (path, sum(links[i].latency_s for i in path),
                     min((links[i].bandwidth_Bps for i in path), default=0.0), weights)
            self.view_routes[key] = route
        return route

    def _start_routed(self, index: int, view: int) -> None:
        now = self.env.now
        self.start[index] = float(now)
        path, latency, narrowest, weights = self._view_route(view, self.src[index],
                                                             self.dst[index])
        if not path:
            self._arrive(index, latency=latency)
            return
        flow = _Flow(index, path, self.nbytes[index], now)
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
        if self.batch_reshare:
            self._defer(path)
        else:
            self._reshare(path)


def simulate_items(items: Sequence[Item] | ItemTable, network: Network,
                   views: Sequence[Network] = ()) -> Timing:
    """Start and end of every item; an item starts when all its ``deps`` have ended.

    ``deps`` must point to earlier items (the list is in a topological order). ``views`` are
    networks with ``network``'s links (other latencies and bandwidths) that :class:`Routed`
    items run on.
    """
    table = items if isinstance(items, ItemTable) else ItemTable.of(items)
    for view in views:
        if len(view.links) != len(network.links):
            raise ValueError(f"view {view.name!r} has other links than {network.name!r}")
    _check_items(table, network.ranks, len(views))
    return _TaskSimulation(table, network, views).run()


def _check_items(table: ItemTable, ranks: int, views: int) -> None:
    """ValueError naming the first malformed item (and its first fault)."""
    cols, view = table.columns, table.view
    counts = np.diff(cols.dep_ptr)
    owner = np.repeat(np.arange(len(cols), dtype=np.int64), counts)
    faults = [
        np.isin(np.arange(len(cols)), owner[(cols.dep_idx < 0) | (cols.dep_idx >= owner)]),
        (view == NETWORK) & ((cols.src < 0) | (cols.src >= ranks)
                             | (cols.dst < 0) | (cols.dst >= ranks)),
        (view >= views),
        (view == DELAY) & ~(table.duration_s >= 0),
    ]
    bad = np.flatnonzero(np.logical_or.reduce(faults)) if len(cols) else counts[:0]
    if not bad.size:
        return
    i = int(bad[0])
    if faults[0][i]:
        deps = tuple(cols.dep_idx[cols.dep_ptr[i]:cols.dep_ptr[i + 1]].tolist())
        raise ValueError(f"item {i}: deps must be earlier items, got {deps}")
    if faults[1][i]:
        raise ValueError(f"item {i}: rank out of range for {ranks} ranks")
    if faults[2][i]:
        raise ValueError(f"item {i}: no view {int(view[i])}")
    raise ValueError(f"item {i}: duration must be >= 0, got {float(table.duration_s[i])}")
