"""Collective and send times for the planner, each shape timed once.

A collective among a group of ranks is timed as ``commsim replay`` times it: the algorithm
``auto`` picks on the group's network (:func:`commsim.replay.lower.group_network`), run by
:func:`commsim.simulate` on that network, uncontended. Groups whose ranks sit on hosts the
same way (same number of hosts, same ranks per host, in the same order) have the same time on
the symmetric machines of the presets, so the memo key is the collective, the size and that
host pattern (on machines without hosts, the ranks themselves).
"""

from __future__ import annotations

from commsim.api import choose_algorithm, simulate
from commsim.collectives import Collective
from commsim.network import Network
from commsim.replay.lower import group_call, group_network


class CollectiveTimer:
    """Times collectives and sends on ``network`` with a memo per shape.

    ``engine`` is ``analytic`` (closed forms, the default: on an uncontended group it equals
    the DES) or ``des``.
    """

    def __init__(self, network: Network, engine: str = "analytic") -> None:
        self.network = network
        self.engine = engine
        self._memo: dict[tuple[object, ...], float] = {}
        self._shapes: dict[tuple[int, ...], tuple[object, ...]] = {}
        self.timed = 0  #: distinct shapes simulated (for benchmarks)

    def _shape(self, group: tuple[int, ...]) -> tuple[object, ...]:
        shape = self._shapes.get(group)
        if shape is None:
            shape = self._shapes[group] = self._host_pattern(group)
        return shape

    def _host_pattern(self, group: tuple[int, ...]) -> tuple[object, ...]:
        hosts = [self.network.host_of(r) for r in group]
        if any(h is None for h in hosts):
            return ("ranks", group)
        labels: dict[object, int] = {}
        return ("hosts", tuple(labels.setdefault(h, len(labels)) for h in hosts))

    def collective(
        self, collective: Collective | str, group: tuple[int, ...], nbytes: int
    ) -> float:
        """Seconds of ``collective`` of ``nbytes`` among global ranks ``group`` (0 for one rank
        or no bytes)."""
        if len(group) < 2 or nbytes <= 0:
            return 0.0
        coll = Collective(collective)
        key = (coll, nbytes, self._shape(group))
        time_s = self._memo.get(key)
        if time_s is None:
            net = group_network(self.network, group)
            name = choose_algorithm(group_call(self.network, group, coll, nbytes), net)
            time_s = simulate(
                coll, net, nbytes, algorithm=name, engine=self.engine, protocol="none"
            ).time_s
            self._memo[key] = time_s
            self.timed += 1
        return time_s

    def send(self, src: int, dst: int, nbytes: int) -> float:
        """Seconds of an uncontended ``nbytes`` send ``src -> dst``: the path's latency plus
        the size over its narrowest hop."""
        if nbytes <= 0 or src == dst:
            return 0.0
        latency, bandwidth = self.network.path_cost(src, dst)
        return latency + nbytes / bandwidth
