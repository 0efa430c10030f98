"""Fully sharded data parallelism (PyTorch FSDP, ZeRO-3): gather before use, reduce-scatter after.

The model is ``units`` FSDP units, each of ``params_per_unit`` parameters sharded over every
rank of the topology. On each rank, in the model of PyTorch FSDP used here:

* forward: unit ``i``'s parameters are all-gathered (``params_per_unit * bytes_per_param``
  bytes, nccl-tests' size) before its forward. With ``prefetch`` ``d`` the all-gather of unit
  ``i`` is issued once the forward of unit ``i - 1 - d`` has ended (``d = 0``: when unit ``i``
  is about to run; ``d = 1``: one unit ahead, FSDP's ``forward_prefetch``);
* ``reshard_after_forward``: the gathered parameters are freed after each unit's forward and
  all-gathered again before its backward (issued, with the same depth, once the backward of unit
  ``j + 1 + d`` has ended); off, they stay gathered from forward to the end of the unit's
  backward (ZeRO-2-like: more memory, no second all-gather);
* backward runs the units in reverse; after unit ``j``'s backward its gradients are
  reduce-scattered (same size) and the unsharded gradients freed;
* all-gathers and reduce-scatters run on two communication streams (as FSDP's all-gather and
  reduce-scatter streams), each in order; they contend for links when they overlap;
* the step ends with ``optimizer_time`` after the last reduce-scatter.

Memory per rank: the sharded parameters, gradients and Adam states, ``2 + 2 + 12`` bytes per
parameter (mixed-precision Adam) over the ranks, plus at each instant the gathered parameters
(from the all-gather's start to their free), the unsharded gradients (from the backward's start
to the reduce-scatter's end) and ``activation_bytes`` per unit (from its forward's end to its
backward's end); ``peak_memory_bytes`` is the largest total.

With prefetch and forward compute ``F`` per unit, an all-gather of time ``g`` is hidden when
``F >= g`` (the forward takes ``g + units * F``) and otherwise exposes ``g - F`` per unit
after the first (``units * g + F``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from commsim.errors import SpecError
from commsim.network import Network
from commsim.replay import fields
from commsim.replay.graph import GraphBuilder, StepGraph, check_tasks
from commsim.replay.metrics import StepMetrics

KIND = "fsdp"
#: Bytes per parameter held sharded for mixed-precision Adam: weights, gradients, fp32 states.
STATE_BYTES_PER_PARAM = 2 + 2 + 12


@dataclass(frozen=True, slots=True, kw_only=True)
class FsdpSpec:
    """``kind: fsdp``: fully sharded over all ranks of the topology.

    Attributes
    ----------
    units, params_per_unit
        FSDP units and the parameters of each.
    bytes_per_param
        Bytes of a gathered parameter and of its gradient (2 for bf16).
    forward_time_s, backward_time_s
        Per unit (one value per unit).
    prefetch
        All-gathers issued ahead (0: none).
    reshard_after_forward
        Free gathered parameters after forward and gather them again for backward.
    activation_bytes
        Activations each unit keeps from its forward to its backward (per rank).
    all_gather_algorithm, reduce_scatter_algorithm
        Algorithms of the collectives (``auto``: the lowest closed-form cost).
    optimizer_time_s
        Optimizer step after the last reduce-scatter.
    forward_only
        Replay only the forward pass (no backward, no reduce-scatter, no optimizer).
    """

    units: int
    params_per_unit: int
    bytes_per_param: int = 2
    forward_time_s: tuple[float, ...]
    backward_time_s: tuple[float, ...]
    prefetch: int = 1
    reshard_after_forward: bool = True
    activation_bytes: int = 0
    all_gather_algorithm: str = "auto"
    reduce_scatter_algorithm: str = "auto"
    optimizer_time_s: float = 0.0
    forward_only: bool = False

    def __post_init__(self) -> None:
        fields.positive_int(self.units, "units")
        fields.positive_int(self.params_per_unit, "params_per_unit")
        fields.positive_int(self.bytes_per_param, "bytes_per_param")
        fields.nonnegative_int(self.prefetch, "prefetch")
        for name in ("forward_time_s", "backward_time_s"):
            if len(getattr(self, name)) != self.units:
                raise SpecError(f"{name[:-2]}: need one value per unit ({self.units})")
        if self.activation_bytes < 0:
            raise SpecError(f"activation_bytes: must be >= 0, got {self.activation_bytes}")

    @property
    def kind(self) -> str:
        return KIND

    @property
    def unit_bytes(self) -> int:
        """Bytes of one gathered unit (the all-gather's and reduce-scatter's size)."""
        return self.params_per_unit * self.bytes_per_param

    def sharded_bytes(self, ranks: int) -> int:
        """Per rank: sharded weights, gradients and optimizer states (16 B per parameter)."""
        return math.ceil(self.units * self.params_per_unit / ranks) * STATE_BYTES_PER_PARAM

    def graph(self, network: Network) -> StepGraph:
        """The step on every rank of ``network``."""
        world = network.ranks
        group = tuple(range(world))
        builder = GraphBuilder(world)
        fwd = self._forward(builder, group)
        if not self.forward_only:
            self._backward(builder, group, fwd)
        return builder.build(self._static(world))

    def _forward(self, builder: GraphBuilder, group: tuple[int, ...]) -> list[list[int]]:
        """Each unit's all-gather (``prefetch`` units ahead) and forward; per unit, its tasks."""
        u, d, g, a = self.units, self.prefetch, self.unit_bytes, self.activation_bytes
        reshard = self.reshard_after_forward
        fwd: list[list[int]] = []
        for i in range(u):
            deps = fwd[i - 1 - d] if i - 1 - d >= 0 else []
            ag = builder.collective(
                group,
                "all_gather",
                g,
                algorithm=self.all_gather_algorithm,
                name=f"allgather u{i}",
                phase="forward",
                deps=deps,
                stream="all_gather",
                mem_start=g,
            )
            fwd.append(
                [
                    builder.compute(
                        r,
                        self.forward_time_s[i],
                        name=f"fwd u{i}",
                        phase="forward",
                        deps=(ag,),
                        mem_end=a - (g if reshard else 0),
                    )
                    for r in group
                ]
            )
        return fwd

    def _backward(
        self, builder: GraphBuilder, group: tuple[int, ...], fwd: list[list[int]]
    ) -> None:
        """Backward in reverse unit order (re-gathering resharded units), each unit's
        reduce-scatter, then the optimizer."""
        u, d, g, a = self.units, self.prefetch, self.unit_bytes, self.activation_bytes
        reshard = self.reshard_after_forward
        bwd: dict[int, list[int]] = {}
        last_rs: int | None = None
        for j in reversed(range(u)):
            deps_b: list[int] = []
            if reshard:
                after = j + 1 + d
                trigger = bwd[after] if after < u else fwd[u - 1]
                deps_b = [
                    builder.collective(
                        group,
                        "all_gather",
                        g,
                        algorithm=self.all_gather_algorithm,
                        name=f"allgather u{j}",
                        phase="backward",
                        deps=trigger,
                        stream="all_gather",
                        mem_start=g,
                    )
                ]
            bwd[j] = [
                builder.compute(
                    r,
                    self.backward_time_s[j],
                    name=f"bwd u{j}",
                    phase="backward",
                    deps=deps_b,
                    mem_start=g,
                    mem_end=-g - a,
                )
                for r in group
            ]
            last_rs = builder.collective(
                group,
                "reduce_scatter",
                g,
                algorithm=self.reduce_scatter_algorithm,
                name=f"reducescatter u{j}",
                phase="backward",
                deps=bwd[j],
                stream="reduce_scatter",
                mem_end=-g,
            )
        if self.optimizer_time_s > 0:
            for r in group:
                builder.compute(
                    r,
                    self.optimizer_time_s,
                    name="optimizer",
                    phase="optimizer",
                    deps=() if last_rs is None else (last_rs,),
                )

    def _static(self, world: int) -> list[int]:
        return [self.sharded_bytes(world)] * world

    def extras(self, metrics: StepMetrics) -> dict[str, object]:
        return {
            "units": self.units,
            "unit_bytes": self.unit_bytes,
            "sharded_state_bytes": self.sharded_bytes(len(metrics.per_rank)),
        }


