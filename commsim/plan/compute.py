"""Compute time of a transformer layer from its shapes: FLOPs per operation, and the
achieved FLOP/s of each GEMM as a function of its per-GPU shape.

FLOPs of one layer's forward on ``b`` sequences, ``T = b s / c`` tokens on a rank of a TP group
of ``t`` and a CP group of ``c`` (``h`` hidden, ``a`` heads, ``g`` key/value heads, ``d = h/a``,
``f`` MLP size, ``V`` vocabulary):

* QKV projection: a ``T x h`` by ``h x (h + 2 g d)/t`` GEMM (grouped-query attention: the keys
  and values are ``g d`` wide; with ``t > g`` each rank keeps a replica of one KV head);
* attention scores and values (causal: half of the ``4 T s h / t`` of full attention):
  ``2 T s h / t``, run fused (FlashAttention) at the device's ``attention`` efficiency
  (``attention_fa2`` for FlashAttention-2, half of it for FlashAttention v1: Dao 2023,
  :data:`~commsim.plan.device.FA2_OVER_FA1`) times a tile factor that slows shorter sequences
  (:func:`fused_attention_times`); or, unfused (:mod:`.stack`), the full scores by batched
  GEMMs with their softmax and dropout passes at HBM bandwidth (:func:`attention_core_times`);
* output projection: ``T x h/t`` by ``h/t x h``;
* MLP: ``T x h`` by ``h x f/t`` (two of them for SwiGLU's gate and up), then ``T x f/t`` by
  ``f/t x h``;
* logits (last stage): ``T x h`` by ``h x V/t``;
* memory-bound element-wise work (norms, residuals, dropout, activation function): the
  layer's stored activations (:func:`commsim.plan.memory.layer_activation_bytes` without the
  attention scores) written once and read once, at the HBM bandwidth.

Backward runs two GEMMs per forward GEMM (input gradient ``T x N`` by ``N x K``, weight
gradient ``K x T`` by ``T x N``), twice the element-wise work, and fused attention's five
GEMMs per tile against the forward's two (:data:`FUSED_BACKWARD_RATIO`; unfused attention's
backward runs the four gradient GEMMs of the scores it stored). Recompute adds
what the schedule runs again: ``full`` the whole forward of the layer (its TP collectives too,
counted by :mod:`commsim.plan.evaluate`), ``selective`` (Megatron-LM, Korthikanti et al. 2022)
the attention core (scores, softmax, dropout, values).

**The wave-roofline curve.** A GEMM of ``M x K`` by ``K x N`` in bf16 takes
``max(2 M N K / (P e w), 2 (M K + K N + M N) / B)`` with ``P`` the peak FLOP/s, ``e`` the
device's large-GEMM efficiency, ``B`` the HBM bandwidth and ``w`` the tile- and wave-
quantization factor of NVIDIA's "Matrix Multiplication Background User's Guide": the output
is cut into ``ceil(M/tm) ceil(N/tn)`` tiles of ``tm x tn`` (a partial tile costs a whole one),
run in waves of one tile per SM (a last partial wave idles the other SMs), so
``w = M N / (waves x SMs x tm x tn)``. A shard too small to fill the GPU costs what it costs.

**FP8** (``Stack.precision == "fp8"``, Transformer Engine's ``te.Linear`` with delayed
scaling): the linear layers' GEMMs, forward and both backward ones, run on the same curve at
the device's ``peak_flops.fp8`` (the large-GEMM efficiency of bf16 taken for fp8 too: no
independent fp8 figure is in the preset), their two inputs 1 byte each and the output 2 in
the roofline's traffic. Each linear layer of ``m`` tokens, ``k`` in and ``n`` out adds its
casts as memory-bound passes (:data:`FP8_CAST_BYTES` per element: read 2, write the fp8 copy
and its transpose, with the amax fused): the input (``m k``) and the weight (``k n``, cast
again each micro-batch: nothing caches it across them) in the forward, the output gradient
(``m n``) in the backward. Attention and the output layer stay in bf16, and so does a
mixture of experts' router; its expert and shared-expert GEMMs run in fp8 too
(:mod:`.moe_layer`).

>>> from commsim.plan.device import DeviceSpec
>>> dev = DeviceSpec(name="x", memory_bytes=2**30, memory_bandwidth_Bps=2e12, peak_flops=1e15,
...                  sms=100, gemm_efficiency=0.8, attention_efficiency=0.5)
>>> big = gemm_time(dev, 12800, 25600, 8192)   # 10,000 tiles: 100 full waves
>>> round(2 * 12800 * 25600 * 8192 / big / 1e12)
800
>>> small = gemm_time(dev, 1280, 1280, 8192)  # 50 tiles: half of the SMs idle
>>> round(2 * 1280 * 1280 * 8192 / small / 1e12)
400
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commsim.plan.device import DeviceSpec
from commsim.plan.models import ModelSpec
from commsim.plan.stack import DEFAULT, Stack

RECOMPUTE = ("none", "selective", "full")
#: Every recompute ``plan`` takes: the searched three and ``moe`` (Megatron-Core's
#: ``--recompute-modules moe``: each MoE layer's MLP half, its router, dispatch, experts and
#: combine, run again in its backward; the rest as ``none``; named, never searched).
RECOMPUTES = RECOMPUTE + ("moe",)
#: Bytes of a bf16 element.
BF16 = 2
#: Bytes moved per element by one of Transformer Engine's fused cast-transposes: read the
#: bf16 tensor (2), write its fp8 copy (1) and the fp8 transpose the backward uses (1).
FP8_CAST_BYTES = 4


def gemm_time(device: DeviceSpec, m: int, n: int, k: int, batch: int = 1,
              precision: str = "bf16") -> float:
    """Seconds of ``batch`` independent ``m x k`` by ``k x n`` GEMMs on ``device`` (the
    wave-roofline; a batched GEMM's tiles share the waves); ``precision`` ``fp8``: at the
    device's fp8 peak with 1-byte inputs (a bf16 output)."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    tiles = batch * math.ceil(m / device.tile_m) * math.ceil(n / device.tile_n)
    waves = math.ceil(tiles / device.sms)
    # each wave runs one full tile per SM at the SM's share of the achievable rate
    tile_s = 2.0 * device.tile_m * device.tile_n * k * device.sms / (
        device.gemm_peak(precision) * device.gemm_efficiency
    )
    compute = waves * tile_s
    item = 1 if precision == "fp8" else BF16
    traffic = batch * (item * (m * k + k * n) + BF16 * m * n) / device.hbm_Bps
    return max(compute, traffic)


def _fwd_bwd(device: DeviceSpec, m: int, n: int, k: int,
             precision: str = "bf16", *, batch: int = 1) -> tuple[float, float]:
    """(forward, backward) seconds of a linear layer: ``m x k`` by ``k x n``, then the input
    gradient (``m x n`` by ``n x k``) and the weight gradient (``k x m`` by ``m x n``); in
    ``fp8``, with the casts of the input and weight (forward) and of the output gradient
    (backward) at HBM bandwidth (:data:`FP8_CAST_BYTES`). ``batch`` such layers at once (a
    grouped GEMM's experts: their tiles share the waves, each casts its own tensors)."""
    fwd = gemm_time(device, m, n, k, batch, precision)
    bwd = gemm_time(device, m, k, n, batch, precision) + gemm_time(device, k, n, m, batch,
                                                                    precision)
    if precision == "fp8":
        fwd += FP8_CAST_BYTES * batch * (m * k + k * n) / device.hbm_Bps
        bwd += FP8_CAST_BYTES * batch * m * n / device.hbm_Bps
    return fwd, bwd


@dataclass(frozen=True, slots=True)
class LayerTimes:
    """Compute seconds per micro-batch on one rank (see the module docstring).

    ``attn_*`` and ``mlp_*`` are the two halves of a layer (each followed by a TP collective);
    ``*_recompute`` is the forward work the backward runs again before its own
    (``full``: the whole half, with its collective; ``selective``: the attention core only,
    without one); ``logits_*`` is the output layer of the last stage.
    """

    attn_fwd: float
    mlp_fwd: float
    attn_bwd: float
    mlp_bwd: float
    attn_recompute: float
    mlp_recompute: float
    logits_fwd: float
    logits_bwd: float
    recompute_collectives: bool  #: full recompute re-runs the forward's TP/CP collectives


def attention_core_flops(model: ModelSpec, micro_batch: int, tp: int, cp: int) -> float:
    """Causal attention scores and values of one layer's forward on one rank."""
    tokens = micro_batch * model.seq // cp
    return 2.0 * tokens * model.seq * model.core_width / tp


#: FlashAttention's backward over its forward in FLOPs: the forward runs two GEMMs per tile
#: (``Q K^T``, ``P V``), the backward five (it recomputes ``Q K^T`` instead of storing the
#: scores, then ``dV``, ``dP``, ``dQ``, ``dK``): 2.5, as FlashAttention-2's own benchmark
#: counts it (Dao 2023, ``benchmarks/benchmark_flash_attention.py``, ``flops(mode="bwd")``).
FUSED_BACKWARD_RATIO = 2.5


#: Bytes per score element that unfused attention's element-wise kernels move (2-byte
#: scores, 1-byte dropout mask): forward, Megatron-LM's fused scale-mask-softmax (read,
#: write) and dropout (read; write output and mask); backward, dropout's (read gradient and
#: mask, write) and softmax's (read gradient and probabilities, write).
UNFUSED_FWD_BYTES, UNFUSED_BWD_BYTES = 9, 11


#: FlashAttention's tile: blocks of 128 queries against blocks of 128 keys (head dim 128).
FLASH_TILE = 128
#: Tiles' worth of work per block of queries beyond the causal half of the scores that the
#: FLOPs count: the diagonal tile run whole (half a tile more), plus loading the queries and
#: rescaling and writing the output (forward, about one tile) or loading the block's
#: queries, output and gradient and writing its gradient (backward, about two). So a causal
#: pass over ``s`` keys reaches ``s / (s + k B)`` of its long-sequence speed, ``B`` the tile.
#: From FlashAttention-2's H100 curves (Shah et al. 2024, FlashAttention-3, head dim 128,
#: 512 to 16k tokens): causal forward 191, 260, 298, 319, 333, 335 TFLOP/s, which ``k = 3``
#: reproduces within 5% (196, 246, 289, 314, 328, 336 with a 16k limit of 344); backward
#: (without the mask) 214 to 322, one block's overhead ``2.1`` tiles, so ``k = 5`` causal.
FLASH_FWD_TILES, FLASH_BWD_TILES = 3, 5


def fused_attention_times(flops: float, seq: int, device: DeviceSpec,
                          kernel: str = "fused") -> tuple[float, float]:
    """(forward, backward) seconds of fused causal attention of ``flops`` forward FLOPs over
    ``seq`` keys: at the device's long-sequence fraction of peak for ``kernel``
    (:meth:`~commsim.plan.device.DeviceSpec.attention_fraction`) times the tile factor
    ``s / (s + k B)`` (:data:`FLASH_FWD_TILES`, :data:`FLASH_BWD_TILES`), the backward
    :data:`FUSED_BACKWARD_RATIO` times the FLOPs.

    >>> from commsim.plan.device import DeviceSpec
    >>> dev = DeviceSpec(name="x", memory_bytes=2**30, memory_bandwidth_Bps=2e12,
    ...                  peak_flops=1e15, sms=100, gemm_efficiency=0.8,
    ...                  attention_efficiency=0.5)
    >>> fwd, bwd = fused_attention_times(1e12, 8192, dev)
    >>> round(1e12 / fwd / 1e12), round(2.5e12 / bwd / 1e12)  # TFLOP/s of each pass
    (478, 464)
    """
    rate = device.peak_flops * device.attention_fraction(kernel)
    fwd = flops / rate * (seq + FLASH_FWD_TILES * FLASH_TILE) / seq
    bwd = FUSED_BACKWARD_RATIO * flops / rate * (seq + FLASH_BWD_TILES * FLASH_TILE) / seq
    return fwd, bwd


def attention_core_times(model: ModelSpec, device: DeviceSpec, *, tp: int, cp: int,
                         micro_batch: int, attention: str) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's attention core on one rank.

    ``fused``, ``fa2`` and ``fa1``: the causal FLOPs by :func:`fused_attention_times` (the
    device's ``attention`` or ``attention_fa2`` efficiency, ``fa1`` half the latter).
    ``unfused``: per head, the full ``s/c x s`` scores (no causal saving) by batched GEMMs on
    the wave-roofline (``Q K^T``, ``P V``; backward the four gradient GEMMs), plus the softmax
    and dropout passes over the scores at HBM bandwidth.
    """
    if attention != "unfused":
        return fused_attention_times(attention_core_flops(model, micro_batch, tp, cp),
                                     model.seq, device, attention)
    batch = micro_batch * max(model.heads // tp, 1)
    q, s, d = model.seq // cp, model.seq, model.head_dim
    elems = batch * q * s / device.hbm_Bps
    fwd = gemm_time(device, q, s, d, batch) + gemm_time(device, q, d, s, batch)
    bwd = (gemm_time(device, q, s, d, batch) + gemm_time(device, s, d, q, batch)
           + gemm_time(device, q, d, s, batch) + gemm_time(device, s, d, q, batch))
    return fwd + UNFUSED_FWD_BYTES * elems, bwd + UNFUSED_BWD_BYTES * elems


#: Bytes per logit that the loss moves on the last stage (Megatron-LM's vocab-parallel cross
#: entropy, ``tensor_parallel/cross_entropy.py``, on ``logits.float()``): forward, the cast to
#: fp32 (read 2, write 4), the max (read 4), subtracting it (read 4, write 4), the exp (read
#: 4, write 4), the sum (read 4) and the division into the softmax kept for the backward
#: (read 4, write 4); backward, scaling the softmax by the incoming gradient (read 4, write
#: 4) and the cast back to 16 bits (read 4, write 2).
CROSS_ENTROPY_FWD_BYTES, CROSS_ENTROPY_BWD_BYTES = 38, 14


def layer_times(
    model: ModelSpec,
    device: DeviceSpec,
    *,
    tp: int,
    cp: int,
    micro_batch: int,
    recompute: str,
    elementwise_bytes: float,
    stack: Stack = DEFAULT,
) -> LayerTimes:
    """The :class:`LayerTimes` of ``model`` split ``tp`` x ``cp`` ways on ``device``.

    ``elementwise_bytes`` is the layer's stored activation bytes (without attention scores) on
    one rank, the traffic of its element-wise kernels; ``stack`` the software's choices
    (:mod:`.stack`: the attention implementation, the weight-gradient accumulation).
    """
    h, t, prec = model.hidden, tp, stack.precision
    tokens = micro_batch * model.seq // cp
    kv = max(model.kv_heads // t, 1) * model.head_dim
    q = model.q_hidden // t
    if model.mla is not None:
        shapes = model.mla.projections(h, model.heads, t)
        gemms = [_fwd_bwd(device, tokens, n, k, prec) for n, k in shapes]
        qkv = (sum(g[0] for g in gemms[:-1]), sum(g[1] for g in gemms[:-1]))
        proj = gemms[-1]
        attn_weights = sum(n * k for n, k in shapes)
    else:
        qkv = _fwd_bwd(device, tokens, q + 2 * kv, h, prec)
        proj = _fwd_bwd(device, tokens, h, q, prec)
        attn_weights = h * (q + 2 * kv + q)
    ups = 2 if model.mlp == "swiglu" else 1
    up = _fwd_bwd(device, tokens, ups * model.ffn_hidden // t, h, prec)
    down = _fwd_bwd(device, tokens, h, model.ffn_hidden // t, prec)
    core, core_bwd = attention_core_times(model, device, tp=t, cp=cp, micro_batch=micro_batch,
                                          attention=stack.attention)
    ew = 2.0 * elementwise_bytes / device.hbm_Bps  # written once, read once
    # the element-wise work splits between the halves as Korthikanti's 11 : 19 (+ 4 norms)
    attn_ew, mlp_ew = ew * 13 / 34, ew * 21 / 34
    # without weight-gradient fusion a separate kernel adds each new gradient to the buffer
    wgrad = 0.0 if stack.wgrad_fusion else stack.wgrad_add_bytes / device.hbm_Bps
    attn_wgrad = wgrad * attn_weights
    mlp_wgrad = wgrad * (ups + 1) * h * (model.ffn_hidden // t)
    attn_fwd = qkv[0] + core + proj[0] + attn_ew
    mlp_fwd = up[0] + down[0] + mlp_ew
    logits = _fwd_bwd(device, tokens, -(-model.vocab // t), h)
    loss = tokens * -(-model.vocab // t) / device.hbm_Bps
    return LayerTimes(
        attn_fwd=attn_fwd,
        mlp_fwd=mlp_fwd,
        attn_bwd=qkv[1] + core_bwd + proj[1] + 2 * attn_ew + attn_wgrad,
        mlp_bwd=up[1] + down[1] + 2 * mlp_ew + mlp_wgrad,
        attn_recompute={"selective": core, "full": attn_fwd}.get(recompute, 0.0),
        mlp_recompute=mlp_fwd if recompute == "full" else 0.0,
        logits_fwd=logits[0] + CROSS_ENTROPY_FWD_BYTES * loss,
        logits_bwd=logits[1] + CROSS_ENTROPY_BWD_BYTES * loss,
        recompute_collectives=recompute == "full",
    )


#: Bytes per parameter of an optimizer step on the parameters a rank updates: the gradient
#: norm for clipping (read the fp32 gradient, 4), Adam (apex/Megatron fused Adam reads the
#: fp32 weight, gradient, momentum and variance, 16, and writes weight and moments, 12), the
#: copy of the fp32 master weights into the 16-bit weights (read 4, write 2) and zeroing the
#: gradient buffer for the next step (``grad_bytes``). Megatron-LM's
#: ``Float16OptimizerWithFloat16Params.step`` in that order.
OPTIMIZER_STEP_BYTES = 4 + 28 + 6
#: With 16-bit gradients the step first copies them into the fp32 main gradients (read 2,
#: write 4); with fp16 loss scaling it unscales them and checks for inf/NaN (read 4, write 4).
GRAD_CAST_BYTES, UNSCALE_BYTES = 6, 8


def optimizer_time(device: DeviceSpec, params: int, stack: Stack = DEFAULT) -> float:
    """Seconds of the optimizer step of a rank that updates ``params`` parameters
    (memory-bound: :data:`OPTIMIZER_STEP_BYTES` and the stack's gradient handling per
    parameter at the HBM bandwidth)."""
    per = OPTIMIZER_STEP_BYTES + stack.grad_bytes
    if stack.grad_bytes == 2:
        per += GRAD_CAST_BYTES
    if stack.loss_scaling:
        per += UNSCALE_BYTES
    return params * per / device.hbm_Bps


def model_flops_per_token(model: ModelSpec) -> float:
    """What MFU counts: ``6 N`` plus causal attention, ``6 l s h`` (forward ``2 l s h``); for
    a mixture of experts ``N`` is the active parameters (``top_k`` experts of each MoE
    layer), and ``h`` the attention's :attr:`~commsim.plan.models.ModelSpec.core_width`."""
    return 6.0 * model.active_params + 6.0 * model.layers * model.seq * model.core_width


def hardware_flops_per_token(model: ModelSpec, recompute: str) -> float:
    """Model FLOPs plus what recompute runs again (Megatron-LM's "achieved" FLOPs):
    ``full`` one more forward of every layer, ``selective`` of every attention core, ``moe``
    of every MoE layer's MLP half (router, shared and ``top_k`` routed experts)."""
    core = 2.0 * model.layers * model.seq * model.core_width
    if recompute == "full":
        return model_flops_per_token(model) + 2.0 * model.active_layer_params + core
    if recompute == "selective":
        return model_flops_per_token(model) + core
    if recompute == "moe" and model.moe is not None:
        last = model.layers - 1
        half = (model.dense_params_at(last) - model.attention_params
                + model.moe.top_k * model.expert_params)
        return model_flops_per_token(model) + 2.0 * model.moe_layers * half
    return model_flops_per_token(model)
