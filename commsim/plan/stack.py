"""The training software stack: how a framework runs the same layout.

The same model, layout and GPUs train at different speeds under different software. The
planner models the choices that change a step's time or memory and that a framework
documents, as one :class:`Stack` per run (never fitted per row of a comparison):

* ``attention``: ``fused`` (FlashAttention, Dao et al. 2022, and its successors: the causal
  half of the scores, never written to HBM, at the device's ``attention`` efficiency) or
  ``unfused`` (Megatron-LM before FlashAttention: the full ``s x s`` scores of every head are
  materialised by a batched GEMM, Megatron's fused scale-mask-softmax and a dropout pass read
  and write them at HBM bandwidth, a second batched GEMM multiplies them by the values; the
  scores, dropout mask and output are kept for the backward, Korthikanti et al. 2022's
  ``5 a s^2 b``);
* ``sequence_parallel``: the norms, dropouts and residuals are split over the TP ranks
  (Korthikanti et al. 2022) or run whole on every TP rank (Megatron-LM 2021: ``10 s b h`` of
  each layer's activations are not split);
* ``wgrad_fusion``: the weight-gradient GEMM accumulates into the gradient buffer itself
  (Megatron-LM's gradient-accumulation fusion, 2022) or writes a new gradient that a separate
  kernel adds to the buffer (2021: 6 bytes per parameter per micro-batch at HBM bandwidth);
* ``grad_overlap``: DDP / ZeRO-1/2 reduce gradients in 25 MiB buckets during the backward
  (PyTorch DDP) or all of a stage's at once after the last backward (Megatron-LM's ``local``
  DDP of 2021: one all-reduce of the contiguous gradient buffer).

The default is today's stack (fused attention, sequence parallelism, fused weight-gradient
accumulation, overlapped reductions); :data:`MEGATRON_2021` is the one of Narayanan et al.
2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM") as
its published run scripts (``examples/sc21`` of NVIDIA/Megatron-LM) set it.

>>> Stack().attention, MEGATRON_2021.attention
('fused', 'unfused')
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.errors import SpecError

ATTENTION = ("fused", "unfused")
#: Bytes per parameter of a separate weight-gradient accumulation: read the new gradient,
#: read and write the 16-bit buffer.
WGRAD_ADD_BYTES = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class Stack:
    """The software stack's choices (see the module docstring)."""

    attention: str = "fused"
    sequence_parallel: bool = True
    wgrad_fusion: bool = True
    grad_overlap: bool = True

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION:
            raise SpecError(f"--attention {self.attention}: must be one of "
                            f"{', '.join(ATTENTION)}")

    def label(self) -> str:
        """A short description, e.g. ``fused sp wgrad-fused overlap``."""
        return " ".join((self.attention, "sp" if self.sequence_parallel else "no-sp",
                         "wgrad-fused" if self.wgrad_fusion else "wgrad-add",
                         "overlap" if self.grad_overlap else "no-overlap"))


DEFAULT = Stack()
MEGATRON_2021 = Stack(attention="unfused", sequence_parallel=False, wgrad_fusion=False,
                      grad_overlap=False)
#: ``commsim plan --stack NAME``.
STACKS = {"current": DEFAULT, "megatron-2021": MEGATRON_2021}


def named_stack(name: str, attention: str | None = None) -> Stack:
    """The stack called ``name`` (:data:`STACKS`), ``attention`` overriding its attention."""
    stack = STACKS.get(name.strip().lower())
    if stack is None:
        raise SpecError(f"--stack {name!r}: unknown (known: {', '.join(STACKS)})")
    if attention is None:
        return stack
    from dataclasses import replace

    return replace(stack, attention=attention.strip().lower())
