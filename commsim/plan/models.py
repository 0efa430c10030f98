"""The transformers ``commsim plan`` sizes: a validated :class:`ModelSpec`, a catalogue of
published models (each with its source), and the reader of model YAML files.

A model file holds the ``model:`` keys of a ``hybrid`` workload (``layers, hidden, heads,
vocab, seq``) plus optional ``kv_heads`` (grouped-query attention; default ``heads``),
``ffn_hidden`` (default ``4 hidden``), ``mlp`` (``gelu``: two matrices; ``swiglu``: three,
as Llama) and ``tied_embeddings`` (default true: the output layer reuses the embedding).
The keys may sit under ``model:`` (a whole ``hybrid`` workload file works) or at the top.
``moe:`` is the reserved place for mixture-of-experts (experts, top-k, expert FFN size); the
planner does not model experts yet and says so.

>>> m = catalogue_model("llama3-70b")
>>> m.kv_heads, m.ffn_hidden, m.mlp, round(m.params / 1e9, 1)
(8, 28672, 'swiglu', 70.6)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commsim.errors import SpecError, describe
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

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq"):
            fields.positive_int(getattr(self, key), f"model.{key}")
        fields.choice(self.mlp, "model.mlp", MLPS)
        if self.hidden % self.heads:
            raise SpecError(f"model.heads: {self.heads} does not divide hidden ({self.hidden})")
        if self.heads % self.kv_heads:
            raise SpecError(
                f"model.kv_heads: {self.kv_heads} does not divide heads ({self.heads})"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_hidden(self) -> int:
        """Width of the keys (and of the values): ``g h / a``."""
        return self.kv_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections: ``2 h^2 + 2 h g h/a``."""
        return 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_hidden

    @property
    def mlp_params(self) -> int:
        """``2 h f`` (GeLU) or ``3 h f`` (SwiGLU)."""
        return (3 if self.mlp == "swiglu" else 2) * self.hidden * self.ffn_hidden

    @property
    def layer_params(self) -> int:
        """Weights of one layer (biases and norms neglected, as Narayanan et al. do)."""
        return self.attention_params + self.mlp_params

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        """All weights: layers, embedding, and the output layer unless tied."""
        out = 1 if self.tied_embeddings else 2
        return self.layers * self.layer_params + out * self.embedding_params


def _m(name: str, source: str, **kw: Any) -> ModelSpec:
    kw.setdefault("kv_heads", kw["heads"])
    kw.setdefault("ffn_hidden", 4 * kw["hidden"])
    return ModelSpec(name=name, source=source, **kw)


_GPT3 = "Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 (s = 2048)"
_LLAMA2 = "Touvron et al. 2023, 'Llama 2', Table 1 and the Hugging Face config.json"
_LLAMA3 = "Llama 3 team 2024, 'The Llama 3 Herd of Models', Table 3 (8K pre-training context)"
_MISTRAL = "Jiang et al. 2023, 'Mistral 7B', Table 1 (context 8192)"
_MEGATRON = "Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training', Table 1"

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
    )
}

_REQUIRED = ("layers", "hidden", "heads", "vocab", "seq")
_OPTIONAL = ("kv_heads", "ffn_hidden", "mlp", "tied_embeddings", "name", "moe")


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
    if "moe" in body:
        raise SpecError(
            f"{fields.join(path, 'moe')}: mixture-of-experts models are not planned yet "
            "(the key is reserved for experts, top_k and expert ffn_hidden)"
        )
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
