"""4D parallelism (TP x CP x PP x DP) of a decoder-only transformer, for capacity planning.

Ranks are assigned in Llama 3's ``[TP, CP, PP, DP]`` order, TP varying fastest: rank
``t + tp (c + cp (p + pp d))`` is TP rank ``t`` of CP rank ``c`` of pipeline stage ``p`` of data
replica ``d``, so TP groups are consecutive ranks and stay inside a node when ``tp`` divides its
GPUs. The step, on the simulated network:

* each data replica runs ``global_batch / (micro_batch * dp)`` micro-batches through a
  pipeline of ``pp`` stages (:mod:`.pipeline`'s schedules, ``v`` chunks per stage); a stage's
  chunk holds ``layers / (pp v)`` layers, or, with ``pipeline.stage_layers`` (a list, first
  stage first), its share of its stage's layers as :mod:`.stages` places them (Megatron-LM's
  uneven stages); activations go to the next stage as sends of
  ``micro_batch * seq/cp * hidden * bytes_per_param / tp`` from each TP rank to its peer;
* each layer runs as in :mod:`.tensor`: attention and MLP halves, each followed by a TP
  all-reduce of the activation (``micro_batch * seq/cp * hidden * bytes_per_param``); with
  ``cp > 1`` the attention first all-gathers keys and values over the CP group
  (``2 micro_batch seq hidden bytes_per_param / tp``) and reduce-scatters their gradients in
  backward;
* gradients are reduced over the ranks holding the same parameters (same ``t`` and ``p``, all
  ``c`` and ``d``): ``ddp`` all-reduces 25 MiB buckets of layers in backward order after their
  last micro-batch's backward; ``fsdp`` makes every layer a unit whose parameters are
  all-gathered before its first forward (one layer ahead) and kept for the step (no reshard
  after forward, as Llama 3 does with pipelining), and whose gradients are reduce-scattered
  after its last backward;
* compute times come from the FLOPs of :mod:`.transformer` at ``flops * efficiency`` (backward
  twice forward; with ``recompute: full`` thrice), or per layer from ``compute.layer_forward_time``
  / ``layer_backward_time``; or, for the planner's description of the step
  (:mod:`commsim.plan.workload`), per block from :attr:`HybridSpec.blocks`, which adds the
  loss, the optimizer step, ZeRO-1/2, the stack's gradient handling and mixture-of-experts
  layers (:mod:`.hybrid_blocks`).

The lowering lives in :mod:`.hybrid_graph`.

Memory per rank: weights and gradients at ``bytes_per_param`` and 12 bytes of Adam states per
parameter held (sharded over DP x CP with FSDP), gathered FSDP layers and unsharded gradients
while live, and each layer's activations from its forward to its backward.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from commsim.errors import SpecError, describe
from commsim.network import Network
from commsim.replay import fields
from commsim.replay.graph import StepGraph
from commsim.replay.hybrid_blocks import BlockTimes
from commsim.replay.hybrid_graph import HybridGraphBuilder, replica_fold
from commsim.replay.layout import Parallel
from commsim.replay.metrics import StepMetrics
from commsim.replay.pipeline import SCHEDULES, stage_orders
from commsim.replay.replicas import ReplicaFold
from commsim.replay.stages import check_split, chunk_layers, even_split, stage_layer_ids
from commsim.replay.transformer import Model

KIND = "hybrid"
DATA_PARALLEL = ("ddp", "fsdp")
RECOMPUTE = ("none", "full")
#: With :class:`BlockTimes` (the planner's description): ZeRO-1/2 and selective recompute too.
BLOCK_DATA_PARALLEL = ("ddp", "zero1", "zero2", "fsdp")
BLOCK_RECOMPUTE = ("none", "selective", "full", "moe")
#: Bytes of Adam's fp32 master weights, momentum and variance per parameter.
OPTIMIZER_BYTES_PER_PARAM = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridSpec:
    """``kind: hybrid`` (see the module docstring for the step it replays).

    Attributes
    ----------
    model
        The transformer.
    parallel
        TP, CP, PP and DP sizes; their product must not exceed the topology's ranks.
    micro_batch, global_batch
        Sequences per micro-batch per replica, and per step.
    schedule, chunks_per_stage
        The pipeline schedule and its ``v``.
    stage_layers
        Layers per stage, first stage first (empty: ``layers / pp`` each); see :mod:`.stages`.
    data_parallel
        ``ddp`` or ``fsdp``.
    recompute
        ``none`` or ``full`` activation checkpointing.
    bytes_per_param
        Bytes of a weight, a gradient and an activation element (2 for bf16).
    flops, efficiency
        Peak FLOP/s per GPU and the fraction its matmuls achieve.
    layer_forward_time_s, layer_backward_time_s
        Per layer per micro-batch per rank; None: derived from the FLOPs.
    algorithm
        Algorithm of every collective (``auto``: the lowest closed-form cost).
    blocks
        Compute per block and the sizes given by the planner's compute model
        (:mod:`commsim.plan.workload`), which replace ``flops``/``efficiency`` and the flat
        FLOPs (None: derived from them, :meth:`block_times`).
    """

    model: Model
    parallel: Parallel
    micro_batch: int
    global_batch: int
    schedule: str = "1f1b"
    chunks_per_stage: int = 1
    stage_layers: tuple[int, ...] = ()
    data_parallel: str = "fsdp"
    recompute: str = "none"
    bytes_per_param: int = 2
    flops: float
    efficiency: float
    layer_forward_time_s: float | None = None
    layer_backward_time_s: float | None = None
    algorithm: str = "auto"
    blocks: BlockTimes | None = None

    def __post_init__(self) -> None:
        par, m = self.parallel, self.model
        fields.positive_int(self.micro_batch, "micro_batch")
        fields.positive_int(self.global_batch, "global_batch")
        fields.positive_int(self.bytes_per_param, "bytes_per_param")
        fields.positive_int(self.chunks_per_stage, "pipeline.chunks_per_stage")
        fields.choice(self.schedule, "pipeline.schedule", SCHEDULES)
        planned = self.blocks is not None
        fields.choice(self.data_parallel, "data_parallel",
                      BLOCK_DATA_PARALLEL if planned else DATA_PARALLEL)
        fields.choice(self.recompute, "recompute", BLOCK_RECOMPUTE if planned else RECOMPUTE)
        if self.blocks is not None and len(self.blocks.params) != m.layers:
            raise SpecError(f"blocks: {len(self.blocks.params)} layers' parameters for "
                            f"model.layers {m.layers}")
        if self.global_batch % (self.micro_batch * par.dp):
            raise SpecError(
                f"global_batch: {self.global_batch} is not a multiple of micro_batch x dp "
                f"({self.micro_batch} x {par.dp})"
            )
        if self.stage_layers:
            check_split(self.stage_layers, m.layers, par.pp, "pipeline.stage_layers:")
            try:
                chunk_layers(self.stage_layers, self.chunks_per_stage)
            except SpecError as exc:
                raise SpecError(f"pipeline.stage_layers: {exc}") from None
        elif m.layers % (par.pp * self.chunks_per_stage):
            raise SpecError(
                f"model.layers: {m.layers} layers do not split into pp x chunks_per_stage "
                f"({par.pp} x {self.chunks_per_stage}) equal chunks"
            )
        if m.heads % par.tp:
            raise SpecError(f"parallel.tp: {par.tp} does not divide model.heads ({m.heads})")
        if m.seq % par.cp:
            raise SpecError(f"parallel.cp: {par.cp} does not divide model.seq ({m.seq})")
        if not (self.flops > 0 and 0 < self.efficiency <= 1):
            raise SpecError("compute: flops must be > 0 and efficiency in (0, 1]")
        try:
            stage_orders(
                self.schedule,
                stages=par.pp,
                microbatches=self.microbatches,
                chunks=self.chunks_per_stage,
            )
        except SpecError as exc:
            raise SpecError(f"pipeline: {exc}") from None

    @property
    def kind(self) -> str:
        return KIND

    @property
    def microbatches(self) -> int:
        """Micro-batches per replica per step (gradient accumulation steps)."""
        return self.global_batch // (self.micro_batch * self.parallel.dp)

    @property
    def layers_per_chunk(self) -> int:
        return self.model.layers // (self.parallel.pp * self.chunks_per_stage)

    @property
    def split(self) -> tuple[int, ...]:
        """Layers per stage, first stage first."""
        return self.stage_layers or even_split(self.model.layers, self.parallel.pp)

    # -- per-layer quantities on one rank ----------------------------------------------------
    def _rate(self) -> float:
        return self.flops * self.efficiency

    def layer_times(self) -> tuple[float, float]:
        """(forward, backward) seconds of one layer per micro-batch on one rank."""
        par = self.parallel
        flops = self.model.layer_forward_flops(self.micro_batch, self.model.seq // par.cp)
        forward = flops / par.tp / self._rate()
        backward = (3 if self.recompute == "full" else 2) * forward
        if self.layer_forward_time_s is not None:
            forward = self.layer_forward_time_s
        if self.layer_backward_time_s is not None:
            backward = self.layer_backward_time_s
        return forward, backward

    def block_times(self) -> BlockTimes:
        """The step's compute per block and its sizes: :attr:`blocks`, or from the flat FLOPs
        (each half of a layer half of :meth:`layer_times`, the logits' backward twice their
        forward, no optimizer step)."""
        if self.blocks is not None:
            return self.blocks
        m, par, bpp = self.model, self.parallel, self.bytes_per_param
        forward, backward = self.layer_times()
        logits = self.logits_time()
        tp_bytes = self.micro_batch * (m.seq // par.cp) * m.hidden * bpp
        return BlockTimes(
            attn_fwd=forward / 2, mlp_fwd=forward / 2, attn_bwd=backward / 2,
            mlp_bwd=backward / 2, logits_fwd=logits, logits_bwd=2 * logits,
            params=tuple(self.layer_params(i) for i in range(m.layers)), tp_bytes=tp_bytes,
            cp_bytes=2 * self.micro_batch * m.seq * m.hidden * bpp // par.tp, grad_bytes=bpp,
            activation_bytes=m.layer_activation_bytes(self.micro_batch, par.tp, par.cp,
                                                      self.recompute == "full"),
            flops_per_token=(m.model_flops_per_token,
                             m.hardware_flops_per_token(self.recompute == "full")),
            peak_flops=self.flops,
        )

    def logits_time(self) -> float:
        par = self.parallel
        flops = self.model.logits_forward_flops(self.micro_batch, self.model.seq // par.cp)
        return flops / par.tp / self._rate()

    def layer_params(self, layer: int) -> int:
        """Parameters of global layer ``layer`` held by one TP rank (the tied embedding is
        counted with layer 0, and again with the last layer when it sits on another stage)."""
        m, par = self.model, self.parallel
        if self.blocks is not None:
            return self.blocks.params[layer]
        params = m.layer_params
        if layer == 0:
            params += m.embedding_params
        if layer == m.layers - 1 and par.pp > 1:
            params += m.embedding_params
        return math.ceil(params / par.tp)

    def layers_of(self, stage: int) -> list[int]:
        """Global layers held by ``stage``, in forward order (chunk by chunk)."""
        return stage_layer_ids(self.split, self.chunks_per_stage, stage)

    def static_bytes(self, stage: int) -> int:
        """Bytes held all step by one rank of ``stage``: weights, gradients, Adam states."""
        mine = self.layers_of(stage)
        params = sum(self.layer_params(layer) for layer in mine)
        shards = self.parallel.dp * self.parallel.cp
        moe = self.blocks.moe if self.blocks is not None else None
        experts = sum(moe.expert_params[i] for i in mine) if moe is not None else 0
        held = (params, shards), (experts, self.parallel.expert_dp if moe else 1)
        bpp, out = self.bytes_per_param, 0
        for n, k in held:
            sharded = {"ddp": 0, "zero1": OPTIMIZER_BYTES_PER_PARAM,
                       "zero2": bpp + OPTIMIZER_BYTES_PER_PARAM}.get(self.data_parallel,
                                                                       2 * bpp
                                                                       + OPTIMIZER_BYTES_PER_PARAM)
            out += (2 * bpp + OPTIMIZER_BYTES_PER_PARAM - sharded) * n
            out += math.ceil(n / k) * sharded
        return out

    # -- the step ----------------------------------------------------------------------------
    def _check_ranks(self, network: Network) -> None:
        if self.parallel.world > network.ranks:
            raise SpecError(
                f"parallel: tp x cp x pp x dp = {self.parallel.world} exceeds the "
                f"{network.ranks} ranks of topology {network.name!r}"
            )

    def graph(self, network: Network) -> StepGraph:
        self._check_ranks(network)
        return HybridGraphBuilder(self).build()

    def folded_graph(self, network: Network) -> tuple[StepGraph, ReplicaFold]:
        """The step's first block of replicas (:mod:`.replicas`) and the symmetry that times
        the others by it; Unfoldable where the network has none."""
        self._check_ranks(network)
        fold = replica_fold(self.parallel, network)
        return HybridGraphBuilder(self, fold.simulated).build(), fold

    def extras(self, metrics: StepMetrics) -> dict[str, object]:
        world = self.parallel.world
        step = metrics.step_time_s
        tokens = self.global_batch * self.model.seq
        tokens_per_s = tokens / step if step > 0 else 0.0
        forward, backward = self.layer_times()
        t = self.block_times()
        model_tflops = t.flops_per_token[0] * tokens_per_s / world / 1e12
        hardware_tflops = t.flops_per_token[1] * tokens_per_s / world / 1e12
        if self.blocks is not None:
            forward = t.attn_fwd + t.mlp_fwd
            backward = t.attn_bwd + t.mlp_bwd + t.attn_recompute + t.mlp_recompute
        return {
            "parallel": {
                "tp": self.parallel.tp,
                "cp": self.parallel.cp,
                "pp": self.parallel.pp,
                "dp": self.parallel.dp,
            },
            "microbatches": self.microbatches,
            "params": t.model_params or self.model.params,
            "layer_forward_time_s": forward,
            "layer_backward_time_s": backward,
            "tokens_per_s": tokens_per_s,
            "model_tflops_per_gpu": model_tflops,
            "hardware_tflops_per_gpu": hardware_tflops,
            "mfu": model_tflops * 1e12 / t.peak_flops,
        }


def parse(data: Mapping[str, Any]) -> HybridSpec:
    """A ``kind: hybrid`` mapping -> :class:`HybridSpec` (errors name the field)."""
    if "compute" not in data:
        raise SpecError("compute: missing; a hybrid workload without it is the planner's "
                        "description, timed by the topology's device: block: replay it with "
                        "`commsim replay` or commsim.plan.replay_workload")
    fields.check_keys(
        data,
        ("kind", "model", "parallel", "micro_batch", "global_batch", "compute"),
        ("pipeline", "data_parallel", "recompute", "bytes_per_param", "algorithm"),
        "",
        " for kind 'hybrid'",
    )
    model = fields.mapping(data["model"], "model")
    fields.check_keys(model, ("layers", "hidden", "heads", "seq", "vocab"), (), "model")
    par = fields.mapping(data["parallel"], "parallel")
    fields.check_keys(par, (), ("tp", "cp", "pp", "dp"), "parallel")
    pipe = fields.mapping(data.get("pipeline", {}), "pipeline")
    fields.check_keys(pipe, (), ("schedule", "chunks_per_stage", "stage_layers"), "pipeline")
    comp = fields.mapping(data["compute"], "compute")
    fields.check_keys(
        comp, ("flops", "efficiency"), ("layer_forward_time", "layer_backward_time"), "compute"
    )
    times = {
        k: fields.time(comp[k], f"compute.{k}") if k in comp else None
        for k in ("layer_forward_time", "layer_backward_time")
    }
    return HybridSpec(
        model=Model(**{k: fields.positive_int(model[k], f"model.{k}") for k in model}),
        parallel=Parallel(**{k: fields.positive_int(par[k], f"parallel.{k}")
                             for k in par}),  # type: ignore[arg-type]
        micro_batch=fields.positive_int(data["micro_batch"], "micro_batch"),
        global_batch=fields.positive_int(data["global_batch"], "global_batch"),
        schedule=fields.choice(pipe.get("schedule", "1f1b"), "pipeline.schedule", SCHEDULES),
        chunks_per_stage=fields.positive_int(
            pipe.get("chunks_per_stage", 1), "pipeline.chunks_per_stage"
        ),
        stage_layers=stage_layers_value(pipe.get("stage_layers")),
        data_parallel=fields.choice(
            data.get("data_parallel", "fsdp"), "data_parallel", DATA_PARALLEL
        ),
        recompute=fields.choice(data.get("recompute", "none"), "recompute", RECOMPUTE),
        bytes_per_param=fields.positive_int(data.get("bytes_per_param", 2), "bytes_per_param"),
        flops=fields.flops(comp["flops"], "compute.flops"),
        efficiency=fields.fraction(comp["efficiency"], "compute.efficiency"),
        layer_forward_time_s=times["layer_forward_time"],
        layer_backward_time_s=times["layer_backward_time"],
        algorithm=fields.algorithm(data.get("algorithm", "auto"), "algorithm"),
    )


def stage_layers_value(value: object) -> tuple[int, ...]:
    """``pipeline.stage_layers``: a list of layer counts (None: even stages)."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not value:
        raise SpecError(f"pipeline.stage_layers: must be a list of layer counts, got "
                        f"{describe(value)}")
    return tuple(fields.positive_int(n, f"pipeline.stage_layers[{i}]")
                 for i, n in enumerate(value))
