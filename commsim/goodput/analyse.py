"""One goodput answer: the closed form for a spec, optionally the simulation beside it, as a
dict (``--json``) or text.

:func:`analyse` picks the interval (the best one, or the spec's), computes the closed form,
runs the simulation when asked, and with ``elastic`` compares waiting for a spare with an
elastic restart, each at its own best interval (or the spec's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from commsim.engine.failures import FailureModel
from commsim.errors import SpecError
from commsim.goodput import closed_form as cf
from commsim.goodput.checkpoint import CheckpointCost, checkpoint_cost
from commsim.goodput.simulate import DEFAULT_HORIZON_S, Simulated, simulate
from commsim.goodput.spec import GoodputSpec


@dataclass(frozen=True, slots=True)
class Policy:
    """One way of running (plain, wait for a spare, elastic): closed form and simulation."""

    name: str
    outcome: cf.Outcome
    simulated: Simulated | None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = self.outcome.as_dict()
        if self.simulated is not None:
            out["simulated_goodput"] = self.simulated.goodput
            out["simulated_ci95"] = self.simulated.ci95
        return out


@dataclass(frozen=True, slots=True)
class Analysis:
    """``commsim goodput``'s answer (see :meth:`to_dict` for the fields)."""

    spec: GoodputSpec
    cost: CheckpointCost
    young_s: float | None
    daly_s: float | None
    plain: Policy
    spare: Policy | None = None
    elastic: Policy | None = None
    seed: int = 0
    horizon_s: float = DEFAULT_HORIZON_S

    @property
    def recovery_s(self) -> float:
        return recovery_s(self.spec, self.cost)

    def to_dict(self) -> dict[str, Any]:
        """The contract's keys (``goodput``, ``interval_s``, ``checkpoint_s``,
        ``failures_per_day``, ``wall_time_s``; ``simulated_goodput``, ``simulated_ci95``) and
        the inputs and costs they come from."""
        s, c = self.spec, self.cost
        out: dict[str, Any] = {
            "gpus": s.gpus, "nodes": s.nodes, "step_time_s": s.step_time_s,
            "step_source": s.step_source,
            "failures_per_day": s.rate_per_s * 86400, "mtbf_s": _mtbf(s),
            "checkpoint_bytes": s.checkpoint_bytes, "writers": s.writers,
            "async": s.async_checkpoint, "checkpoint_s": c.blocking_s,
            "write_s": c.write_s, "read_s": c.read_s, "recovery_s": self.recovery_s,
            "young_interval_s": self.young_s, "daly_interval_s": self.daly_s,
            **self.plain.as_dict(),
        }
        if self.plain.simulated is not None:
            out.update(simulated_runs=self.plain.simulated.runs, seed=self.seed,
                       simulated_work_s=s.work_s or self.horizon_s,
                       simulated_failures_per_run=self.plain.simulated.failures_per_run)
        if self.spare is not None and self.elastic is not None:
            out["spare_wait_s"] = s.spare_wait_s
            out["elastic_slowdown"] = s.slowdown
            out["wait_for_spare"] = self.spare.as_dict()
            out["elastic"] = self.elastic.as_dict()
        return out


def _mtbf(spec: GoodputSpec) -> float | None:
    return 1 / spec.rate_per_s if spec.rate_per_s > 0 else None


def recovery_s(spec: GoodputSpec, cost: CheckpointCost) -> float:
    """After a failure until training resumes: restart, re-queue, read the checkpoint."""
    return spec.restart_s + spec.requeue_s + cost.read_s


def _interval(spec: GoodputSpec, cost: CheckpointCost, best: float) -> float:
    """The spec's interval (at least the background write), or ``best``, at least a step."""
    if spec.interval_s is None:
        return max(best, spec.step_time_s)
    return max(spec.interval_s, cost.commit_delay_s)


def _wall(spec: GoodputSpec, goodput: float) -> float | None:
    work = spec.work_s
    if work is None:
        return None
    return work / goodput if goodput > 0 else math.inf


def _model(spec: GoodputSpec, cost: CheckpointCost, interval_s: float, horizon_s: float,
           **kw: Any) -> FailureModel:
    return FailureModel(rate_per_s=spec.rate_per_s, interval_s=interval_s,
                        blocking_s=cost.blocking_s, commit_delay_s=cost.commit_delay_s,
                        restart_s=kw.pop("restart_s", recovery_s(spec, cost)),
                        work_s=spec.work_s or horizon_s, **kw)


def analyse(spec: GoodputSpec, *, runs: int | None = None, seed: int = 0,
            horizon_s: float | None = None, elastic: bool = False,
            progress: bool = False) -> Analysis:
    """The closed form for ``spec``; with ``runs``, the mean of that many seeded simulated
    runs beside it; with ``elastic``, waiting for a spare against an elastic restart."""
    cost = checkpoint_cost(spec)
    lam, rec = spec.rate_per_s, recovery_s(spec, cost)
    horizon = DEFAULT_HORIZON_S if horizon_s is None else horizon_s
    young = daly = None
    best = math.inf
    if lam > 0:
        young = cf.young_interval(lam, cost.blocking_s)
        daly = cf.daly_interval(lam, cost.blocking_s)
        best = cf.best_interval(lam, cost.blocking_s, cost.commit_delay_s)

    def policy(name: str, interval: float, g: float, **kw: Any) -> Policy:
        sim = None
        if runs is not None:
            model = _model(spec, cost, interval, horizon, **kw)
            sim = simulate(model, runs, seed, expected_goodput=g, progress=progress)
        return Policy(name, cf.Outcome(interval, g, _wall(spec, g)), sim)

    tau = _interval(spec, cost, best)
    plain = policy("plain", tau, cf.goodput(lam, tau, cost.blocking_s, cost.commit_delay_s, rec))
    if not elastic:
        return Analysis(spec, cost, young, daly, plain, seed=seed, horizon_s=horizon)
    wait = rec + spec.spare_wait_s  # the best interval does not depend on the recovery
    spare = policy("wait for spare", tau,
                   cf.goodput(lam, tau, cost.blocking_s, cost.commit_delay_s, wait),
                   restart_s=wait)
    knobs = {"rejoin_s": spec.restart_s + cost.read_s, "repair_s": spec.spare_wait_s,
             "slowdown": spec.slowdown}
    e_best = (cf.best_elastic_interval(lam, cost.blocking_s, cost.commit_delay_s, rec,
                                       shortest_s=spec.step_time_s, **knobs)
              if lam > 0 and spec.interval_s is None else math.inf)  # else the spec's
    tau_e = _interval(spec, cost, e_best)
    live = spec.spare_wait_s - rec
    terms = (cf.elastic_terms(lam, tau_e + cost.blocking_s, cost.commit_delay_s
                              + knobs["rejoin_s"], live) if lam > 0 and live > 0 else 0.0)
    if terms > cf.MOST_TERMS:
        raise SpecError(f"--interval {tau_e:g}s with --spare-wait {spec.spare_wait_s:g}s: the "
                        f"elastic closed form would add up {terms:,.0f} terms, over "
                        f"{cf.MOST_TERMS:,} (a longer --interval or a shorter --spare-wait)")
    g_e = cf.elastic_goodput(lam, tau_e, cost.blocking_s, cost.commit_delay_s, rec, **knobs)
    flex = policy("elastic", tau_e, g_e, elastic=True, **knobs)
    return Analysis(spec, cost, young, daly, plain, spare, flex, seed=seed, horizon_s=horizon)
