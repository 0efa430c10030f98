"""Mixture-of-experts and multi-head latent attention in a model file: the ``moe:`` and
``mla:`` blocks, validated, and what follows from them alone (parameters per expert, the
busiest expert-parallel rank's share of the routed tokens, MLA's projections).

``moe:`` keys (Megatron-Core's names in brackets)::

    experts            routed experts per MoE layer            [--num-experts]
    top_k              experts each token is routed to         [--moe-router-topk]
    expert_ffn_hidden  an expert's MLP inner size              [--moe-ffn-hidden-size]
    shared_experts     experts every token goes through (0)    [shared expert size / f_e]
    dense_layers       the first layers, with a dense MLP (0)  [first_k_dense_replace]
    capacity_factor    null (dropless, the default) or > 0     [--moe-expert-capacity-factor]
    skew               extra share of the routed tokens the hottest expert gets (0: even)
    groups             routing groups of consecutive experts (0: none) [--moe-router-num-groups]
    group_limit        groups a token's experts may come from          [--moe-router-group-topk]

An expert is an MLP of the model's kind (``mlp``: SwiGLU's three matrices, GeLU's two) of
inner size ``expert_ffn_hidden``; the shared experts are one such MLP of ``shared_experts``
times that size (DeepSeek-V3's one shared expert of 2048); the router is an ``h x E`` matrix.
**Group-limited routing** (DeepSeek-V3's, Section 2.1.2: the experts in ``groups`` groups, a
token's top-k drawn from its best ``group_limit`` groups; its Hugging Face config's
``n_group`` 8 and ``topk_group`` 4, one group per node, "each token will be sent to at most
M = 4 nodes") bounds how many hosts a token's copies reach (:mod:`commsim.plan.dispatch`).

``mla:`` (DeepSeek-V2/V3's multi-head latent attention; the Hugging Face config's names):
``q_lora_rank`` (0: queries projected directly), ``kv_lora_rank``, ``qk_nope_head_dim``,
``qk_rope_head_dim``, ``v_head_dim``. Queries are compressed to ``q_lora_rank``, keys and values
to ``kv_lora_rank`` (plus one shared ``qk_rope_head_dim`` RoPE key), then projected up per head.

**Routing imbalance.** With ``E`` experts of which the hottest gets ``(1 + skew) / E`` of the
routed tokens and the others share the rest evenly, an expert-parallel rank holding ``E/EP``
experts, the hottest among them, processes ``L`` times the even share (:meth:`MoESpec.load`);
with a capacity factor ``c`` no expert takes more than ``c`` times its even share (the rest is
dropped, Megatron-Core's ``--moe-token-drop-policy``), so ``L <= c``.

>>> moe = MoESpec(experts=8, top_k=2, expert_ffn_hidden=14336, skew=0.5)
>>> moe.load(1), moe.load(8), round(moe.load(4), 4)
(1.0, 1.5, 1.2143)
>>> MoESpec(experts=8, top_k=2, expert_ffn_hidden=64, skew=0.5, capacity_factor=1.25).load(8)
1.25
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commsim.errors import SpecError, describe
from commsim.replay import fields

MOE_KEYS = ("experts", "top_k", "expert_ffn_hidden", "shared_experts", "dense_layers",
            "capacity_factor", "skew", "groups", "group_limit")
MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
            "v_head_dim")


@dataclass(frozen=True, slots=True, kw_only=True)
class MoESpec:
    """The ``moe:`` block (see the module docstring)."""

    experts: int
    top_k: int
    expert_ffn_hidden: int
    shared_experts: int = 0
    dense_layers: int = 0
    capacity_factor: float | None = None
    skew: float = 0.0
    groups: int = 0
    group_limit: int = 0

    def __post_init__(self) -> None:
        for key in ("experts", "top_k", "expert_ffn_hidden"):
            fields.positive_int(getattr(self, key), f"moe.{key}")
        for key in ("shared_experts", "dense_layers", "groups", "group_limit"):
            fields.nonnegative_int(getattr(self, key), f"moe.{key}")
        self._check_groups()
        if self.top_k > self.experts:
            raise SpecError(f"moe.top_k: {self.top_k} is more than the {self.experts} experts")
        cf = self.capacity_factor
        if cf is not None and (isinstance(cf, bool) or not isinstance(cf, int | float)
                               or not cf > 0):
            raise SpecError(f"moe.capacity_factor: must be null or a number > 0 "
                            f"(got {describe(cf)})")
        s = self.skew
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0 <= s <= self.experts - 1:
            raise SpecError(f"moe.skew: must be a number in [0, experts - 1 = "
                            f"{self.experts - 1}] (the hottest expert's extra share) "
                            f"(got {describe(s)})")

    def _check_groups(self) -> None:
        g, m = self.groups, self.group_limit
        if not g and not m:
            return
        if not g or self.experts % g:
            raise SpecError(f"moe.groups: {g} must divide the {self.experts} experts (with "
                            f"moe.group_limit {m})")
        if not 1 <= m <= g or m * (self.experts // g) < self.top_k:
            raise SpecError(f"moe.group_limit: {m} must be 1 to moe.groups ({g}) and its "
                            f"groups must hold the top_k {self.top_k} experts")

    def expert_params(self, hidden: int, mlp: str) -> int:
        """Weights of one routed expert: ``3 h f_e`` (SwiGLU) or ``2 h f_e``."""
        return (3 if mlp == "swiglu" else 2) * hidden * self.expert_ffn_hidden

    def shares(self, ep: int) -> tuple[float, float]:
        """(hottest, other) expert's tokens over the even share: ``1 + skew`` and
        ``(E - 1 - skew) / (E - 1)``, each capped at the capacity factor."""
        e = self.experts
        hot = 1.0 + self.skew
        other = (e - hot) / (e - 1) if e > 1 else 1.0
        if self.capacity_factor is not None:
            hot, other = min(hot, self.capacity_factor), min(other, self.capacity_factor)
        return hot, other

    def load(self, ep: int) -> float:
        """Tokens the busiest of ``ep`` expert-parallel ranks processes, over the even share
        (1 without skew): its ``E/ep`` experts are the hottest and ``E/ep - 1`` others."""
        hot, other = self.shares(ep)
        local = self.experts // ep
        return (hot + (local - 1) * other) / local


@dataclass(frozen=True, slots=True, kw_only=True)
class MLASpec:
    """The ``mla:`` block (see the module docstring)."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def __post_init__(self) -> None:
        fields.nonnegative_int(self.q_lora_rank, "mla.q_lora_rank")
        for key in MLA_KEYS[1:]:
            fields.positive_int(getattr(self, key), f"mla.{key}")

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def projections(self, hidden: int, heads: int, tp: int) -> tuple[tuple[int, int], ...]:
        """``(n, k)`` of the per-token GEMMs of one TP rank, in order: the down projections
        (queries', keys' and values' with the RoPE key: not split, every TP rank runs them,
        as Megatron-Core's MLA does for its ``linear_q_down_proj``/``linear_kv_down_proj``),
        the up projections (split by heads) and the output projection (``k`` split)."""
        a = heads // tp
        down = self.kv_lora_rank + self.qk_rope_head_dim
        out: list[tuple[int, int]] = []
        if self.q_lora_rank:
            out += [(self.q_lora_rank + down, hidden),
                    (a * self.qk_head_dim, self.q_lora_rank)]
        else:
            out += [(a * self.qk_head_dim + down, hidden)]
        out += [(a * (self.qk_nope_head_dim + self.v_head_dim), self.kv_lora_rank),
                (hidden, a * self.v_head_dim)]
        return tuple(out)

    def params(self, hidden: int, heads: int) -> int:
        """Weights of the attention (the projections of :meth:`projections` at ``tp = 1``)."""
        return sum(n * k for n, k in self.projections(hidden, heads, 1))


