"""The training software stack: how a framework runs the same layout.

The same model, layout and GPUs train at different speeds under different software. The
planner models the choices that change a step's time or memory and that a framework
documents, as one :class:`Stack` per run (never fitted per row of a comparison):

* ``attention``: ``fused`` (FlashAttention, Dao et al. 2022, and its successors: the causal
  half of the scores, never written to HBM, at the device's ``attention`` efficiency, the
  kernel of today's stack on that device: FlashAttention-3 or cuDNN's on Hopper), ``fa2``
  (FlashAttention-2, Dao 2023: the same, at the device's ``attention_fa2`` efficiency where
  a later kernel exists; PyTorch's ``scaled_dot_product_attention`` flash backend and
  ``flash-attn`` 2.x run it), ``fa1`` (FlashAttention v1, ``flash-attn`` 1.x, or its Triton
  port, llm-foundry's ``attn_impl: triton``: the same at half FlashAttention-2's speed, Dao
  2023, :data:`~commsim.plan.device.FA2_OVER_FA1`) or ``unfused`` (Megatron-LM before
  FlashAttention: the full ``s x s`` scores of every head are materialised by a batched
  GEMM, Megatron's fused scale-mask-softmax and a dropout pass read and write them at HBM
  bandwidth, a second batched GEMM multiplies them by the values; the scores, dropout mask
  and output are kept for the backward, Korthikanti et al. 2022's ``5 a s^2 b``);
* ``sequence_parallel``: the norms, dropouts and residuals are split over the TP ranks
  (Korthikanti et al. 2022) or run whole on every TP rank (Megatron-LM 2021: ``10 s b h`` of
  each layer's activations are not split);
* ``wgrad_fusion``: the weight-gradient GEMM accumulates into the gradient buffer itself
  (Megatron-LM's gradient-accumulation fusion, 2022) or writes a new gradient that a separate
  kernel adds to the buffer (2021: 6 bytes per parameter per micro-batch at HBM bandwidth);
* ``grad_overlap``: DDP / ZeRO-1/2 reduce gradients in 25 MiB buckets during the backward
  (PyTorch DDP) or all of a stage's at once after the last backward (Megatron-LM's ``local``
  DDP of 2021: one all-reduce of the contiguous gradient buffer);
* ``p2p_blocking``: pipeline sends and receives overlap compute (today's asynchronous
  point-to-point, as the replay runs them) or block the stage: Megatron-LM 2021's
  ``p2p_communication._communicate`` waits for every ``isend``/``irecv`` and then calls
  ``torch.cuda.synchronize()``, so the sender's next op starts only after its send, and,
  with TP, each received tensor (sent as ``1/t`` of it per TP rank, the paper's
  scatter/gather optimisation) is all-gathered over the TP group before use;
* ``grad_bytes``: 2 (gradients accumulated and reduced in 16 bits) or 4 (in fp32: the
  Llama 3 paper, Section 3.3.4, accumulates gradients over micro-batches in fp32 and
  reduce-scatters them in fp32);
* ``loss_scaling``: fp16 training (Megatron-LM 2021): the 16-bit gradients are copied into
  the fp32 main gradients, unscaled and checked for inf/NaN before each optimizer step;
* ``precision``: ``bf16``, or ``fp8`` as Transformer Engine runs it (``commsim plan
  --precision``): the linear layers' GEMMs at the device's fp8 peak with 1-byte inputs, their
  casts to fp8 as memory-bound passes, attention and the output layer in bf16
  (:mod:`.compute`, :mod:`.memory`);
* ``fsdp_reshard``: FSDP as PyTorch's ``FULL_SHARD`` runs it (True) or as Megatron-LM's and
  the Llama 3 paper's FSDP does (False: each layer's weights gathered once per step and kept
  until its last backward, its gradient reduced once after it). PyTorch frees a unit's
  gathered weights after its forward and all-gathers them again for its backward, in every
  micro-batch, and reduce-scatters the unit's gradient after every micro-batch's backward (no
  ``no_sync`` under FSDP); the backward all-gather of the next unit, prefetched one unit
  ahead (``BACKWARD_PRE``), and the reduce-scatter of the last share the same links, modelled
  as one stream in issue order (:mod:`.evaluate`);
* ``moe_overlap``: how a mixture of experts' dispatch and combine all-to-alls meet compute
  (:mod:`.overlap`): ``none`` (Megatron-Core's default: each waits on the compute stream),
  ``ep-overlap`` (Megatron-Core's ``--overlap-moe-expert-parallel-comm``, its "combined
  1F1B": a forward of one micro-batch and a backward of another run together, each one's
  all-to-alls hidden under the other's compute; hosted by its schedules without pipelining
  and with interleaving) or ``dualpipe`` (the DeepSeek-V3 report's DualPipe, Section 3.2.1:
  a bidirectional pipeline whose forward and backward chunks run in overlapped pairs, the
  all-to-alls and pipeline sends hidden); while they overlap, the communication kernels hold
  ``comm_sms`` of the device's SMs (DeepSeek-V3, Section 3.2.2: 20 of an H800's 132), which
  the overlapped compute runs without;
* ``dispatcher``: what moves the routed tokens (:mod:`.dispatch`): ``alltoall`` (Megatron-Core's
  default, NCCL's all-to-all of every copy) or ``deepep`` (DeepEP's kernels: each token once
  per rank and once per host that needs it, forwarded over NVLink);
* ``overlap_cost``: the data-parallel gradient reductions that overlap the backward (DDP and
  ZeRO buckets, FSDP's reduce-scatters) slow the compute they overlap by the SMs and HBM
  bandwidth their kernels take (:mod:`.interference`); on by default (it is the hardware's,
  not a choice), off to compare with the compute unslowed (the mixture of experts' paired
  all-to-alls keep their ``comm_sms`` either way).

The default is today's stack (fused attention, sequence parallelism, fused weight-gradient
accumulation, overlapped reductions); :data:`MEGATRON_2021` is the one of Narayanan et al.
2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM") as
its published run scripts (``examples/sc21`` of NVIDIA/Megatron-LM) set it.

>>> Stack().attention, MEGATRON_2021.attention, PYTORCH_FSDP.attention
('fused', 'unfused', 'fa2')
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.errors import SpecError

ATTENTION = ("fused", "fa2", "fa1", "unfused")
PRECISIONS = ("bf16", "fp8")
MOE_OVERLAPS = ("none", "ep-overlap", "dualpipe")
#: What moves a mixture of experts' routed tokens (:mod:`commsim.plan.dispatch`).
DISPATCHERS = ("alltoall", "deepep")
#: SMs the communication kernels hold while they overlap compute: the DeepSeek-V3 report,
#: Section 3.2.2 ("only 20 SMs are sufficient to fully utilize the bandwidths of IB and
#: NVLink", of an H800's 132).
COMM_SMS = 20
#: Bytes per parameter of a separate weight-gradient accumulation into a 16-bit buffer:
#: read the new gradient, read and write the buffer (fp32 buffer: ``Stack.wgrad_add_bytes``).
WGRAD_ADD_BYTES = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class Stack:
    """The software stack's choices (see the module docstring)."""

    attention: str = "fused"
    sequence_parallel: bool = True
    wgrad_fusion: bool = True
    grad_overlap: bool = True
    p2p_blocking: bool = False
    grad_bytes: int = 2
    loss_scaling: bool = False
    precision: str = "bf16"
    fsdp_reshard: bool = False
    moe_overlap: str = "none"
    comm_sms: int = COMM_SMS
    dispatcher: str = "alltoall"
    overlap_cost: bool = True

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION:
            raise SpecError(f"--attention {self.attention}: must be one of "
                            f"{', '.join(ATTENTION)}")
        if self.precision not in PRECISIONS:
            raise SpecError(f"--precision {self.precision!r}: must be one of "
                            f"{', '.join(PRECISIONS)}")
        if self.moe_overlap not in MOE_OVERLAPS:
            raise SpecError(f"--moe-overlap {self.moe_overlap!r}: must be one of "
                            f"{', '.join(MOE_OVERLAPS)}")
        if self.dispatcher not in DISPATCHERS:
            raise SpecError(f"--dispatcher {self.dispatcher!r}: must be one of "
                            f"{', '.join(DISPATCHERS)}")
        if isinstance(self.comm_sms, bool) or not isinstance(self.comm_sms, int) \
                or self.comm_sms < 0:
            raise SpecError(f"stack comm_sms {self.comm_sms!r}: must be an integer >= 0")
        if self.grad_bytes not in (2, 4):
            raise SpecError(f"stack grad_bytes {self.grad_bytes}: must be 2 or 4")

    @property
    def wgrad_add_bytes(self) -> int:
        """Bytes per parameter of one separate weight-gradient accumulation."""
        return WGRAD_ADD_BYTES - 4 + 2 * self.grad_bytes

    def label(self) -> str:
        """A short description, e.g. ``fused sp wgrad-fused overlap``."""
        return " ".join((self.attention, "sp" if self.sequence_parallel else "no-sp",
                         "wgrad-fused" if self.wgrad_fusion else "wgrad-add",
                         "overlap" if self.grad_overlap else "no-overlap")
                        + (("p2p-blocking",) if self.p2p_blocking else ())
                        + (("fp32-grads",) if self.grad_bytes == 4 else ())
                        + (("loss-scaling",) if self.loss_scaling else ())
                        + (("fsdp-reshard",) if self.fsdp_reshard else ())
                        + (() if self.overlap_cost else ("no-overlap-cost",))
                        + ((self.precision,) if self.precision != "bf16" else ())
                        + ((self.moe_overlap,) if self.moe_overlap != "none" else ())
                        + ((self.dispatcher,) if self.dispatcher != "alltoall" else ()))