def parse(data: Mapping[str, Any]) -> FsdpSpec:
    """A ``kind: fsdp`` mapping -> :class:`FsdpSpec` (errors name the field)."""
    fields.check_keys(
        data,
        ("kind", "units", "params_per_unit", "forward_time", "backward_time"),
        (
            "bytes_per_param",
            "prefetch",
            "reshard_after_forward",
            "activation_bytes",
            "algorithm",
            "all_gather_algorithm",
            "reduce_scatter_algorithm",
            "optimizer_time",
            "forward_only",
        ),
        "",
        " for kind 'fsdp'",
    )
    units = fields.positive_int(data["units"], "units")
    check_tasks(2 * units, "units", units)  # a forward and a backward per unit
    default = fields.algorithm(data.get("algorithm", "auto"), "algorithm")

    def algo(key: str) -> str:
        return fields.algorithm(data[key], key) if key in data else default

    return FsdpSpec(
        units=units,
        params_per_unit=fields.count(data["params_per_unit"], "params_per_unit"),
        bytes_per_param=fields.positive_int(data.get("bytes_per_param", 2), "bytes_per_param"),
        forward_time_s=fields.each(
            data["forward_time"], "forward_time", units, fields.time, "unit"
        ),
        backward_time_s=fields.each(
            data["backward_time"], "backward_time", units, fields.time, "unit"
        ),
        prefetch=fields.nonnegative_int(data.get("prefetch", 1), "prefetch"),
        reshard_after_forward=fields.boolean(
            data.get("reshard_after_forward", True), "reshard_after_forward"
        ),
        activation_bytes=fields.size(data.get("activation_bytes", 0), "activation_bytes"),
        all_gather_algorithm=algo("all_gather_algorithm"),
        reduce_scatter_algorithm=algo("reduce_scatter_algorithm"),
        optimizer_time_s=fields.time(data.get("optimizer_time", 0), "optimizer_time"),
        forward_only=fields.boolean(data.get("forward_only", False), "forward_only"),
    )
