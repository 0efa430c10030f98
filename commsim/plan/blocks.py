"""What the one-pipeline evaluation (:mod:`commsim.plan.evaluate`) times: a pipeline's costs
per micro-batch (:class:`PipelineCosts`, with each stage's mixture-of-experts halves,
:class:`MoEStage`, made by :mod:`commsim.plan.costs`) and each layer's blocks on the compute
stream and the streams of its collectives (:func:`layer_blocks`), which the evaluation runs
and :mod:`commsim.plan.overlap` pairs.

A dense layer's forward is ``[cp] attention [tp] MLP [tp]``, its backward ``[recompute] MLP
[tp] attention [cp] [tp]``; a stage with MoE layers runs its mean layer (see
:func:`_moe_blocks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Block = tuple[str, float]  # (stream, seconds)


@dataclass(frozen=True, slots=True)
class MoEStage:
    """A stage's mixture-of-experts halves (:mod:`commsim.plan.moe_layer`), in seconds per
    micro-batch: ``share`` of its layers are MoE layers, whose MLP half is ``pre`` (router,
    permute), a dispatch all-to-all (``a2a``, on the ``ep`` stream), ``experts`` (grouped
    GEMMs, shared experts), the TP collective ``tp`` and a combine all-to-all; the stage's
    layer is the mean of its dense and MoE layers (exact for the serial chain of an op's
    layers, :func:`~commsim.plan.evaluate._run_layers`)."""

    share: float
    pre_fwd: float
    experts_fwd: float
    pre_bwd: float
    experts_bwd: float
    a2a: float
    tp: float
    #: the forward combine and the dispatch's backward, which stay bf16 when the dispatch
    #: runs in FP8 (:mod:`commsim.plan.moe_layer`); None: ``a2a``
    a2a_bf16: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineCosts:
    """Everything :func:`~commsim.plan.evaluate.evaluate_pipeline` needs, in seconds per
    micro-batch per rank.

    ``attn_fwd``, ``mlp_fwd``, ``attn_bwd``, ``mlp_bwd`` are the compute of a layer's halves;
    ``attn_rc``/``mlp_rc`` the forward re-run before the backward (with the forward's
    collectives when ``rc_comm``); ``logits_fwd``/``logits_bwd`` the last virtual stage's output
    layer. ``chunk_layers[v]``: the layers of virtual stage ``v`` when stages differ
    (:mod:`commsim.replay.stages`; empty: ``layers_per_chunk`` each, a chunk of none runs an
    empty kernel, the embedding or the loss alone). Per stage: ``tp_ar`` (0: no TP group),
    ``cp_gather``/``cp_rs`` (0: no CP group); ``send`` maps ``(src, dst)`` stages to a send's
    seconds. ``gather[stage]`` lists the FSDP all-gather of each of the stage's layers in
    first-use order (empty: nothing sharded); ``reduce[stage]`` maps a global layer to the
    reduction issued after its last backward; ``final[stage]`` runs on the ``dp`` stream after
    the last reduction and the stage's last op (ZeRO's weight all-gather; without overlap, the
    gradient reduction too). ``optimizer[stage]`` is the optimizer step, on the compute stream
    once every stream of the stage is done (empty: none). With ``p2p_blocking`` a stage's
    compute stream waits for each of its sends (Megatron-LM 2021), and a received tensor is
    usable ``recv_gather[stage]`` after it arrives (its TP all-gather).
    ``compute_factor[stage]`` multiplies every compute of the stage (its layers, logits and
    optimizer step: a what-if's slowest rank among the stage's ranks,
    :func:`commsim.plan.costs.stage_factors`; empty: all at healthy pace). ``moe[stage]``
    (empty: a dense model) replaces the MLP half of its MoE layers (:class:`MoEStage`).
    ``fsdp_reshard``: ``gather`` and ``reduce`` run as PyTorch's FSDP runs them, in every
    micro-batch (see the module docstring). ``moe_overlap`` and ``paired[stage]`` (its
    forward and backward layer's blocks when a forward and a backward run together, the
    all-to-alls hidden: :mod:`commsim.plan.overlap`): under ``ep-overlap`` a forward and a
    backward of different micro-batches that follow each other on a stage run so.
    ``overlap[stage]`` maps a global layer to the compute seconds that the reductions issued
    after its last backward cost the compute they overlap (:mod:`commsim.plan.interference`),
    run on the compute stream right after that layer, at the stage's ``compute_factor`` as
    the replay runs every compute task of a slow rank (empty: none).
    """

    schedule: str
    pp: int
    chunks: int
    microbatches: int
    layers_per_chunk: int
    chunk_layers: tuple[int, ...] = ()
    attn_fwd: float
    mlp_fwd: float
    attn_bwd: float
    mlp_bwd: float
    attn_rc: float = 0.0
    mlp_rc: float = 0.0
    rc_comm: bool = False
    moe_rc: bool = False  #: ``moe`` recompute: each MoE half's forward again before its backward
    logits_fwd: float = 0.0
    logits_bwd: float = 0.0
    tp_ar: tuple[float, ...]
    cp_gather: tuple[float, ...]
    cp_rs: tuple[float, ...]
    send: Mapping[tuple[int, int], float] = field(default_factory=dict)
    gather: tuple[tuple[float, ...], ...] = ()
    reduce: tuple[Mapping[int, float], ...] = ()
    final: tuple[float, ...] = ()
    optimizer: tuple[float, ...] = ()
    p2p_blocking: bool = False
    recv_gather: tuple[float, ...] = ()
    compute_factor: tuple[float, ...] = ()
    moe: tuple[MoEStage, ...] = ()
    fsdp_reshard: bool = False
    moe_overlap: str = "none"
    paired: tuple[tuple[tuple[Block, ...], tuple[Block, ...]], ...] = ()
    overlap: tuple[Mapping[int, float], ...] = ()

    def factor(self, stage: int) -> float:
        """The compute factor of ``stage`` (1 without a what-if)."""
        return self.compute_factor[stage] if self.compute_factor else 1.0


@dataclass(frozen=True, slots=True)
class PipelineTiming:
    """The step of one pipeline: its time, and per stage compute and exposed communication."""

    step_time_s: float
    compute_s: tuple[float, ...]
    exposed_comm_s: tuple[float, ...]


def layer_blocks(c: PipelineCosts, stage: int, forward: bool) -> list[Block]:
    """One layer's blocks on ``stage``, in order (see the module docstring)."""
    if c.moe:
        return _moe_blocks(c, stage, forward)
    tp, cg, rs = c.tp_ar[stage], c.cp_gather[stage], c.cp_rs[stage]
    k = c.factor(stage)
    fwd: list[Block] = []
    for half, comp in (("attn", c.attn_fwd), ("mlp", c.mlp_fwd)):
        if half == "attn" and cg:
            fwd.append(("cp", cg))
        fwd.append(("compute", comp * k))
        if tp:
            fwd.append(("tp", tp))
    if forward:
        return fwd
    out: list[Block] = []
    if c.rc_comm:
        rc = [("compute", (c.attn_rc if i == 0 else c.mlp_rc) * k) for i in range(2)]
        out += [b if b[0] != "compute" else rc.pop(0) for b in fwd]
    out.append(("compute", (c.mlp_bwd + (0.0 if c.rc_comm else c.mlp_rc)) * k))
    if tp:
        out.append(("tp", tp))
    out.append(("compute", (c.attn_bwd + (0.0 if c.rc_comm else c.attn_rc)) * k))
    if rs:
        out.append(("cp", rs))
    if tp:
        out.append(("tp", tp))
    return out


