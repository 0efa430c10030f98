"""Collective and send times for the planner, each shape timed once.

A collective among a group of ranks is timed exactly as ``commsim run`` and ``commsim replay``
time it, by the one timing layer (:class:`commsim.timing.Timer`: NCCL's choice of algorithm
and protocol on a machine that runs NCCL, its launch latency), uncontended. Groups whose ranks
sit on hosts the same way (same number of hosts, same ranks per host, in the same order) have
the same time on the symmetric machines of the presets, so the memo key is the collective, the
size and that host pattern (on machines without hosts, the ranks themselves). On a machine a
what-if's links change, a group with a rank on a host that a changed link touches is its own
key (and every group is, when a changed link touches no rank's device). A send is the timer's
point-to-point model, uncontended.
"""

from __future__ import annotations

from collections.abc import Callable

from commsim.collectives import Collective
from commsim.engine.pairs import touched_ranks
from commsim.network import Network
from commsim.timing import CollectiveCall, Timer, resolve_engine
from commsim.topology.degrade import DEVICES_KEY


class CollectiveTimer:
    """Times collectives and sends on ``network`` with a memo per shape.

    ``engine`` is the timing layer's: ``auto`` (the default: the DES for groups of up to 64
    ranks, as ``replay`` times them, the closed forms beyond), ``des`` or ``analytic``.
    """

    def __init__(self, network: Network, engine: str = "auto") -> None:
        self.network = network
        self.engine = engine
        self._memo: dict[tuple[object, ...], float] = {}
        self._derived: dict[tuple[object, ...], float] = {}
        self._shapes: dict[tuple[int, ...], tuple[object, ...]] = {}
        self.timed = 0  #: distinct shapes simulated (for benchmarks)
        #: Ranks on hosts a what-if's changed links touch (None: every rank, see the module)
        self.exact = self._exact_ranks()

    def _exact_ranks(self) -> frozenset[int] | None:
        if DEVICES_KEY not in self.network.meta:
            return frozenset()
        touched = touched_ranks(self.network).tolist()
        hosts = {self.network.host_of(r) for r in touched}
        if not touched or None in hosts:
            return None
        return frozenset(r for r in range(self.network.ranks) if self.network.host_of(r) in hosts)

    def _shape(self, group: tuple[int, ...]) -> tuple[object, ...]:
        shape = self._shapes.get(group)
        if shape is None:
            shape = self._shapes[group] = self._host_pattern(group)
        return shape

    def _host_pattern(self, group: tuple[int, ...]) -> tuple[object, ...]:
        if self.exact is None or (self.exact and not self.exact.isdisjoint(group)):
            return ("ranks", group)
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
            call = CollectiveCall(collective=coll, nbytes=nbytes, group=group)
            engine = resolve_engine(self.engine, len(group))
            time_s = Timer.of(self.network).time(call, engine).time_s
            self._memo[key] = time_s
            self.timed += 1
        return time_s

    def derived(self, key: tuple[object, ...], group: tuple[int, ...],
                make: Callable[[], float]) -> float:
        """``make()``, kept per ``key`` and ``group``'s host pattern (as :meth:`collective`
        keeps a collective's time): for times composed of collectives, such as DeepEP's
        dispatch (:mod:`commsim.plan.dispatch`)."""
        k = (key, self._shape(group))
        out = self._derived.get(k)
        if out is None:
            out = self._derived[k] = make()
        return out

    def known(self, collective: Collective | str, group: tuple[int, ...], nbytes: int) -> float:
        """:meth:`collective`'s seconds if that shape has been timed already, else 0 (a lower
        bound that costs nothing: the search's pruning uses it)."""
        if len(group) < 2 or nbytes <= 0:
            return 0.0
        return self._memo.get((Collective(collective), nbytes, self._shape(group)), 0.0)

    def send(self, src: int, dst: int, nbytes: int) -> float:
        """Seconds of an uncontended ``nbytes`` send ``src -> dst`` by the topology's
        point-to-point model: its launch latency, the path's latency and the size over its
        narrowest hop."""
        if nbytes <= 0 or src == dst:
            return 0.0
        view, launch = Timer.of(self.network).point_to_point()
        latency, bandwidth = view.path_cost(src, dst)
        return launch + latency + nbytes / bandwidth
