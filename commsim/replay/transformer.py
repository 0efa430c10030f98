"""A decoder-only transformer's sizes, FLOPs and activation memory, for capacity planning.

Formulas of Narayanan et al. (SC'21, "Efficient large-scale language model training on GPU
clusters using Megatron-LM", appendix) and Korthikanti et al. (2022, "Reducing activation
recomputation in large transformer models"), for ``l`` layers of hidden size ``h``, ``a`` heads,
sequence ``s``, vocabulary ``V``, an MLP of ``4h`` and tied embeddings:

* parameters ``N = 12 l h^2 + V h`` (biases and norms neglected);
* forward FLOPs of one layer on ``b`` sequences: ``24 b s h^2 + 4 b s^2 h`` (matmuls of the
  projections and MLP, then attention scores and values); of the logits: ``2 b s h V``;
  backward is twice forward;
* model FLOPs per token (what MFU counts, no recomputation): ``6 N + 12 l s h``;
  with full recomputation the hardware also re-runs every layer's forward: ``+ 24 l h^2 + 4 l s h``;
* activation bytes of one layer per micro-batch with 16-bit activations, tensor and sequence
  parallel over ``t`` ranks: ``s b h (34 + 5 a s / h) / t``; with full recomputation only the
  layer's input is kept: ``2 s b h / t``.

>>> m = Model(layers=40, hidden=5120, heads=40, seq=2048, vocab=50368)
>>> round(m.params / 1e9, 2)
12.84
>>> m.model_flops_per_token == 6 * m.params + 12 * 40 * 2048 * 5120
True
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.replay import fields


@dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """A decoder-only transformer: layers, hidden size, heads, sequence length, vocabulary."""

    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "seq", "vocab"):
            fields.positive_int(getattr(self, name), f"model.{name}")

    @property
    def layer_params(self) -> int:
        """Parameters of one layer: ``12 h^2``."""
        return 12 * self.hidden**2

    @property
    def embedding_params(self) -> int:
        """Parameters of the (tied) embedding: ``V h``."""
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        """``N = 12 l h^2 + V h``."""
        return self.layers * self.layer_params + self.embedding_params

    def layer_forward_flops(self, batch: int, queries: int | None = None) -> float:
        """Forward FLOPs of one layer on ``batch`` sequences (``queries`` of them per sequence
        on this rank, the whole sequence by default: context parallelism splits queries)."""
        q = self.seq if queries is None else queries
        h = self.hidden
        return 24.0 * batch * q * h * h + 4.0 * batch * q * self.seq * h

    def logits_forward_flops(self, batch: int, queries: int | None = None) -> float:
        """Forward FLOPs of the output projection: ``2 b s h V``."""
        q = self.seq if queries is None else queries
        return 2.0 * batch * q * self.hidden * self.vocab

    @property
    def model_flops_per_token(self) -> float:
        """``6 N + 12 l s h``: forward and backward, attention included, no recomputation."""
        return 6.0 * self.params + 12.0 * self.layers * self.seq * self.hidden

    def hardware_flops_per_token(self, recompute: bool) -> float:
        """Model FLOPs plus, with full recomputation, one more forward of every layer."""
        extra = 24.0 * self.layers * self.hidden**2 + 4.0 * self.layers * self.seq * self.hidden
        return self.model_flops_per_token + (extra if recompute else 0.0)

    def layer_activation_bytes(self, batch: int, tp: int, cp: int, recompute: bool) -> int:
        """Activations one layer keeps for backward per micro-batch on one rank (16-bit)."""
        s, h, a = self.seq / cp, self.hidden, self.heads
        if recompute:
            return int(2 * s * batch * h / tp)
        return int(s * batch * h * (34 + 5 * a * self.seq / h) / tp)
