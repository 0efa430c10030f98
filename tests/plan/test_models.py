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


# Published totals and active counts (billions). Active counts include the embedding and the
# output layer, except gpt-oss's model card, which counts the output layer only.
MOE_COUNTS = [("mixtral-8x7b", 46.7, 12.9), ("mixtral-8x22b", 141, 39),
              ("deepseek-v3", 671, 37), ("qwen3-30b-a3b", 30.5, 3.3),
              ("qwen3-235b-a22b", 235, 22), ("gpt-oss-120b", 116.83, 5.13)]


@pytest.mark.parametrize("name,total,active", MOE_COUNTS)
def test_moe_catalogue_counts(name, total, active):
    """The MoE catalogue's shapes give the published total and active parameter counts
    within 2% (the sources' own rounding; biases and norms neglected)."""
    m = CATALOGUE[name]
    got = m.active_params - (m.embedding_params if name == "gpt-oss-120b" else 0)
    assert m.params / 1e9 == pytest.approx(total, rel=0.02)
    assert got / 1e9 == pytest.approx(active, rel=0.02)
    assert m.moe is not None and m.source


def test_moe_model_file(tmp_path):
    """A model file's moe: and mla: blocks are read with their defaults; a dense model's
    counts are unchanged by them (active = total)."""
    path = tmp_path / "m.yaml"
    path.write_text("model: {layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 100, "
                    "mlp: swiglu, head_dim: 64, moe: {experts: 8, top_k: 2, "
                    "expert_ffn_hidden: 128, dense_layers: 1, skew: 0.5}, mla: {q_lora_rank: 0, "
                    "kv_lora_rank: 32, qk_nope_head_dim: 16, qk_rope_head_dim: 8, "
                    "v_head_dim: 16}}\n")
    m = load_model(str(path))
    assert m.moe.capacity_factor is None and m.moe.shared_experts == 0 and m.moe.skew == 0.5
    assert [m.is_moe(i) for i in range(4)] == [False, True, True, True]
    expert = 3 * 256 * 128
    assert m.params - m.active_params == 3 * (8 - 2) * expert
    dense = load_model("llama2-7b")
    assert dense.active_params == dense.params


def test_model_file_keys(tmp_path):
    """A model file may hold a hybrid workload's model: keys, optional GQA and SwiGLU."""
    path = tmp_path / "m.yaml"
    path.write_text("model: {layers: 4, hidden: 256, heads: 8, kv_heads: 2, seq: 128, "
                    "vocab: 100, ffn_hidden: 640, mlp: swiglu}\n")
    m = load_model(str(path))
    assert (m.name, m.kv_heads, m.mlp, m.tied_embeddings) == ("m", 2, "swiglu", True)


@pytest.mark.parametrize("text,needle", [
    ("{layers: 4, hidden: 256, heads: 8, seq: 128}", "vocab"),
    ("{layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 10, moe: {experts: 8}}", "top_k"),
    ("{layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 10, moe: {experts: 8, top_k: 2, "
     "expert_ffn_hidden: 64, topk: 2}}", "moe.topk: unknown key"),
    ("{layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 10, moe: {experts: 8, top_k: 9, "
     "expert_ffn_hidden: 64}}", "moe.top_k: 9"),
    ("{layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 10, moe: {experts: 8, top_k: 2, "
     "expert_ffn_hidden: 64, skew: -1}}", "moe.skew"),
    ("{layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 10, moe: {experts: 8, top_k: 2, "
     "expert_ffn_hidden: 64, capacity_factor: 0}}", "moe.capacity_factor"),
    ("{layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 10, moe: {experts: 8, top_k: 2, "
     "expert_ffn_hidden: 64, dense_layers: 4}}", "dense_layers"),
    ("{layers: 4, hidden: 256, heads: 8, seq: 128, vocab: 10, mla: {kv_lora_rank: 8}}",
     "mla.q_lora_rank: missing"),
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
