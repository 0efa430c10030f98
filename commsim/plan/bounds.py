"""Lower bounds on a configuration's step, which let the search prune (:mod:`.search`).

Compute: the busiest stage runs all its ops one at a time, after the first micro-batch's
forward has crossed the stages before it and before the last one's backward crosses them
back (:func:`step_bound`; per stage under a what-if's compute factors, :func:`slow_bound`; on
stages of different layers, :func:`split_bound`), a layer costing at most any layer's
(:func:`layer_bound`: the cheaper of the dense and the MoE MLP half). Communication
(:func:`comm_bound`): the stage's TP and CP collectives of shapes already timed, and its MoE
all-to-alls (:func:`a2a_bound`: timed, one collective that the configuration times anyway if
it is not pruned), which its layers wait for.

Under a ``moe_overlap`` (:mod:`.overlap`) the all-to-alls may hide, so none enters the bound;
under ``dualpipe`` a rank runs the micro-batches of two stages (``r`` and ``PP - 1 - r``)
half each with no fill or drain that a lower bound can count, so its bound is the mean of
the two stages' compute, and no collective enters it.
"""

from __future__ import annotations

from functools import lru_cache

from commsim.plan.compute import LayerTimes, layer_times
from commsim.plan.config import PlanConfig
from commsim.plan.device import DeviceSpec
from commsim.plan.dispatch import dispatch_seconds
from commsim.plan.groups import group
from commsim.plan.memory import layer_activation_bytes, moe_share, stage_chunk_layers
from commsim.plan.models import ModelSpec
from commsim.plan.moe_layer import MoETimes, dispatch_bytes, moe_times
from commsim.plan.stack import DEFAULT, Stack
from commsim.plan.timing import CollectiveTimer


@lru_cache(maxsize=4096)
def layer_costs(model: ModelSpec, device: DeviceSpec, tp: int, cp: int, mb: int,
                recompute: str, stack: Stack = DEFAULT) -> LayerTimes:
    """The compute of one layer (:func:`~commsim.plan.compute.layer_times`), memoised."""
    ew = layer_activation_bytes(model, mb, tp, cp, "selective", stack)
    return layer_times(model, device, tp=tp, cp=cp, micro_batch=mb, recompute=recompute,
                       elementwise_bytes=ew, stack=stack)


def moe_costs(model: ModelSpec, device: DeviceSpec, cfg: PlanConfig,
              stack: Stack = DEFAULT) -> MoETimes | None:
    """The MoE half's compute (:func:`~commsim.plan.moe_layer.moe_times`) in the stack's
    precision; None for a dense model."""
    if model.moe is None:
        return None
    return moe_times(model, device, tp=cfg.tp, cp=cfg.cp, ep=cfg.ep, micro_batch=cfg.micro_batch,
                     precision=stack.precision, etp=None if cfg.etp == cfg.tp else cfg.etp)


def layer_bound(model: ModelSpec, device: DeviceSpec, cfg: PlanConfig,
                 t: LayerTimes, stack: Stack = DEFAULT) -> tuple[float, float]:
    """(forward, backward with recompute) compute of a layer, at most any layer's: the MLP
    half the cheaper of the dense and the MoE one where a model has both."""
    mlp_f, mlp_b = t.mlp_fwd, t.mlp_bwd
    m = moe_costs(model, device, cfg, stack)
    if m is not None and model.moe is not None:
        f, b = m.pre_fwd + m.experts_fwd, m.pre_bwd + m.experts_bwd
        mlp_f, mlp_b = (min(mlp_f, f), min(mlp_b, b)) if model.moe.dense_layers else (f, b)
    rc = mlp_f if cfg.recompute == "full" else 0.0
    if cfg.recompute == "moe" and m is not None and model.moe is not None:
        rc = 0.0 if model.moe.dense_layers else mlp_f  # a dense layer recomputes nothing
    return t.attn_fwd + mlp_f, t.attn_bwd + mlp_b + t.attn_recompute + rc


def step_bound(model: ModelSpec, device: DeviceSpec, cfg: PlanConfig, k: int,
           stack: Stack) -> float:
    """A lower bound on the step: the last stage's compute (all its ops, one at a time),
    after the first micro-batch's forward has crossed the ``pp - 1`` stages before it, and
    before the last micro-batch's backward crosses them back (compute only)."""
    t = layer_costs(model, device, cfg.tp, cfg.cp, cfg.micro_batch, cfg.recompute, stack)
    per_chunk = model.layers // (cfg.pp * cfg.chunks)
    fwd, bwd = (per_chunk * x for x in layer_bound(model, device, cfg, t, stack))
    if stack.moe_overlap == "dualpipe":  # every rank: k chunks, half with the output layer
        return k * (fwd + bwd + (t.logits_fwd + t.logits_bwd) / 2)
    last = k * (cfg.chunks * (fwd + bwd) + t.logits_fwd + t.logits_bwd)
    return last + (cfg.pp - 1) * (fwd + bwd)


def slow_bound(model: ModelSpec, device: DeviceSpec, cfg: PlanConfig, k: int, stack: Stack,
                factors: tuple[float, ...]) -> tuple[float, ...]:
    """:func:`step_bound` with each stage's compute ``factors``, for every stage: its compute at
    its factor, after and before the crossing of the stages before it."""
    t = layer_costs(model, device, cfg.tp, cfg.cp, cfg.micro_batch, cfg.recompute, stack)
    per_chunk = model.layers // (cfg.pp * cfg.chunks)
    fwd, bwd = (per_chunk * x for x in layer_bound(model, device, cfg, t, stack))
    out: list[float] = []
    crossed = 0.0
    for stage, f in enumerate(factors):
        own = f * k * (cfg.chunks * (fwd + bwd)
                       + (t.logits_fwd + t.logits_bwd if stage == cfg.pp - 1 else 0.0))
        out.append(own + crossed)
        crossed += f * (fwd + bwd)
    return _dualpipe(out, stack) if stack.moe_overlap == "dualpipe" else tuple(out)


