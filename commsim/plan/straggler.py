"""A plan on a machine that is not perfect: a what-if's slow ranks and jitter, and the healthy
step beside each configuration's.

One slow GPU slows the whole data-parallel group: its stage computes at its pace in every
replica, which wait for it at the gradient reduction, and the pipeline's other stages wait
for its sends (:func:`commsim.plan.costs.stage_factors`). Each of the ``top`` best
configurations' records gets the healthy machine's step (``healthy_step_time_s``) and the
``slowdown`` (its step over that one; both null for the configurations ranked below the top,
timed only to rank them); every timed configuration's, under slow ranks or jitter, the rank
that paces it: ``slowest_rank``, its ``slowest_compute_factor``, where it sits
(``slowest_rank_stage``, ``slowest_rank_replica``) and each stage's factor
(``stage_compute_factors``). See docs/what-if.md.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from commsim.network import Network
from commsim.plan.costs import slowest_rank, stage_factors
from commsim.plan.device import DeviceSpec
from commsim.plan.models import ModelSpec
from commsim.plan.search import PlanResult, retime
from commsim.plan.stack import Stack
from commsim.plan.timing import CollectiveTimer
from commsim.topology.what_if import WhatIf, factors_for

#: The record keys a what-if adds (the last five only under slow ranks or jitter).
KEYS = ("healthy_step_time_s", "slowdown", "slowest_rank", "slowest_compute_factor",
        "slowest_rank_stage", "slowest_rank_replica", "stage_compute_factors")


def compute_factors(what_if: WhatIf, gpus: int, source: object) -> np.ndarray | None:
    """Each of the ``gpus`` GPUs' compute factor under ``what_if`` (None: it changes no
    compute); a rank beyond them is a SpecError naming the file."""
    return factors_for(what_if, gpus, source) if what_if.changes_compute else None


def beside_healthy(result: PlanResult, model: ModelSpec, device: DeviceSpec,
                   healthy: Network, *, engine: str, stack: Stack,
                   factors: np.ndarray | None, top: int) -> None:
    """Add :data:`KEYS` to each ranked configuration's record: the ``top`` best (0: all)
    timed again on the ``healthy`` network with every rank at its healthy pace."""
    timer = CollectiveTimer(healthy, engine)
    configs = []
    for i, e in enumerate(result.configs):
        base = retime(model, device, e, timer, stack) if i < top or not top else None
        step = e.record["step_time_s"]
        extra: dict[str, object] = {
            "healthy_step_time_s": base,
            "slowdown": step / base if base is not None and base > 0 else None}
        if factors is not None:
            slow = slowest_rank(e.config, factors)
            extra.update(slowest_rank=slow["rank"], slowest_compute_factor=slow["factor"],
                         slowest_rank_stage=slow["stage"], slowest_rank_replica=slow["replica"],
                         stage_compute_factors=list(stage_factors(e.config, factors)))
        configs.append(replace(e, record={**e.record, **extra}))
    result.configs = configs


def note(what_if: WhatIf, records: list[dict[str, object]]) -> list[str]:
    """The ranking's lines about the what-if: what it is and which rank paces the step."""
    lines = [f"what-if {what_if.name!r}: step time on the degraded machine; 'healthy' is the "
             "same configuration's step without it"]
    if records and "slowest_rank" in records[0]:
        r = records[0]
        factor = r["slowest_compute_factor"]
        lines.append(
            f"rank {r['slowest_rank']} is the slowest GPU (compute x{factor:.3g}): its stage "
            "runs at its pace in every data-parallel replica, which wait for it at the "
            "gradient reduction, and the other stages wait for its pipeline sends")
    return lines
