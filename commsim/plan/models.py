"""The transformers ``commsim plan`` sizes: a validated :class:`ModelSpec`, a catalogue of
published models (each with its source), and the reader of model YAML files.

A model file holds the ``model:`` keys of a ``hybrid`` workload (``layers, hidden, heads,
vocab, seq``) plus optional ``kv_heads`` (grouped-query attention; default ``heads``),
``ffn_hidden`` (default ``4 hidden``), ``mlp`` (``gelu``: two matrices; ``swiglu``: three,
as Llama) and ``tied_embeddings`` (default true: the output layer reuses the embedding).
The keys may sit under ``model:`` (a whole ``hybrid`` workload file works) or at the top.
``head_dim`` sets the width of a head when it is not ``hidden / heads`` (Qwen3, GPT-OSS).
``moe:`` makes the layers after the first ``dense_layers`` mixtures of experts and ``mla:`` the
attention DeepSeek's multi-head latent attention (:mod:`.experts`).

>>> m = catalogue_model("llama3-70b")
>>> m.kv_heads, m.ffn_hidden, m.mlp, round(m.params / 1e9, 1)
(8, 28672, 'swiglu', 70.6)
>>> v3 = catalogue_model("deepseek-v3")   # DeepSeek-V3's report: 671B total, 37B active
>>> round(v3.params / 1e9), round(v3.active_params / 1e9, 1)
(671, 37.6)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from commsim.errors import SpecError, describe
from commsim.plan.experts import MLASpec, MoESpec, mla_from_dict, moe_from_dict
from commsim.replay import fields

MLPS = ("gelu", "swiglu")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer.

    Attributes
    ----------
    name
        Catalogue name or file stem.
    layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq
        Layers ``l``, hidden size ``h``, query heads ``a``, key/value heads ``g`` (``g < a``:
        grouped-query attention), MLP inner size ``f``, vocabulary ``V``, sequence ``s``.
    mlp
        ``gelu`` (up and down projections) or ``swiglu`` (gate, up and down).
    tied_embeddings
        The output projection shares the input embedding's weights.
    source
        Where the sizes come from.
    head_channels
        A head's width where it is not ``h / a`` (None: ``h / a``).
    moe, mla
        Mixture-of-experts layers and multi-head latent attention (:mod:`.experts`; None:
        a dense MLP in every layer, standard attention).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq: int
    mlp: str = "gelu"
    tied_embeddings: bool = True
    source: str = ""
    head_channels: int | None = None
    moe: MoESpec | None = None
    mla: MLASpec | None = None

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq"):
            fields.positive_int(getattr(self, key), f"model.{key}")
        fields.choice(self.mlp, "model.mlp", MLPS)
        if self.head_channels is not None:
            fields.positive_int(self.head_channels, "model.head_dim")
        elif self.hidden % self.heads:
            raise SpecError(f"model.heads: {self.heads} does not divide hidden ({self.hidden})")
        if self.moe is not None and self.moe.dense_layers >= self.layers:
            raise SpecError(f"model.moe.dense_layers: {self.moe.dense_layers} leaves none of "
                            f"the {self.layers} layers a mixture of experts")
        if self.heads % self.kv_heads:
            raise SpecError(
                f"model.kv_heads: {self.kv_heads} does not divide heads ({self.heads})"
            )

    @property
    def head_dim(self) -> int:
        """A head's width ``d``: ``h / a`` unless the model file sets it (MLA: the values')."""
        if self.mla is not None:
            return self.mla.v_head_dim
        return self.head_channels or self.hidden // self.heads

    @property
    def q_hidden(self) -> int:
        """Width of the queries and of the attention's output: ``a d`` (``h`` usually)."""
        return self.heads * self.head_dim

    @property
    def kv_hidden(self) -> int:
        """Width of the keys (and of the values): ``g d``."""
        return self.kv_heads * self.head_dim

    @property
    def core_width(self) -> int:
        """Half the width the attention core multiplies by per token and key, ``a (d_qk +
        d_v) / 2`` (``h`` for standard attention): causal scores and values of a layer's
        forward cost ``2 T s`` times it."""
        if self.mla is not None:
            return self.heads * (self.mla.qk_head_dim + self.mla.v_head_dim) // 2
        return self.q_hidden

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections: ``2 h a d + 2 h g d`` (``2 h^2 + 2 h g h/a``), or
        MLA's (:meth:`~commsim.plan.experts.MLASpec.params`)."""
        if self.mla is not None:
            return _mla_params(self.mla, self.hidden, self.heads)
        return 2 * self.hidden * self.q_hidden + 2 * self.hidden * self.kv_hidden

    @property
    def mlp_params(self) -> int:
        """``2 h f`` (GeLU) or ``3 h f`` (SwiGLU)."""
        return (3 if self.mlp == "swiglu" else 2) * self.hidden * self.ffn_hidden

    @property
    def layer_params(self) -> int:
        """Weights of one dense layer (biases and norms neglected, as Narayanan et al. do)."""
        return self.attention_params + self.mlp_params

    def is_moe(self, layer: int) -> bool:
        """Whether global layer ``layer`` (from 0) is a mixture of experts."""
        return self.moe is not None and layer >= self.moe.dense_layers

    @property
    def moe_layers(self) -> int:
        return 0 if self.moe is None else self.layers - self.moe.dense_layers

    @property
    def expert_params(self) -> int:
        """Weights of one routed expert (0 without ``moe``)."""
        return 0 if self.moe is None else self.moe.expert_params(self.hidden, self.mlp)

    def dense_params_at(self, layer: int) -> int:
        """Weights of ``layer`` that every expert-parallel rank holds: the attention and the
        dense MLP, or (a MoE layer) the attention, the router and the shared experts."""
        if not self.is_moe(layer):
            return self.layer_params
        assert self.moe is not None
        return (self.attention_params + self.hidden * self.moe.experts
                + self.moe.shared_experts * self.expert_params)

    def experts_at(self, layer: int) -> int:
        """Weights of ``layer``'s routed experts (0 for a dense layer)."""
        if self.moe is None or not self.is_moe(layer):
            return 0
        return self.moe.experts * self.expert_params

    @property
    def active_layer_params(self) -> int:
        """Weights all layers apply to one token: the dense ones and ``top_k`` experts."""
        if self.moe is None:
            return self.layers * self.layer_params
        dense = self.layers - self.moe_layers
        moe = self.dense_params_at(self.layers - 1) + self.moe.top_k * self.expert_params
        return dense * self.layer_params + self.moe_layers * moe

    @property
    def active_params(self) -> int:
        """Weights one token uses (:attr:`params` for a dense model): the layers' active
        weights, the embedding, and the output layer unless tied."""
        out = 1 if self.tied_embeddings else 2
        return self.active_layer_params + out * self.embedding_params

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        """All weights: layers, embedding, and the output layer unless tied."""
        out = 1 if self.tied_embeddings else 2
        last = self.layers - 1  # a MoE layer, if any
        moe = self.moe_layers * (self.dense_params_at(last) + self.experts_at(last))
        return ((self.layers - self.moe_layers) * self.layer_params + moe
                + out * self.embedding_params)


