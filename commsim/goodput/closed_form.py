"""Goodput in closed form: the expected fraction of wall time that trains, and the best interval.

Failures are a Poisson process of rate ``lam = 1/M`` (``M`` the mean time between failures of
the whole job), and may strike at any moment, restarts included. A run computes for ``tau``,
stalls ``C`` per checkpoint (``b = tau + C`` between snapshots), and a checkpoint is durable
``W`` after its stall ends (``W``: an asynchronous write; 0 when synchronous). A failure rolls
back to the last durable checkpoint and costs a recovery ``R`` (restart, re-queue, read),
begun again when a failure hits it.

**Exact expectation.** Cut the run at the end of each recovery: the time to the next failure
is exponential, mean ``M``, whatever happened before, so a cycle lasts ``M + (e^{lam R} - 1) M
= M e^{lam R}`` on average. The cycle banks a checkpoint at each ``a + k b`` (``a = b + W``,
``k >= 0``) that comes before its failure, ``e^{-lam a} / (1 - e^{-lam b})`` of them on
average, each worth ``tau`` of training. Their ratio is the goodput (renewal-reward)::

    G(tau) = lam tau e^{-lam (R + a)} / (1 - e^{-lam b})

With ``W = 0`` it is ``tau / (M e^{R/M} (e^{(tau + C)/M} - 1))``, Daly's exact expectation for
exponential failures (J. T. Daly, "A higher order estimate of the optimum checkpoint interval
for restart dumps", FGCS 22(3), 2006, eq. 13, per unit of work).

**Best interval.** ``G`` depends on ``tau`` as ``tau / (e^{lam (tau + C)} - 1)``, with or
without ``W``, so its maximum solves ``e^{lam (tau + C)} (1 - lam tau) = 1``:
``tau* = M (1 + W0(-e^{-1 - C/M}))`` (``W0``: Lambert's function), found here by bisection. An
asynchronous interval shorter than the write would start a snapshot before the last one is
written: intervals are at least ``W``, so the best is ``max(tau*, W)``. The classic
approximations, reported beside it: Young's ``sqrt(2 C M)`` (J. W. Young, "A first order
approximation to the optimum checkpoint interval", CACM 17(9), 1974) and Daly's higher-order
``sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + C / 18M) - C`` for ``C < 2M``, else ``M`` (Daly 2006,
eq. 37).

**After a node is lost** (``--elastic``): *waiting for a spare* adds the wait ``S`` to every
recovery, ``G(tau; R + S)``. An *elastic* restart resumes at once on the nodes left, each node
out costing the fraction ``d`` of full speed (never below 0). A node that failed at ``t`` is
back at ``t + S`` and rejoins free at the first restart that ends after that, or else at the
next durable checkpoint, which then pays a planned restart ``R_j`` (nothing is lost; a failure
during it starts a recovery).

*Exact expectation.* Failures are Poisson whatever the run does, so ``G`` is ``lam`` times
the expected work banked between two failures. That is 0 unless the recovery ends
(``e^{-lam R}``); training then resumes with the next failure exponentially far. All that
matters until then is the repairs that come after training resumes, at ``L = S - R``: the
failed node's own, and those of the nodes that failed in the ``L`` before it, back at the
points of a Poisson process of rate ``lam`` on ``(0, L)`` (earlier ones rejoined at the
recovery's end). A stretch of training that starts at ``s`` has every node whose repair lies
in ``(s, L]`` out, the failed node and ``K ~ Poisson(lam (L - s))`` more, so its expected
speed is ``E[max(0, 1 - d (1 + K))]``; at its first repair it stops at the next durable
checkpoint, pauses ``R_j``, and the next stretch starts with every repair until then seen. A
stretch that starts at or after ``L`` trains at full speed: ``tau e^{-lam a} / (1 -
e^{-lam b})``, as in ``G``. So::

    G_elastic(tau) = lam e^{-lam R} V(L)

where ``V(L)`` sums, over the places ``n (a + R_j) + m b`` a stretch can start, the probability
of starting there times the checkpoints it banks at its speed: a finite sum of about
``(L / b) (L / (a + R_j))`` terms, one level of rejoins at a time (:func:`_gap_work`; the
places reached with probability under ``e^-40`` left out). With ``S <= R``, or ``d = 0``,
``R_j = 0`` and ``W = 0``, it is ``G(tau; R)``. To first order in ``lam`` it is ``G(tau; R) (1 -
lam (R_j + W)) (1 - d lam (L + w - W))``, ``w`` the wait from ``L`` to the next durable
checkpoint: fixed by the schedule, since the node's repair and the restart are both timed from
its failure.

>>> round(young_interval(1 / 36000, 60), 1), round(best_interval(1 / 36000, 60, 0), 1)
(2078.5, 2038.7)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def goodput(rate_per_s: float, interval_s: float, blocking_s: float, commit_delay_s: float,
            recovery_s: float) -> float:
    """``G(tau)`` (see the module docstring): the expected fraction of wall time that trains."""
    segment = interval_s + blocking_s
    if rate_per_s == 0:
        return interval_s / segment
    lam = rate_per_s
    first = segment + commit_delay_s
    return lam * interval_s * math.exp(-lam * (recovery_s + first)) / -math.expm1(-lam * segment)


def best_interval(rate_per_s: float, blocking_s: float, commit_delay_s: float) -> float:
    """The ``tau`` that maximises :func:`goodput`: ``max(tau*, W)`` (``tau*`` by bisection)."""
    c = rate_per_s * blocking_s
    lo, hi = 0.0, 1.0  # x = lam tau; f(x) = (e^(x+c) - 1)(1 - x) - x falls from >= 0 to -1
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if math.expm1(mid + c) * (1 - mid) - mid > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return max(0.5 * (lo + hi) / rate_per_s, commit_delay_s)


def young_interval(rate_per_s: float, blocking_s: float) -> float:
    """Young (1974): ``sqrt(2 C M)``."""
    return math.sqrt(2 * blocking_s / rate_per_s)


def daly_interval(rate_per_s: float, blocking_s: float) -> float:
    """Daly (2006), eq. 37: the higher-order estimate (``M`` once ``C >= 2M``)."""
    mtbf = 1 / rate_per_s
    if blocking_s >= 2 * mtbf:
        return mtbf
    r = blocking_s / (2 * mtbf)
    return math.sqrt(2 * blocking_s * mtbf) * (1 + math.sqrt(r) / 3 + r / 9) - blocking_s


def elastic_goodput(rate_per_s: float, interval_s: float, blocking_s: float,
                    commit_delay_s: float, recovery_s: float, *, rejoin_s: float,
                    repair_s: float, slowdown: float) -> float:
    """``G_elastic(tau) = lam e^{-lam R} V(S - R)`` (see the module docstring), exact. A
    ValueError past :data:`MOST_TERMS` (see :func:`elastic_terms`)."""
    live = repair_s - recovery_s  # training time until the failed node is back
    if rate_per_s == 0 or live <= 0:
        return goodput(rate_per_s, interval_s, blocking_s, commit_delay_s, recovery_s)
    terms = elastic_terms(rate_per_s, interval_s + blocking_s, commit_delay_s + rejoin_s, live)
    if terms > MOST_TERMS:
        raise ValueError(f"the elastic sum would have {terms:,.0f} terms, over {MOST_TERMS:,}")
    lam = rate_per_s
    work = _gap_work(lam, interval_s, blocking_s, commit_delay_s, rejoin_s, live, slowdown)
    return lam * math.exp(-lam * recovery_s) * work


#: The most terms (slots x levels of rejoins, :func:`elastic_terms`, an upper estimate) of one
#: elastic sum: 1.9 million took 0.08 s and under 50 MB on the 2-core development machine.
MOST_TERMS = 2_000_000


def elastic_terms(rate_per_s: float, segment_s: float, restart_s: float, live_s: float) -> float:
    """About how many terms :func:`_gap_work` adds up: the checkpoint intervals
    (``segment_s``) it follows a lost node over, until it is back ``live_s`` after training
    resumes or the failure has come with probability ``1 - e^-40``, times the levels of planned
    rejoins (each at least ``segment_s + restart_s`` long) until the rest is as unlikely."""
    far = min(live_s, _FAR / rate_per_s)
    levels = min(far / (segment_s + restart_s), _most_rejoins(rate_per_s * far)) + 1
    return (far / segment_s + 2) * levels


def _most_rejoins(mean: float) -> float:
    """Rejoins that Poisson(``mean``) repairs (each at most one) pass with probability under
    about ``e^-_FAR``."""
    return mean + 10 * math.sqrt(mean) + _FAR


#: A start or slot reached before the failure with probability under ``e^-_FAR`` is dropped:
#: what comes after it adds at most that probability to the goodput (work <= wall time, whose
#: mean to the failure is ``1 / lam``), and a run passes the cut at most once.
_FAR = 40.0


def _gap_work(lam: float, tau: float, blocking_s: float, commit_delay_s: float, pause: float,
              live: float, slowdown: float) -> float:
    """``V(live)``: the expected work banked from a recovery's end to the next failure.

    After ``n`` planned rejoins (``origin = n (a + pause)``) a stretch starts at ``origin +
    m b`` and its checkpoints are durable at ``origin + a + m' b``, ``m' >= m``. ``starts[m]``
    is the probability of starting there before the failure, every repair until then seen;
    ``going[m]`` that of a stretch training on past ``origin + a + m b`` with no repair since
    it started. Slot ``m`` ends at ``origin + a + m b``: the first of a stretch that starts at
    ``m``, or the next of one going on from ``m - 1``."""
    b = tau + blocking_s
    a = b + commit_delay_s
    settled = tau * math.exp(-lam * a) / -math.expm1(-lam * b)  # every node back: G's stretch
    far = min(live, _FAR / lam)
    m = np.arange(int(far // b) + 2)
    total, origin, starts = 0.0, 0.0, np.zeros(m.size)
    starts[0] = 1.0
    while starts.sum() > math.exp(-_FAR):
        at = origin + m * b
        total += settled * float(starts[at >= live].sum())
        starts[at >= far] = 0.0
        first = _slots(lam, a, live - at, starts, tau, slowdown)
        # going[m] = first.going[m] + e^(-2 lam b) going[m - 1] (no repair in b-slot m, no
        # failure) up to the b-slot that holds live, summed with scale = e^(2 lam b m)
        ends = live - (at + a) < b
        last = int(np.argmax(ends)) if ends.any() else m.size
        if lam * b < 300:  # scale < e^(2 _FAR + 600), as lam b m < _FAR + 2 lam b
            scale = np.exp(2 * lam * b * np.minimum(m, last))
            going = np.where(m <= last, np.cumsum(first.going * scale) / scale, 0.0)
        else:  # e^(-2 lam b) < e^-600: nothing goes on past a slot
            going = first.going
        going = np.concatenate(([0.0], going[:-1]))  # what goes on into slot m
        later = _slots(lam, b, live - (at + a - b), going, tau, slowdown)
        total += first.banked + later.banked
        starts = (first.rejoin + later.rejoin) * math.exp(-lam * pause)
        origin += a + pause
    return total


@dataclass(frozen=True, slots=True)
class _Slots:
    banked: float  # the work their checkpoints bank
    rejoin: np.ndarray  # probability of a repair in the slot and no failure: a planned rejoin
    going: np.ndarray  # probability of no repair in the slot and no failure: it trains on


def _slots(lam: float, length: float, left: np.ndarray, reach: np.ndarray, tau: float,
           slowdown: float) -> _Slots:
    """Slots of ``length``, reached with probability ``reach``, the failed node back ``left``
    after each begins: what their checkpoints bank, and how each ends."""
    on = reach > 0
    survive = math.exp(-lam * length)
    speed = np.zeros(reach.size)
    speed[on] = _speed(lam * left[on], slowdown)
    repair = np.where(left < length, 1.0, -math.expm1(-lam * length))
    return _Slots(float((reach * speed).sum()) * survive * tau, reach * repair * survive,
                  reach * (1 - repair) * survive)


def _speed(mean: np.ndarray, slowdown: float) -> np.ndarray:
    """``E[max(0, 1 - d (1 + K))]``, ``K`` Poisson of ``mean``: a stretch's speed with the
    failed node out and ``K`` more (the simulation's speed never goes below 0)."""
    linear = 1 - slowdown * (1 + mean)
    if slowdown == 0 or mean.size == 0:
        return linear
    top = math.ceil(1 / slowdown - 1) - 1  # the most nodes out besides it at a speed above 0
    peak = float(mean.max())
    if top >= peak + 10 * math.sqrt(peak) + 30:  # P(K > top) < e^-45: the floor never bites
        return linear
    log_mean = np.log(np.maximum(mean, np.finfo(float).tiny))  # K = 0 when mean = 0
    speed = np.zeros(mean.size)
    for k in range(top + 1):
        speed += (1 - slowdown * (1 + k)) * np.exp(k * log_mean - mean - math.lgamma(k + 1))
    return speed


def best_elastic_interval(rate_per_s: float, blocking_s: float, commit_delay_s: float,
                          recovery_s: float, *, rejoin_s: float, repair_s: float,
                          slowdown: float, shortest_s: float = 0.0) -> float:
    """The interval that maximises :func:`elastic_goodput` (golden-section search on
    ``log tau``, from a tenth to ten times the plain optimum, to a relative 1e-9), at least
    ``shortest_s``, and long enough for the sum to keep to half :data:`MOST_TERMS`."""
    far = min(max(repair_s - recovery_s, 0.0), _FAR / rate_per_s)
    levels = _most_rejoins(rate_per_s * far) + 1  # whatever the interval
    fewest = far / (MOST_TERMS / 2 / levels - 2) - blocking_s
    floor = max(shortest_s, fewest, commit_delay_s, 1e-9)
    start = max(best_interval(rate_per_s, blocking_s, commit_delay_s), floor)

    def value(log_tau: float) -> float:
        return elastic_goodput(rate_per_s, math.exp(log_tau), blocking_s, commit_delay_s,
                               recovery_s, rejoin_s=rejoin_s, repair_s=repair_s,
                               slowdown=slowdown)

    lo, hi = math.log(max(start / 10, floor)), math.log(start * 10)
    ratio = (math.sqrt(5) - 1) / 2
    left, right = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    g_left, g_right = value(left), value(right)
    while hi - lo > 1e-9:
        if g_left >= g_right:
            hi, right, g_right = right, left, g_left
            left = hi - ratio * (hi - lo)
            g_left = value(left)
        else:
            lo, left, g_left = left, right, g_right
            right = lo + ratio * (hi - lo)
            g_right = value(right)
    return math.exp(0.5 * (lo + hi))


@dataclass(frozen=True, slots=True)
class Outcome:
    """One policy's answer: the interval used, its goodput, and the wall time of the run."""

    interval_s: float
    goodput: float
    wall_time_s: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"interval_s": self.interval_s, "goodput": self.goodput,
                "wall_time_s": self.wall_time_s}
