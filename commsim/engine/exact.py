"""The exact fast evaluator: a schedule's DES timing computed level by level in numpy, when it
provably has no contention.

Uncontended, the DES (:mod:`commsim.engine.des`) starts a transfer when its last dependency
ends, drains its bytes at its route's narrowest bandwidth, then waits the route's summed
latency (and ``gamma * nbytes`` for a reduce into a rank). That is a longest path through the
dependency DAG, computed here one level at a time with the same floating-point operations in
the same order, so the numbers are the DES's to the last bit.

It is only the DES's answer when no two transfers ever drain over one directed link at the same
time. :func:`exact_timing` checks that on the timing it computed: per link, the drain
intervals ``[start, start + nbytes / bandwidth]`` sorted by start must be strictly apart (a tie
could let the DES re-share for an instant). Then each transfer was alone on its links for its
whole drain in the DES as well (by induction over events in time order), so it took the DES's
idle fast path with these exact times. Otherwise it returns None and the DES runs.

>>> from commsim.topology import ring
>>> from commsim.schedule import Columns, OpKind, Transfer
>>> net = ring(3, latency="1us", bandwidth="1GB/s")
>>> cols = Columns.from_transfers([Transfer(0, 1, 0, 1000, OpKind.COPY),
...                                Transfer(1, 2, 0, 1000, OpKind.COPY, (0,))])
>>> exact_timing(cols, net).end_s.tolist()
[2e-06, 4e-06]
>>> both = Columns.from_transfers([Transfer(0, 1, 0, 1000, OpKind.COPY),
...                                Transfer(0, 1, 0, 1000, OpKind.COPY)])
>>> exact_timing(both, net) is None   # one link, same time: contended
True
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from commsim.engine.des import Timing, check_fits, simulate_des
from commsim.errors import SpecError
from commsim.network import Network
from commsim.schedule import Columns, Schedule


def _routes(cols: Columns, network: Network) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                      np.ndarray, list[tuple[int, ...]]]:
    """Per transfer: its route's index among the distinct routes, its drain time and its
    latency (plus reduction); and per distinct route its link tuple."""
    width = int(max(cols.src.max(initial=0), cols.dst.max(initial=0))) + 1
    key = cols.src * width + cols.dst
    if width * width <= 1 << 24:                      # a table instead of a sort
        seen = np.zeros(width * width, dtype=bool)
        seen[key] = True
        pairs = np.flatnonzero(seen)
        table = np.zeros(width * width, dtype=np.int64)
        table[pairs] = np.arange(len(pairs))
        which = table[key]
    else:
        pairs, which = np.unique(key, return_inverse=True)
    paths = [network.route(pair // width, pair % width) for pair in pairs.tolist()]
    lat, bw = network.link_costs(paths)
    latency = np.empty(len(pairs))
    bandwidth = np.empty(len(pairs))
    for k, path in enumerate(paths):
        # NOTE: the DES's own expressions (a Python sum from 0, the narrowest capacity)
        latency[k] = sum(lat[i] for i in path)
        bandwidth[k] = min((bw[i] for i in path), default=0.0)
    which = which.reshape(-1)
    has_path = np.array([bool(path) for path in paths])[which]
    nbytes = cols.nbytes.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        drain = np.where(has_path, nbytes / bandwidth[which], 0.0)
    delay = latency[which]
    gamma = network.gamma_s_per_B
    reduce_here = cols.reduce & (cols.dst < network.ranks)
    if gamma and reduce_here.any():
        delay = np.where(reduce_here, delay + gamma * nbytes, delay)
    return which, has_path, drain, delay, paths


def _levels(cols: Columns) -> np.ndarray:
    """A level per transfer above its dependencies' (the builder's, else the DAG's depth)."""
    return cols.level if cols.level is not None else cols.depths()


def _longest_path(cols: Columns, drain: np.ndarray, delay: np.ndarray) -> tuple[np.ndarray,
                                                                                np.ndarray]:
    """Start (the latest dependency's end, 0 without one) and end of every transfer."""
    n = len(cols)
    level = _levels(cols)
    steps = np.diff(level)
    if (steps >= 0).all():                            # rows already in level order
        order, contiguous = np.arange(n), True
        bounds = np.flatnonzero(steps) + 1
        counts = np.diff(cols.dep_ptr)
        ptr, deps = cols.dep_ptr, cols.dep_idx
    else:
        order, contiguous = np.argsort(level, kind="stable"), False
        bounds = np.flatnonzero(np.diff(level[order])) + 1
        counts = np.diff(cols.dep_ptr)[order]
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        gather = np.repeat(cols.dep_ptr[:-1][order] - ptr[:-1], counts) + np.arange(ptr[-1])
        deps = cols.dep_idx[gather]                   # dependencies, in level order
    start = np.zeros(n)
    end = np.zeros(n)
    edges = [0, *bounds.tolist(), n]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        rows: slice | np.ndarray = slice(a, b) if contiguous else order[a:b]
        lo, hi = ptr[a], ptr[b]
        if hi > lo:
            waits = counts[a:b] > 0
            latest = np.maximum.reduceat(end[deps[lo:hi]], ptr[a:b][waits] - lo)
            if waits.all():
                start[rows] = latest
            else:
                start[order[a:b][waits]] = latest
        end[rows] = (start[rows] + drain[rows]) + delay[rows]
    return start, end


