"""The DES instant by instant in numpy, for wide schedules (an all-to-all's million transfers
start and drain in a handful of instants).

It gives what :class:`commsim.engine.des._Simulation` gives, to the bit: the same arithmetic
per flow (``remaining -= rate * elapsed`` when a rate changes, a drain at ``now + remaining /
rate``, an arrival a route's latency later, plus ``gamma * nbytes`` for a reduce on a rank),
the same instants, and at the end of each instant the max-min rates of the flows then active,
from the same level-by-level filling (:mod:`commsim.engine.maxmin`: filling every active flow
at once gives each component what filling it alone does, and flows whose rate is unchanged
keep their drain). Where the event loop takes an event per transfer and per rate change, this
takes a few numpy passes per instant: it pays when many transfers share an instant
(:func:`is_wide`). ``tests/engine/test_batched.py`` pins the equality on every algorithm and
on random contended schedules.
"""

from __future__ import annotations

from heapq import heappop, heappush

import numpy as np

from commsim.engine import maxmin
from commsim.gcpause import paused_gc
from commsim.network import Network
from commsim.progress import Progress
from commsim.schedule import Columns

#: Transfers per step level (``Columns.level``) from which the batched engine is used, and
#: transfers in all. Measured, both engines on one schedule, load 4-5 on 2 cores: a ring
#: (p transfers per level, 256 ranks) takes 3.2 s in the event loop and 3.7 s here; thousands
#: per level run far faster here (hierarchical_rabenseifner on 4,096 ranks 5.5 s -> 0.36 s,
#: bruck on 128 ranks 2.6 s -> 0.23 s, all_pairs on 128 ranks 0.95 s -> 0.04 s).
WIDE_PER_LEVEL = 2048
WIDE_MIN_TRANSFERS = 4096
#: From this many transfers on, a run draws a progress bar (on a terminal), as the event
#: loop's does.
PROGRESS_MIN_TRANSFERS = 200_000

_DRAIN, _ARRIVE = 0, 1


def is_wide(columns: Columns) -> bool:
    """Whether ``columns`` has many transfers per step level (the batched engine's case; a
    schedule whose builder gave no levels is not searched for them)."""
    n = len(columns)
    if n < WIDE_MIN_TRANSFERS or columns.level is None:
        return False
    return n >= WIDE_PER_LEVEL * (int(columns.level.max(initial=0)) + 1)


