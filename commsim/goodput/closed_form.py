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
out costing the fraction ``d`` of full speed, until the node is back ``S`` later and rejoins
at the next durable checkpoint (a planned restart ``R_j``), or free at the next failure's
restart when one comes first. To first order in ``lam``: nodes out add up; a node waits
``b / 2`` for its checkpoint; it rejoins at a planned restart unless it came back during a
restart (probability ``lam R``) or a failure struck during its wait (``1 - e^{-lam b/2}``);
and while the run trains, no failure struck during the last recovery, so of the ``S + b/2``
a node is out, ``R`` never overlaps training after its own failure::

    G_elastic(tau) = G(tau; R) (1 - lam R_j n_j) (1 - d lam (S + b/2 - R)),
    n_j = (1 - lam R) e^{-lam b/2}

>>> round(young_interval(1 / 36000, 60), 1), round(best_interval(1 / 36000, 60, 0), 1)
(2078.5, 2038.7)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
    """``G_elastic(tau)`` (see the module docstring), first order in the failure rate."""
    base = goodput(rate_per_s, interval_s, blocking_s, commit_delay_s, recovery_s)
    lam, wait = rate_per_s, (interval_s + blocking_s) / 2
    rejoins = (1 - lam * recovery_s) * math.exp(-lam * wait)
    out = slowdown * lam * max(0.0, repair_s + wait - recovery_s)
    return max(0.0, base * (1 - lam * rejoin_s * rejoins) * (1 - out))


def best_elastic_interval(rate_per_s: float, blocking_s: float, commit_delay_s: float,
                          recovery_s: float, **elastic: float) -> float:
    """The interval that maximises :func:`elastic_goodput` (golden-section search on
    ``log tau``, from a tenth to ten times the plain optimum)."""
    start = best_interval(rate_per_s, blocking_s, commit_delay_s)

    def value(log_tau: float) -> float:
        return elastic_goodput(rate_per_s, math.exp(log_tau), blocking_s, commit_delay_s,
                               recovery_s, **elastic)

    lo, hi = math.log(max(start / 10, commit_delay_s, 1e-9)), math.log(start * 10)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(100):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if value(a) >= value(b):
            hi = b
        else:
            lo = a
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
