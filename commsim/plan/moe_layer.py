"""A mixture-of-experts layer's MLP half on one rank: its compute from the GEMMs' real shapes,
the bytes of its all-to-alls and TP collectives, and the activations it keeps.

The layout is Megatron-Core's (``--expert-model-parallel-size``, the alltoall token
dispatcher, ``--moe-grouped-gemm``, ``--expert-tensor-parallel-size``): the ``E`` experts of a
layer are spread over the ``EP`` ranks of an expert-parallel group (``E/EP`` each, every
expert's matrices split ``u`` ways over the expert TP group, ``u = etp``; by default the
attention's ``t``), the groups from the expert grid
(:meth:`commsim.plan.config.PlanConfig.ep_group`). Per micro-batch a rank holds ``T/t``
tokens (``T = b s / c``, sequence parallel over the attention's TP), and per MoE layer it
(``MoEAlltoAllTokenDispatcher``: permute, all-to-all over EP, all-gather over expert TP; then
reduce-scatter over expert TP, all-to-all over EP, un-permute):

1. runs the router (a ``T/t x h`` by ``h x E`` GEMM) and permutes its ``k T/t`` routed copies
   (read and written once at HBM bandwidth);
2. **dispatches** them by an all-to-all over the EP group: each rank's send buffer is
   ``k (T/t) h`` bf16 values, times the busiest rank's load ``L``
   (:meth:`~commsim.plan.experts.MoESpec.load`): the all-to-all is timed as an even one in
   which every rank receives what the busiest receives (an upper bound on the uneven
   all-to-allv, and its time wherever the busiest rank's receive sets it);
3. all-gathers the received tokens over the expert TP group, runs its local experts as a
   grouped GEMM (the hottest expert's ``(1 + skew) n`` tokens, the ``E/EP - 1`` others' ``n``
   each, ``n = k T EP u / (t E)`` their even share, times the shares of
   :meth:`~commsim.plan.experts.MoESpec.shares`), each expert an MLP of the model's kind
   split ``u`` ways, and reduce-scatters the outputs: the expert TP traffic of the routed
   tokens, timed as one all-reduce of their ``k L T u / t h`` bf16 values (as the dense
   halves' all-gather and reduce-scatter are; none for ``u = 1``); the shared experts are a
   dense MLP of ``shared x f_e`` on the ``T`` tokens split over the attention's TP group
   (Megatron-Core's ``SharedExpertMLP``), whose TP traffic (``T h``) joins it when ``u = t``
   and is its own all-reduce over the TP group otherwise;
4. **combines** the outputs by a second all-to-all of the same size, and un-permutes them.

The backward runs the two all-to-alls again in reverse (4 per layer and micro-batch; 6 with
full recompute), the GEMMs' input and weight gradients, and twice the element-wise work. The
step waits for the busiest rank (its load ``L``) in every layer. How the dispatch and combine
meet compute is the stack's ``moe_overlap`` (:mod:`.overlap`; by default they do not).

**FP8** (``precision="fp8"``, as the DeepSeek-V3 report's Section 3.3 runs its MoE layers):
the router stays in bf16; the expert and shared-expert GEMMs run as the dense linear layers
do in fp8 (:func:`~commsim.plan.compute._fwd_bwd`: the fp8 peak, 1-byte inputs, their casts
at HBM bandwidth); the activations are dispatched in FP8, 1 byte per element and one fp32
scale per 128 (the report's 1 x 128 tiles), and so is the output gradient sent to the experts
in the backward (the combine's backward), while the forward combine and the dispatch's
backward stay in bf16 (Section 3.3.3: "for both the forward and backward combine components,
we retain them in BF16").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from commsim.plan.compute import BF16, _fwd_bwd
from commsim.plan.device import DeviceSpec
from commsim.plan.models import ModelSpec


@dataclass(frozen=True, slots=True)
class MoETimes:
    """Seconds per micro-batch of one MoE layer's MLP half on the busiest rank."""

    pre_fwd: float  #: router and permute, before the dispatch
    experts_fwd: float  #: grouped expert GEMMs, shared experts, activation, un-permute
    pre_bwd: float
    experts_bwd: float
    load: float  #: the busiest rank's tokens over the even share
    precision: str = "bf16"  #: the expert GEMMs'


#: Bytes per element of an FP8 dispatch: the 1-byte value and an fp32 scale per 1 x 128 tile
#: (the DeepSeek-V3 report, Section 3.3: activations quantized per token per 128 channels).
FP8_DISPATCH_BYTES = 1 + 4 / 128


def tokens(model: ModelSpec, micro_batch: int, cp: int) -> int:
    """``T``: the tokens of a micro-batch on one CP rank (a TP group's)."""
    return micro_batch * model.seq // cp


def dispatch_bytes(model: ModelSpec, *, tp: int, cp: int, ep: int, micro_batch: int,
                   precision: str = "bf16") -> int:
    """One all-to-all's size (each rank's send buffer, as nccl-tests counts it):
    ``L k (T/t) h`` bf16 values; ``precision="fp8"``: the FP8 dispatch's
    (:data:`FP8_DISPATCH_BYTES` per value; the combine stays bf16)."""
    assert model.moe is not None
    routed = model.moe.top_k * tokens(model, micro_batch, cp) / tp
    item = FP8_DISPATCH_BYTES if precision == "fp8" else BF16
    return int(model.moe.load(ep) * routed * model.hidden * item)


