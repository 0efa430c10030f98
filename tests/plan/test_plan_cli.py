"""``commsim plan``: ranking, memory marking, rejections, errors and determinism."""

from __future__ import annotations

import json

import pytest

from commsim.cli import main
from commsim.plan import SearchSpace, plan

SMALL = ["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32"]


def _run(capsys, *argv):
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_keys_and_ranking(capsys):
    """--json has the contract's keys; configurations are ranked fastest first, those that
    fit before those that do not."""
    code, out, _ = _run(capsys, *SMALL, "--json", "--top", "0", "--tp", "1,2", "--pp", "1,2")
    assert code == 0
    data = json.loads(out)
    assert {"model", "topology", "gpus", "global_batch", "seq", "configs", "rejected"} <= set(data)
    keys = {"tp", "cp", "pp", "dp", "micro_batch", "schedule", "chunks_per_stage",
            "data_parallel", "recompute", "step_time_s", "tokens_per_s", "model_tflops_per_gpu",
            "hardware_tflops_per_gpu", "mfu", "peak_memory_bytes", "fits"}
    assert all(keys <= set(c) for c in data["configs"])
    ranked = [(not c["fits"], c["step_time_s"]) for c in data["configs"]]
    assert ranked == sorted(ranked)
    assert all(r["reason"] for r in data["rejected"])


def test_a_config_that_does_not_fit_is_never_first():
    """On GPUs too small for most layouts, whatever fits ranks above everything that does not,
    and what does not fit is marked (or rejected with the reason)."""
    space = SearchSpace(pp=(1,), cp=(1,), data_parallel=("ddp", "fsdp"), recompute=("none",))
    out = plan("gpt3-2.7b", "dgx-a100", global_batch=32, space=space, gpu_memory="24GiB", top=0)
    configs = out.result.configs
    assert configs and configs[0].fits
    fits = [e.fits for e in configs]
    assert fits == sorted(fits, reverse=True)
    assert any("does not fit" in r.reason for r in out.result.rejected)


def test_nothing_fits_still_ranks_marked():
    """When nothing fits, the fastest configurations are still shown, marked fits: false."""
    out = plan("gpt3-2.7b", "dgx-a100", global_batch=32, gpu_memory="1GiB", top=3)
    assert len(out.result.configs) == 3
    assert not any(e.fits for e in out.result.configs)


def test_pruned_configs_cannot_beat_the_top():
    """A configuration pruned by its lower bound is truly slower than the top K: timing every
    configuration gives the same top K."""
    space = SearchSpace(cp=(1,), data_parallel=("ddp",))
    pruned = plan("gpt3-1.3b", "dgx-a100", global_batch=32, space=space, top=3)
    full = plan("gpt3-1.3b", "dgx-a100", global_batch=32, space=space, top=0)
    assert [e.record for e in pruned.result.configs[:3]] == [
        e.record for e in full.result.configs[:3]]
    assert any(r.reason.startswith("pruned") for r in pruned.result.rejected)


def test_the_stack_changes_the_answer(capsys):
    """--stack megatron-2021 (unfused attention and the rest) is slower than today's stack on
    the same layout, and unfused attention alone costs time too."""
    axes = ["--tp", "2", "--pp", "1", "--cp", "1", "--micro-batch", "2", "--data-parallel",
            "ddp", "--recompute", "none", "--json"]
    steps = {}
    for extra in ([], ["--stack", "megatron-2021"], ["--attention", "unfused"]):
        code, out, _ = _run(capsys, *SMALL, *axes, *extra)
        assert code == 0
        steps[" ".join(extra)] = json.loads(out)["configs"][0]["step_time_s"]
    assert steps[""] < steps["--attention unfused"] < steps["--stack megatron-2021"]


