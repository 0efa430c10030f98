"""Time a task graph: network transfers and fixed-duration delays, in one discrete-event run.

A training step lowers to this (``commsim.replay``): compute on a rank is a :class:`Delay`
(it takes its duration and uses no link), a collective is its schedule's transfers remapped to
global ranks, and zero-length delays mark where a collective may begin and when it has ended.
Transfers are timed exactly as :func:`commsim.engine.des.simulate_des` times them (max-min fair
sharing of every link, then the route's latency), so collectives that run at the same time
contend for the links they share.

>>> from commsim.topology import load_topology
>>> from commsim.schedule import OpKind, Transfer
>>> net = load_topology({"kind": "ring", "ranks": 2, "link": {"latency": 0, "bandwidth": "1B/s"}})
>>> t = simulate_items([Delay(2.0), Transfer(0, 1, 0, 3, OpKind.COPY, (0,)), Delay(1.0, (1,))], net)
>>> t.start_s, t.end_s
((0.0, 2.0, 5.0), (2.0, 5.0, 6.0))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commsim.engine.des import Timing, _Simulation
from commsim.network import Network
from commsim.schedule import Transfer


@dataclass(frozen=True, slots=True)
class Delay:
    """Lasts ``duration_s`` once its ``deps`` (item indices) have ended; uses no link."""

    duration_s: float
    deps: tuple[int, ...] = ()


class _TaskSimulation(_Simulation):
    """The DES, where an item may also be a :class:`Delay`."""

    def _start(self, index: int) -> None:
        item = self.transfers[index]
        if isinstance(item, Delay):
            self.start[index] = float(self.env.now)
            event = self.env.timeout(item.duration_s)
            event.callbacks.append(lambda _e, i=index: self._end(i))
            return
        super()._start(index)


def simulate_items(items: Sequence[Transfer | Delay], network: Network) -> Timing:
    """Start and end of every item; an item starts when all its ``deps`` have ended.

    ``deps`` must point to earlier items (the list is in a topological order).
    """
    ranks = network.ranks
    for index, item in enumerate(items):
        if any(not 0 <= dep < index for dep in item.deps):
            raise ValueError(f"item {index}: deps must be earlier items, got {item.deps}")
        if isinstance(item, Transfer) and not (0 <= item.src < ranks and 0 <= item.dst < ranks):
            raise ValueError(f"item {index}: rank out of range for {ranks} ranks")
        if isinstance(item, Delay) and not item.duration_s >= 0:
            raise ValueError(f"item {index}: duration must be >= 0, got {item.duration_s}")
    return _TaskSimulation(items, network).run()  # type: ignore[arg-type]