def moe_tp_bytes(model: ModelSpec, *, cp: int, ep: int, micro_batch: int) -> int:
    """Bytes of the MoE half's TP collective: the routed tokens' ``k L T h`` values, and the
    shared experts' ``T h`` when there are any."""
    assert model.moe is not None
    t = tokens(model, micro_batch, cp)
    shared = t if model.moe.shared_experts else 0
    return int((model.moe.top_k * model.moe.load(ep) * t + shared) * model.hidden * BF16)


def moe_tp_collectives(model: ModelSpec, *, tp: int, etp: int, cp: int, ep: int,
                       micro_batch: int) -> tuple[tuple[str, int], ...]:
    """The MoE half's TP all-reduces as (group, bytes), the group ``"tp"`` (the attention's)
    or ``"etp"`` (expert TP): :func:`moe_tp_bytes` over TP when ``etp = tp``; else the routed
    tokens' ``k L T etp / t h`` values over expert TP (none for ``etp = 1``) and the shared
    experts' ``T h`` over TP."""
    assert model.moe is not None
    if etp == tp:
        return (("tp", moe_tp_bytes(model, cp=cp, ep=ep, micro_batch=micro_batch)),)
    t = tokens(model, micro_batch, cp)
    routed = int(model.moe.top_k * model.moe.load(ep) * t * etp / tp * model.hidden * BF16)
    out = [("etp", routed)] if etp > 1 else []
    if model.moe.shared_experts:
        out.append(("tp", t * model.hidden * BF16))
    return tuple(out)


@lru_cache(maxsize=4096)
def moe_times(model: ModelSpec, device: DeviceSpec, *, tp: int, cp: int, ep: int,
              micro_batch: int, precision: str = "bf16", etp: int | None = None) -> MoETimes:
    """The :class:`MoETimes` of ``model`` (see the module docstring; ``precision`` the
    expert and shared-expert GEMMs', the router's stays bf16; ``etp``: expert TP, None: ``tp``)."""
    moe = model.moe
    assert moe is not None
    h, t = model.hidden, tp
    u = t if etp is None else etp
    n_tok = tokens(model, micro_batch, cp)
    local = n_tok // t  # sequence parallel
    router = _fwd_bwd(device, local, moe.experts, h)
    permute = 2.0 * moe.top_k * local * h * BF16 / device.hbm_Bps  # read and write once
    ups = 2 if model.mlp == "swiglu" else 1
    fe = moe.expert_ffn_hidden // u
    even = moe.top_k * n_tok * ep / moe.experts  # tokens per local expert, even routing
    gathered = 1.0 if u == t else u / t  # the expert TP group's share of the T tokens
    even *= gathered
    hot, other = moe.shares(ep)
    per = moe.experts // ep
    fwd = bwd = 0.0
    for n, count in ((round(even * hot), 1), (round(even * other), per - 1)):
        if count and n:  # the grouped GEMM's up (gate and up) and down projections
            up = _fwd_bwd(device, n, ups * fe, h, precision, batch=count)
            down = _fwd_bwd(device, n, h, fe, precision, batch=count)
            fwd += up[0] + down[0]
            bwd += up[1] + down[1]
    routed = moe.load(ep) * moe.top_k * n_tok * gathered
    # the activation function reads (ups) and writes one f_e/u row per routed token
    act = routed * (ups + 1) * fe * BF16 / device.hbm_Bps
    shared = (0.0, 0.0)
    if moe.shared_experts:
        fs = moe.shared_experts * moe.expert_ffn_hidden // t
        up = _fwd_bwd(device, n_tok, ups * fs, h, precision)
        down = _fwd_bwd(device, n_tok, h, fs, precision)
        shared = (up[0] + down[0], up[1] + down[1])
    return MoETimes(
        pre_fwd=router[0] + permute,
        experts_fwd=fwd + act + shared[0] + permute * moe.load(ep),
        pre_bwd=router[1] + permute,
        experts_bwd=bwd + 2 * act + shared[1] + permute * moe.load(ep),
        load=moe.load(ep),
        precision=precision,
    )


@lru_cache(maxsize=4096)
def moe_activation_bytes(model: ModelSpec, *, tp: int, cp: int, ep: int, micro_batch: int,
                         recompute: str, etp: int | None = None) -> float:
    """Bytes a MoE layer's MLP half keeps for its backward on the busiest rank, in place of
    the dense MLP's: the router's fp32 logits (``4 E T/t``), each routed
    token's gathered input (``2 h``) and SwiGLU's (GeLU's) ``6 f_e/u`` (``4 f_e/u``) of the
    expert MLP, times ``k L T u / t`` (``u``: expert TP, None: ``t``), and the shared experts'
    as a dense MLP (``6 T f_s / t``). Full recompute keeps only the layer's input (counted by
    the caller); ``moe`` recompute only the half's input (``2 T h / t``)."""
    moe = model.moe
    assert moe is not None
    if recompute == "full":
        return 0.0
    n_tok = tokens(model, micro_batch, cp)
    if recompute == "moe":
        return 2.0 * n_tok * model.hidden / tp
    per_f = 6 if model.mlp == "swiglu" else 4
    u = tp if etp is None else etp
    gathered = 1.0 if u == tp else u / tp
    routed = moe.top_k * moe.load(ep) * n_tok * gathered * (2 * model.hidden
                                                            + per_f * moe.expert_ffn_hidden / u)
    shared = per_f * n_tok * moe.shared_experts * moe.expert_ffn_hidden / tp
    base = 3 * n_tok * model.hidden / tp  # the half's input and dropout mask
    return base + 4.0 * moe.experts * n_tok / tp + routed + shared