DEFAULT = Stack()
MEGATRON_2021 = Stack(attention="unfused", sequence_parallel=False, wgrad_fusion=False,
                      grad_overlap=False, p2p_blocking=True, loss_scaling=True)
#: The Llama 3 paper's (Section 3.3): today's stack with gradients accumulated over
#: micro-batches and reduce-scattered in fp32 (accumulated by a separate addition, as
#: autograd accumulates a gradient: the paper names no fused accumulation).
LLAMA3 = Stack(wgrad_fusion=False, grad_bytes=4)
#: PyTorch FSDP (``FULL_SHARD``) as MosaicML's llm-foundry/Composer runs it: weights
#: resharded after the forward and gathered again for the backward, gradients
#: reduce-scattered after every micro-batch in fp32 (Composer's ``DEFAULT`` FSDP mixed
#: precision: parameters in bf16, reduction in fp32), attention by FlashAttention-2
#: (PyTorch's ``scaled_dot_product_attention`` flash backend; llm-foundry's ``attn_impl:
#: flash`` with its ``gpu-flash2`` extra). llm-foundry's 2023 benchmark tables ran
#: ``attn_impl: triton``, FlashAttention v1's Triton port (``fa1``; their rows in
#: ``benchmarks/_foundry_rows.py`` and docs/planning.md say how that is known).
PYTORCH_FSDP = Stack(fsdp_reshard=True, grad_bytes=4, attention="fa2")
#: ``commsim plan --stack NAME``.
STACKS = {"current": DEFAULT, "megatron-2021": MEGATRON_2021, "llama3": LLAMA3,
          "pytorch-fsdp": PYTORCH_FSDP}


