"""One description of a training step for ``plan`` and ``replay``: a configuration of the
planner as a ``hybrid`` workload, and such a workload timed by the planner's compute model.

A ``hybrid`` workload without a flat ``compute:`` block is the planner's description: its
``model:`` takes every key of a model file (:mod:`.models`: ``kv_heads``, ``ffn_hidden``,
``mlp``, ``tied_embeddings``, ``head_dim``, ``moe``, ``mla``), ``parallel:`` takes ``ep`` (the
expert-parallel size) and ``etp`` (expert TP, written by ``--write-workload`` where it is not
``tp``: the MoE layers' own grid, :class:`~commsim.replay.layout.Parallel`; a planned
``stack.moe_overlap: ep-overlap`` runs Megatron-Core's combined 1F1B, ``dualpipe`` is refused on
replay in one line, ``stack.dispatcher: deepep`` runs DeepEP's two legs), ``data_parallel`` also
``zero1``/``zero2``, ``recompute`` also ``selective`` and ``moe``, and ``stack:`` names the
software stack (:mod:`.stack`: ``current``, ``megatron-2021``, ``llama3``, or a mapping of its
fields). The topology's ``device:`` block times every block (:mod:`.compute`'s shape-aware
GEMMs, :mod:`.moe_layer`'s router, grouped expert GEMMs and skew), the loss on the last stage
and each stage's optimizer step (:func:`~commsim.plan.compute.optimizer_time`); a flat
``compute: {flops, efficiency}`` beside those keys overrides the device's peak FLOP/s and its
GEMM and attention efficiencies.

:func:`workload_dict` writes a configuration as that mapping (``commsim plan
--write-workload``); :func:`replay_workload` reads it back into the replay's
:class:`~commsim.replay.hybrid.HybridSpec` with :class:`~commsim.replay.hybrid_blocks.BlockTimes`
from the same functions the planner's evaluation uses, so that ``commsim replay`` of the file
lowers the step the planner timed, every rank simulated, its collectives (the expert-parallel
all-to-alls among them) contending in one DES.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from commsim.errors import SpecError, describe
from commsim.network import Network
from commsim.plan.blocks import PipelineCosts, layer_blocks
from commsim.plan.bounds import layer_costs, moe_costs
from commsim.plan.compute import hardware_flops_per_token, model_flops_per_token
from commsim.plan.config import ORDERS, PlanConfig, rank_order
from commsim.plan.costs import layer_bytes, optimizer_times, pipeline_costs, plan_layer_params
from commsim.plan.device import DeviceSpec, network_device
from commsim.plan.dispatch import deepep_legs
from commsim.plan.memory import layer_activation_bytes
from commsim.plan.models import ModelSpec, model_from_dict
from commsim.plan.moe_layer import dispatch_bytes, moe_tp_collectives
from commsim.plan.overlap import recompute_unfit
from commsim.plan.stack import (
    ATTENTION,
    DISPATCHERS,
    MOE_OVERLAPS,
    PRECISIONS,
    STACKS,
    Stack,
    named_stack,
)
from commsim.plan.timing import CollectiveTimer
from commsim.replay import fields
from commsim.replay.hybrid import (
    BLOCK_DATA_PARALLEL,
    BLOCK_RECOMPUTE,
    HybridSpec,
    Parallel,
    stage_layers_value,
)
from commsim.replay.hybrid_blocks import BlockTimes, MoEBlocks
from commsim.replay.pipeline import SCHEDULES
from commsim.replay.transformer import Model
from commsim.topology import load_topology

#: The choices of a stack's text fields in a workload's ``stack:`` mapping.
STACK_CHOICES = {"attention": ATTENTION, "precision": PRECISIONS, "moe_overlap": MOE_OVERLAPS,
                 "dispatcher": DISPATCHERS}

#: The model keys of a model file beyond the flat description's five.
PLAN_MODEL_KEYS = ("kv_heads", "ffn_hidden", "mlp", "tied_embeddings", "name", "head_dim",
                   "moe", "mla")
_TOP = (("kind", "model", "parallel", "micro_batch", "global_batch"),
        ("pipeline", "data_parallel", "recompute", "stack", "algorithm", "compute"))


def is_planned(data: object) -> bool:
    """Whether ``data`` is a ``hybrid`` workload in the planner's description (no flat
    ``compute:``, or a ``stack:``, ``parallel.ep`` or a model-file key)."""
    if not isinstance(data, Mapping) or data.get("kind") != "hybrid":
        return False
    model, par = data.get("model"), data.get("parallel")
    return ("compute" not in data or "stack" in data
            or (isinstance(model, Mapping) and any(k in model for k in PLAN_MODEL_KEYS))
            or (isinstance(par, Mapping) and "ep" in par))


def model_dict(model: ModelSpec) -> dict[str, Any]:
    """``model`` as a model file's ``model:`` mapping (what :func:`model_from_dict` reads)."""
    out: dict[str, Any] = {"name": model.name}
    for key in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq", "mlp",
                "tied_embeddings"):
        out[key] = getattr(model, key)
    if model.head_channels is not None:
        out["head_dim"] = model.head_channels
    if model.moe is not None:
        out["moe"] = dataclasses.asdict(model.moe)
    if model.mla is not None:
        out["mla"] = dataclasses.asdict(model.mla)
    return out


