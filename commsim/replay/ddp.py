"""Distributed data parallelism (PyTorch DDP): bucketed gradient all-reduce overlapping backward.

Every rank of the topology holds the whole model. A step is ``accumulation_steps`` micro-steps,
each a forward over the layers in order and a backward in reverse order, on the rank's compute
stream. As PyTorch's reducer does:

* buckets are fixed up front by walking the layers in backward order and closing a bucket as
  soon as it holds at least ``bucket_bytes`` (the first one at least ``first_bucket_bytes`` when
  given: PyTorch uses 1 MiB so that communication starts early); the rest form the last bucket;
* when the last gradient of a bucket is ready, its all-reduce is queued on the rank's single
  communication stream (one collective at a time, in order);
* gradient accumulation runs the first ``accumulation_steps - 1`` micro-steps under
  ``no_sync()``: no all-reduce, only the last micro-step's backward reduces;
* the step ends when backward and every all-reduce are done, plus ``optimizer_time``.

>>> buckets([25 * 2**20, 25 * 2**20], 25 * 2**20)
[[1], [0]]
>>> buckets([2**20] * 4, 3 * 2**20, first_bucket_bytes=1)
[[3], [2, 1, 0]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from commsim.errors import SpecError
from commsim.network import Network
from commsim.replay import fields
from commsim.replay.graph import GraphBuilder, StepGraph, check_tasks
from commsim.replay.metrics import StepMetrics

KIND = "ddp"
#: PyTorch DDP's default ``bucket_cap_mb`` (25 MiB).
DEFAULT_BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    """One layer: its forward and backward time and the bytes of its gradients."""

    forward_time_s: float
    backward_time_s: float
    grad_bytes: int

    def __post_init__(self) -> None:
        if not (self.forward_time_s >= 0 and self.backward_time_s >= 0 and self.grad_bytes >= 0):
            raise SpecError(f"layer times and grad_bytes must be >= 0, got {self}")


def buckets(
    grad_bytes: Sequence[int], bucket_bytes: int, first_bucket_bytes: int | None = None
) -> list[list[int]]:
    """Layer indices of each bucket, in backward order (see the module docstring)."""
    out: list[list[int]] = []
    current: list[int] = []
    held = 0
    for layer in reversed(range(len(grad_bytes))):
        current.append(layer)
        held += grad_bytes[layer]
        cap = first_bucket_bytes if not out and first_bucket_bytes is not None else bucket_bytes
        if held >= cap:
            out.append(current)
            current, held = [], 0
    if current:
        out.append(current)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class DdpSpec:
    """``kind: ddp``: data parallel over all ranks of the topology.

    Attributes
    ----------
    layers
        The layers, in forward order.
    bucket_bytes
        A bucket closes as soon as it holds at least this many gradient bytes (25 MiB).
    first_bucket_bytes
        The first bucket's threshold (None: ``bucket_bytes``; PyTorch uses 1 MiB).
    algorithm
        The all-reduce algorithm (``auto``: the lowest closed-form cost for each bucket).
    optimizer_time_s
        Optimizer step, after every all-reduce.
    accumulation_steps
        Micro-steps per step; only the last one all-reduces (``no_sync()`` on the others).
    """

    layers: tuple[Layer, ...]
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    first_bucket_bytes: int | None = None
    algorithm: str = "auto"
    optimizer_time_s: float = 0.0
    accumulation_steps: int = 1

    def __post_init__(self) -> None:
        if not self.layers:
            raise SpecError("layers: need at least one layer")
        if self.bucket_bytes <= 0:
            raise SpecError(f"bucket_bytes: must be > 0, got {self.bucket_bytes}")
        if self.first_bucket_bytes is not None and self.first_bucket_bytes <= 0:
            raise SpecError(f"first_bucket_bytes: must be > 0, got {self.first_bucket_bytes}")
        fields.positive_int(self.accumulation_steps, "accumulation_steps")
        if not self.optimizer_time_s >= 0:
            raise SpecError(f"optimizer_time: must be >= 0, got {self.optimizer_time_s}")

    @property
    def kind(self) -> str:
        return KIND

    @property
    def buckets(self) -> list[list[int]]:
        """Layer indices of each bucket, in backward order."""
        return buckets(
            [layer.grad_bytes for layer in self.layers], self.bucket_bytes, self.first_bucket_bytes
        )

    def bucket_nbytes(self) -> list[int]:
        return [sum(self.layers[i].grad_bytes for i in bucket) for bucket in self.buckets]

    def graph(self, network: Network) -> StepGraph:
        """The step on every rank of ``network``."""
        world = network.ranks
        group = tuple(range(world))
        builder = GraphBuilder(world)
        closes = {bucket[-1]: j for j, bucket in enumerate(self.buckets)}
        sizes = self.bucket_nbytes()
        last_comm: int | None = None
        for micro in range(self.accumulation_steps):
            tag = f" mb{micro}" if self.accumulation_steps > 1 else ""
            for index, layer in enumerate(self.layers):
                for rank in group:
                    builder.compute(
                        rank, layer.forward_time_s, name=f"fwd L{index}{tag}", phase="forward"
                    )
            reduce = micro == self.accumulation_steps - 1
            for index in reversed(range(len(self.layers))):
                layer = self.layers[index]
                ready = [
                    builder.compute(
                        rank, layer.backward_time_s, name=f"bwd L{index}{tag}", phase="backward"
                    )
                    for rank in group
                ]
                bucket = closes.get(index)
                if reduce and bucket is not None and sizes[bucket] > 0:
                    last_comm = builder.collective(
                        group,
                        "all_reduce",
                        sizes[bucket],
                        algorithm=self.algorithm,
                        name=f"allreduce bucket{bucket}",
                        phase="gradient",
                        deps=ready,
                    )
        if self.optimizer_time_s > 0:
            for rank in group:
                builder.compute(
                    rank,
                    self.optimizer_time_s,
                    name="optimizer",
                    phase="optimizer",
                    deps=() if last_comm is None else (last_comm,),
                )
        return builder.build()

    def extras(self, metrics: StepMetrics) -> dict[str, object]:
        return {
            "accumulation_steps": self.accumulation_steps,
            "buckets": [
                {"bucket": j, "layers": bucket, "nbytes": nbytes}
                for j, (bucket, nbytes) in enumerate(
                    zip(self.buckets, self.bucket_nbytes(), strict=True)
                )
            ],
        }


_LAYER_KEYS = ("forward_time", "backward_time", "grad_bytes")


def _layer(item: Mapping[str, Any], defaults: Mapping[str, Any], path: str) -> Layer:
    values: dict[str, Any] = {}
    for key in _LAYER_KEYS:
        where = fields.join(path, key)
        if key in item:
            value = item[key]
        elif key in defaults:
            value, where = defaults[key], key
        else:
            raise SpecError(f"{fields.join(path, key)}: missing (and no top-level {key!r})")
        values[key] = (
            fields.size(value, where) if key == "grad_bytes" else fields.time(value, where)
        )
    return Layer(
        forward_time_s=values["forward_time"],
        backward_time_s=values["backward_time"],
        grad_bytes=values["grad_bytes"],
    )


def parse(data: Mapping[str, Any]) -> DdpSpec:
    """A ``kind: ddp`` mapping -> :class:`DdpSpec` (errors name the field)."""
    fields.check_keys(
        data,
        ("kind", "layers"),
        (
            *_LAYER_KEYS,
            "bucket_bytes",
            "first_bucket_bytes",
            "algorithm",
            "optimizer_time",
            "accumulation_steps",
        ),
        "",
        " for kind 'ddp'",
    )
    raw = data["layers"]
    defaults = {k: data[k] for k in _LAYER_KEYS if k in data}
    if isinstance(raw, list):
        if not raw:
            raise SpecError("layers: must not be empty")
        layers = []
        for i, item in enumerate(raw):
            path = fields.join("layers", i)
            item = fields.mapping(item, path)
            fields.check_keys(item, (), _LAYER_KEYS, path)
            layers.append(_layer(item, defaults, path))
    else:
        count = fields.positive_int(raw, "layers")
        check_tasks(2 * count, "layers", count)  # a forward and a backward per layer
        for key in _LAYER_KEYS:
            if key not in data:
                raise SpecError(f"{key}: missing required key (layers is a count)")
        layers = [_layer({}, defaults, "")] * count
    first = data.get("first_bucket_bytes")
    return DdpSpec(
        layers=tuple(layers),
        bucket_bytes=fields.positive_size(
            data.get("bucket_bytes", f"{DEFAULT_BUCKET_BYTES}B"), "bucket_bytes"
        ),
        first_bucket_bytes=None
        if first is None
        else fields.positive_size(first, "first_bucket_bytes"),
        algorithm=fields.algorithm(data.get("algorithm", "auto"), "algorithm"),
        optimizer_time_s=fields.time(data.get("optimizer_time", 0), "optimizer_time"),
        accumulation_steps=fields.positive_int(
            data.get("accumulation_steps", 1), "accumulation_steps"
        ),
    )
