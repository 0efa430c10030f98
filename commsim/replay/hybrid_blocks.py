"""A ``hybrid`` layer as a sequence of blocks: compute on the rank's compute stream, or one
collective over a kind of group (``tp``, ``cp``, ``ep``), each waiting for the one before.

:class:`BlockTimes` holds a step's compute per block and the sizes of its collectives when a
model outside this package (the planner's compute model, :mod:`commsim.plan.workload`) gives
them; without it the blocks come from the flat FLOPs of :mod:`.transformer`. One sequence per
layer, read by the lowering (:mod:`.hybrid_graph`) and, block for block, by the planner's one
pipeline (:mod:`commsim.plan.evaluate`):

* a dense layer's forward is ``[cp all-gather] attention [tp all-reduce] MLP [tp all-reduce]``;
  its backward ``MLP' [tp] attention' [cp reduce-scatter] [tp]``, the recompute added to each
  half (selective: the attention core), or, with full recompute, the forward's blocks run
  again first, collectives and all;
* a mixture-of-experts layer's MLP half is ``router ep:dispatch experts [etp] [tp]
  ep:combine`` (the all-to-alls over the expert-parallel group, the TP collectives of the
  routed tokens and the shared experts),
  backward ``ep:combine' experts' [tp] ep:dispatch'`` with the router's backward joining the
  attention's (under ``moe`` recompute after the half's forward again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple


class Block(NamedTuple):
    """``kind`` ``compute`` (``amount``: seconds) or a group kind, ``tp``, ``cp``, ``ep`` or
    ``etp``, whose ``collective`` moves ``amount`` bytes."""

    kind: str
    collective: str
    amount: float
    label: str


def _c(seconds: float, label: str) -> Block:
    return Block("compute", "", seconds, label)


@dataclass(frozen=True, slots=True, kw_only=True)
class MoEBlocks:
    """The mixture-of-experts layers of a step (seconds per micro-batch on the busiest rank).

    ``layers``: the global layers with experts (their expert-parallel groups those of
    :class:`~commsim.replay.layout.Parallel`); one all-to-all's send buffer per rank,
    ``to_experts_bytes`` for what goes to the experts (the forward's dispatch, the backward's
    gradient of the combine: FP8 where the GEMMs are) and ``from_experts_bytes`` for what comes
    back (the forward's combine, the backward's gradient of the dispatch); ``tp_collectives``:
    the MoE half's all-reduces as (group kind ``tp`` or ``etp``, bytes); ``expert_params``: per
    global layer, one rank's routed-expert parameters (0 on a dense layer), gathered and
    reduced over the expert data-parallel group; ``legs``: (an expert-parallel group, the bytes
    of its all-to-all) -> the all-to-alls over subgroups that run together in its place, each
    with its bytes and its lane (a rank's subgroups are in different lanes, its ``ep``
    stream's and ``ep #2``'s: DeepEP's two legs, :mod:`commsim.plan.dispatch`; empty: NCCL's
    all-to-all), the group's ranks waiting for every one of them.
    """

    layers: frozenset[int]
    pre_fwd: float
    experts_fwd: float
    pre_bwd: float
    experts_bwd: float
    to_experts_bytes: int
    from_experts_bytes: int
    tp_collectives: tuple[tuple[str, int], ...]
    expert_params: tuple[int, ...]
    legs: Mapping[tuple[tuple[int, ...], int], tuple[tuple[tuple[int, ...], int, int], ...]] = (
        field(default_factory=dict))

    def tp_blocks(self) -> list[Block]:
        """The MoE half's TP collectives, in order."""
        return [Block(kind, "all_reduce", nbytes, "experts allreduce")
                for kind, nbytes in self.tp_collectives]


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockTimes:
    """A step's compute per block (seconds per micro-batch on one rank) and its sizes.

    ``attn_*``/``mlp_*``: the two halves of a dense layer; ``*_recompute`` what the backward
    runs again (``recompute_collectives``: full recompute, the forward's collectives too;
    ``moe_recompute``: a MoE layer's MLP half, its all-to-alls too, before its backward);
    ``logits_*``: the last stage's output layer and loss; ``optimizer_s``: per stage, the
    optimizer step of one rank (empty: none); ``params``: per global layer, one TP rank's
    parameters (embeddings included); ``tp_bytes``, ``cp_bytes``: the TP all-reduce and the CP
    all-gather of keys and values; ``grad_bytes``: bytes of a reduced gradient element;
    ``grad_overlap``: DDP/ZeRO reduce per bucket during the backward (else once after it);
    ``activation_bytes``: one layer's activations kept per micro-batch; ``flops_per_token``:
    model and hardware FLOPs per token (MFU's numerator); ``model_params``: the model's
    parameters (reported; 0: the flat model's); ``peak_flops``: the GPU's;
    ``p2p_blocking``: a stage's compute waits for each of its pipeline sends, and a received
    activation is all-gathered over the TP group before use (Megatron-LM 2021);
    ``overlap_s[stage]``: global layer -> compute seconds run right after its last backward,
    what the gradient reductions issued there cost the compute they overlap (the planner's
    :mod:`commsim.plan.interference`; empty: none).
    """

    attn_fwd: float
    mlp_fwd: float
    attn_bwd: float
    mlp_bwd: float
    attn_recompute: float = 0.0
    mlp_recompute: float = 0.0
    recompute_collectives: bool = False
    moe_recompute: bool = False
    logits_fwd: float
    logits_bwd: float
    optimizer_s: tuple[float, ...] = ()
    params: tuple[int, ...]
    tp_bytes: int
    cp_bytes: int
    grad_bytes: int = 2
    grad_overlap: bool = True
    activation_bytes: int = 0
    flops_per_token: tuple[float, float] = (0.0, 0.0)
    model_params: int = 0
    peak_flops: float = 0.0
    p2p_blocking: bool = False
    moe: MoEBlocks | None = None
    overlap_s: tuple[Mapping[int, float], ...] = ()
    #: Megatron-Core's combined 1F1B (``--moe-overlap ep-overlap``): per stage, the factor a
    #: combined step's compute is stretched by while its all-to-alls hold SMs
    #: (:func:`commsim.plan.overlap.paired_blocks`); empty: every op runs alone.
    combined_stretch: tuple[float, ...] = ()


