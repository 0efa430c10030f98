"""Tensor parallelism (Megatron-LM): layers split over a TP group, all-reduces in between.

A transformer layer under Megatron-style TP runs its attention block and its MLP block sharded
over the ``tp`` ranks of a group; each block's output is all-reduced in forward (the ``g``
operator), and each block's input gradient is all-reduced in backward (the conjugate ``f``),
so a layer costs four all-reduces of the activation tensor (``micro_batch * seq * hidden *
bytes``) per micro-batch, none of which overlaps compute: the next block needs the result.

``kind: tensor`` splits the topology's ranks into consecutive groups of ``tp`` ranks (TP stays
inside a node when ``tp`` divides the GPUs per node), each running the same layers on its own
micro-batches at the same time, so the groups' all-reduces contend for shared links.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from commsim.errors import SpecError
from commsim.network import Network
from commsim.replay import fields
from commsim.replay.graph import GraphBuilder, StepGraph, check_tasks
from commsim.replay.metrics import StepMetrics

KIND = "tensor"


def tp_layer(
    builder: GraphBuilder,
    group: Sequence[int],
    time_s: float,
    allreduce_bytes: int,
    *,
    algorithm: str,
    name: str,
    phase: str,
    deps: Mapping[int, Sequence[int]],
    mem_start: int = 0,
    mem_end: int = 0,
    extra_deps: Callable[[str, int], Sequence[int]] | None = None,
    after_compute: Callable[[str, list[int]], list[int]] | None = None,
) -> dict[int, list[int]]:
    """One layer's forward or backward on a TP group (Megatron): two blocks (attention and MLP;
    MLP first backward), each a compute half per rank followed by an all-reduce over the group.

    ``time_s`` is the layer's compute per rank (already divided by the TP degree), split evenly
    between the blocks. ``deps`` gives each rank's tasks the first block waits on; the first
    block's halves carry ``mem_start``, the last block's ``mem_end``. The hybrid workload adds
    to this: ``extra_deps(block, t)`` more tasks rank ``group[t]``'s half waits on (asked for
    just before that half is added), and ``after_compute(block, halves)`` tasks that replace a
    block's halves before its all-reduce (one per rank). With one rank there is no all-reduce.
    Returns, per rank, the tasks whose ends mark the layer done.
    """
    blocks = ("mlp", "attn") if phase == "backward" else ("attn", "mlp")
    prev = {r: list(deps[r]) for r in group}
    for block in blocks:
        halves = []
        for t, r in enumerate(group):
            extra = list(extra_deps(block, t)) if extra_deps is not None else []
            halves.append(
                builder.compute(
                    r,
                    time_s / 2,
                    name=f"{name} {block}",
                    phase=phase,
                    deps=prev[r] + extra,
                    mem_start=mem_start if block == blocks[0] else 0,
                    mem_end=mem_end if block == blocks[-1] else 0,
                )
            )
        if after_compute is not None:
            halves = after_compute(block, halves)
        if len(group) == 1:
            prev = {r: [h] for r, h in zip(group, halves, strict=True)}
            continue
        reduced = builder.collective(
            group,
            "all_reduce",
            allreduce_bytes,
            algorithm=algorithm,
            name=f"{name} {block} allreduce",
            phase=phase,
            deps=halves,
            stream="tp",
        )
        prev = {r: [reduced] for r in group}
    return prev


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorSpec:
    """``kind: tensor``: Megatron-style TP groups of ``tp`` consecutive ranks.

    Attributes
    ----------
    tp
        Ranks per TP group; must divide the topology's ranks (None: all ranks, one group).
    layers
        Transformer layers.
    forward_time_s, backward_time_s
        Per layer per micro-batch on each rank (the sharded compute).
    allreduce_bytes
        Bytes of each all-reduce (the activation tensor: micro_batch x seq x hidden x bytes).
    microbatches
        Micro-batches run one after another.
    algorithm
        The all-reduce algorithm (``auto``: the lowest closed-form cost on the group).
    """

    tp: int | None = None
    layers: int
    forward_time_s: float
    backward_time_s: float
    allreduce_bytes: int
    microbatches: int = 1
    algorithm: str = "auto"

    def __post_init__(self) -> None:
        if self.tp is not None:
            fields.positive_int(self.tp, "tp")
        fields.positive_int(self.layers, "layers")
        fields.positive_int(self.microbatches, "microbatches")
        # a forward and a backward of every layer for every micro-batch
        check_tasks(2 * self.layers * self.microbatches, "layers x microbatches",
                    f"{self.layers} x {self.microbatches}")
        if self.allreduce_bytes < 0:
            raise SpecError(f"allreduce_bytes: must be >= 0, got {self.allreduce_bytes}")

    @property
    def kind(self) -> str:
        return KIND

    def groups(self, ranks: int) -> list[tuple[int, ...]]:
        """Consecutive TP groups over ``ranks`` ranks (SpecError if ``tp`` does not divide it)."""
        tp = ranks if self.tp is None else self.tp
        if ranks % tp:
            raise SpecError(f"tp: {tp} does not divide the topology's {ranks} ranks")
        return [tuple(range(g, g + tp)) for g in range(0, ranks, tp)]

    def graph(self, network: Network) -> StepGraph:
        builder = GraphBuilder(network.ranks)
        for group in self.groups(network.ranks):
            for mb in range(self.microbatches):
                tag = f" mb{mb}" if self.microbatches > 1 else ""
                done: dict[int, list[int]] = {r: [] for r in group}
                for layer in range(self.layers):
                    done = tp_layer(
                        builder,
                        group,
                        self.forward_time_s,
                        self.allreduce_bytes,
                        algorithm=self.algorithm,
                        name=f"fwd L{layer}{tag}",
                        phase="forward",
                        deps=done,
                    )
                for layer in reversed(range(self.layers)):
                    done = tp_layer(
                        builder,
                        group,
                        self.backward_time_s,
                        self.allreduce_bytes,
                        algorithm=self.algorithm,
                        name=f"bwd L{layer}{tag}",
                        phase="backward",
                        deps=done,
                    )
        return builder.build()

    def extras(self, metrics: StepMetrics) -> dict[str, object]:
        ranks = len(metrics.per_rank)
        return {
            "tp": ranks if self.tp is None else self.tp,
            "allreduces_per_microbatch": 4 * self.layers,
        }


def parse(data: Mapping[str, Any]) -> TensorSpec:
    """A ``kind: tensor`` mapping -> :class:`TensorSpec` (errors name the field)."""
    fields.check_keys(
        data,
        ("kind", "layers", "forward_time", "backward_time", "allreduce_bytes"),
        ("tp", "microbatches", "algorithm"),
        "",
        " for kind 'tensor'",
    )
    return TensorSpec(
        tp=fields.positive_int(data["tp"], "tp") if "tp" in data else None,
        layers=fields.positive_int(data["layers"], "layers"),
        forward_time_s=fields.time(data["forward_time"], "forward_time"),
        backward_time_s=fields.time(data["backward_time"], "backward_time"),
        allreduce_bytes=fields.size(data["allreduce_bytes"], "allreduce_bytes"),
        microbatches=fields.positive_int(data.get("microbatches", 1), "microbatches"),
        algorithm=fields.algorithm(data.get("algorithm", "auto"), "algorithm"),
    )