def stack_value(stack: Stack) -> str | dict[str, Any]:
    """A stack as a workload's ``stack:`` (its name where it is a named one)."""
    for name, known in STACKS.items():
        if known == stack:
            return name
    return dataclasses.asdict(stack)


def workload_dict(model: ModelSpec, cfg: PlanConfig, global_batch: int,
                  stack: Stack) -> dict[str, Any]:
    """The ``hybrid`` workload of configuration ``cfg`` (``commsim plan --write-workload``)."""
    pipeline: dict[str, Any] = {"schedule": cfg.schedule, "chunks_per_stage": cfg.chunks}
    if cfg.stage_layers:
        pipeline["stage_layers"] = list(cfg.stage_layers)
    return {
        "kind": "hybrid",
        "model": model_dict(model),
        "parallel": {"tp": cfg.tp, "cp": cfg.cp, "pp": cfg.pp, "dp": cfg.dp, "ep": cfg.ep,
                     **({"etp": cfg.etp} if cfg.etp != cfg.tp else {}), "order": cfg.order},
        "micro_batch": cfg.micro_batch,
        "global_batch": global_batch,
        "pipeline": pipeline,
        "data_parallel": cfg.data_parallel,
        "recompute": cfg.recompute,
        "stack": stack_value(stack),
    }