def _moe_blocks(c: PipelineCosts, stage: int, forward: bool) -> list[Block]:
    """:func:`layer_blocks` of a stage with MoE layers (the mean layer, :class:`MoEStage`):
    forward ``[cp] attention [tp] router ep:dispatch experts [tp] ep:combine``, backward
    ``ep:combine' experts' [tp] ep:dispatch' router'+attention' [cp] [tp]``, after the MoE
    half's forward again under ``moe`` recompute."""
    m, k = c.moe[stage], c.factor(stage)
    tp, cg, rs = c.tp_ar[stage], c.cp_gather[stage], c.cp_rs[stage]
    dense = 1.0 - m.share
    a2a = [("ep", m.share * m.a2a)] if m.a2a and m.share else []
    bf16 = m.a2a if m.a2a_bf16 is None else m.a2a_bf16
    a2a16 = [("ep", m.share * bf16)] if bf16 and m.share else []
    mlp_tp = dense * tp + m.share * m.tp
    fwd: list[Block] = [("cp", cg)] if cg else []
    fwd += [("compute", c.attn_fwd * k)] + ([("tp", tp)] if tp else [])
    fwd += [("compute", (dense * c.mlp_fwd + m.share * m.pre_fwd) * k), *a2a,
            ("compute", m.share * m.experts_fwd * k)]
    fwd += ([("tp", mlp_tp)] if mlp_tp else []) + a2a16
    if forward:
        return fwd
    out = list(fwd) if c.rc_comm else []
    if c.moe_rc:  # the MoE half's forward again: router, dispatch, experts, [tp], combine
        out += [("compute", m.share * m.pre_fwd * k), *a2a,
                ("compute", m.share * m.experts_fwd * k)]
        out += ([("tp", m.share * m.tp)] if m.tp else []) + a2a16
    mlp_rc = 0.0 if c.rc_comm else dense * c.mlp_rc
    attn_rc = 0.0 if c.rc_comm else c.attn_rc
    out += a2a + [("compute", (dense * c.mlp_bwd + mlp_rc + m.share * m.experts_bwd) * k)]
    out += ([("tp", mlp_tp)] if mlp_tp else []) + a2a16
    out.append(("compute", (c.attn_bwd + attn_rc + m.share * m.pre_bwd) * k))
    out += ([("cp", rs)] if rs else []) + ([("tp", tp)] if tp else [])
    return out
