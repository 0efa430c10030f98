"""Hybrid TP x CP x PP x DP: Llama 3 rank order, groups, derived compute, throughput and MFU."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from commsim.cli import main
from commsim.errors import SpecError
from commsim.replay import Model, Parallel, replay, workload_from_dict

HIER = {
    "kind": "hierarchical",
    "nodes": 2,
    "gpus_per_node": 4,
    "intra": {"latency": "2us", "bandwidth": "450GB/s"},
    "inter": {"latency": "5us", "bandwidth": "50GB/s"},
}
MODEL = {"layers": 4, "hidden": 1024, "heads": 16, "seq": 1024, "vocab": 32000}


def _hybrid(**over: object) -> dict[str, object]:
    spec: dict[str, object] = {
        "kind": "hybrid",
        "model": dict(MODEL),
        "parallel": {"tp": 4, "cp": 1, "pp": 1, "dp": 2},
        "micro_batch": 1,
        "global_batch": 4,
        "pipeline": {"schedule": "1f1b"},
        "data_parallel": "fsdp",
        "compute": {"flops": "989TFLOP/s", "efficiency": 0.5},
        "algorithm": "ring",
    }
    spec.update(over)
    return spec


def test_ranks_follow_llama3_order() -> None:
    """Rank = t + tp (c + cp (p + pp d)): TP fastest, then CP, PP, DP."""
    par = Parallel(tp=2, cp=2, pp=2, dp=2)
    assert par.rank(1, 0, 0, 0) == 1 and par.rank(0, 1, 0, 0) == 2
    assert par.rank(0, 0, 1, 0) == 4 and par.rank(0, 0, 0, 1) == 8
    assert par.world == 16


def test_tp_groups_stay_inside_a_node_and_dp_groups_cross_nodes() -> None:
    """tp=4 on 2 nodes of 4 GPUs: TP all-reduces within each node; FSDP groups pair rank t of
    node 0 with rank t of node 1 (every replica's tasks: not folded)."""
    r = replay(_hybrid(), HIER, fold=False)
    df = r.tasks().query("kind == 'collective'")
    tp_groups = set(df[df["collective"] == "all_reduce"]["ranks"])
    dp_groups = set(df[df["collective"].isin(["all_gather", "reduce_scatter"])]["ranks"])
    assert tp_groups == {(0, 1, 2, 3), (4, 5, 6, 7)}
    assert dp_groups == {(0, 4), (1, 5), (2, 6), (3, 7)}


def test_throughput_and_mfu_follow_from_the_step_time() -> None:
    """tokens/s = global_batch x seq / step; MFU = model TFLOP/s per GPU / peak; without
    recompute the hardware FLOPs equal the model FLOPs."""
    r = replay(_hybrid(), HIER)
    out = r.to_dict()
    m = Model(**MODEL)
    tokens_per_s = 4 * 1024 / r.step_time_s
    assert out["tokens_per_s"] == pytest.approx(tokens_per_s, rel=1e-12)
    model_tflops = m.model_flops_per_token * tokens_per_s / 8 / 1e12
    assert out["model_tflops_per_gpu"] == pytest.approx(model_tflops, rel=1e-12)
    assert out["hardware_tflops_per_gpu"] == out["model_tflops_per_gpu"]
    assert out["mfu"] == pytest.approx(model_tflops / 989, rel=1e-12)
    assert 0 < out["mfu"] < 0.5  # never above the matmul efficiency
    for key in (
        "tokens_per_s",
        "model_tflops_per_gpu",
        "hardware_tflops_per_gpu",
        "mfu",
        "peak_memory_bytes",
    ):
        assert key in out
    assert all("peak_memory_bytes" in rank for rank in out["per_rank"])


def test_full_recompute_costs_time_and_saves_memory() -> None:
    """recompute: full re-runs each layer's forward in backward (hardware FLOPs > model FLOPs,
    slower step) and keeps only layer inputs (less memory)."""
    plain = replay(_hybrid(), HIER).to_dict()
    full = replay(_hybrid(recompute="full"), HIER).to_dict()
    assert full["step_time_s"] > plain["step_time_s"]
    assert full["hardware_tflops_per_gpu"] > full["model_tflops_per_gpu"]
    assert full["peak_memory_bytes"] < plain["peak_memory_bytes"]


def test_given_layer_times_override_the_flops() -> None:
    """compute.layer_forward_time/layer_backward_time set the per-layer compute; with tp=pp=cp=1
    each rank computes k micro-batches of L layers plus the logits."""
    f, b = 2.0**-10, 2.0**-9
    spec = _hybrid(
        parallel={"dp": 2},
        global_batch=6,
        compute={
            "flops": "989TFLOP/s",
            "efficiency": 0.5,
            "layer_forward_time": f"{f!r}s",
            "layer_backward_time": f"{b!r}s",
        },
    )
    r = replay(spec, HIER)
    m = Model(**MODEL)
    logits = m.logits_forward_flops(1) / (989e12 * 0.5)
    assert r.to_dict()["microbatches"] == 3
    assert r.metrics.per_rank[0].compute_time_s == pytest.approx(
        3 * (4 * (f + b) + 3 * logits), rel=1e-12
    )


def test_pipeline_and_ddp_compose() -> None:
    """pp=2 x dp=2 x tp=2 with DDP: sends between stages, bucketed all-reduces per stage."""
    r = replay(
        _hybrid(parallel={"tp": 2, "pp": 2, "dp": 2}, data_parallel="ddp", global_batch=8), HIER,
        fold=False,
    )
    df = r.tasks()
    sends = set(df.query("kind == 'send'")["ranks"])
    assert (0, 2) in sends and (2, 0) in sends and (5, 7) in sends
    grads = df.query("phase == 'gradient'")
    assert set(grads["collective"]) == {"all_reduce"}
    assert set(grads["ranks"]) == {(0, 4), (1, 5), (2, 6), (3, 7)}


def test_context_parallel_gathers_keys_and_values() -> None:
    """cp=2: per layer a key/value all-gather in forward and reduce-scatter in backward."""
    r = replay(_hybrid(parallel={"tp": 2, "cp": 2, "dp": 2}), HIER)
    df = r.tasks()
    kv = df[df["name"].str.contains("kv")]
    assert set(kv["collective"]) == {"all_gather", "reduce_scatter"}
    assert (0, 2) in set(kv["ranks"])


def test_interleaved_pipeline_in_hybrid() -> None:
    """Interleaved 1F1B with 2 chunks per stage runs (layers split into pp x v chunks)."""
    r = replay(
        _hybrid(
            parallel={"tp": 2, "pp": 2, "dp": 2},
            global_batch=8,
            pipeline={"schedule": "interleaved", "chunks_per_stage": 2},
        ),
        HIER,
    )
    assert r.step_time_s > 0


def test_uneven_stages_each_hold_their_layers() -> None:
    """``pipeline.stage_layers`` gives each stage its own layers: an even list replays as the
    default does, an uneven one runs layers 0 on the first stage and 1..3 on the second."""
    par = {"tp": 4, "cp": 1, "pp": 2, "dp": 1}
    even = replay(_hybrid(parallel=par, pipeline={"stage_layers": [2, 2]}), HIER)
    assert even.step_time_s == replay(_hybrid(parallel=par), HIER).step_time_s
    uneven = replay(_hybrid(parallel=par, pipeline={"stage_layers": [1, 3]}), HIER)
    tasks = uneven.tasks()
    fwd = tasks[tasks["name"].str.startswith("fwd L")]
    first = {name.split()[1] for name, ranks in zip(fwd["name"], fwd["ranks"], strict=True)
             if ranks[0] < 4}
    assert first == {"L0"}
    assert uneven.step_time_s > even.step_time_s  # the last stage's 3 layers pace the step


def test_contract_example_parses() -> None:
    """The contract's hybrid example is a valid workload."""
    spec = workload_from_dict(
        {
            "kind": "hybrid",
            "model": {"layers": 40, "hidden": 5120, "heads": 40, "seq": 2048, "vocab": 50368},
            "parallel": {"tp": 1, "cp": 1, "pp": 1, "dp": 64},
            "micro_batch": 2,
            "global_batch": 128,
            "pipeline": {"schedule": "1f1b", "chunks_per_stage": 1},
            "data_parallel": "fsdp",
            "recompute": "none",
            "bytes_per_param": 2,
            "compute": {"flops": "989TFLOP/s", "efficiency": 0.5},
        }
    )
    assert spec.kind == "hybrid" and spec.microbatches == 1


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (
            {"parallel": {"tp": 4, "dp": 4}},
            r"^parallel: tp x cp x pp x dp = 16 exceeds the 8 ranks",
        ),
        ({"global_batch": 5}, r"^global_batch: 5 is not a multiple of micro_batch x dp"),
        ({"parallel": {"tp": 1, "pp": 3}}, r"^model.layers: 4 layers do not split"),
        ({"parallel": {"tp": 3}}, r"^parallel.tp: 3 does not divide model.heads"),
        ({"parallel": {"tp": 0}}, r"^parallel.tp: must be a positive integer"),
        ({"paralel": {}}, r"^paralel: unknown key"),
        ({"recompute": "some"}, r"^recompute: must be one of none, full \(got 'some'\)"),
        (
            {
                "pipeline": {"schedule": "interleaved", "chunks_per_stage": 2},
                "global_batch": 2,
                "parallel": {"pp": 2, "dp": 2},
            },
            r"^pipeline: microbatches: interleaved needs a multiple",
        ),
        ({"compute": {"flops": "0TFLOP/s", "efficiency": 0.5}}, r"^compute.flops: must be > 0"),
        ({"compute": {"flops": "1TFLOP/s", "efficiency": 1.5}}, r"^compute.efficiency: must be"),
        (
            {"parallel": {"tp": 1, "pp": 3}, "pipeline": {"stage_layers": [1, 1, 1]}},
            r"^pipeline.stage_layers: 1\*3: sums to 3 layers, the model has 4",
        ),
        (
            {"parallel": {"tp": 1, "pp": 3}, "pipeline": {"stage_layers": [2, 2]}},
            r"^pipeline.stage_layers: 2\*2: 2 stages, but pp is 3",
        ),
        (
            {"parallel": {"tp": 1, "pp": 2}, "pipeline": {"stage_layers": [4, 0]}},
            r"^pipeline.stage_layers\[1\]: must be a positive integer",
        ),
        (
            {"parallel": {"tp": 1, "pp": 2}, "pipeline": {"stage_layers": 4}},
            r"^pipeline.stage_layers: must be a list of layer counts",
        ),
        (
            {
                "parallel": {"tp": 1, "pp": 2},
                "global_batch": 2,
                "pipeline": {"schedule": "interleaved", "chunks_per_stage": 3,
                             "stage_layers": [1, 3]},
            },
            r"^pipeline.stage_layers: interleaved:3: stage 0's 1 layers do not split",
        ),
    ],
)
def test_invalid_hybrid_workloads(over: dict[str, object], message: str) -> None:
    """Each invalid field is a SpecError naming its path."""
    with pytest.raises(SpecError, match=message):
        replay(_hybrid(**over), HIER)



def test_a_step_too_big_to_time_is_refused_before_it_is_built(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    """Llama 3 70B's first plan on 512 H100 (TP2 CP4 PP4 DP16, 64 micro-batches), every
    replica simulated (``--no-fold``; folded, one replica of 32 ranks is timed for all:
    benchmarks/replay_fold.py), is refused in one line from its compute tasks alone, counted
    before any is built: 512 ranks x 64 micro-batches x 80 layers x 2 compute blocks x forward
    and backward / 4 stages."""
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump({
        "kind": "hybrid",
        "model": {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
                  "ffn_hidden": 28672, "vocab": 128256, "seq": 8192, "mlp": "swiglu"},
        "parallel": {"tp": 2, "cp": 4, "pp": 4, "dp": 16},
        "micro_batch": 1, "global_batch": 1024,
        "pipeline": {"schedule": "interleaved", "chunks_per_stage": 20},
        "data_parallel": "fsdp", "recompute": "none",
    }))
    assert main(["replay", str(workload), "-t", "dgx-h100x64", "--no-fold"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "ranks x micro-batches x layers: 512 x 64 x 80 gives a step at least 2621440 " \
        "tasks" in err
