"""Capacity planning: which TP/CP/PP/DP split, micro-batch, schedule, data parallelism and
recompute trains a model fastest on a machine's GPUs, and does it fit in memory?

One module per concept: :mod:`.models` (catalogue and model files), :mod:`.device` (the
topology's ``device:`` block), :mod:`.compute` (FLOPs and the wave-roofline GEMM curve),
:mod:`.memory` (states, activations, buffers), :mod:`.timing` (collectives timed once per
shape), :mod:`.evaluate` and :mod:`.costs` (one pipeline's exact step), :mod:`.search`,
:mod:`.straggler` (a what-if's slow GPUs and the healthy step beside), and :mod:`.cli`. See
docs/planning.md.

>>> out = plan("gpt3-1.3b", "dgx-a100", global_batch=64, space=SearchSpace(tp=(1,), pp=(1,),
...            cp=(1,), micro_batch=(4,), data_parallel=("ddp",), recompute=("none",)))
>>> best = out.to_dict()["configs"][0]
>>> best["tp"], best["dp"], best["fits"], 0 < best["mfu"] < 1
(1, 8, True, True)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commsim.network import Network
from commsim.plan.device import DeviceSpec, network_device
from commsim.plan.models import ModelSpec, load_model
from commsim.plan.search import PlanResult, SearchSpace, run_search
from commsim.plan.stack import MEGATRON_2021, Stack
from commsim.plan.straggler import beside_healthy, compute_factors, note
from commsim.plan.workload import replay_workload, workload_dict
from commsim.timing import ENGINE_CHOICES
from commsim.topology import load_topology
from commsim.topology.degrade import apply_what_if
from commsim.topology.what_if import WhatIf, WhatIfSource

__all__ = ["MEGATRON_2021", "PlanOutcome", "SearchSpace", "Stack", "plan", "replay_workload",
           "workload_dict"]

#: The largest global batch searched (2^40 sequences): its divisors are found by trial division
#: up to its square root, about a second at this size.
MAX_GLOBAL_BATCH = 2**40
#: A configuration's axes, and the keys that are its work over its step (``healthy`` under a
#: what-if gives them for the healthy step).
HEALTHY_AXES = ("tp", "cp", "pp", "dp", "micro_batch", "schedule", "chunks_per_stage",
                "data_parallel", "recompute", "ep", "stage_layers")
HEALTHY_RATES = ("tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu")


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    """A search's inputs and :class:`~commsim.plan.search.PlanResult`."""

    model: ModelSpec
    network: Network
    device: DeviceSpec
    gpus: int
    global_batch: int
    result: PlanResult
    stack: Stack = dataclasses.field(default_factory=Stack)
    what_if: WhatIf | None = None  #: the what-if the plan ran under (None: healthy)

    def to_dict(self) -> dict[str, Any]:
        """The contract's JSON: model, topology, gpus, global_batch, seq, configs, rejected
        (and ``what_if``, its name, under a what-if)."""
        head = {} if self.what_if is None else {"what_if": self.what_if.name,
                                                "healthy": self._healthy()}
        return {
            **head,
            "model": self.model.name,
            "topology": self.network.name,
            "device": self.device.name,
            "gpu_memory_bytes": self.device.memory_bytes,
            "gpus": self.gpus,
            "global_batch": self.global_batch,
            "seq": self.model.seq,
            "params": self.model.params,
            "stack": dataclasses.asdict(self.stack),
            "considered": self.result.considered,
            "configs": [e.record for e in self.result.configs],
            "rejected": [
                {**r.axes, "reason": r.reason,
                 **({} if r.peak_memory_bytes is None
                    else {"peak_memory_bytes": r.peak_memory_bytes})}
                for r in self.result.rejected
            ],
        }

    def _healthy(self) -> dict[str, Any]:
        """The healthy machine's answer for the configurations re-timed on it (the top K), in
        the ranking's order: their axes, step and what follows from the step alone (tokens/s,
        model and hardware TFLOP/s per GPU, MFU: the same work over the healthy step)."""
        configs = []
        for e in self.result.configs:
            r, base = e.record, e.record.get("healthy_step_time_s")
            if not isinstance(base, float) or base <= 0:
                continue
            scale = r["step_time_s"] / base
            configs.append({
                **{k: r[k] for k in HEALTHY_AXES if k in r}, "step_time_s": base,
                **{k: r[k] * scale for k in HEALTHY_RATES}, "fits": r["fits"]})
        return {"model": self.model.name, "topology": self.network.name, "gpus": self.gpus,
                "global_batch": self.global_batch, "seq": self.model.seq, "configs": configs}

    def table(self, top: int) -> str:
        """The ranked configurations as a text table (``top`` rows; 0: all)."""
        rows = self.result.configs if top == 0 else self.result.configs[:top]
        # the config column is 44 wide (49 with EP sizes; longer labels overflow it); rows
        # with uneven stages, whose labels carry the split, widen it to the longest
        width = 49 if any(e.config.ep > 1 for e in rows) else 44
        if any(e.config.stage_layers for e in rows):
            width = max([width, *(len(e.config.label()) for e in rows)])
        head = (f"{'#':>3} {'config':{width}s} {'step':>9} {'tokens/s':>10} {'model':>6} "
                f"{'hw':>6} {'MFU':>5} {'exp.comm':>8} {'bubble':>6} {'memory':>9} fits")
        if self.what_if is not None:
            head += f" {'healthy':>9} {'slower':>6}"
            if self.what_if.changes_compute:
                head += "  slowest rank"
        lines = [
            f"{self.model.name} ({self.model.params / 1e9:.1f}B, seq {self.model.seq}) on "
            f"{self.gpus} x {self.device.name} ({self.network.name}), global batch "
            f"{self.global_batch}: {len(self.result.configs)} timed, "
            f"{len(self.result.rejected)} rejected of {self.result.considered}",
            "TFLOP/s per GPU: model (6N + attention) and hardware (with recompute)"
            + ("" if self.stack == Stack() else f"; stack: {self.stack.label()}"),
        ]
        if self.what_if is not None:
            lines += note(self.what_if, [e.record for e in rows])
        lines.append(head)
        for i, e in enumerate(rows, 1):
            r = e.record
            lines.append(
                f"{i:>3} {e.config.label():{width}s} {r['step_time_s']:>8.3f}s "
                f"{r['tokens_per_s']:>10.4g} {r['model_tflops_per_gpu']:>6.1f} "
                f"{r['hardware_tflops_per_gpu']:>6.1f} {r['mfu']:>5.1%} "
                f"{r['exposed_comm_s']:>7.3f}s {r['bubble_fraction']:>6.1%} "
                f"{r['peak_memory_bytes'] / 2**30:>5.1f} GiB {'yes' if e.fits else 'NO'}"
                + ("" if self.what_if is None else _beside(r))
            )
        return "\n".join(lines)


