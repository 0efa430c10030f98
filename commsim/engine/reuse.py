"""Simulated timings kept for the next time the same schedule runs over links alike, within
one scope: a machine and the what-ifs applied to it.

A DES timing is a function of the schedule and, of the network, only what the simulation
reads: each transfer's route, the latency and bandwidth of the links on the routes, which
routes share a link (and the links' order), the ranks and gamma. ``run --what-if`` and a
diagnosis time the healthy machine and degraded ones, whose phases often run over links the
file did not change: NCCL's NVLS tree across 512 hosts with one NIC at half speed simulates
the other rails' phase, 16,352 transfers over exactly the healthy links, on both. A network
made by :func:`in_scope` (and every view and degraded network made from it: they copy its
``meta``) keeps the event loop's timing of each schedule of :data:`MIN_TRANSFERS` or more
under that content (a schedule the exact evaluator times, uncontended, costs less than its key
and is never kept), and :func:`reused_timing` gives it back where the same schedule (the same
kept object, :func:`~commsim.algorithms.memo.memo_schedule`) runs over links alike in the same
scope; anything else, and every network outside a scope, is simulated. Scopes never share timings,
so repeated runs (a benchmark's) simulate as a new process does. The memo holds at most
:data:`KEPT_TRANSFERS` transfers' timings, the least recently used going first
(:class:`~commsim.sized_lru.SizedLRU`).
"""

from __future__ import annotations

import hashlib

import numpy as np

from commsim.engine.des import Timing, simulate_des
from commsim.engine.exact import time_schedule
from commsim.network import Network
from commsim.schedule import Schedule
from commsim.sized_lru import SizedLRU

#: Below this many transfers the event loop takes milliseconds: never kept. (A key costs about
#: a tenth of the loop: 0.9 ms against 11 ms for a double binary tree of 252 transfers on
#: dgx-h100x8, 8.5 against 72 ms for 2,044 on dgx-h100x64, measured on two shared cores.)
MIN_TRANSFERS = 256
#: The most transfers whose timings the memo keeps, all together (16 bytes each).
KEPT_TRANSFERS = 2_000_000

#: The ``meta`` key of a network's :class:`ReuseScope`.
SCOPE_KEY = "reuse_scope"

_kept: SizedLRU[bytes, tuple[Schedule, ReuseScope, Timing]] = SizedLRU(KEPT_TRANSFERS)


class ReuseScope:
    """The scope within which simulated timings are reused (compared by identity)."""

    __slots__ = ()


def in_scope(network: Network) -> Network:
    """``network`` in a scope of its own: it, its views and the what-ifs applied to it reuse
    one another's simulated timings of phases over links alike."""
    return network.rebuilt(meta={**network.meta, SCOPE_KEY: ReuseScope()})


def reused_timing(schedule: Schedule, network: Network, limit: int | None = None) -> Timing:
    """:func:`~commsim.engine.exact.time_schedule` of ``schedule`` on ``network``, its event
    loop's timing given back from an earlier simulation of the same schedule over links alike
    (the module docstring); a schedule proven uncontended is timed exactly as ever (cheaper than
    its key), and schedules of reducing switches (``endpoints``) and small ones are simply
    timed."""
    scope = network.meta.get(SCOPE_KEY)
    if not isinstance(scope, ReuseScope) or schedule.endpoints or len(schedule) < MIN_TRANSFERS:
        return time_schedule(schedule, network, limit)

    def kept_or_simulated(schedule: Schedule, network: Network) -> Timing:
        key = _key(schedule, scope, network)
        kept = _kept.get(key)
        if kept is not None and kept[0] is schedule and kept[1] is scope:
            return kept[2]
        timing = simulate_des(schedule, network)
        for array in (timing.start_s, timing.end_s):
            array.flags.writeable = False
        _kept.put(key, (schedule, scope, timing), len(schedule))
        return timing

    return time_schedule(schedule, network, limit, kept_or_simulated)


def forget() -> None:
    """Empty the memo."""
    _kept.clear()


def _key(schedule: Schedule, scope: ReuseScope, network: Network) -> bytes:
    """What the simulation of ``schedule`` reads of ``network``, as a digest: the schedule and
    the scope (which objects), every distinct (src, dst) pair's route with its links
    renumbered in their order (so routes sharing a link still share it), those links'
    latencies and bandwidths, the ranks and gamma."""
    cols = schedule.columns
    width = int(max(cols.src.max(initial=0), cols.dst.max(initial=0))) + 1
    pairs = np.unique(cols.src.astype(np.int64) * width + cols.dst)
    paths = [network.route(int(p) // width, int(p) % width) for p in pairs.tolist()]
    lengths = np.fromiter((len(p) for p in paths), dtype=np.int64, count=len(paths))
    flat = np.fromiter((link for p in paths for link in p), dtype=np.int64,
                       count=int(lengths.sum()))
    used = np.unique(flat)
    values = network.link_values(used)
    digest = hashlib.blake2b(digest_size=32)
    for part in (np.asarray([id(schedule), id(scope), width, network.ranks], dtype=np.int64), pairs,
                 lengths, np.searchsorted(used, flat),
                 np.asarray(values.latency_s, dtype=np.float64),
                 np.asarray(values.bandwidth_Bps, dtype=np.float64),
                 np.asarray([network.gamma_s_per_B], dtype=np.float64)):
        digest.update(np.ascontiguousarray(part).tobytes())
    return digest.digest()