def test_replay_warns_when_a_step_does_not_fit(capsys, tmp_path):
    """commsim replay of a hybrid step on a GPU too small for it: the step, and one warning
    line on stderr; on the preset's 80 GB GPU no warning."""
    from pathlib import Path

    preset = Path(__file__).resolve().parents[2] / "topologies" / "dgx-a100.yaml"
    small = tmp_path / "small.yaml"
    small.write_text(preset.read_text().replace("memory: 80GiB", "memory: 32MiB"))
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "kind: hybrid\nmodel: {layers: 4, hidden: 512, heads: 8, seq: 256, vocab: 1000}\n"
        "parallel: {tp: 2, cp: 1, pp: 1, dp: 4}\nmicro_batch: 1\nglobal_batch: 8\n"
        "compute: {flops: 1TFLOP/s, efficiency: 0.5}\n")
    code = main(["replay", str(workload), "--topology", str(small)])
    out, err = capsys.readouterr()
    assert code == 0 and "step time" in out
    assert err.count("\n") == 1 and "warning" in err and "0.1 GiB" in err
    assert main(["replay", str(workload), "--topology", "dgx-a100"]) == 0
    assert capsys.readouterr().err == ""


def test_deterministic(capsys):
    """The same command prints the same bytes twice (table, JSON and CSV)."""
    for fmt in ([], ["--json"], ["--csv"]):
        first = _run(capsys, *SMALL, *fmt)[1]
        assert first and first == _run(capsys, *SMALL, *fmt)[1]


def test_csv_lists_rejections(capsys):
    """--csv has one row per configuration, rejected ones with their reason."""
    code, out, _ = _run(capsys, *SMALL, "--csv", "--tp", "2", "--micro-batch", "1,3")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("tp,cp,pp,dp")
    assert any("does not divide" in line for line in lines[1:])


def test_list_models(capsys):
    """--list-models names the catalogue with sources."""
    code, out, _ = _run(capsys, "--list-models")
    assert code == 0 and "llama3-405b" in out and "gpt3-175b" in out and "Llama 3" in out


@pytest.mark.parametrize("argv,needle", [
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--tp", "3"], "--tp 3"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "0"], "--global-batch"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "x"], "--global-batch"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", str(2**40 + 1)],
     f"--global-batch {2**40 + 1}: above 2^40"),
    (["gpt9", "--topology", "dgx-a100", "--global-batch", "32"], "unknown model 'gpt9'"),
    (["gpt3-1.3b", "--topology", "nowhere", "--global-batch", "32"], "nowhere"),
    (["gpt3-1.3b", "--topology", "tpu-v4-64", "--global-batch", "32"], "device"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--pp", "5"], "--pp 5"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--schedule", "zb"], "zb"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--recompute", "some"],
     "some"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--gpu-memory=-1GB"],
     "-1GB"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--gpus", "16"], "16"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "3", "--micro-batch", "2"],
     "divide"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--stack", "x"],
     "--stack 'x'"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--attention", "flash"],
     "--attention flash"),
    (["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32", "--engine", "fast"],
     "--engine 'fast'"),
    (["--topology", "dgx-a100", "--global-batch", "32"], "MODEL"),
    (["missing.yaml", "--topology", "dgx-a100", "--global-batch", "32"], "missing.yaml"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    """Impossible axes, unknown names and malformed values: one line naming them, exit 2."""
    code, out, err = _run(capsys, *argv)
    assert code == 2, err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_a_huge_global_batch_answers(capsys):
    """A global batch of 2^20 sequences (once minutes: its divisors by trial up to n, then
    stage orders of a million micro-batches): configurations whose pipeline would have more
    ops than a step graph may are rejected, saying so, and the others are ranked."""
    out = plan("gpt3-1.3b", "dgx-h100", global_batch=2**20, top=3)
    assert out.result.configs
    assert any("pipeline ops" in r.reason for r in out.result.rejected)


def test_a_batch_past_what_commsim_times_is_rejected_not_fatal():
    """10^11 sequences: nothing fits, and a configuration whose collectives would exceed 1 PiB
    is rejected with that reason (it once ended the whole search); the others are shown."""
    out = plan("gpt3-1.3b", "dgx-h100", global_batch=10**11, top=10)
    assert out.result.configs and not any(e.fits for e in out.result.configs)
    assert any(r.reason.startswith("not timed: ") and "1PiB" in r.reason
               for r in out.result.rejected)
