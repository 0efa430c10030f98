"""The planner's search: every configuration of the axes, checked, sized, pruned and timed.

1. **Enumerate** (:mod:`.candidates`) TP x CP x PP (DP is what remains of the GPUs) x EP
   (mixtures of experts: every EP dividing the experts and DP; with ``--etp``, expert TP x EP
   dividing a stage's ranks) x micro-batch x schedule x data parallelism x
   recompute. An axis the user lists is checked on its own first (a value
   that cannot divide what it splits is a one-line error); an omitted axis takes every value
   that divides (TP: the heads and the GPUs, CP: the sequence, PP: the layers; micro-batch:
   the per-replica batch; interleaved: every ``V > 1`` dividing the stage's layers). With one
   stage, only ``1f1b`` (plain gradient accumulation) is tried unless ``--schedule`` asks.
   Combinations that do not divide are *rejected* with the reason.
2. **Size** each one (:mod:`.memory`, closed form) and bound its step from below by its
   busiest stage's compute (:mod:`.compute`): the compute stream runs it all, one op at a time.
3. **Time** the ones that fit, fastest bound first, with the reduced evaluation
   (:mod:`.costs`, :mod:`.evaluate`); once ``top`` have been timed, a configuration whose
   bound exceeds the ``top``-th best step is *rejected* as pruned (it cannot rank in the top).
   Configurations that do not fit are rejected as such, unless fewer than ``top`` fit: then
   the smallest-bound ones are timed too, marked ``fits: false`` and ranked after.

Under a what-if's slow ranks and jitter (``factors``, one per GPU), each stage computes at its
slowest rank's pace (:func:`~commsim.plan.costs.stage_factors`), in the bound as in the timing.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from commsim.errors import SpecError
from commsim.gcpause import frozen_gc, paused_gc
from commsim.network import Network
from commsim.plan.bounds import (
    comm_bound,
    layer_costs,
    moe_costs,
    slow_bound,
    split_bound,
    step_bound,
)
from commsim.plan.candidates import (
    Rejected,
    SearchSpace,
    check_space,
    divisors,
    expert_axes,
    layouts,
    schedules,
    stage_split,
    unplaced,
)
from commsim.plan.compute import hardware_flops_per_token, model_flops_per_token
from commsim.plan.config import PlanConfig, rank_order
from commsim.plan.costs import estimate_step, pipeline_costs, stage_factors
from commsim.plan.device import DeviceSpec
from commsim.plan.memory import Memory, peak_memory
from commsim.plan.models import ModelSpec
from commsim.plan.overlap import unfit
from commsim.plan.stack import DEFAULT, Stack
from commsim.plan.timing import CollectiveTimer


@dataclass(frozen=True, slots=True)
class Evaluated:
    """A timed configuration and what the planner reports for it."""

    config: PlanConfig
    microbatches: int
    memory: Memory
    fits: bool
    record: dict[str, Any]


@dataclass(slots=True)
class PlanResult:
    """Ranked configurations (those that fit first, then fastest) and the rejected ones."""

    configs: list[Evaluated] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    considered: int = 0


@dataclass(frozen=True, slots=True)
class _Candidate:
    config: PlanConfig
    microbatches: int
    memory: Memory
    bound_s: float
    factors: tuple[float, ...] = ()  #: each stage's compute factor (empty: healthy)
    #: under factors, each stage's term of the bound, which its TP/CP traffic adds to
    stage_bounds: tuple[float, ...] = ()


def enumerate_candidates(model: ModelSpec, device: DeviceSpec, *, gpus: int, global_batch: int,
                         space: SearchSpace, result: PlanResult, stack: Stack = DEFAULT,
                         factors: np.ndarray | None = None) -> list[_Candidate]:
    """Every configuration that divides, sized and bounded (rejections into ``result``;
    ``factors``: each GPU's compute factor under a what-if)."""
    check_space(model, gpus, space)
    out: list[_Candidate] = []
    memo: dict[tuple[object, ...], Any] = {}  # per-stage costs and bounds (_candidate)
    order = rank_order(model.moe is not None)
    for tp, cp, pp, dp in layouts(model, gpus, space, result.rejected):
        axes: dict[str, Any] = {"tp": tp, "cp": cp, "pp": pp, "dp": dp}
        per_stage = (None if factors is None
                     else _layout_factors(factors, tp * cp, pp, dp, order))
        if global_batch % dp:
            result.rejected.append(Rejected(axes, f"dp {dp} does not divide the global batch "
                                                  f"({global_batch})"))
            continue
        for mb in space.micro_batch or divisors(global_batch // dp):
            if global_batch % (mb * dp):
                result.rejected.append(Rejected({**axes, "micro_batch": mb},
                                                f"micro_batch x dp = {mb * dp} does not divide "
                                                f"the global batch ({global_batch})"))
                continue
            k = global_batch // (mb * dp)
            eps = expert_axes(model, tp, cp, dp, space, {**axes, "micro_batch": mb},
                              result.rejected)
            splits = {rc: stage_split(model, device, space, stack, tp, cp, pp, mb, rc)
                      for rc in space.recompute}
            uneven = sorted({sp for sp in splits.values() if sp})
            for name, v in schedules(model, pp, k, space, {**axes, "micro_batch": mb},
                                     result.rejected, uneven):
                for dpm, rc, (ep, etp) in itertools.product(space.data_parallel,
                                                            space.recompute, eps):
                    cfg = PlanConfig(tp=tp, cp=cp, pp=pp, dp=dp, micro_batch=mb, schedule=name,
                                     chunks=v, data_parallel=dpm, recompute=rc, ep=ep,
                                     etp=etp, stage_layers=splits[rc], order=order)
                    why = unplaced(cfg.stage_layers, v) if cfg.stage_layers else None
                    if model.moe is not None:  # --moe-overlap: nothing for a dense model
                        why = why or unfit(cfg, k, stack)
                    if why:
                        result.rejected.append(Rejected(cfg.axes(), why))
                    else:
                        out.append(_candidate(model, device, cfg, k, stack, per_stage, memo))
    result.considered = len(out) + len(result.rejected)
    return out


def _layout_factors(factors: np.ndarray, tpcp: int, pp: int, dp: int,
                    order: str) -> tuple[float, ...]:
    """Each stage's compute factor (:func:`~commsim.plan.costs.stage_factors`) of a layout."""
    cfg = PlanConfig(tp=tpcp, cp=1, pp=pp, dp=dp, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="ddp", recompute="none", order=order)
    return stage_factors(cfg, factors)


def _candidate(model: ModelSpec, device: DeviceSpec, cfg: PlanConfig, k: int,
               stack: Stack, per_stage: tuple[float, ...] | None = None,
               memo: dict[tuple[object, ...], Any] | None = None) -> _Candidate:
    """A configuration's memory and compute bound; ``memo``: one search's (one model and
    stack) per-stage costs, kept between configurations."""
    mem = peak_memory(model, tp=cfg.tp, cp=cfg.cp, pp=cfg.pp, dp=cfg.dp,
                      micro_batch=cfg.micro_batch, microbatches=k, schedule=cfg.schedule,
                      chunks=cfg.chunks, data_parallel=cfg.data_parallel,
                      recompute=cfg.recompute, stack=stack, ep=cfg.ep,
                      stage_layers=cfg.stage_layers, memo=memo, etp=cfg.etp)
    # NOTE: the bounds read neither dp (but through k) nor the data parallelism nor the
    # schedule's name (but through its chunks): one per key, a quarter of the calls
    # (benchmarks/plan_speed.py: deepseek-v3, 86,525 configurations)
    bkey = (cfg.tp, cfg.cp, cfg.pp, cfg.micro_batch, cfg.recompute, cfg.ep, cfg.etp,
            cfg.chunks, k)
    if cfg.stage_layers:
        factors = per_stage or (1.0,) * cfg.pp
        stages = _memoised(memo, ("split_bound", *bkey, cfg.stage_layers, cfg.order, factors),
                           lambda: split_bound(model, device, cfg, k, stack, factors))
        return _Candidate(cfg, k, mem, max(stages), per_stage or (), stages)
    if per_stage is None:
        return _Candidate(cfg, k, mem, _memoised(
            memo, ("step_bound", *bkey), lambda: step_bound(model, device, cfg, k, stack)))
    stages = _memoised(memo, ("slow_bound", *bkey, per_stage),
                       lambda: slow_bound(model, device, cfg, k, stack, per_stage))
    return _Candidate(cfg, k, mem, max(stages), per_stage, stages)


def _memoised(memo: dict[tuple[object, ...], Any] | None, key: tuple[object, ...],
              make: Callable[[], Any]) -> Any:
    """``make()``, kept in ``memo`` under ``key`` (None: not kept)."""
    if memo is None:
        return make()
    out = memo.get(key)
    if out is None:
        out = memo[key] = make()
    return out


def _record(model: ModelSpec, device: DeviceSpec, c: _Candidate, timer: CollectiveTimer,
            global_batch: int, stack: Stack) -> Evaluated:
    cfg = c.config
    times = layer_costs(model, device, cfg.tp, cfg.cp, cfg.micro_batch, cfg.recompute, stack)
    est = estimate_step(pipeline_costs(cfg, model, times, timer, c.microbatches, stack=stack,
                                       device=device, compute_factor=c.factors,
                                       moe=moe_costs(model, device, cfg, stack)))
    tokens_per_s = global_batch * model.seq / est.step_time_s
    mflops = model_flops_per_token(model) * tokens_per_s / cfg.world
    hflops = hardware_flops_per_token(model, cfg.recompute) * tokens_per_s / cfg.world
    fits = c.memory.total <= device.memory_bytes
    record = {
        **cfg.axes(),
        "stage_layers": list(cfg.split(model.layers)),
        "microbatches": c.microbatches,
        "step_time_s": est.step_time_s,
        "tokens_per_s": tokens_per_s,
        "model_tflops_per_gpu": mflops / 1e12,
        "hardware_tflops_per_gpu": hflops / 1e12,
        "mfu": mflops / device.peak_flops,
        "compute_time_s": est.compute_s,
        "exposed_comm_s": est.exposed_comm_s,
        "bubble_fraction": est.bubble_fraction,
        "peak_memory_bytes": c.memory.total,
        "memory": c.memory.as_dict(),
        "fits": fits,
    }
    if model.moe is not None:  # the busiest expert-parallel rank's tokens over the even share
        record["expert_load"] = model.moe.load(cfg.ep)
    return Evaluated(cfg, c.microbatches, c.memory, fits, record)


def run_search(model: ModelSpec, network: Network, device: DeviceSpec, *, gpus: int,
               global_batch: int, space: SearchSpace, top: int = 10,
               progress: Callable[[int], Any] | None = None,
               total: Callable[[int], Any] | None = None,
               stack: Stack = DEFAULT, engine: str = "analytic",
               factors: np.ndarray | None = None) -> PlanResult:
    """Search (see the module docstring); ``top = 0`` times every configuration that fits;
    ``stack``: the software's choices (:mod:`.stack`); ``engine``: how collectives are timed
    (:class:`~commsim.plan.timing.CollectiveTimer`); ``factors``: each GPU's compute factor
    under a what-if (None: healthy).

    ``total(n)`` is told how many configurations may be timed, ``progress(1)`` after each.
    """
    if gpus > network.ranks:
        raise SpecError(f"--gpus {gpus}: topology {network.name!r} has {network.ranks} ranks")
    result = PlanResult()
    # NOTE: ~100,000 configurations, each a few objects that live to the end and make no
    # cycles: the cyclic collector's full collections, each scanning them all, were 0.5-0.7 s
    # of deepseek-v3's search on dgx-h100x256 (benchmarks/plan_speed.py). It is paused while
    # they are made and sorted; while collectives are timed (the DES makes cycles) it runs,
    # the configurations frozen out of its scans.
    with paused_gc():
        cands = enumerate_candidates(model, device, gpus=gpus, global_batch=global_batch,
                                     space=space, result=result, stack=stack, factors=factors)
        if not cands:
            raise SpecError(f"no configuration of {model.name} on {gpus} GPUs is left: "
                            f"{_commonest(result.rejected)}")
        order = sorted(cands, key=lambda c: (c.bound_s, c.config.label()))
    with frozen_gc():
        return _rank(model, network, device, order, result, gpus=gpus,
                     global_batch=global_batch, top=top, progress=progress, total=total,
                     stack=stack, engine=engine)


def _commonest(rejected: list[Rejected]) -> str:
    """The reason most of ``rejected`` give (the first of those as common), and how many."""
    if not rejected:
        return "the search space is empty"
    counts = Counter(r.reason for r in rejected)
    reason, n = counts.most_common(1)[0]
    return f"{reason} ({n} of {len(rejected)} rejected for that)" if n > 1 else reason


def _rank(model: ModelSpec, network: Network, device: DeviceSpec, order: list[_Candidate],
          result: PlanResult, *, gpus: int, global_batch: int, top: int,
          progress: Callable[[int], Any] | None, total: Callable[[int], Any] | None,
          stack: Stack, engine: str) -> PlanResult:
    """Time the configurations in ``order`` (fastest bound first) that fit, pruning; or, if
    fewer than ``top`` fit, the fastest others too; rank them (see the module)."""
    fitting: list[_Candidate] = []
    spill: list[_Candidate] = []
    for c in order:
        (fitting if c.memory.total <= device.memory_bytes else spill).append(c)
    timer = CollectiveTimer(network, engine)
    if total:
        total(len(fitting) if fitting else min(len(spill), max(top, 1)))
    best: list[float] = []  # max-heap (negated) of the top step times
    timed = _time_all(model, device, fitting, timer, global_batch, top, best, result, progress,
                      stack)
    missing = max(top, 1) - len(timed) if top else (0 if fitting else 1)
    i = 0
    while i < len(spill) and missing > 0:  # fewer than top fit: the fastest others are timed
        c, i = spill[i], i + 1
        try:
            timed.append(_record(model, device, c, timer, global_batch, stack))
            missing -= 1
        except SpecError as exc:  # none fits, and this one is past what commsim times
            result.rejected.append(Rejected(c.config.axes(), f"not timed: {exc}",
                                            c.memory.total))
    with paused_gc():  # objects that make no cycles (deepseek-v3 on dgx-h100x256: 71,796)
        _reject_unfit(spill[i:], device, result)
    if not timed:
        raise SpecError(f"no configuration of {model.name} on {gpus} GPUs could be timed: "
                        f"{result.rejected[-1].reason}")
    timed.sort(key=lambda e: (not e.fits, e.record["step_time_s"], e.config.label()))
    result.configs = timed
    return result


def _reject_unfit(cands: list[_Candidate], device: DeviceSpec, result: PlanResult) -> None:
    """Reject ``cands`` as not fitting the GPU's memory."""
    has = f"the GPU has {device.memory_bytes / 2**30:.1f} GiB"
    for c in cands:
        need = c.memory.total
        result.rejected.append(Rejected(c.config.axes(), f"does not fit: needs "
                                        f"{need / 2**30:.1f} GiB, {has}", need))


def _time_all(model: ModelSpec, device: DeviceSpec, cands: list[_Candidate],
              timer: CollectiveTimer, global_batch: int, top: int, best: list[float],
              result: PlanResult, progress: Callable[[int], Any] | None,
              stack: Stack) -> list[Evaluated]:
    timed: list[Evaluated] = []
    for c in cands:
        if top and len(best) >= top:
            bound, what = c.bound_s, "compute alone"
            if bound <= -best[0]:
                what = "compute and TP/CP traffic"
                bound = (max(b + comm_bound(model, c.config, c.microbatches, timer, p, stack)
                             for p, b in enumerate(c.stage_bounds)) if c.stage_bounds
                         else bound + comm_bound(model, c.config, c.microbatches, timer,
                                                 stack=stack))
            if bound > -best[0]:
                result.rejected.append(Rejected(
                    c.config.axes(), f"pruned: its {what} ({bound:.4g} s) exceeds the "
                    f"{top}th best step ({-best[0]:.4g} s)", c.memory.total))
                continue
        e = _record(model, device, c, timer, global_batch, stack)
        timed.append(e)
        heapq.heappush(best, -e.record["step_time_s"])
        if top and len(best) > top:
            heapq.heappop(best)
        if progress:
            progress(1)
    return timed


def retime(model: ModelSpec, device: DeviceSpec, e: Evaluated, timer: CollectiveTimer,
           stack: Stack = DEFAULT) -> float:
    """The step of an evaluated configuration timed again by ``timer`` (another machine, e.g.
    the healthy one beside a what-if's), every rank at its healthy pace."""
    cfg = e.config
    times = layer_costs(model, device, cfg.tp, cfg.cp, cfg.micro_batch, cfg.recompute, stack)
    return estimate_step(pipeline_costs(cfg, model, times, timer, e.microbatches, stack=stack,
                                        device=device,
                                        moe=moe_costs(model, device, cfg, stack))).step_time_s
