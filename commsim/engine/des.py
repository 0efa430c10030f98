"""The discrete-event engine: times any schedule on any network with SimPy.

Each transfer starts when its dependencies have ended. Its bytes then flow over its route at a
rate set by max-min fair sharing of every link it crosses (the flow-level model validated by
SimGrid); once the last byte has left, it arrives after the route's summed hop latency, and a
reduce also spends ``gamma * nbytes`` adding it in. Uncontended, a transfer therefore costs
``latency + nbytes / narrowest bandwidth (+ gamma * nbytes)``, the alpha-beta cost.

Rates are re-shared only within the connected component of flows that share links with the
flow that started or finished, so an uncontended schedule costs O(transfers).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import simpy

from commsim.network import Network
from commsim.schedule import OpKind, Schedule, Transfer


@dataclass(frozen=True, slots=True)
class Timing:
    """When each transfer of a schedule started and ended (indexed like ``schedule.transfers``)."""

    start_s: tuple[float, ...]
    end_s: tuple[float, ...]

    @property
    def time_s(self) -> float:
        """The collective's time: the latest end (0 for an empty schedule)."""
        return max(self.end_s, default=0.0)


class _Flow:
    """An active transfer's data phase: bytes left and the rate they drain at."""

    __slots__ = ("index", "links", "remaining", "rate", "updated", "version")

    def __init__(self, index: int, links: tuple[int, ...], nbytes: float, now: float) -> None:
        self.index = index
        self.links = links
        self.remaining = nbytes
        self.rate = 0.0
        self.updated = now
        self.version = 0


class _Simulation:
    """One run of one schedule's transfers; all state is local to the instance.

    ``transfers`` may hold other items with ``deps`` if a subclass overrides :meth:`_start`
    for them (``commsim.engine.tasks`` adds fixed-duration delays this way).
    """

    def __init__(self, transfers: Sequence[Transfer], network: Network) -> None:
        self.transfers = transfers
        self.network = network
        self.env = simpy.Environment()
        n = len(transfers)
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.waiting = [len(t.deps) for t in transfers]
        self.dependents: list[list[int]] = [[] for _ in range(n)]
        for index, transfer in enumerate(transfers):
            for dep in transfer.deps:
                self.dependents[dep].append(index)
        # link id -> active flows on it (a dict keeps insertion order: deterministic)
        self.on_link: dict[int, dict[int, _Flow]] = {}
        self.capacity = [link.bandwidth_Bps for link in network.links]
        self.latency: dict[tuple[int, int], float] = {}

    def run(self) -> Timing:
        for index, count in enumerate(self.waiting):
            if count == 0:
                self._start(index)
        self.env.run()
        unfinished = [i for i, count in enumerate(self.waiting) if count > 0]
        if unfinished:  # only a malformed (cyclic) schedule gets here
            raise RuntimeError(f"transfers never became ready: {unfinished[:5]}")
        return Timing(tuple(self.start), tuple(self.end))

    # -- transfer life cycle -------------------------------------------------------------
    def _start(self, index: int) -> None:
        transfer = self.transfers[index]
        now = self.env.now
        self.start[index] = float(now)
        path = self.network.route(transfer.src, transfer.dst)
        if not path:
            self._arrive(index)
            return
        flow = _Flow(index, path, float(transfer.nbytes), now)
        for link in path:
            self.on_link.setdefault(link, {})[index] = flow
        self._reshare(path)

    def _drained(self, flow: _Flow, version: int) -> None:
        if version != flow.version:  # superseded by a later rate change
            return
        for link in flow.links:
            flows = self.on_link[link]
            del flows[flow.index]
            if not flows:
                del self.on_link[link]
        self._reshare(flow.links)
        self._arrive(flow.index)

    def _arrive(self, index: int) -> None:
        """The last byte has left: wait for the route's latency (and reduction), then end."""
        transfer = self.transfers[index]
        delay = self._path_latency(transfer.src, transfer.dst)
        if transfer.op is OpKind.REDUCE:
            delay += self.network.gamma_s_per_B * transfer.nbytes
        event = self.env.timeout(delay)
        event.callbacks.append(lambda _e, i=index: self._end(i))

    def _end(self, index: int) -> None:
        self.end[index] = float(self.env.now)
        for dependent in self.dependents[index]:
            self.waiting[dependent] -= 1
            if self.waiting[dependent] == 0:
                self._start(dependent)

    def _path_latency(self, src: int, dst: int) -> float:
        key = (src, dst)
        latency = self.latency.get(key)
        if latency is None:
            links = self.network.links
            latency = sum(links[i].latency_s for i in self.network.route(src, dst))
            self.latency[key] = latency
        return latency

    # -- bandwidth sharing ---------------------------------------------------------------
    def _component(self, seed_links: Iterable[int]) -> tuple[list[_Flow], list[int]]:
        """Flows connected to ``seed_links`` through shared links, and the links they use."""
        flows: dict[int, _Flow] = {}
        links: dict[int, None] = {}
        stack = [link for link in seed_links if link in self.on_link]
        while stack:
            link = stack.pop()
            if link in links:
                continue
            links[link] = None
            for index, flow in self.on_link[link].items():
                if index not in flows:
                    flows[index] = flow
                    stack.extend(other for other in flow.links if other not in links)
        return list(flows.values()), list(links)

    def _reshare(self, seed_links: Iterable[int]) -> None:
        """Max-min fair rates (progressive filling) for the component around ``seed_links``."""
        flows, links = self._component(seed_links)
        if not flows:
            return
        rates = _max_min_rates(flows, links, self.capacity, self.on_link)
        now = self.env.now
        for flow in flows:
            rate = rates[flow.index]
            if rate == flow.rate:
                continue
            flow.remaining -= flow.rate * (now - flow.updated)
            flow.updated = now
            flow.rate = rate
            flow.version += 1
            left = max(flow.remaining, 0.0) / rate
            event = self.env.timeout(left)
            event.callbacks.append(lambda _e, f=flow, v=flow.version: self._drained(f, v))


def _max_min_rates(
    flows: list[_Flow],
    links: list[int],
    capacity: list[float],
    on_link: dict[int, dict[int, _Flow]],
) -> dict[int, float]:
    """Progressive filling: repeatedly saturate the link with the smallest fair share."""
    spare = {link: capacity[link] for link in links}
    unfixed = {link: len(on_link[link]) for link in links}
    rates: dict[int, float] = {}
    while len(rates) < len(flows):
        share, bottleneck = min(
            (spare[link] / count, link) for link, count in unfixed.items() if count
        )
        for flow in on_link[bottleneck].values():
            if flow.index in rates:
                continue
            rates[flow.index] = share
            for link in flow.links:
                spare[link] = max(spare[link] - share, 0.0)  # clamp float rounding
                unfixed[link] -= 1
    return rates


def simulate_des(schedule: Schedule, network: Network) -> Timing:
    """Time ``schedule`` on ``network`` with the discrete-event engine."""
    if schedule.ranks > network.ranks:
        raise ValueError(f"schedule needs {schedule.ranks} ranks, network has {network.ranks}")
    return _Simulation(schedule.transfers, network).run()