@lru_cache(maxsize=64)
def _mla_params(mla: MLASpec, hidden: int, heads: int) -> int:
    return mla.params(hidden, heads)


def _m(name: str, source: str, **kw: Any) -> ModelSpec:
    kw.setdefault("kv_heads", kw["heads"])
    kw.setdefault("ffn_hidden", 4 * kw["hidden"])
    return ModelSpec(name=name, source=source, **kw)


_GPT3 = "Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 (s = 2048)"
_LLAMA2 = "Touvron et al. 2023, 'Llama 2', Table 1 and the Hugging Face config.json"
_LLAMA3 = "Llama 3 team 2024, 'The Llama 3 Herd of Models', Table 3 (8K pre-training context)"
_MISTRAL = "Jiang et al. 2023, 'Mistral 7B', Table 1 (context 8192)"
_MEGATRON = "Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training', Table 1"
_MIXTRAL = ("Jiang et al. 2024, 'Mixtral of Experts', Table 1 and the Hugging Face config.json "
            "(46.7B total, 12.9B active)")
_MIXTRAL22 = ("Mistral AI, Hugging Face mistralai/Mixtral-8x22B-v0.1 config.json "
              "(141B total, 39B active)")
_DEEPSEEK = ("DeepSeek-AI 2024, 'DeepSeek-V3 Technical Report', Sections 2 and 4.2, and the "
             "Hugging Face config.json (671B total, 37B active; pre-training sequence 4K)")
_QWEN3 = ("Qwen team 2025, 'Qwen3 Technical Report', Table 2, and the Hugging Face config.json "
          "(pre-training sequence 4096, stages S1-S2)")
_GPT_OSS = ("OpenAI 2025, 'gpt-oss-120b & gpt-oss-20b Model Card', Table 1, and the Hugging Face "
            "config.json (116.8B total, 5.1B active without the embedding; initial context 4096)")
