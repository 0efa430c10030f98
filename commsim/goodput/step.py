"""The step time ``goodput`` needs, from commsim's own answers: the fastest configuration
``plan`` finds for a model on a cluster, or the replay of a workload.

After a node is lost, an elastic restart runs on the nodes that remain: its step is the plan of
the same model and global batch with the full run's model-parallel group (TP x CP x PP) and as
many data-parallel replicas as fit in the GPUs left and divide the global batch
(:func:`elastic_step`; the course's elastic checkpoints reshard the same states over fewer
replicas): a 64-node job of 8-GPU replicas whose batch is a power of two runs on 32 replicas
after losing one node. So the comparison with waiting for a spare uses the model, never a
guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from commsim.errors import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """A step time and where it came from: ``source`` names the configuration (``plan``) or
    the workload (``replay``); ``tokens`` per step where known (a plan's global batch x seq)."""

    time_s: float
    source: str
    tokens: int | None = None
    #: GPUs of one model replica (TP x CP x PP) of the planned configuration.
    model_parallel: int | None = None


def planned_step(model: str, topology: str | Path, *, global_batch: int, gpus: int) -> Step:
    """The step of the fastest configuration that fits of ``model`` on ``gpus`` GPUs of
    ``topology`` (``commsim plan``'s first row), SpecError when none fits."""
    from commsim.plan import plan

    outcome = plan(model, topology, global_batch=global_batch, gpus=gpus, top=1)
    fitting = [e for e in outcome.result.configs if e.fits]
    if not fitting:
        raise SpecError(f"--global-batch {global_batch}: no configuration of {model} fits "
                        f"{gpus} GPUs of {outcome.network.name} ('commsim plan' says why)")
    best = fitting[0]
    r = best.record
    return Step(time_s=float(r["step_time_s"]),
                source=f"plan: {best.config.label()} on {gpus} GPUs",
                tokens=global_batch * outcome.model.seq,
                model_parallel=int(r["tp"]) * int(r["cp"]) * int(r["pp"]))


def elastic_step(model: str, topology: str | Path, *, global_batch: int, gpus: int,
                 gpus_per_node: int, full: Step) -> Step:
    """The planned step after a node of ``gpus`` is lost: ``full``'s model-parallel group
    times the most data-parallel replicas that fit in the GPUs left and divide
    ``global_batch``."""
    group = full.model_parallel or 1
    left = gpus - gpus_per_node
    replicas = max((d for d in range(1, left // group + 1) if global_batch % d == 0), default=0)
    if replicas == 0:
        raise SpecError(f"--elastic: one replica of {group} GPUs does not fit in the {left} "
                        "GPUs left after a node is lost")
    return planned_step(model, topology, global_batch=global_batch, gpus=group * replicas)


def replayed_step(workload: str | Path, topology: str | Path) -> Step:
    """The step time of ``commsim replay WORKLOAD --topology TOPOLOGY``."""
    from commsim.replay import replay

    result = replay(workload, topology)
    return Step(time_s=float(result.metrics.step_time_s), source=f"replay: {workload}")
