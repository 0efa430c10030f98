"""The search's axes (:mod:`.search`): what may be tried, each axis checked on its own, and
the values of each that divide, with the combinations that do not rejected and why.

Expert parallelism (mixtures of experts) comes as (EP, expert TP) pairs: with expert TP the
attention's (the default), every EP that divides the experts and DP (the EP ranks are
data-parallel ranks); with an expert TP of its own (``--etp``), every EP that divides the
experts with ``etp x ep`` dividing a stage's ``tp x cp x dp`` ranks (Megatron-Core's rule,
:mod:`.config`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from commsim.errors import SpecError
from commsim.plan.bounds import layer_costs
from commsim.plan.compute import RECOMPUTE, RECOMPUTES
from commsim.plan.device import DeviceSpec
from commsim.plan.memory import DATA_PARALLEL, stage_chunk_layers
from commsim.plan.models import ModelSpec
from commsim.plan.stack import Stack
from commsim.replay.graph import MAX_TASKS
from commsim.replay.pipeline import pipeline_ops
from commsim.replay.stages import check_split, is_even, search_split


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order (pairs up to its square root).

    >>> divisors(12), divisors(1), divisors(49)
    ([1, 2, 3, 4, 6, 12], [1], [1, 7, 49])
    """
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return low + [n // d for d in reversed(low) if d * d != n]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """The values to try per axis; None: every value that divides (see the module)."""

    tp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] | None = None
    schedule: tuple[tuple[str, int | None], ...] | None = None  #: (name, V or None: search)
    data_parallel: tuple[str, ...] = DATA_PARALLEL
    recompute: tuple[str, ...] = RECOMPUTE
    ep: tuple[int, ...] | None = None
    etp: tuple[int, ...] | None = None  #: expert TP (None: the attention's TP only)
    #: layers per stage, first stage first (None: equal stages where pp divides the layers,
    #: else the split :func:`~commsim.replay.stages.search_split` finds)
    stage_layers: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    """A configuration not timed (partial ones name only the axes they fixed), and why."""

    axes: dict[str, Any]
    reason: str
    peak_memory_bytes: int | None = None


def _check_axis(name: str, values: Sequence[int] | None, of: int, what: str) -> None:
    for v in values or ():
        if v < 1 or of % v:
            raise SpecError(f"--{name} {v}: does not divide {what} ({of})")


def check_space(model: ModelSpec, gpus: int, space: SearchSpace) -> None:
    _check_axis("tp", space.tp, model.heads, "the model's heads")
    for t in space.tp or ():
        if model.kv_heads % t and t % model.kv_heads:
            raise SpecError(f"--tp {t}: neither divides nor is a multiple of the "
                            f"{model.kv_heads} key/value heads")
    _check_axis("tp", space.tp, gpus, "the GPUs")
    _check_axis("cp", space.cp, model.seq, "the sequence length")
    _check_axis("cp", space.cp, gpus, "the GPUs")
    for p in space.pp or ():
        if p > model.layers:
            raise SpecError(f"--pp {p}: more stages than the model's {model.layers} layers")
    _check_axis("pp", space.pp, gpus, "the GPUs")
    if space.stage_layers is not None:
        for p in space.pp or (len(space.stage_layers),):
            check_split(space.stage_layers, model.layers, p, "--stage-layers")
    for mb in space.micro_batch or ():
        if mb < 1:
            raise SpecError(f"--micro-batch {mb}: must be >= 1")
    for ep in space.ep or ():
        if model.moe is None and ep != 1:
            raise SpecError(f"--ep {ep}: {model.name} has no experts (only --ep 1)")
    if model.moe is not None:
        _check_axis("ep", space.ep, model.moe.experts, "the model's experts")
        _check_axis("ep", space.ep, gpus, "the GPUs")
        _check_axis("etp", space.etp, model.moe.expert_ffn_hidden, "the experts' FFN size")
        _check_axis("etp", space.etp, gpus, "the GPUs")
    elif space.etp:
        raise SpecError(f"--etp {space.etp[0]}: {model.name} has no experts")
    for rc in space.recompute:
        if rc not in RECOMPUTES:
            raise SpecError(f"--recompute {rc}: must be one of {', '.join(RECOMPUTES)}")
        if rc == "moe" and model.moe is None:
            raise SpecError(f"--recompute moe: {model.name} has no experts")


def expert_axes(model: ModelSpec, tp: int, cp: int, dp: int, space: SearchSpace,
                axes: dict[str, Any], rejected: list[Rejected]) -> list[tuple[int, int]]:
    """The (EP, expert TP) pairs of a layout (see the module docstring): the EP sizes asked
    for (rejected where they do not divide), or every divisor of the experts that divides;
    expert TP the attention's unless ``space.etp`` lists others."""
    if model.moe is None:
        return [(1, tp)]
    out: list[tuple[int, int]] = []
    for etp in space.etp or (tp,):
        if etp == tp:
            if space.ep is None:
                out += [(e, tp) for e in divisors(model.moe.experts) if dp % e == 0]
                continue
            for e in space.ep:
                if dp % e:
                    rejected.append(Rejected({**axes, "ep": e, "etp": tp},
                                             f"ep {e} does not divide dp ({dp}): the "
                                             "expert-parallel ranks are data-parallel ranks"))
                else:
                    out.append((e, tp))
            continue
        ranks = tp * cp * dp
        for e in space.ep or divisors(model.moe.experts):
            if ranks % (etp * e) == 0:
                out.append((e, etp))
            elif space.ep is not None:
                rejected.append(Rejected({**axes, "ep": e, "etp": etp},
                                         f"etp x ep = {etp * e} does not divide a stage's "
                                         f"tp x cp x dp = {ranks} ranks"))
    return out