def block_times(model: ModelSpec, cfg: PlanConfig, device: DeviceSpec,
                stack: Stack, network: Network | None = None) -> BlockTimes:
    """The planner's compute and sizes of ``cfg`` on ``device`` as the replay's blocks (the
    functions :func:`~commsim.plan.search` times a configuration with; on ``network``, what
    the overlapped gradient reductions cost the compute, the planner's ``overlap`` charges
    of :func:`~commsim.plan.costs.pipeline_costs`)."""
    t = layer_costs(model, device, cfg.tp, cfg.cp, cfg.micro_batch, cfg.recompute, stack)
    params = plan_layer_params(model, cfg)
    tp_bytes, cp_bytes = layer_bytes(cfg, model)
    moe = None
    m = moe_costs(model, device, cfg, stack)
    if m is not None:
        sizes: dict[str, Any] = dict(tp=cfg.tp, cp=cfg.cp, ep=cfg.ep, micro_batch=cfg.micro_batch)
        to_experts = dispatch_bytes(model, **sizes, precision=m.precision)
        from_experts = dispatch_bytes(model, **sizes)
        moe = MoEBlocks(
            layers=frozenset(i for i in range(model.layers) if model.is_moe(i)),
            pre_fwd=m.pre_fwd, experts_fwd=m.experts_fwd, pre_bwd=m.pre_bwd,
            experts_bwd=m.experts_bwd,
            to_experts_bytes=to_experts, from_experts_bytes=from_experts,
            legs=_deepep_legs(model, cfg, network, {to_experts, from_experts})
            if stack.dispatcher == "deepep" else {},
            tp_collectives=moe_tp_collectives(model, etp=cfg.etp, **sizes),
            expert_params=tuple(-(-model.experts_at(i) // (cfg.ep * cfg.etp))
                                if model.is_moe(i) else 0 for i in range(model.layers)),
        )
    overlap: tuple = ()
    stretch: tuple[float, ...] = ()
    combined = stack.moe_overlap == "ep-overlap" and m is not None
    if network is not None and (stack.overlap_cost or combined):
        costs = pipeline_costs(cfg, model, t, CollectiveTimer(network), 1, params, stack,
                               device, moe=m)[0]
        overlap = costs.overlap if stack.overlap_cost else ()
        stretch = tuple(_stretch(costs, p) for p in range(cfg.pp)) if combined else ()
    elif combined:
        raise SpecError("stack.moe_overlap: ep-overlap needs the topology to time what the "
                        "all-to-alls' SMs cost the compute they overlap")
    return BlockTimes(
        attn_fwd=t.attn_fwd, mlp_fwd=t.mlp_fwd, attn_bwd=t.attn_bwd, mlp_bwd=t.mlp_bwd,
        attn_recompute=t.attn_recompute, mlp_recompute=t.mlp_recompute,
        recompute_collectives=t.recompute_collectives,
        moe_recompute=cfg.recompute == "moe" and moe is not None, logits_fwd=t.logits_fwd,
        logits_bwd=t.logits_bwd,
        optimizer_s=optimizer_times(cfg, model, params, device, stack),
        params=tuple(params(i) for i in range(model.layers)), tp_bytes=tp_bytes,
        cp_bytes=cp_bytes, grad_bytes=stack.grad_bytes, grad_overlap=stack.grad_overlap,
        activation_bytes=int(layer_activation_bytes(model, cfg.micro_batch, cfg.tp, cfg.cp,
                                                    cfg.recompute, stack)),
        flops_per_token=(model_flops_per_token(model),
                         hardware_flops_per_token(model, cfg.recompute)),
        model_params=model.params,
        peak_flops=device.peak_flops, p2p_blocking=stack.p2p_blocking, moe=moe,
        overlap_s=overlap, combined_stretch=stretch,
    )


def _stretch(costs: PipelineCosts, stage: int) -> float:
    """How much a combined step stretches ``stage``'s compute (the planner's
    :func:`~commsim.plan.overlap.paired_blocks`: the SMs its all-to-alls hold)."""
    alone = sum(x for f in (True, False) for s, x in layer_blocks(costs, stage, f)
                if s == "compute")
    paired = sum(x for blocks in costs.paired[stage] for s, x in blocks if s == "compute")
    return paired / alone if alone else 1.0


def _parallel(cfg: PlanConfig) -> Parallel:
    return Parallel(tp=cfg.tp, cp=cfg.cp, pp=cfg.pp, dp=cfg.dp, ep=cfg.ep, etp=cfg.etp,
                    order=cfg.order)


def _deepep_legs(model: ModelSpec, cfg: PlanConfig, network: Network | None,
                 sizes: set[int]) -> dict[tuple[tuple[int, ...], int],
                                          tuple[tuple[tuple[int, ...], int, int], ...]]:
    """Every expert-parallel group's DeepEP legs (:func:`~commsim.plan.dispatch.deepep_legs`:
    the rails across hosts in lane 0, each host's ranks in lane 1) for an all-to-all of each of
    ``sizes`` bytes, on ``network``'s hosts."""
    assert model.moe is not None
    if network is None:
        raise SpecError("stack.dispatcher: deepep needs the topology's hosts to lay out its "
                        "legs")
    par, out = _parallel(cfg), {}
    for p in range(cfg.pp):
        for et in range(par.etp):
            for group in map(tuple, par.ep_groups(et, p)):
                for nbytes in sorted(sizes):
                    rails, local = deepep_legs(model.moe, group, network.host_of, nbytes)
                    out[(group, nbytes)] = tuple((r, b, 0) for r, b in rails) + tuple(
                        (r, b, 1) for r, b in local)
    return out


def replay_spec(model: ModelSpec, cfg: PlanConfig, global_batch: int, device: DeviceSpec,
                stack: Stack, algorithm: str = "auto",
                network: Network | None = None) -> HybridSpec:
    """The replay's spec of configuration ``cfg``, timed by the planner's compute model
    (and, on ``network``, its cost of overlapped reductions to compute)."""
    if stack.fsdp_reshard and cfg.data_parallel == "fsdp":
        raise SpecError("stack.fsdp_reshard: PyTorch FSDP's gathers and reductions in every "
                        "micro-batch are planned but not lowered by the hybrid workload (the "
                        "fsdp workload kind replays them)")
    if cfg.recompute == "moe" and model.moe is None:
        raise SpecError(f"recompute: moe recomputes mixtures of experts; {model.name} has no "
                        "moe:")
    conflict = recompute_unfit(cfg.recompute, stack) if model.moe is not None else None
    if conflict:
        raise SpecError(conflict)
    if stack.moe_overlap == "dualpipe" and model.moe is not None:
        raise SpecError("stack.moe_overlap: dualpipe is planned (a closed form) but not "
                        "lowered by the hybrid workload; replay it with moe_overlap none or "
                        "ep-overlap")
    return HybridSpec(
        model=Model(layers=model.layers, hidden=model.hidden, heads=model.heads, seq=model.seq,
                    vocab=model.vocab),
        parallel=_parallel(cfg),
        micro_batch=cfg.micro_batch, global_batch=global_batch, schedule=cfg.schedule,
        chunks_per_stage=cfg.chunks, stage_layers=cfg.stage_layers,
        data_parallel=cfg.data_parallel, recompute=cfg.recompute,
        flops=device.peak_flops, efficiency=device.gemm_efficiency, algorithm=algorithm,
        blocks=block_times(model, cfg, device, stack, network),
    )


def _stack(value: object) -> Stack:
    if isinstance(value, str):
        return named_stack(value)
    body = fields.mapping(value, "stack")
    defaults = Stack()
    names = tuple(f.name for f in dataclasses.fields(Stack))
    fields.check_keys(body, (), names, "stack")
    kw: dict[str, Any] = {}
    for key, value in body.items():
        path = f"stack.{key}"
        if isinstance(getattr(defaults, key), bool):
            kw[key] = fields.boolean(value, path)
        elif isinstance(getattr(defaults, key), int):  # grad_bytes, comm_sms: Stack checks
            kw[key] = value
        else:
            options = STACK_CHOICES[key]  # spelled as the flags spell them (ep-overlap)
            text = value.strip().lower() if isinstance(value, str) else ""
            if text not in options:
                raise SpecError(f"{path}: must be one of {', '.join(options)} (got {value!r})")
            kw[key] = text
    try:
        return Stack(**kw)
    except SpecError as exc:
        raise SpecError(f"stack: {exc}") from None


def _config(data: Mapping[str, Any], model: ModelSpec) -> PlanConfig:
    par = fields.mapping(data["parallel"], "parallel")
    fields.check_keys(par, (), ("tp", "cp", "pp", "dp", "ep", "etp", "order"), "parallel")
    pipe = fields.mapping(data.get("pipeline", {}), "pipeline")
    fields.check_keys(pipe, (), ("schedule", "chunks_per_stage", "stage_layers"), "pipeline")
    tp, cp, pp, dp, ep = (fields.positive_int(par.get(k, 1), f"parallel.{k}") for k in
                          ("tp", "cp", "pp", "dp", "ep"))
    order = par.get("order", rank_order(model.moe is not None))
    order = order.strip().lower() if isinstance(order, str) else order
    if order not in ORDERS:
        raise SpecError(f"parallel.order: must be one of {', '.join(ORDERS)} (got "
                        f"{describe(order)})")
    if model.moe is not None and model.moe.experts % ep:
        raise SpecError(f"parallel.ep: {ep} does not divide the {model.moe.experts} experts")
    if model.moe is None and ep != 1:
        raise SpecError(f"parallel.ep: {ep} without model.moe (a dense model)")
    etp = fields.positive_int(par.get("etp", tp), "parallel.etp")
    return PlanConfig(
        tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, etp=etp, order=order,
        micro_batch=fields.positive_int(data["micro_batch"], "micro_batch"),
        schedule=fields.choice(pipe.get("schedule", "1f1b"), "pipeline.schedule", SCHEDULES),
        chunks=fields.positive_int(pipe.get("chunks_per_stage", 1),
                                   "pipeline.chunks_per_stage"),
        data_parallel=fields.choice(data.get("data_parallel", "fsdp"), "data_parallel",
                                    BLOCK_DATA_PARALLEL),
        recompute=fields.choice(data.get("recompute", "none"), "recompute", BLOCK_RECOMPUTE),
        stage_layers=stage_layers_value(pipe.get("stage_layers")),
    )


def _device(data: Mapping[str, Any], network: Network) -> DeviceSpec:
    """The topology's device, a flat ``compute:`` overriding its FLOP/s and efficiencies."""
    device = network_device(network)
    if "compute" not in data:
        return device
    comp = fields.mapping(data["compute"], "compute")
    fields.check_keys(comp, ("flops", "efficiency"), (), "compute")
    eff = fields.fraction(comp["efficiency"], "compute.efficiency")
    return dataclasses.replace(device, peak_flops=fields.flops(comp["flops"], "compute.flops"),
                               gemm_efficiency=eff, attention_efficiency=eff)


def write_workload(path: str | Path, model: ModelSpec, cfg: PlanConfig, global_batch: int,
                   stack: Stack) -> None:
    """Write :func:`workload_dict` of ``cfg`` to ``path`` as YAML."""
    import yaml

    text = yaml.safe_dump(workload_dict(model, cfg, global_batch, stack), sort_keys=False,
                          default_flow_style=None, width=200)
    Path(path).write_text(text, encoding="utf-8")


def replay_workload(workload: Mapping[str, Any] | str | Path,
                    topology: Network | str | Path | Mapping[str, Any]) -> HybridSpec:
    """A ``hybrid`` workload in the planner's description (a mapping or a YAML file) ->
    the replay's spec, timed by ``topology``'s device (errors name the field path)."""
    source = str(workload) if isinstance(workload, str | Path) else ""
    network = load_topology(topology)
    try:
        raw = fields.read_yaml(workload) if isinstance(workload, str | Path) else workload
        data = fields.mapping(raw, "")
        fields.check_keys(data, *_TOP, "", " for a planned kind 'hybrid'")
        if data["kind"] != "hybrid":
            raise SpecError(f"kind: {data['kind']!r}: the planner's description is a 'hybrid' "
                            "workload")
        model = model_from_dict({"model": data["model"]})
        cfg = _config(data, model)
        return replay_spec(
            model, cfg, fields.positive_int(data["global_batch"], "global_batch"),
            _device(data, network), _stack(data.get("stack", "current")),
            fields.algorithm(data.get("algorithm", "auto"), "algorithm"), network)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}" if source else str(exc)) from None
