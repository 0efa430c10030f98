"""The model catalogue, model files and the FLOP and GEMM formulas."""

from __future__ import annotations

import pytest

from commsim.errors import SpecError
from commsim.plan.compute import gemm_time, hardware_flops_per_token, model_flops_per_token
from commsim.plan.device import DeviceSpec
from commsim.plan.models import CATALOGUE, load_model, model_from_dict


@pytest.mark.parametrize("name,billions", [("gpt3-175b", 174.6), ("llama2-7b", 6.7),
                                           ("llama2-70b", 69.0), ("llama3-8b", 8.0),
                                           ("llama3-70b", 70.6), ("llama3-405b", 405.8),
                                           ("mistral-7b", 7.2)])
def test_catalogue_parameter_counts(name, billions):
    """The catalogue's sizes give the published parameter counts (norms neglected)."""
    assert CATALOGUE[name].params / 1e9 == pytest.approx(billions, rel=0.01)
    assert CATALOGUE[name].source


def test_model_file_keys(tmp_path):
    """A model file may hold a hybrid workload's model: keys, optional GQA and SwiGLU."""
    path = tmp_path / "m.yaml"
    path.write_text("model: {layers: 4, hidden: 256, heads: 8, kv_heads: 2, seq: 128, "
                    "vocab: 100, ffn_hidden: 640, mlp: swiglu}\n")
    m = load_model(str(path))
    assert (m.name, m.kv_heads, m.mlp, m.tied_embeddings) == ("m", 2, "swiglu", True)


@pytest.mark.parametrize("text,needle", [
    ("{layers: 4, hidden: 256, heads: 8, seq: 128}", "vocab"),
    ("{layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 10, moe: {experts: 8}}", "moe"),
    ("{layers: 4, hidden: 256, heads: 7, seq: 128, vocab: 10}", "heads"),
    ("{layers: 0, hidden: 256, heads: 8, seq: 128, vocab: 10}", "layers"),
    ("[1, 2]", "mapping"),
])
def test_bad_model_files(tmp_path, text, needle):
    """Bad model files are SpecErrors naming the file and the field."""
    path = tmp_path / "bad.yaml"
    path.write_text(text + "\n")
    with pytest.raises(SpecError, match=needle) as info:
        load_model(str(path))
    assert str(path) in str(info.value)


def test_model_and_hardware_flops():
    """6 FLOPs per parameter per token plus causal attention (6 l s h); full recompute adds
    a forward of every layer, selective its attention core."""
    m = model_from_dict({"layers": 2, "hidden": 64, "heads": 4, "seq": 32, "vocab": 10})
    assert model_flops_per_token(m) == 6 * m.params + 6 * 2 * 32 * 64
    core = 2 * 2 * 32 * 64
    assert hardware_flops_per_token(m, "selective") == model_flops_per_token(m) + core
    assert hardware_flops_per_token(m, "full") == (
        model_flops_per_token(m) + 2 * 2 * m.layer_params + core)


def test_wave_quantization():
    """A GEMM one tile more than a full wave takes a second wave: its time doubles."""
    dev = DeviceSpec(name="x", memory_bytes=1, memory_bandwidth_Bps=1e15, peak_flops=1e15,
                     sms=10, gemm_efficiency=1.0, attention_efficiency=1.0, tile_m=100,
                     tile_n=100)
    one_wave = gemm_time(dev, 1000, 100, 4096)
    assert gemm_time(dev, 1001, 100, 4096) == pytest.approx(2 * one_wave, rel=1e-3)
