"""The discrete-event engine: times any schedule on any network with SimPy.

Each transfer starts when its dependencies have ended. Its bytes then flow over its route at a
rate set by max-min fair sharing of every link it crosses (the flow-level model validated by
SimGrid); once the last byte has left, it arrives after the route's summed hop latency, and a
reduce also spends ``gamma * nbytes`` adding it in. Uncontended, a transfer therefore costs
``latency + nbytes / narrowest bandwidth (+ gamma * nbytes)``, the alpha-beta cost.

Rates are re-shared only within the connected component of flows that share links with the
flow that started or finished, so an uncontended schedule costs O(transfers).

A transfer is two SimPy events and no process: its data phase ends (*drained*; superseded
whenever its rate changes) and it arrives (*ends*). ``benchmarks/des_throughput.py`` measures
the engine against a naive SimPy model of the same schedule. A wide schedule (thousands of
transfers per step: an all-to-all) is timed instead by :mod:`commsim.engine.batched`, instant
by instant in numpy, with the same result to the bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import NORMAL

from commsim.engine import maxmin
from commsim.gcpause import paused_gc
from commsim.network import Network
from commsim.progress import Progress
from commsim.schedule import Columns, Schedule

if TYPE_CHECKING:
    import numpy as np

#: From this many transfers on, a simulation draws a progress bar (on a terminal): contended,
#: a transfer costs 4-30 us (each start and end re-shares its component's rates), so such a run
#: may take seconds to a minute.
PROGRESS_MIN_TRANSFERS = 200_000
#: Events run between two redraws of that bar.
PROGRESS_EVENTS = 1 << 16


@dataclass(frozen=True, slots=True, eq=False)
class Timing:
    """When each transfer of a schedule started and ended: float64 arrays, one row per transfer
    (indexed like the schedule's columns). Equal when every start and end is.

    >>> import numpy as np
    >>> Timing(np.array([0.0, 1.0]), np.array([1.0, 2.5])).time_s
    2.5
    """

    start_s: np.ndarray
    end_s: np.ndarray

    @property
    def time_s(self) -> float:
        """The collective's time: the latest end (0 for an empty schedule)."""
        return float(self.end_s.max()) if len(self.end_s) else 0.0

    def shifted(self, seconds: float) -> Timing:
        """Every start and end ``seconds`` later."""
        return Timing(self.start_s + seconds, self.end_s + seconds)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Timing):
            return NotImplemented
        import numpy as np

        return bool(np.array_equal(self.start_s, other.start_s)
                    and np.array_equal(self.end_s, other.end_s))

    def __hash__(self) -> int:
        return hash((self.start_s.tobytes(), self.end_s.tobytes()))


# NOTE: SimPy's ``Environment.schedule(event, priority, delay)`` is public and duck-typed: the
# loop reads an event's ``callbacks`` (replacing them with None) and ``_ok``. Scheduling these
# slotted objects instead of ``Timeout``s with a closure each skips Event.__init__ and one
# allocation per event while keeping SimPy's heap, tie-breaking counter and therefore the
# exact event order (and results) of ``env.timeout``. With the flat per-link lists and the
# cached routes below, this took a fifth off the engine's time per transfer (ring all-reduce,
# 256 ranks, benchmarks/des_throughput.py; the fast path in _start then halved the rest).
# ``_ok`` is SimPy's private attribute, so pyproject.toml pins simpy to the tested 4.1.x.
class _Flow:
    """An active transfer's data phase: bytes left and the rate they drain at.

    Once drained, the flow object itself is scheduled as the transfer's arrival event.
    """

    __slots__ = ("index", "links", "remaining", "rate", "updated", "version", "callbacks",
                 "weights", "latency")
    _ok = True  # read by SimPy after the callbacks ran

    def __init__(self, index: int, links: tuple[int, ...], nbytes: float, now: float) -> None:
        self.index = index
        self.links = links
        self.remaining = nbytes
        self.rate = 0.0
        self.updated = now
        self.version = 0
        self.callbacks: tuple[object, ...] | None = None
        #: Link capacity one byte/s of this flow takes, per link (None: 1 on every link); a
        #: flow timed on a view of the network (commsim.engine.tasks) sets it.
        self.weights: dict[int, float] | None = None
        #: The route's latency when it is not the network's own (a view's).
        self.latency: float | None = None