def moe_from_dict(value: object, path: str) -> MoESpec:
    """The ``moe:`` mapping at ``path`` -> :class:`MoESpec` (SpecError naming the key)."""
    body = fields.mapping(value, path)
    fields.check_keys(body, MOE_KEYS[:3], MOE_KEYS[3:], path)
    kw: dict[str, Any] = {}
    for key in MOE_KEYS[:3]:
        kw[key] = fields.positive_int(body[key], fields.join(path, key))
    for key in ("shared_experts", "dense_layers", "groups", "group_limit"):
        kw[key] = fields.nonnegative_int(body.get(key, 0), fields.join(path, key))
    for key in ("capacity_factor", "skew"):
        v = body.get(key, None if key == "capacity_factor" else 0)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise SpecError(f"{fields.join(path, key)}: must be a number (got {describe(v)})")
        kw[key] = v
    try:
        return MoESpec(**kw)
    except SpecError as exc:
        raise SpecError(str(exc).replace("moe.", f"{path}.", 1)) from None


def mla_from_dict(value: object, path: str) -> MLASpec:
    """The ``mla:`` mapping at ``path`` -> :class:`MLASpec`."""
    body = fields.mapping(value, path)
    fields.check_keys(body, MLA_KEYS, (), path)
    kw = {k: fields.nonnegative_int(body[k], fields.join(path, k)) for k in MLA_KEYS}
    try:
        return MLASpec(**kw)
    except SpecError as exc:
        raise SpecError(str(exc).replace("mla.", f"{path}.", 1)) from None
