"""Closed forms of the bidirectional rings (``ring_bidirectional``) and the multi-axis torus
collectives (``torus``), for :func:`commsim.engine.analytic.predict`: one clockwise and one
counter-clockwise ring per line, timed as :class:`~commsim.engine.ring_phases.RingPhase`
phases (see ``docs/closed-forms.md``).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.engine import closed_forms as cf
from commsim.engine.closed_forms import Hop, Ints
from commsim.engine.pairs import MAX_LOOKUPS, PairCosts
from commsim.engine.ring_phases import RingPhase, ring_phases
from commsim.errors import SpecError

#: Flows whose links are counted for ``ring_bidirectional``'s shared-link beta: all of them up
#: to this many ranks, beyond it windows of consecutive ranks.
LOAD_WINDOW = 64


def _loaded_hops(pairs: PairCosts, sets: list[tuple[Ints, Ints]]) -> list[Hop]:
    """Each set's worst pair when the flows of all ``sets`` run at once: summed latency, and
    the narrowest ``bandwidth / flows`` over the path's links (max-min fair sharing gives a
    flow at least that). Beyond ``MAX_LOOKUPS`` ranks only windows of ``LOAD_WINDOW``
    consecutive source ranks (evenly spaced) are routed and counted."""
    network, p = pairs.network, pairs.ranks
    if p > MAX_LOOKUPS:
        offsets = np.linspace(0, p - LOAD_WINDOW, MAX_LOOKUPS // LOAD_WINDOW).astype(np.int64)
        pick = np.unique((offsets[:, None] + np.arange(LOAD_WINDOW)).ravel())
        sets = [(src[pick[pick < len(src)]], dst[pick[pick < len(src)]]) for src, dst in sets]
    routes = [
        [network.route(int(a), int(b)) for a, b in zip(src, dst, strict=True) if a != b]
        for src, dst in sets
    ]
    load = Counter(link for paths in routes for path in paths for link in path)
    latency, bandwidth = network.link_costs(path for paths in routes for path in paths)
    hops = []
    for paths in routes:
        if not paths:
            hops.append(Hop(0.0, float("inf"), pairs.gamma))
            continue
        alpha = max(sum(latency[k] for k in path) for path in paths)
        beta = min(bandwidth[k] / load[k] for path in paths for k in path)
        hops.append(Hop(alpha, beta, pairs.gamma))
    return hops


def ring_bidirectional(call: Call, chunks: int, pairs: PairCosts) -> float:
    """Two rings (or chains) at once, each over half of every block: the slower one. Their
    hops count the links both directions share (a switch port carries a rank's two flows)."""
    p, n, root = call.ranks, call.nbytes, call.root
    coll = call.collective
    r = np.arange(p, dtype=np.int64)
    if coll.rooted:
        first = root if coll is Collective.BROADCAST else root + 1
        last = root if coll is Collective.BROADCAST else root - 1
        k = np.arange(p - 1, dtype=np.int64)
        cw, ccw = pairs.memo(
            ("bidirectional chains", first % p, last % p),
            lambda: _loaded_hops(
                pairs,
                [((first + k) % p, (first + k + 1) % p), ((last - k) % p, (last - k - 1) % p)],
            ),
        )
        reduce = coll is Collective.REDUCE
        return max(
            cf.ring_chain(p, n // 2, chunks, cw, reduce),
            cf.ring_chain(p, n - n // 2, chunks, ccw, reduce),
        )
    cw, ccw = pairs.memo(
        "bidirectional ring",
        lambda: _loaded_hops(pairs, [(r, (r + 1) % p), (r, (r - 1) % p)]),
    )
    steps = {
        Collective.ALL_GATHER: (0, p - 1, 0),
        Collective.REDUCE_SCATTER: (p - 1, 0, 1),
        Collective.ALL_REDUCE: (p - 1, p - 1, 1),
    }[coll]
    seg = cf.segment_lengths(p, n)
    ccw_order = (-r) % p
    time_s = 0.0
    for lengths, hop in ((seg // 2, cw), ((seg - seg // 2)[ccw_order], ccw)):
        time_s = max(time_s, cf.ring_blocks(lengths, chunks, *steps, hop, hop))
    return time_s


def _torus_lines(pairs: PairCosts, dims: tuple[int, ...], axis: int) -> tuple[Ints, Ints, Hop, Hop]:
    """The lines along ``axis`` (ranks, ``(L, d)``), their block bases, and the ``+`` and
    ``-`` hops (memoised)."""

    def make() -> tuple[Ints, Ints, Hop, Hop]:
        p, m = pairs.ranks, dims[axis]
        stride = math.prod(dims[axis + 1 :])
        r = np.arange(p, dtype=np.int64)
        starts = r[(r // stride) % m == 0]
        line = starts[:, None] + np.arange(m, dtype=np.int64) * stride
        base = starts - starts % (stride * m)
        plus = pairs.hop(line.ravel(), np.roll(line, -1, axis=1).ravel())
        minus = pairs.hop(line.ravel(), np.roll(line, 1, axis=1).ravel())
        return line, base, plus, minus

    return pairs.memo(("torus", dims, axis), make)


def _torus_phase(
    pairs: PairCosts, dims: tuple[int, ...], axis: int, n: int, reduce: bool
) -> RingPhase:
    """The bidirectional rings of every line along ``axis`` as one :class:`RingPhase`."""
    p, m = pairs.ranks, dims[axis]
    stride = math.prod(dims[axis + 1 :])
    line, base, plus, minus = _torus_lines(pairs, dims, axis)
    lo = base[:, None] + np.arange(m, dtype=np.int64) * stride
    start, stop = lo * n // p, (lo + stride) * n // p
    length = stop - start
    if m < 3:  # one ring of whole blocks
        ranks, starts, lengths, hops = line, start, length, [plus] * len(line)
    else:
        ccw = (-np.arange(m)) % m
        ranks = np.concatenate([line, line[:, ccw]])
        half = length // 2
        starts = np.concatenate([start, (start + half)[:, ccw]])
        lengths = np.concatenate([half, (length - half)[:, ccw]])
        hops = [plus] * len(line) + [minus] * len(line)
    steps = (m - 1, 0) if reduce else (0, m - 1)
    return RingPhase(
        ranks=ranks,
        starts=starts,
        lengths=lengths,
        reduce_steps=steps[0],
        copy_steps=steps[1],
        alpha=np.array([h.alpha_s for h in hops]),
        beta=np.array([h.beta_Bps for h in hops]),
        key=axis,
    )


def torus(call: Call, chunks: int, pairs: PairCosts) -> float:
    """Reduce-scatter along axes 0, 1, ..., then all-gather back: :func:`ring_phases`."""
    dims = call.torus_dims
    if dims is None:  # check_supports already refused it
        raise SpecError("algorithm 'torus' needs a torus topology")
    order = [a for a, d in enumerate(dims) if d > 1]
    coll, n = call.collective, call.nbytes
    phases = []
    if coll is not Collective.ALL_GATHER:
        phases += [_torus_phase(pairs, dims, a, n, True) for a in order]
    if coll is not Collective.REDUCE_SCATTER:
        phases += [_torus_phase(pairs, dims, a, n, False) for a in reversed(order)]
    if chunks == 1 and all(_symmetric(phase) for phase in phases):
        # Every ring of a phase moves equal blocks over alike pairs: the phases run in
        # lockstep, each step one transfer time, so the recurrence is a sum (10x faster).
        total = 0.0
        for phase in phases:
            block = int(phase.lengths.flat[0])
            hop = Hop(float(phase.alpha[0]), float(phase.beta[0]), pairs.gamma)
            total += phase.reduce_steps * hop.reduce(block) + phase.copy_steps * hop.copy(block)
        return total
    return ring_phases(n, chunks, phases, pairs.gamma)


def _symmetric(phase: RingPhase) -> bool:
    """Equal blocks and alike pairs throughout the phase."""
    return bool(
        phase.lengths.min() == phase.lengths.max()
        and phase.alpha.min() == phase.alpha.max()
        and phase.beta.min() == phase.beta.max()
    )