class _Drained:
    """The event "``flow`` has no bytes left", valid while the flow is at ``version``."""

    __slots__ = ("callbacks", "flow", "version")
    _ok = True

    def __init__(self, callbacks: tuple[object, ...], flow: _Flow) -> None:
        self.callbacks = callbacks
        self.flow = flow
        self.version = flow.version


class _Arrival:
    """The arrival event of a transfer without a flow (both ends on one device)."""

    __slots__ = ("callbacks", "index")
    _ok = True

    def __init__(self, callbacks: tuple[object, ...], index: int) -> None:
        self.callbacks = callbacks
        self.index = index


class _Reshare:
    """The event "re-share the links that changed at this instant", after every other event
    of the instant (one max-min filling for all the flows that started or drained at once)."""

    __slots__ = ("callbacks",)
    _ok = True

    def __init__(self, callbacks: tuple[object, ...]) -> None:
        self.callbacks = callbacks


#: The re-sharing of an instant runs after its other events (SimPy's NORMAL is 1).
LATE = NORMAL + 1


class _Simulation:
    """One run of one schedule's transfers (its columns); all state is local to the instance.

    A subclass may time other rows than transfers by overriding :meth:`_start` for them
    (``commsim.engine.tasks`` adds fixed-duration delays and transfers on views this way), with
    ``eager_routes`` off so that routes are looked up only for the transfers that start here;
    :meth:`_end` ends any row.
    """

    #: Time a flow that starts on idle links without max-min filling (same result; tests
    #: switch it off to prove that).
    fast_path = True

    def __init__(self, columns: Columns, network: Network, eager_routes: bool = True) -> None:
        self.network = network
        self.env = simpy.Environment()
        n = len(columns)
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.ended = 0  # transfers (rows) ended so far, for the progress bar
        # per row: its fields as flat lists (read per event: no attribute lookups)
        self.src: list[int] = columns.src.tolist()
        self.dst: list[int] = columns.dst.tolist()
        self.nbytes: list[float] = columns.nbytes.astype(float).tolist()
        self.reduce: list[bool] = columns.reduce.tolist()
        self.waiting, self.dependents = _dependents(columns)
        # link id -> active flows on it, in insertion order (deterministic); empty when idle
        self.on_link: list[dict[int, _Flow]] = [{} for _ in network.links]
        self.capacity = [link.bandwidth_Bps for link in network.links]
        # (src rank, dst rank) -> (links, summed latency, narrowest bandwidth)
        self.routes: dict[tuple[int, int], tuple[tuple[int, ...], float, float]] = {}
        self.gamma = network.gamma_s_per_B
        self.ranks = network.ranks
        # (links, latency, narrowest bandwidth) of each transfer's route (None: found on start)
        self.route_of: list[tuple[tuple[int, ...], float, float] | None] = (
            self._routes_of(columns) if eager_routes else [None] * n)
        # (event, priority, delay): SimPy's own scheduler, given the slotted events above
        self._schedule: Callable[[Any, Any, float], None] = self.env.schedule  # type: ignore[assignment]
        # NOTE: the hot paths push onto SimPy's heap themselves, as ``env.schedule`` does
        # (same key: time, priority, SimPy's own event counter), saving a call per event.
        self._queue: list[Any] = self.env._queue
        self._eid = self.env._eid
        self._on_drained = (self._drained,)
        self._on_arrival = (self._arrival,)
        # links whose flows changed at this instant, re-shared once at its end
        self._changed: dict[int, None] = {}
        self._on_reshare = (self._reshare_changed,)

    def run(self) -> Timing:
        # NOTE: every event allocates objects that die young; with the collector on, the
        # schedule's long-lived objects are rescanned again and again (commsim.gcpause).
        with paused_gc():
            for index, count in enumerate(self.waiting):
                if count == 0:
                    self._start(index)
            if len(self.end) < PROGRESS_MIN_TRANSFERS:
                self._loop()
            else:
                self._loop_with_bar()
        unfinished = [i for i, count in enumerate(self.waiting) if count > 0]
        if unfinished:  # only a malformed (cyclic) schedule gets here
            raise RuntimeError(f"transfers never became ready: {unfinished[:5]}")
        import numpy as np

        return Timing(np.array(self.start), np.array(self.end))

    def _loop(self) -> None:
        """``env.run()``, inlined: SimPy's ``step`` for events that always succeed (ours and
        ``Timeout``), popped from its own heap in its own order."""
        env = self.env
        queue: list[Any] = env._queue
        pop = heappop
        while queue:
            event: Any
            env._now, _, _, event = pop(queue)
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)

    def _loop_with_bar(self) -> None:
        """:meth:`_loop` with a progress bar of the transfers ended, redrawn every
        :data:`PROGRESS_EVENTS` events. NOTE: its own copy of the loop, so that the loop
        without a bar counts nothing per event (des_throughput: 2-3% slower when it did)."""
        bar = Progress(f"simulating {len(self.end)} transfers", "transfer")
        env = self.env
        queue: list[Any] = env._queue
        pop = heappop
        try:
            while queue:
                for _ in range(PROGRESS_EVENTS):
                    if not queue:
                        break
                    event: Any
                    env._now, _, _, event = pop(queue)
                    callbacks, event.callbacks = event.callbacks, None
                    for callback in callbacks:
                        callback(event)
                bar.update_to(self.ended, len(self.end))
        finally:
            bar.close()

    def _routes_of(self, columns: Columns) -> list[tuple[tuple[int, ...], float, float] | None]:
        """Every transfer's route, looked up once per distinct (src, dst) pair."""
        import numpy as np

        width = int(max(columns.src.max(initial=0), columns.dst.max(initial=0))) + 1
        pairs, which = np.unique(columns.src * width + columns.dst, return_inverse=True)
        found = [self._route(pair // width, pair % width) for pair in pairs.tolist()]
        return [found[k] for k in which.reshape(-1).tolist()]

    # -- transfer life cycle -------------------------------------------------------------
    def _route(self, src: int, dst: int) -> tuple[tuple[int, ...], float, float]:
        path = self.network.route(src, dst)
        links = self.network.links
        latency = sum(links[i].latency_s for i in path)
        narrowest = min((self.capacity[i] for i in path), default=0.0)
        self.routes[(src, dst)] = route = (path, latency, narrowest)
        return route

    def _start(self, index: int) -> None:
        now = self.env._now
        self.start[index] = float(now)
        route = self.route_of[index]
        if route is None:
            key = (self.src[index], self.dst[index])
            route = self.routes.get(key) or self._route(*key)
            self.route_of[index] = route
        path = route[0]
        if not path:
            self._arrive(index)
            return
        flow = _Flow(index, path, self.nbytes[index], now)
        on_link = self.on_link
        idle = True
        for link in path:
            flows = on_link[link]
            if flows:
                idle = False
            flows[index] = flow
        if idle and self.fast_path:
            # NOTE: a flow alone on its links is its own max-min component: progressive filling
            # would give it capacity / 1 on its narrowest link, exactly the route's bandwidth,
            # and _reshare would schedule the same drain; skipping the component search and the
            # filling halves the cost of an uncontended transfer (benchmarks/des_throughput.py).
            rate = route[2]
            flow.rate = rate
            flow.version = 1
            heappush(self._queue, (now + max(flow.remaining, 0.0) / rate, NORMAL,
                                   next(self._eid), _Drained(self._on_drained, flow)))
            return
        self._defer(path)

    def _drained(self, event: _Drained) -> None:
        flow = event.flow
        if event.version != flow.version:  # superseded by a later rate change
            return
        on_link = self.on_link
        index = flow.index
        busy = False
        for link in flow.links:
            flows = on_link[link]
            del flows[index]
            if flows:
                busy = True
        if busy:  # flows left behind on a shared link may speed up
            self._defer(flow.links)
        self._arrive(index, flow)

    def _arrive(self, index: int, flow: _Flow | None = None,
                latency: float | None = None) -> None:
        """The last byte has left: wait for the route's latency (and reduction), then end."""
        if latency is None:
            latency = flow.latency if flow is not None else None
        dst = self.dst[index]
        delay = self.route_of[index][1] if latency is None else latency  # type: ignore[index]
        # a switch reduces in hardware at line rate: gamma is the ranks' arithmetic only
        if self.reduce[index] and dst < self.ranks:
            delay += self.gamma * self.nbytes[index]
        event: _Flow | _Arrival
        if flow is None:
            event = _Arrival(self._on_arrival, index)
        else:
            flow.callbacks = self._on_arrival
            event = flow
        heappush(self._queue, (self.env._now + delay, NORMAL, next(self._eid), event))

    def _arrival(self, event: _Flow | _Arrival) -> None:
        index = event.index  # NOTE: _end, inlined: one call less per transfer
        self.end[index] = float(self.env._now)
        self.ended += 1
        waiting = self.waiting
        for dependent in self.dependents[index]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                self._start(dependent)

    def _end(self, index: int) -> None:
        self.end[index] = float(self.env._now)
        self.ended += 1
        waiting = self.waiting
        for dependent in self.dependents[index]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                self._start(dependent)

    # -- bandwidth sharing ---------------------------------------------------------------
    def _rates(self, flows: list[_Flow], links: list[int]) -> dict[int, float]:
        """Max-min fair rates of a component's flows."""
        # NOTE: two fillings rather than one with weights 1: the unweighted one counts flows
        # with len() and is the contended DES's hot path; only replay's views need weights.
        if any(flow.weights is not None for flow in flows):
            return maxmin.fill_weighted(flows, links, self.capacity, self.on_link)
        return maxmin.fill(flows, links, self.capacity, self.on_link)

    def _component(self, seed_links: Iterable[int]) -> tuple[list[_Flow], list[int]]:
        """Flows connected to ``seed_links`` through shared links, and the links they use."""
        on_link = self.on_link
        flows: dict[int, _Flow] = {}
        links: dict[int, None] = {}
        stack = [link for link in seed_links if on_link[link]]
        while stack:
            link = stack.pop()
            if link in links:
                continue
            links[link] = None
            for index, flow in on_link[link].items():
                if index not in flows:
                    flows[index] = flow
                    stack.extend(other for other in flow.links if other not in links)
        return list(flows.values()), list(links)

    def _defer(self, links: Iterable[int]) -> None:
        """Re-share ``links``' component at the end of this instant: flows that start or
        drain together (an all-to-all's million) cost one max-min filling, not one each. The
        rates are those of the instant's last state, as re-sharing after each change gives
        (a rate set and replaced within an instant moves no byte)."""
        if not self._changed:
            heappush(self._queue, (self.env._now, LATE, next(self._eid),
                                   _Reshare(self._on_reshare)))
        self._changed.update(dict.fromkeys(links))

    def _reshare_changed(self, event: _Reshare) -> None:
        links = list(self._changed)
        self._changed.clear()
        self._reshare(links)

    def _reshare(self, seed_links: Iterable[int]) -> None:
        """Max-min fair rates (progressive filling) for the component around ``seed_links``."""
        flows, links = self._component(seed_links)
        if not flows:
            return
        rates = self._rates(flows, links)
        env = self.env
        now = env.now
        for flow in flows:
            rate = rates[flow.index]
            if rate == flow.rate:
                continue
            flow.remaining -= flow.rate * (now - flow.updated)
            flow.updated = now
            flow.rate = rate
            flow.version += 1
            self._schedule(
                _Drained(self._on_drained, flow), NORMAL, max(flow.remaining, 0.0) / rate
            )


def check_fits(schedule: Schedule, network: Network) -> None:
    """ValueError unless ``network`` has the ranks and reducing switches ``schedule`` uses."""
    if schedule.ranks > network.ranks:
        raise ValueError(f"schedule needs {schedule.ranks} ranks, network has {network.ranks}")
    if schedule.endpoints and (
        schedule.ranks != network.ranks or schedule.endpoints > len(network.reduction_switches)
    ):
        raise ValueError(
            f"schedule addresses {schedule.endpoints} reducing switches after its "
            f"{schedule.ranks} ranks; network {network.name!r} has "
            f"{len(network.reduction_switches)} after {network.ranks}"
        )


def simulate_des(schedule: Schedule, network: Network) -> Timing:
    """Time ``schedule`` on ``network`` with the discrete-event engine (its columns: no object
    per transfer; batched in numpy when the schedule is wide)."""
    check_fits(schedule, network)
    from commsim.engine.batched import BatchedSimulation, is_wide

    if is_wide(schedule.columns):
        return Timing(*BatchedSimulation(schedule.columns, network).run())
    with paused_gc():  # the per-transfer lists: many long-lived objects (commsim.gcpause)
        simulation = _Simulation(schedule.columns, network)
    return simulation.run()


def _dependents(columns: Columns) -> tuple[list[int], list[list[int]]]:
    """Per transfer: how many dependencies it waits for, and the transfers that wait for it."""
    import numpy as np

    counts = np.diff(columns.dep_ptr)
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    order = np.argsort(columns.dep_idx, kind="stable")
    bounds = np.searchsorted(columns.dep_idx[order], np.arange(len(counts) + 1)).tolist()
    waiters = owner[order].tolist()
    return counts.tolist(), [waiters[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
