"""``--precision bf16|fp8``: the fp8 GEMMs and casts of the compute model, the device's fp8
peak, the fp8 weight copies in memory, the CLI and API, and the MPT models."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from commsim.cli import main
from commsim.errors import SpecError
from commsim.plan import SearchSpace, plan
from commsim.plan.compute import FP8_CAST_BYTES, _fwd_bwd, gemm_time
from commsim.plan.device import DeviceSpec, device_from_dict
from commsim.plan.memory import peak_memory
from commsim.plan.models import CATALOGUE
from commsim.plan.search import layer_costs
from commsim.plan.stack import Stack, named_stack

DEV = DeviceSpec(name="x", memory_bytes=2**34, memory_bandwidth_Bps=2e12, peak_flops=1e15,
                 sms=100, gemm_efficiency=0.8, attention_efficiency=0.5, peak_flops_fp8=2e15)
ONE = ["--tp", "1", "--pp", "1", "--cp", "1", "--micro-batch", "2", "--data-parallel", "fsdp",
       "--recompute", "none"]


def test_a_large_fp8_gemm_runs_at_the_fp8_peak():
    """A compute-bound GEMM of whole waves runs at e x the fp8 peak: twice as fast as bf16."""
    m, n, k = 12800, 25600, 8192
    bf16 = gemm_time(DEV, m, n, k)
    fp8 = gemm_time(DEV, m, n, k, precision="fp8")
    assert 2 * m * n * k / fp8 == pytest.approx(0.8 * 2e15)
    assert bf16 == pytest.approx(2 * fp8)


def test_a_memory_bound_fp8_gemm_moves_one_byte_inputs():
    """Bound by its traffic, an fp8 GEMM reads 1-byte inputs and writes a 2-byte output."""
    fast = replace(DEV, peak_flops=1e20, peak_flops_fp8=1e20)
    m, n, k = 64, 64, 4096
    assert gemm_time(fast, m, n, k, precision="fp8") == pytest.approx(
        (m * k + k * n + 2 * m * n) / 2e12)
    assert gemm_time(fast, m, n, k) == pytest.approx(2 * (m * k + k * n + m * n) / 2e12)


def test_the_casts_of_an_fp8_linear_layer_by_hand():
    """An fp8 linear layer adds 4 bytes per element of its input and weight (forward) and of
    its output gradient (backward) at HBM bandwidth."""
    m, n, k = 4096, 2048, 1024
    f8, b8 = _fwd_bwd(DEV, m, n, k, "fp8")
    gemms = (gemm_time(DEV, m, n, k, precision="fp8"),
             gemm_time(DEV, m, k, n, precision="fp8") + gemm_time(DEV, k, n, m, precision="fp8"))
    assert f8 - gemms[0] == pytest.approx(FP8_CAST_BYTES * (m * k + k * n) / 2e12)
    assert b8 - gemms[1] == pytest.approx(FP8_CAST_BYTES * m * n / 2e12)


def test_fp8_speeds_the_linear_layers_only():
    """In fp8 the layer's halves get faster (less than twice: casts, attention), the output
    layer and the attention core do not change."""
    model = CATALOGUE["mpt-7b"]
    bf16 = layer_costs(model, DEV, 1, 1, 4, "none")
    fp8 = layer_costs(model, DEV, 1, 1, 4, "none", Stack(precision="fp8"))
    assert bf16.mlp_fwd / 2 < fp8.mlp_fwd < bf16.mlp_fwd
    assert bf16.attn_bwd / 2 < fp8.attn_bwd < bf16.attn_bwd
    assert fp8.logits_fwd == bf16.logits_fwd and fp8.logits_bwd == bf16.logits_bwd


def test_device_reads_the_fp8_peak_and_refuses_without_it():
    """peak_flops.fp8 is read from the device block; a device without one refuses fp8 in one
    line naming the device; a non-positive peak is a spec error."""
    block = {"name": "g", "memory": "80GiB", "memory_bandwidth": "2TB/s",
             "peak_flops": {"bf16": "312TFLOP/s"}, "sms": 108,
             "efficiency": {"curve": "wave-roofline", "gemm": 0.8, "attention": 0.6}}
    old = device_from_dict(block)
    assert old.peak_flops_fp8 is None and old.gemm_peak("bf16") == 312e12
    with pytest.raises(SpecError, match="--precision fp8: device 'g' has no fp8 peak"):
        old.gemm_peak("fp8")
    new = device_from_dict({**block, "peak_flops": {"bf16": "1PFLOP/s", "fp8": "2PFLOP/s"}})
    assert new.gemm_peak("fp8") == 2e15
    with pytest.raises(SpecError, match="fp8"):
        replace(new, peak_flops_fp8=0.0)


def test_fp8_memory_holds_the_weight_copies_of_the_layers_in_flight():
    """fp8 adds 2 bytes per linear weight of each layer in flight (one layer's with full
    recompute); nothing else changes."""
    model = CATALOGUE["mpt-1b"]
    kw = dict(tp=1, cp=1, pp=1, dp=8, micro_batch=2, microbatches=1, schedule="1f1b", chunks=1,
              data_parallel="fsdp")
    for recompute, layers in (("none", model.layers), ("full", 1)):
        bf16 = peak_memory(model, recompute=recompute, **kw)
        fp8 = peak_memory(model, recompute=recompute, stack=Stack(precision="fp8"), **kw)
        assert fp8.activations - bf16.activations == pytest.approx(
            2 * model.layer_params * layers, abs=1)
        assert fp8.weights == bf16.weights and fp8.optimizer == bf16.optimizer


def test_precision_in_json_csv_and_table(capsys):
    """--precision fp8 is each configuration's precision in --json and --csv, the stack's in
    the JSON, and named in the table's stack line; it is faster than bf16."""
    base = ["plan", "mpt-1b", "--topology", "dgx-h100", "--global-batch", "16", *ONE]
    assert main([*base, "--precision", "fp8", "--json"]) == 0
    fp8 = json.loads(capsys.readouterr().out)
    assert fp8["stack"]["precision"] == "fp8"
    assert {c["precision"] for c in fp8["configs"]} == {"fp8"}
    assert main([*base, "--json"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    assert bf16["configs"][0]["precision"] == "bf16"
    assert fp8["configs"][0]["step_time_s"] < bf16["configs"][0]["step_time_s"]
    assert main([*base, "--precision", "fp8", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    column = lines[0].split(",").index("precision")
    assert lines[1].split(",")[column] == "fp8"
    assert main([*base, "--precision", "fp8"]) == 0
    assert "stack: fused sp wgrad-fused overlap fp8" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--topology", "dgx-a100", "--precision", "fp8"], "device 'A100 SXM4 80GB' has no fp8"),
    (["--topology", "dgx-h100", "--precision", "fp16"], "--precision 'fp16': must be one of"),
])
def test_bad_precision_is_one_line_and_exit_2(capsys, argv, message):
    """An unknown precision, or fp8 on a GPU without an fp8 peak: one line, exit 2."""
    code = main(["plan", "mpt-1b", "--global-batch", "16", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_the_api_takes_the_precision_in_the_stack():
    """plan(stack=...) with fp8 refuses a device without an fp8 peak; named_stack sets it."""
    assert named_stack("pytorch-fsdp", precision="FP8").precision == "fp8"
    with pytest.raises(SpecError, match="no fp8 peak"):
        plan("mpt-1b", "dgx-a100", global_batch=16, stack=Stack(precision="fp8"),
             space=SearchSpace(tp=(1,), pp=(1,), cp=(1,)))


#: NumParams of mosaicml/llm-foundry scripts/train/benchmarking/README.md at sequence 2048
#: (their count includes the learned position embedding, 2048 h, and the norms).
MPT_PARAMS = [("mpt-1b", 1315950592), ("mpt-3b", 2651837440), ("mpt-7b", 6658859008),
              ("mpt-13b", 12853954560), ("mpt-30b", 29975214080), ("mpt-70b", 64862437376)]


@pytest.mark.parametrize("name,published", MPT_PARAMS)
def test_mpt_parameter_counts(name, published):
    """The MPT models' sizes give llm-foundry's NumParams within 2% (GeLU MLP of 4h, tied
    embeddings of 50368)."""
    model = CATALOGUE[name]
    assert model.mlp == "gelu" and model.tied_embeddings and model.vocab == 50368
    assert model.params == pytest.approx(published, rel=0.02)
