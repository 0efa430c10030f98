"""A configuration's communication groups (:class:`~commsim.plan.config.PlanConfig`'s), each
built once per layout.

A group reads only the layout (the order, TP, CP, PP, DP, EP and expert TP sizes), which the
configurations of a search share by the dozen (every micro-batch, schedule, data parallelism
and recompute): the search's bounds and timing ask for them per configuration, and building
a data-parallel or expert-parallel group of ~1,000 ranks rank by rank each time was about a
third of the work of ``plan deepseek-v3 -t dgx-h100x256``'s timing besides the collectives
themselves (cProfile, the collectives already timed; ``benchmarks/plan_speed.py``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from commsim.plan.config import PlanConfig

#: The :class:`PlanConfig` methods giving one group.
Kind = Literal["tp_group", "cp_group", "dp_group", "ep_group", "etp_group", "expert_dp_group"]


def group(cfg: PlanConfig, kind: Kind, *at: int) -> tuple[int, ...]:
    """``cfg.<kind>(*at)``, memoised per layout."""
    return _group(kind, cfg.order, cfg.tp, cfg.cp, cfg.pp, cfg.dp, cfg.ep, cfg.etp, at)


def ep_groups(cfg: PlanConfig, stage: int) -> tuple[tuple[int, ...], ...]:
    """``cfg.ep_groups(stage)``, memoised per layout."""
    return _ep_groups(cfg.order, cfg.tp, cfg.cp, cfg.pp, cfg.dp, cfg.ep, cfg.etp, stage)


def _layout(order: str, tp: int, cp: int, pp: int, dp: int, ep: int, etp: int) -> PlanConfig:
    """A configuration of the layout (its other fields do not enter a group)."""
    return PlanConfig(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, etp=etp, order=order, micro_batch=1,
                      schedule="1f1b", chunks=1, data_parallel="ddp", recompute="none")


# NOTE: bounded: a group holds at most the GPUs (a few thousand ranks in the presets)
@lru_cache(maxsize=1024)
def _group(kind: Kind, order: str, tp: int, cp: int, pp: int, dp: int, ep: int, etp: int,
           at: tuple[int, ...]) -> tuple[int, ...]:
    out: tuple[int, ...] = getattr(_layout(order, tp, cp, pp, dp, ep, etp), kind)(*at)
    return out


@lru_cache(maxsize=256)
def _ep_groups(order: str, tp: int, cp: int, pp: int, dp: int, ep: int, etp: int,
               stage: int) -> tuple[tuple[int, ...], ...]:
    return tuple(_layout(order, tp, cp, pp, dp, ep, etp).ep_groups(stage))