def _uncontended(which: np.ndarray, has_path: np.ndarray, start: np.ndarray,
                 drain_end: np.ndarray, paths: list[tuple[int, ...]]) -> bool:
    """Whether the drain intervals on every directed link are strictly apart."""
    lengths = np.array([len(path) for path in paths], dtype=np.int64)
    path_links = np.array([link for path in paths for link in path], dtype=np.int64)
    if (lengths == 1).all():                          # one hop each (rings, full meshes)
        link, rows = path_links[which], None
    else:
        path_ptr = np.zeros(len(paths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=path_ptr[1:])
        rows = np.flatnonzero(has_path)
        hops = lengths[which[rows]]
        first = np.repeat(path_ptr[which[rows]] - np.cumsum(hops) + hops, hops)
        link = path_links[first + np.arange(int(hops.sum()))]
        rows = np.repeat(rows, hops)
    # NOTE: the rows of one link usually come in start order already (a link's pieces
    # follow each other), so a stable sort by link alone, then a check, saves a lexsort.
    order = np.argsort(link.astype(np.int32), kind="stable")
    row = order if rows is None else rows[order]
    begin = start[row]
    on = link[order]
    other = on[1:] != on[:-1]                         # a new link begins: no constraint
    if not (other | (begin[1:] >= begin[:-1])).all():
        order = np.lexsort((begin, on))
        row, begin, on = row[order], begin[order], on[order]
        other = on[1:] != on[:-1]
    return bool((other | (begin[1:] > drain_end[row][:-1])).all())


def exact_timing(cols: Columns, network: Network) -> Timing | None:
    """The DES's timing of ``cols`` on ``network`` when no link is ever shared; None when the
    schedule is (or might be) contended and only the DES can tell."""
    if len(cols) == 0:
        return Timing(np.zeros(0), np.zeros(0))
    which, has_path, drain, delay, paths = _routes(cols, network)
    start, end = _longest_path(cols, drain, delay)
    if not _uncontended(which, has_path, start, start + drain, paths):
        return None
    return Timing(start, end)


#: Set (to anything but ``0`` or empty) to skip the exact evaluator: every DES evaluation then
#: runs the event loop (benchmarks and tests compare the two).
FULL_DES_ENV = "COMMSIM_FULL_DES"


def full_des_forced() -> bool:
    """Whether :data:`FULL_DES_ENV` asks for the event loop on every schedule."""
    return os.environ.get(FULL_DES_ENV, "") not in ("", "0")


def time_schedule(schedule: Schedule, network: Network, limit: int | None = None,
                  simulate: Callable[[Schedule, Network], Timing] | None = None) -> Timing:
    """The DES's timing of ``schedule`` on ``network``: :func:`exact_timing` where it proves the
    schedule uncontended, else (or when :func:`full_des_forced`) the event loop,
    :func:`~commsim.engine.des.simulate_des` or ``simulate`` (:mod:`commsim.engine.reuse`
    passes one that gives back a kept timing); SpecError when that would run more than
    ``limit`` transfers."""
    check_fits(schedule, network)
    if not full_des_forced():
        timing = exact_timing(schedule.columns, network)
        if timing is not None:
            return timing
    if limit is not None and len(schedule) > limit:
        raise SpecError(
            f"{schedule.algorithm} {schedule.collective.value} on {schedule.ranks} ranks "
            f"{'shares links' if not full_des_forced() else f'with {FULL_DES_ENV} set'}, so its "
            f"{len(schedule)} transfers need the discrete-event engine, more than the "
            f"{limit:.2g} it runs in seconds: use --engine analytic (closed form), fewer "
            "--chunks or fewer --ranks"
        )
    return (simulate or simulate_des)(schedule, network)


#: :func:`takes_at_least` answers yes only when the uncontended makespan passes the time by
#: this much (relative): far more than the DES's rounding, so the answer holds for its floats.
AT_LEAST_MARGIN = 1e-9


def takes_at_least(schedule: Schedule, network: Network, time_s: float) -> bool:
    """Whether the DES's time of ``schedule`` on ``network`` is provably ``time_s`` or more,
    without running it: its makespan with every transfer alone on its links (the longest path
    :func:`exact_timing` computes) passes ``time_s`` (by :data:`AT_LEAST_MARGIN`). The DES
    starts a transfer no earlier than that path does and drains it at no more than its route's
    narrowest bandwidth (a shared link's bandwidth is split), so its time is never shorter.
    False says nothing."""
    cols = schedule.columns
    if len(cols) == 0:
        return time_s <= 0
    _, _, drain, delay, _ = _routes(cols, network)
    _, end = _longest_path(cols, drain, delay)
    return float(end.max()) * (1 - AT_LEAST_MARGIN) >= time_s