class RouteTable:
    """Every transfer's route (CSR rows of link ids, one per rank pair) and its summed latency
    (added hop by hop, as the event loop does); every link's capacity."""

    def __init__(self, columns: Columns, network: Network) -> None:
        src, dst, which = columns.pairs()
        ptr, links = network.route_csr(src, dst)
        ends = network.link_values(np.arange(len(network.links)))
        lat, bw = ends.latency_s, ends.bandwidth_Bps
        count = np.diff(ptr)
        latency = np.zeros(len(src))
        for hop in range(int(count.max(initial=0))):  # in hop order: same rounding
            on = np.flatnonzero(count > hop)
            latency[on] += lat[links[ptr[on] + hop]]
        self.capacity = bw.astype(np.float64)
        self.pair_ptr, self.pair_links, self.which = ptr, links, which
        self.length = count[which]
        self.latency = latency[which]

    def incidence(self, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(position in flows, link)`` for every link of every transfer in ``flows``."""
        length = self.length[flows]
        pos = np.repeat(np.arange(len(flows), dtype=np.int64), length)
        first = self.pair_ptr[self.which[flows]]
        offset = np.arange(len(pos), dtype=np.int64) - np.repeat(np.cumsum(length) - length,
                                                                 length)
        return pos, self.pair_links[np.repeat(first, length) + offset]


class BatchedSimulation:
    """One run of a schedule's columns on a network, instant by instant."""

    def __init__(self, columns: Columns, network: Network) -> None:
        n = len(columns)
        self.n = n
        self.routes = RouteTable(columns, network)
        nbytes = columns.nbytes.astype(np.float64)
        self.nbytes = nbytes
        # a switch reduces in hardware at line rate: gamma is the ranks' arithmetic only
        charged = columns.reduce & (columns.dst < network.ranks)
        self.delay = self.routes.latency.copy()
        self.delay[charged] += network.gamma_s_per_B * nbytes[charged]
        counts = np.diff(columns.dep_ptr)
        self.waiting = counts.copy()
        owner = np.repeat(np.arange(n, dtype=np.int64), counts)
        order = np.argsort(columns.dep_idx, kind="stable")
        self.dependents = owner[order]
        self.dep_start = np.searchsorted(columns.dep_idx[order], np.arange(n + 1))
        self.start = np.zeros(n)
        self.end = np.zeros(n)
        self.remaining = np.zeros(n)
        self.rate = np.zeros(n)
        self.updated = np.zeros(n)
        self.version = np.zeros(n, dtype=np.int64)
        self.active = np.zeros(0, dtype=np.int64)   # transfers whose bytes are flowing...
        self.flowing = np.zeros(n, dtype=bool)      # ... (drained ones leave at re-sharing)
        self.started: list[np.ndarray] = []         # ... and those started this instant
        self.dirty = False                          # flows started or drained this instant
        self.queue: list[tuple[float, int, int, np.ndarray, np.ndarray | None]] = []
        self.pushed = 0
        self.ended = 0

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        """Every transfer's start and end (RuntimeError if some never became ready)."""
        with paused_gc():
            self._start(np.flatnonzero(self.waiting == 0), 0.0)
            if self.dirty:
                self._reshare(0.0)
            bar = (Progress(f"simulating {self.n} transfers", "transfer")
                   if self.n >= PROGRESS_MIN_TRANSFERS else None)
            try:
                self._loop(bar)
            finally:
                if bar is not None:
                    bar.close()
        unfinished = np.flatnonzero(self.waiting > 0)
        if unfinished.size:  # only a malformed (cyclic) schedule gets here
            raise RuntimeError(f"transfers never became ready: {unfinished[:5].tolist()}")
        return self.start, self.end

    def _loop(self, bar: Progress | None) -> None:
        queue = self.queue
        while queue:
            now = queue[0][0]
            while queue and queue[0][0] == now:   # the instant's events, then its re-sharing
                _, _, kind, rows, versions = heappop(queue)
                if kind == _DRAIN:
                    self._drained(rows[self.version[rows] == versions], now)
                else:
                    self._arrived(rows, now)
                if not queue or queue[0][0] != now:
                    if self.dirty:
                        self._reshare(now)
            if bar is not None:
                bar.update_to(self.ended, self.n)

    def _push(self, kind: int, rows: np.ndarray, times: np.ndarray) -> None:
        """One event per distinct time among ``rows``' ``times`` (in row order within)."""
        if not rows.size:
            return
        order = np.argsort(times, kind="stable")
        times, rows = times[order], rows[order]
        cut = np.flatnonzero(times[1:] != times[:-1]) + 1
        for lo, hi in zip([0, *cut.tolist()], [*cut.tolist(), len(rows)], strict=True):
            group = rows[lo:hi]
            versions = self.version[group] if kind == _DRAIN else None
            heappush(self.queue, (float(times[lo]), self.pushed, kind, group, versions))
            self.pushed += 1

    def _start(self, rows: np.ndarray, now: float) -> None:
        self.start[rows] = now
        still = self.routes.length[rows] == 0
        self._push(_ARRIVE, rows[still], now + self.delay[rows[still]])
        flows = rows[~still]
        if flows.size:
            self.remaining[flows] = self.nbytes[flows]
            self.rate[flows] = 0.0
            self.updated[flows] = now
            self.flowing[flows] = True
            self.started.append(flows)
            self.dirty = True

    def _drained(self, rows: np.ndarray, now: float) -> None:
        if not rows.size:
            return
        self.flowing[rows] = False
        self.dirty = True
        self._push(_ARRIVE, rows, now + self.delay[rows])

    def _arrived(self, rows: np.ndarray, now: float) -> None:
        self.end[rows] = now
        self.ended += len(rows)
        lo, hi = self.dep_start[rows], self.dep_start[rows + 1]
        sizes = hi - lo
        if not sizes.sum():
            return
        nxt = self.dependents[np.repeat(lo - np.cumsum(sizes) + sizes, sizes)
                              + np.arange(int(sizes.sum()))]
        touched, times = np.unique(nxt, return_counts=True)
        self.waiting[touched] -= times
        self._start(touched[self.waiting[touched] == 0], now)

    def _reshare(self, now: float) -> None:
        """New rates for the active flows; a flow whose rate changed drains anew."""
        self.dirty = False
        flows = self.active = np.concatenate([self.active[self.flowing[self.active]],
                                              *self.started])
        self.started.clear()
        if not flows.size:
            return
        inc_flow, inc_link = self.routes.incidence(flows)
        rates = maxmin.fill_arrays(inc_flow, inc_link, len(flows), self.routes.capacity)
        changed = rates != self.rate[flows]
        flows, rates = flows[changed], rates[changed]
        if not flows.size:
            return
        self.remaining[flows] -= self.rate[flows] * (now - self.updated[flows])
        self.updated[flows] = now
        self.rate[flows] = rates
        self.version[flows] += 1
        self._push(_DRAIN, flows, now + np.maximum(self.remaining[flows], 0.0) / rates)