def _beside(r: dict[str, Any]) -> str:
    """A ranked row's what-if columns: the healthy step, the slowdown, the slowest rank and
    where it sits (stage, replica)."""
    slower = "" if r["slowdown"] is None else f"{r['slowdown']:.3f}x"
    base = r["healthy_step_time_s"]
    out = f" {'-':>9}" if base is None else f" {base:>8.3f}s"
    out += f" {slower:>6}"
    if "slowest_rank" in r:
        out += (f"  {r['slowest_rank']} (x{r['slowest_compute_factor']:.3g}, stage "
                f"{r['slowest_rank_stage']}, dp {r['slowest_rank_replica']})")
    return out


def plan(
    model: ModelSpec | str,
    topology: Network | str | Path | dict[str, object],
    *,
    global_batch: int,
    seq: int | None = None,
    gpus: int | None = None,
    space: SearchSpace | None = None,
    top: int = 10,
    gpu_memory: str | int | None = None,
    progress: bool = False,
    stack: Stack | None = None,
    engine: str = "analytic",
    what_if: WhatIfSource | None = None,
) -> PlanOutcome:
    """Search the configurations of ``model`` on ``topology`` (see :mod:`.search`) under the
    software ``stack`` (:mod:`.stack`; default: fused attention, sequence parallelism,
    overlapped gradient reduction; its ``precision``, ``bf16`` or ``fp8``, is each
    configuration's ``precision``, and MFU stays against the bf16 peak; its ``moe_overlap``
    and ``dispatcher``, taken as given and not searched, each one's). Collectives are timed by
    ``engine``: ``analytic`` (the default: the timing layer's closed forms, fast), ``des`` or
    ``auto`` (as ``replay`` times them: the DES up to 64 ranks).

    ``progress`` draws a tqdm bar on stderr (only on a terminal). ``what_if`` (a file, its
    mapping or a parsed :class:`~commsim.topology.what_if.WhatIf`, docs/what-if.md) plans on
    the degraded machine, each stage at its slowest rank's compute factor, and adds the
    healthy machine's step beside each configuration's (:mod:`.straggler`).
    """
    from commsim.errors import SpecError

    spec = load_model(model) if isinstance(model, str) else model
    if seq is not None:
        spec = dataclasses.replace(spec, seq=seq)
    healthy = network = load_topology(topology)
    parsed = None
    if what_if is not None:
        network, parsed = apply_what_if(network, what_if)
    device = network_device(network, gpu_memory)
    if engine not in ENGINE_CHOICES:
        raise SpecError(f"--engine {engine!r}: unknown (known: {', '.join(ENGINE_CHOICES)})")
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise SpecError(f"--global-batch {global_batch!r}: must be a positive integer")
    if global_batch > MAX_GLOBAL_BATCH:
        raise SpecError(f"--global-batch {global_batch}: above 2^40, the largest batch the "
                        "search factors (its micro-batches are the batch's divisors)")
    device.gemm_peak((stack or Stack()).precision)  # refuses fp8 on a device without it
    n = network.ranks if gpus is None else gpus
    factors = None
    if parsed is not None:
        factors = compute_factors(parsed, min(n, network.ranks), what_if)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc="plan", unit=" configs", disable=None, leave=False)
    try:
        result = run_search(
            spec, network, device, gpus=n, global_batch=global_batch,
            space=space or SearchSpace(), top=top,
            progress=bar.update if bar is not None else None,
            total=(lambda t: setattr(bar, "total", t)) if bar is not None else None,
            stack=stack or Stack(), engine=engine, factors=factors,
        )
    finally:
        if bar is not None:
            bar.close()
    for e in result.configs:
        e.record["precision"] = (stack or Stack()).precision
        e.record["moe_overlap"] = (stack or Stack()).moe_overlap
        e.record["dispatcher"] = (stack or Stack()).dispatcher
    if parsed is not None:
        beside_healthy(result, spec, device, healthy, engine=engine, stack=stack or Stack(),
                       factors=factors, top=top)
    return PlanOutcome(spec, network, device, n, global_batch, result, stack or Stack(), parsed)
