"""Training-step replay: DDP, FSDP, pipeline, tensor and hybrid parallelism on the network.

A workload (YAML or a dict, validated into a spec) lowers to a step graph of compute and
communication tasks on each rank's streams (:mod:`.graph`); the step graph runs on the same
engine and schedules as ``commsim run`` (:mod:`.lower`), so concurrent collectives contend for
shared links; metrics (:mod:`.metrics`) say how long the step took and how much of its
communication hid under compute. :mod:`commsim.bound` has the FSDP compute-bound condition.

>>> r = replay({"kind": "ddp", "layers": 2, "forward_time": "1ms", "backward_time": "10ms",
...             "grad_bytes": "25MiB", "algorithm": "ring"}, "dgx-h100")
>>> r.metrics.compute_time_s == 22e-3, 0 < r.overlap_fraction < 1
(True, True)
"""

from commsim.replay.ddp import DdpSpec, Layer
from commsim.replay.fsdp import FsdpSpec
from commsim.replay.graph import GraphBuilder, StepGraph, Task, TaskKind
from commsim.replay.hybrid import HybridSpec, Parallel
from commsim.replay.lower import GraphTiming, time_graph
from commsim.replay.metrics import RankMetrics, StepMetrics, step_metrics
from commsim.replay.pipeline import PipelineSpec, PipeOp, stage_orders
from commsim.replay.step import KINDS, StepResult, load_workload, replay, workload_from_dict
from commsim.replay.tensor import TensorSpec
from commsim.replay.transformer import Model

__all__ = [
    "KINDS",
    "DdpSpec",
    "FsdpSpec",
    "GraphBuilder",
    "GraphTiming",
    "HybridSpec",
    "Layer",
    "Model",
    "Parallel",
    "PipeOp",
    "PipelineSpec",
    "RankMetrics",
    "StepGraph",
    "StepMetrics",
    "StepResult",
    "Task",
    "TaskKind",
    "TensorSpec",
    "load_workload",
    "replay",
    "stage_orders",
    "step_metrics",
    "time_graph",
    "workload_from_dict",
]