def _dualpipe(own: list[float], stack: Stack) -> tuple[float, ...]:
    """Each rank's bound under DualPipe: the mean of its two stages' own compute."""
    pp = len(own)
    return tuple((own[r] + own[pp - 1 - r]) / 2 for r in range(pp))


def split_bound(model: ModelSpec, device: DeviceSpec, cfg: PlanConfig, k: int, stack: Stack,
                 factors: tuple[float, ...]) -> tuple[float, ...]:
    """:func:`slow_bound` for stages of different layers (``cfg.stage_layers``): each stage's
    compute at its factor, after the first micro-batch's forward through the first model
    chunk of every stage before it, and before the last one's backward back through them."""
    t = layer_costs(model, device, cfg.tp, cfg.cp, cfg.micro_batch, cfg.recompute, stack)
    layer = (t.attn_fwd + t.mlp_fwd + t.attn_bwd + t.mlp_bwd + t.attn_recompute
             + t.mlp_recompute)
    if model.moe is not None:  # at most any layer's, dense or MoE
        layer = sum(layer_bound(model, device, cfg, t, stack))
    sizes = stage_chunk_layers(cfg.stage_layers, cfg.chunks)
    out: list[float] = []
    own_only: list[float] = []
    crossed = 0.0
    for stage, f in enumerate(factors):
        own = f * k * (sum(sizes[stage]) * layer
                       + (t.logits_fwd + t.logits_bwd if stage == cfg.pp - 1 else 0.0))
        out.append(own + crossed)
        own_only.append(own)
        crossed += f * sizes[stage][0] * layer
    return _dualpipe(own_only, stack) if stack.moe_overlap == "dualpipe" else tuple(out)


def comm_bound(model: ModelSpec, cfg: PlanConfig, microbatches: int, timer: CollectiveTimer,
               stage: int | None = None, stack: Stack = DEFAULT) -> float:
    """The last stage's (or ``stage``'s) TP and CP collectives and expert all-to-alls, which
    its layers wait for (all but the last all-reduce of each op, which the next op's first
    compute may overlap): the TP and CP ones of shapes already timed (0 for the others, so
    they cost no simulation), the all-to-all timed (:func:`a2a_bound`); under
    ``stack.moe_overlap`` no all-to-all, under ``dualpipe`` nothing."""
    if stack.moe_overlap == "dualpipe":
        return 0.0
    p = cfg.pp - 1 if stage is None else stage
    tokens = cfg.micro_batch * model.seq // cfg.cp
    ar = timer.known("all_reduce", group(cfg, "tp_group", p, 0), tokens * model.hidden * 2)
    kv = max(model.kv_heads // cfg.tp, 1) * model.head_dim if cfg.tp > 1 else model.kv_hidden
    cp_bytes = 2 * cfg.micro_batch * model.seq * kv * 2
    cps = group(cfg, "cp_group", p, 0)
    cg = timer.known("all_gather", cps, cp_bytes)
    rs = timer.known("reduce_scatter", cps, cp_bytes)
    per_chunk = model.layers // (cfg.pp * cfg.chunks)
    # with an expert TP of its own, a MoE half's TP collectives (over expert TP, or the shared
    # experts' alone) may be smaller than a dense half's or none: only the attention's counted
    halves = 2 if model.moe is None or cfg.etp == cfg.tp else 1
    fwd = cg + halves * ar
    bwd = rs + halves * ar + (fwd if cfg.recompute == "full" else 0.0)
    a2a, last = ((0.0, 0.0) if stack.moe_overlap != "none"
                 else a2a_bound(model, cfg, timer, p, stack.precision, stack.dispatcher))
    if cfg.stage_layers:  # every op of n > 0 layers: all but its last all-reduce (combine)
        sizes = stage_chunk_layers(cfg.stage_layers, cfg.chunks)[p]
        return microbatches * sum(n * (fwd + bwd + a2a) - 2 * ar - last for n in sizes if n)
    return microbatches * cfg.chunks * (per_chunk * (fwd + bwd + a2a) - 2 * ar - last)


def a2a_bound(model: ModelSpec, cfg: PlanConfig, timer: CollectiveTimer, stage: int,
              precision: str = "bf16", dispatcher: str = "alltoall") -> tuple[float, float]:
    """(per layer, per op) of a MoE stage's all-to-alls (its first expert-parallel group's,
    timed: a configuration that is not pruned times it anyway, and one all-to-all bounds the
    exposed communication that dominates MoE steps; deepseek-v3 on dgx-h100x256: 444
    configurations timed before, 147 after): the mean layer's dispatches and combines (4, 6
    with full or ``moe`` recompute), and the forward's last combine that the next op may
    overlap; (0, 0) without experts (or on a stage of dense layers only); in ``fp8``, every
    one at the FP8 dispatch's size (the smaller of the two it sends)."""
    if model.moe is None or cfg.ep < 2:
        return 0.0, 0.0
    share = moe_share(model, cfg.pp, cfg.chunks, stage, cfg.stage_layers)
    if not share:
        return 0.0, 0.0
    nbytes = dispatch_bytes(model, tp=cfg.tp, cp=cfg.cp, ep=cfg.ep, micro_batch=cfg.micro_batch,
                            precision=precision)
    a2a = dispatch_seconds(timer, model.moe, group(cfg, "ep_group", stage, 0), nbytes,
                           dispatcher)
    return (6 if cfg.recompute in ("full", "moe") else 4) * share * a2a, a2a