_MPT = ("MosaicML llm-foundry, scripts/train/yamls/pretrain/mpt-*.yaml (d_model, n_heads, "
        "n_layers; expansion_ratio 4, vocab 50368, tied embeddings, no biases); parameter "
        "counts checked against the NumParams of scripts/train/benchmarking/README.md")

#: Published models: name -> spec (GPT-3 and Megatron's GPT use a 4h GeLU MLP and tied
#: embeddings; Llama and Mistral SwiGLU and untied ones).
CATALOGUE: Mapping[str, ModelSpec] = {
    m.name: m
    for m in (
        _m("gpt3-1.3b", _GPT3, layers=24, hidden=2048, heads=16, vocab=50257, seq=2048),
        _m("gpt3-2.7b", _GPT3, layers=32, hidden=2560, heads=32, vocab=50257, seq=2048),
        _m("gpt3-6.7b", _GPT3, layers=32, hidden=4096, heads=32, vocab=50257, seq=2048),
        # The paper lists d_model 5140 with 40 heads of 128: 5120 is the consistent value.
        _m("gpt3-13b", _GPT3, layers=40, hidden=5120, heads=40, vocab=50257, seq=2048),
        _m("gpt3-175b", _GPT3, layers=96, hidden=12288, heads=96, vocab=50257, seq=2048),
        _m("megatron-145b", _MEGATRON, layers=80, hidden=12288, heads=96, vocab=51200,
           seq=2048),
        _m("megatron-1t", _MEGATRON, layers=128, hidden=25600, heads=160, vocab=51200,
           seq=2048),
        _m("llama2-7b", _LLAMA2, layers=32, hidden=4096, heads=32, ffn_hidden=11008,
           vocab=32000, seq=4096, mlp="swiglu", tied_embeddings=False),
        _m("llama2-13b", _LLAMA2, layers=40, hidden=5120, heads=40, ffn_hidden=13824,
           vocab=32000, seq=4096, mlp="swiglu", tied_embeddings=False),
        _m("llama2-70b", _LLAMA2, layers=80, hidden=8192, heads=64, kv_heads=8,
           ffn_hidden=28672, vocab=32000, seq=4096, mlp="swiglu", tied_embeddings=False),
        _m("llama3-8b", _LLAMA3, layers=32, hidden=4096, heads=32, kv_heads=8,
           ffn_hidden=14336, vocab=128256, seq=8192, mlp="swiglu", tied_embeddings=False),
        _m("llama3-70b", _LLAMA3, layers=80, hidden=8192, heads=64, kv_heads=8,
           ffn_hidden=28672, vocab=128256, seq=8192, mlp="swiglu", tied_embeddings=False),
        _m("llama3-405b", _LLAMA3, layers=126, hidden=16384, heads=128, kv_heads=8,
           ffn_hidden=53248, vocab=128256, seq=8192, mlp="swiglu", tied_embeddings=False),
        _m("mistral-7b", _MISTRAL, layers=32, hidden=4096, heads=32, kv_heads=8,
           ffn_hidden=14336, vocab=32000, seq=8192, mlp="swiglu", tied_embeddings=False),
        # MosaicML's MPT (GeLU MLP of 4h, tied embeddings; the learned position embedding the
        # benchmark runs count, s h, is neglected)
        _m("mpt-1b", _MPT, layers=24, hidden=2048, heads=16, vocab=50368, seq=2048),
        _m("mpt-3b", _MPT, layers=32, hidden=2560, heads=20, vocab=50368, seq=2048),
        _m("mpt-7b", _MPT, layers=32, hidden=4096, heads=32, vocab=50368, seq=2048),
        _m("mpt-13b", _MPT, layers=40, hidden=5120, heads=40, vocab=50368, seq=2048),
        _m("mpt-30b", _MPT, layers=48, hidden=7168, heads=56, vocab=50368, seq=2048),
        _m("mpt-70b", _MPT, layers=80, hidden=8192, heads=64, vocab=50368, seq=2048),
        # mixtures of experts: no shared experts and no dense layers unless named
        _m("mixtral-8x7b", _MIXTRAL, layers=32, hidden=4096, heads=32, kv_heads=8,
           ffn_hidden=14336, vocab=32000, seq=32768, mlp="swiglu", tied_embeddings=False,
           moe=MoESpec(experts=8, top_k=2, expert_ffn_hidden=14336)),
        _m("mixtral-8x22b", _MIXTRAL22, layers=56, hidden=6144, heads=48, kv_heads=8,
           ffn_hidden=16384, vocab=32768, seq=65536, mlp="swiglu", tied_embeddings=False,
           moe=MoESpec(experts=8, top_k=2, expert_ffn_hidden=16384)),
        # first_k_dense_replace 3 (dense MLP 18432), one shared expert of 2048; n_group 8,
        # topk_group 4 (group-limited routing); MLA
        _m("deepseek-v3", _DEEPSEEK, layers=61, hidden=7168, heads=128, ffn_hidden=18432,
           vocab=129280, seq=4096, mlp="swiglu", tied_embeddings=False,
           moe=MoESpec(experts=256, top_k=8, expert_ffn_hidden=2048, shared_experts=1,
                       dense_layers=3, groups=8, group_limit=4),
           mla=MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                       qk_rope_head_dim=64, v_head_dim=128)),
        _m("qwen3-30b-a3b", _QWEN3, layers=48, hidden=2048, heads=32, kv_heads=4,
           head_channels=128, ffn_hidden=6144, vocab=151936, seq=4096, mlp="swiglu",
           tied_embeddings=False, moe=MoESpec(experts=128, top_k=8, expert_ffn_hidden=768)),
        _m("qwen3-235b-a22b", _QWEN3, layers=94, hidden=4096, heads=64, kv_heads=4,
           head_channels=128, ffn_hidden=12288, vocab=151936, seq=4096, mlp="swiglu",
           tied_embeddings=False, moe=MoESpec(experts=128, top_k=8, expert_ffn_hidden=1536)),
        # biases, attention sinks and the alternating sliding window are neglected
        _m("gpt-oss-120b", _GPT_OSS, layers=36, hidden=2880, heads=64, kv_heads=8,
           head_channels=64, ffn_hidden=2880, vocab=201088, seq=4096, mlp="swiglu",
           tied_embeddings=False, moe=MoESpec(experts=128, top_k=4, expert_ffn_hidden=2880)),
    )
}

