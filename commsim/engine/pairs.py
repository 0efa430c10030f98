"""Worst-pair costs of a network for the closed forms: :class:`PairCosts`.

A closed form sees one :class:`~commsim.engine.closed_forms.Hop` per phase: the *worst* pair
the phase uses (largest ``alpha``, smallest ``beta``). :class:`PairCosts` finds it with few path
lookups (O(1) for the kinds whose pairs are alike by construction) and memoises each
algorithm's size-independent structure, so a sweep over sizes computes it once. It sits below
:mod:`commsim.engine.analytic` and the closed-form modules that take it
(:mod:`commsim.engine.bidirectional`), so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

import numpy as np

from commsim.engine.closed_forms import Hop, Ints
from commsim.errors import SpecError
from commsim.network import Network
from commsim.topology.degrade import DEVICES_KEY, META_KEY

#: Pair kinds whose every pair of distinct ranks costs the same, by construction.
UNIFORM_KINDS = frozenset({"fully_connected", "switch"})
#: At most this many distinct pairs are looked up per phase; beyond it an even sample is.
MAX_LOOKUPS = 4096
#: The most link crossings one phase's concurrent messages may have counted (about 10 ns each).
MAX_CROSSINGS = 200_000_000
#: Routes sampled to estimate how many links a phase's messages cross.
CROSSING_SAMPLE = 64
#: On a degraded network (a what-if), at most this many pairs are looked up per phase: one
#: slow link makes its pairs the worst, and an even sample may miss them.
MAX_DEGRADED_LOOKUPS = 65536


def alike_kind(network: Network) -> object:
    """The kind whose pairs are alike by construction (``meta["kind"]``), or None on a
    degraded network (:mod:`commsim.topology.degrade`) of a kind whose every pair stands for
    every other. (A degraded ``hierarchical`` network keeps its kind: one pair per class
    stands for the pairs of ranks that no changed link touches, :func:`touched_ranks`.)"""
    kind = network.meta.get("kind")
    return None if META_KEY in network.meta and kind in UNIFORM_KINDS else kind


def touched_ranks(network: Network) -> np.ndarray:
    """The ranks whose devices are an end of a link a what-if changed (none when healthy)."""
    touched = network.meta.get(DEVICES_KEY)
    if not touched:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(np.isin(network.rank_device_array(), np.asarray(touched)))

T = TypeVar("T")


class PairCosts:
    """Worst (alpha, beta) over sets of rank pairs of one network, with few path lookups.

    One instance per network and rank count is kept with the network
    (:meth:`~commsim.network.Network.derived`); through :meth:`memo` it remembers each
    algorithm's hops and structure (trees, host groups), which do not depend on the size, so a
    sweep over sizes (and ``auto`` over algorithms) computes them once.
    """

    def __init__(self, network: Network, ranks: int, hosts: tuple[int, ...] | None) -> None:
        self.network = network
        self.gamma = network.gamma_s_per_B
        self.kind = alike_kind(network)
        #: The host of each rank as given (a memo key), and as an array.
        self.host_ids = hosts
        self.hosts = None if hosts is None else np.asarray(hosts, dtype=np.int64)
        self.ranks = ranks
        self.touched = touched_ranks(network)
        self._classes: dict[bool, tuple[float, float]] = {}
        self._memo: dict[object, object] = {}

    @classmethod
    def of(cls, network: Network, ranks: int, hosts: tuple[int, ...] | None) -> PairCosts:
        """The instance kept with ``network`` for ``ranks`` ranks on ``hosts``."""
        return network.derived(("pair_costs", ranks, hosts), lambda: cls(network, ranks, hosts))

    def memo(self, key: object, make: Callable[[], T]) -> T:
        """``make()`` once per ``key``: for size-independent structure (trees, host groups)."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]  # type: ignore[return-value]

    def hop(self, src: Ints | list[int], dst: Ints | list[int]) -> Hop:
        """The worst pair among ``src[k] -> dst[k]`` (pairs of a rank with itself ignored)."""
        a, b = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        keep = a != b
        return self._worst(a[keep], b[keep])

    def concurrent_hop(self, key: Hashable, src: Ints, dst: Ints) -> Hop:
        """:meth:`hop` for pairs that all send at once (a butterfly's step): where several of
        them cross one link, each gets at most its equal share of the busiest one, as the DES's
        max-min sharing gives flows that move alike. The kinds of :data:`UNIFORM_KINDS` are
        skipped: a rank that sends to one rank and receives from one shares no link there."""
        if self.kind in UNIFORM_KINDS:
            return self.hop(src, dst)
        load = self.busiest(key, lambda: (src, dst))  # first: it refuses routes too long
        hop = self.hop(src, dst)
        if load * hop.beta_Bps <= 1.0:
            return hop
        return Hop(hop.alpha_s, 1.0 / load, hop.gamma_s_per_B)

    def busiest(self, key: Hashable, ends: Callable[[], tuple[Ints, Ints]]) -> float:
        """Seconds per byte on the busiest link when every pair ``src[k] -> dst[k]`` of
        ``ends()`` moves one byte at once over its route (a pair listed twice is two flows).
        The crossings are counted once per network structure and ``key`` (protocol views of
        one machine share them)."""
        network = self.network

        def count() -> tuple[Ints, Ints]:
            src, dst = ends()
            keep = src != dst
            _check_crossings(network, src[keep], dst[keep])
            crossings = np.bincount(network.route_links(src[keep], dst[keep]))
            used = np.flatnonzero(crossings)
            return used, crossings[used]

        used, crossings = network.structural((key, self.ranks), count)
        if not used.size:
            return 0.0
        return float((crossings / network.link_values(used).bandwidth_Bps).max())

    def _worst(self, src: Ints, dst: Ints) -> Hop:
        if src.size == 0:
            return Hop(0.0, float("inf"), self.gamma)
        if self.kind in UNIFORM_KINDS:
            alpha, beta = self._cost(int(src[0]), int(dst[0]))
        elif self.kind == "hierarchical" and self.hosts is not None:
            same = self.hosts[src] == self.hosts[dst]
            # a degraded pair stands only for itself, and never for its class
            hit = (np.isin(src, self.touched) | np.isin(dst, self.touched) if self.touched.size
                   else np.zeros(src.size, dtype=bool))
            costs = [self._class(flag, src[k], dst[k]) for flag in (False, True)
                     if (k := np.flatnonzero((same == flag) & ~hit)).size]
            pairs = np.unique(src[hit] * self.ranks + dst[hit])
            costs += [self._cost(int(k) // self.ranks, int(k) % self.ranks) for k in pairs]
            alpha, beta = max(c[0] for c in costs), min(c[1] for c in costs)
        else:
            pairs = np.unique(src * self.ranks + dst)
            most = MAX_LOOKUPS if self.kind is not None else MAX_DEGRADED_LOOKUPS
            if pairs.size > most:
                pairs = pairs[np.linspace(0, pairs.size - 1, most).astype(np.int64)]
            costs = [self._cost(int(k) // self.ranks, int(k) % self.ranks) for k in pairs]
            alpha, beta = max(c[0] for c in costs), min(c[1] for c in costs)
        return Hop(alpha, beta, self.gamma)

    def _class(self, same: bool, src: Ints, dst: Ints) -> tuple[float, float]:
        """The cost of the intra-host (``same``) or inter-host class, from the first of its
        untouched pairs ``src[k] -> dst[k]`` asked about (all cost the same by construction)."""
        if same not in self._classes:
            self._classes[same] = self._cost(int(src[0]), int(dst[0]))
        return self._classes[same]

    def _cost(self, src: int, dst: int) -> tuple[float, float]:
        return self.network.path_cost(src, dst)


def _check_crossings(network: Network, src: Ints, dst: Ints) -> None:
    """SpecError when counting the links crossed by the routes ``src[k] -> dst[k]`` would take
    more than seconds: their total length, estimated from an even sample of
    :data:`CROSSING_SAMPLE` routes, above :data:`MAX_CROSSINGS` (a butterfly on a ring of
    65,536 ranks: routes of thousands of hops, billions of crossings)."""
    if src.size * len(network.links) <= MAX_CROSSINGS:  # a route crosses a link at most once
        return
    picks = np.linspace(0, src.size - 1, min(src.size, CROSSING_SAMPLE)).astype(np.int64)
    hops = float(np.mean([len(network.route(int(src[k]), int(dst[k]))) for k in picks]))
    if src.size * hops > MAX_CROSSINGS:
        raise SpecError(
            f"{src.size} concurrent messages over routes of about {hops:.0f} hops would cross "
            f"about {src.size * hops:.3g} links, more than the {MAX_CROSSINGS:.0e} the closed "
            "forms count in seconds: name an algorithm without concurrent exchanges "
            "(--algorithm ring) or use fewer ranks"
        )