def _dense_fwd(t: BlockTimes, cp: bool, attn: float, mlp: float) -> list[Block]:
    out: list[Block] = [Block("cp", "all_gather", t.cp_bytes, "kv allgather")] if cp else []
    return out + [_c(attn, "attn"), Block("tp", "all_reduce", t.tp_bytes, "attn allreduce"),
                  _c(mlp, "mlp"), Block("tp", "all_reduce", t.tp_bytes, "mlp allreduce")]


def _moe_fwd(t: BlockTimes, cp: bool) -> list[Block]:
    m = t.moe
    assert m is not None
    out: list[Block] = [Block("cp", "all_gather", t.cp_bytes, "kv allgather")] if cp else []
    return out + [_c(t.attn_fwd, "attn"),
                  Block("tp", "all_reduce", t.tp_bytes, "attn allreduce"),
                  *_moe_half(m)]


def _moe_half(m: MoEBlocks) -> list[Block]:
    """A MoE layer's MLP half, forward."""
    return [_c(m.pre_fwd, "router"), Block("ep", "all_to_all", m.to_experts_bytes, "dispatch"),
            _c(m.experts_fwd, "experts"), *m.tp_blocks(),
            Block("ep", "all_to_all", m.from_experts_bytes, "combine")]


def handovers(kinds: Sequence[str]) -> frozenset[int]:
    """Where an op of a combined step hands the compute stream to the other: the indices of
    a layer's compute blocks (``kinds``: its blocks' kinds) after which the other op's next
    part runs. Megatron-Core's combined 1F1B runs a layer pair in four parts, forward
    attention | dispatch | experts | combine against backward combine | experts | dispatch |
    attention (``combined_1f1b.py``; its "Combined 1F1B" developer guide page), so an op
    hands over after the last compute before each all-to-all that follows compute, and after
    its layer's last compute: twice per MoE layer either way, once per dense layer."""
    out: set[int] = set()
    last = None
    for i, kind in enumerate(kinds):
        if kind == "compute":
            last = i
        elif kind == "ep" and last is not None:
            out.add(last)
    if last is not None:
        out.add(last)
    return frozenset(out)


def layer_blocks(t: BlockTimes, layer: int, forward: bool, cp: bool) -> list[Block]:
    """The blocks of ``layer``'s forward or backward (``cp``: context parallel, ``cp > 1``)."""
    moe = t.moe is not None and layer in t.moe.layers
    fwd = _moe_fwd(t, cp) if moe else _dense_fwd(t, cp, t.attn_fwd, t.mlp_fwd)
    if forward:
        return fwd
    rc = t.recompute_collectives
    out: list[Block] = []
    if rc:
        out = fwd if moe else _dense_fwd(t, cp, t.attn_recompute, t.mlp_recompute)
        out = [b._replace(label="recompute " + b.label) for b in out]
    attn = t.attn_bwd + (0.0 if rc else t.attn_recompute)
    if moe:
        m = t.moe
        assert m is not None
        if t.moe_recompute:
            out += [b._replace(label="recompute " + b.label) for b in _moe_half(m)]
        out += [Block("ep", "all_to_all", m.to_experts_bytes, "combine"),
                _c(m.experts_bwd, "experts"),
                *m.tp_blocks(),
                Block("ep", "all_to_all", m.from_experts_bytes, "dispatch"),
                _c(attn + m.pre_bwd, "router+attn")]
    else:
        out += [_c(t.mlp_bwd + (0.0 if rc else t.mlp_recompute), "mlp"),
                Block("tp", "all_reduce", t.tp_bytes, "mlp allreduce"),
                _c(attn, "attn")]
    if cp:
        out.append(Block("cp", "reduce_scatter", t.cp_bytes, "kv reducescatter"))
    out.append(Block("tp", "all_reduce", t.tp_bytes, "attn allreduce"))
    return out