def layouts(model: ModelSpec, gpus: int, space: SearchSpace,
             rejected: list[Rejected]) -> list[tuple[int, int, int, int]]:
    """(tp, cp, pp, dp) whose product is the GPUs (others rejected)."""
    tps = space.tp or [t for t in divisors(gpus) if model.heads % t == 0
                       and (model.kv_heads % t == 0 or t % model.kv_heads == 0)]
    cps = space.cp or [c for c in divisors(gpus) if model.seq % c == 0]
    pps = space.pp or ([len(space.stage_layers)] if space.stage_layers is not None
                       else [p for p in divisors(gpus) if model.layers % p == 0])
    out = []
    for tp in tps:
        for cp in cps:
            for pp in pps:
                if gpus % (tp * cp * pp):
                    rejected.append(Rejected({"tp": tp, "cp": cp, "pp": pp},
                                             f"tp x cp x pp = {tp * cp * pp} does not divide "
                                             f"the {gpus} GPUs"))
                    continue
                out.append((tp, cp, pp, gpus // (tp * cp * pp)))
    return out


def schedules(model: ModelSpec, pp: int, k: int, space: SearchSpace,
               axes: dict[str, Any], rejected: list[Rejected],
               splits: Sequence[tuple[int, ...]] = ()) -> list[tuple[str, int]]:
    """The schedules to try (rejections into ``rejected``); ``splits``: the stages' layers
    when they differ (the chunk counts that place on any of them; each configuration is
    checked against its own in :func:`unplaced`)."""
    wanted = space.schedule
    if wanted is None:
        wanted = (("1f1b", 1),) if pp == 1 else (("1f1b", 1), ("gpipe", 1), ("interleaved", None))
    out = []
    for name, v in wanted:
        if name != "interleaved":
            if _too_many_ops(pp, k, 1, {**axes, "schedule": name}, rejected):
                continue
            out.append((name, 1))
            continue
        per = model.layers // pp
        chunks = [v] if v is not None else [c for c in divisors(per) if c > 1]
        if splits and v is None:
            chunks = [c for c in range(2, max(map(max, splits)) + 2)
                      if any(unplaced(sp, c) is None for sp in splits)]
        for c in chunks:
            why = ""
            if pp == 1:
                why = "interleaved needs pp > 1"
            elif not splits and per % c:
                why = f"{c} chunks do not divide the stage's {per} layers"
            elif k % pp:
                why = f"interleaved needs micro-batches ({k}) divisible by pp ({pp})"
            at = {**axes, "schedule": name, "chunks_per_stage": c}
            if why:
                rejected.append(Rejected(at, why))
            elif not _too_many_ops(pp, k, c, at, rejected):
                out.append((name, c))
    return out


def unplaced(split: tuple[int, ...], chunks: int) -> str | None:
    """Why ``split``'s stages do not split into ``chunks`` model chunks (None: they do)."""
    try:
        stage_chunk_layers(split, chunks)
    except SpecError as exc:
        return str(exc)
    return None


def stage_split(model: ModelSpec, device: DeviceSpec, space: SearchSpace, stack: Stack,
           tp: int, cp: int, pp: int, mb: int, recompute: str) -> tuple[int, ...]:
    """A configuration's stage layers where they differ (empty: equal stages):
    ``--stage-layers``, or, where pp does not divide the layers,
    :func:`~commsim.replay.stages.search_split` on the configuration's compute per
    micro-batch (a layer's forward, backward and recompute; the output layer and loss on the
    last stage)."""
    if space.stage_layers is not None:
        return () if is_even(space.stage_layers) else space.stage_layers
    if model.layers % pp == 0:
        return ()
    t = layer_costs(model, device, tp, cp, mb, recompute, stack)
    layer = (t.attn_fwd + t.mlp_fwd + t.attn_bwd + t.mlp_bwd + t.attn_recompute
             + t.mlp_recompute)
    return search_split(model.layers, pp, layer, t.logits_fwd + t.logits_bwd)


def _too_many_ops(pp: int, k: int, v: int, axes: dict[str, Any],
                  rejected: list[Rejected]) -> bool:
    """Whether a pipeline of ``pp`` stages, ``k`` micro-batches and ``v`` chunks per stage has
    more ops than a step graph may (:data:`~commsim.replay.graph.MAX_TASKS`): it is then
    rejected, as its evaluation would walk every op (a larger micro-batch has fewer)."""
    ops = pipeline_ops(pp, k, v)
    if ops <= MAX_TASKS:
        return False
    rejected.append(Rejected(axes, f"{k} micro-batches make {ops} pipeline ops (2 x pp x "
                                   f"micro-batches x chunks), more than the {MAX_TASKS} a step "
                                   "graph may have"))
    return True