_REQUIRED = ("layers", "hidden", "heads", "vocab", "seq")
_OPTIONAL = ("kv_heads", "ffn_hidden", "mlp", "tied_embeddings", "name", "head_dim", "moe",
             "mla")


def catalogue_model(name: str) -> ModelSpec:
    """The catalogue's model ``name`` (case-insensitive); SpecError listing them otherwise."""
    key = name.strip().lower()
    if key not in CATALOGUE:
        raise SpecError(
            f"unknown model {name!r} (not a file; catalogue: {', '.join(sorted(CATALOGUE))})"
        )
    return CATALOGUE[key]


def model_from_dict(data: object, name: str = "model") -> ModelSpec:
    """A model mapping (its keys at the top or under ``model:``) -> :class:`ModelSpec`."""
    top = fields.mapping(data, "model file")
    body = fields.mapping(top["model"], "model") if "model" in top else top
    path = "model" if "model" in top else ""
    fields.check_keys(body, _REQUIRED, _OPTIONAL, path)
    ints = {k: fields.positive_int(body[k], fields.join(path, k)) for k in _REQUIRED}
    hidden = ints["hidden"]
    mlp = fields.choice(body.get("mlp", "gelu"), fields.join(path, "mlp"), MLPS)
    tied = body.get("tied_embeddings", True)
    if not isinstance(tied, bool):
        raise SpecError(
            f"{fields.join(path, 'tied_embeddings')}: must be true or false, got {describe(tied)}"
        )
    label = body.get("name", name)
    if not isinstance(label, str) or not label:
        raise SpecError(f"{fields.join(path, 'name')}: must be a string, got {describe(label)}")
    return ModelSpec(
        name=label,
        kv_heads=fields.positive_int(body.get("kv_heads", ints["heads"]),
                                     fields.join(path, "kv_heads")),
        ffn_hidden=fields.positive_int(body.get("ffn_hidden", 4 * hidden),
                                       fields.join(path, "ffn_hidden")),
        mlp=mlp,
        tied_embeddings=tied,
        source="model file",
        head_channels=(None if "head_dim" not in body else
                       fields.positive_int(body["head_dim"], fields.join(path, "head_dim"))),
        moe=None if body.get("moe") is None else moe_from_dict(body["moe"],
                                                               fields.join(path, "moe")),
        mla=None if body.get("mla") is None else mla_from_dict(body["mla"],
                                                               fields.join(path, "mla")),
        **ints,
    )


def load_model(ref: str) -> ModelSpec:
    """A catalogue name, or a YAML file (a path that exists, or ends in .yaml/.yml)."""
    path = Path(ref)
    if path.exists() or path.suffix in (".yaml", ".yml"):
        try:
            return model_from_dict(fields.read_yaml(path), path.stem)
        except SpecError as exc:
            text = str(exc)
            raise SpecError(text if text.startswith(str(path)) else f"{path}: {text}") from None
    return catalogue_model(ref)