def named_stack(name: str, attention: str | None = None,
                precision: str | None = None, moe_overlap: str | None = None,
                dispatcher: str | None = None, overlap_cost: bool = True) -> Stack:
    """The stack called ``name`` (:data:`STACKS`), ``attention`` overriding its attention,
    ``precision`` (``bf16`` or ``fp8``) its precision, ``moe_overlap``
    (:data:`MOE_OVERLAPS`) its mixture of experts' all-to-all overlap, ``dispatcher``
    (:data:`DISPATCHERS`) what moves its routed tokens, and ``overlap_cost`` False turning
    its cost of overlapped reductions to compute off."""
    from dataclasses import replace

    stack = STACKS.get(name.strip().lower())
    if stack is None:
        raise SpecError(f"--stack {name!r}: unknown (known: {', '.join(STACKS)})")
    if attention is not None:
        stack = replace(stack, attention=attention.strip().lower())
    if precision is not None:
        stack = replace(stack, precision=precision.strip().lower())
    if moe_overlap is not None:
        stack = replace(stack, moe_overlap=moe_overlap.strip().lower())
    if dispatcher is not None:
        stack = replace(stack, dispatcher=dispatcher.strip().lower())
    if not overlap_cost:
        stack = replace(stack, overlap_cost=False)
    return stack
