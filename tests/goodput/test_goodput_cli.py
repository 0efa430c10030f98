"""``commsim goodput``: the --json keys of the contract, the text, determinism, and bad inputs
as exactly one line on stderr with exit 2."""

from __future__ import annotations

import json

import pytest

from commsim.cli import main

BASE = ["goodput", "--gpus", "16384", "--step-time", "5.5s", "--checkpoint-bytes", "2TB"]


def _run(capsys, *argv):
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_the_contract_keys(capsys):
    """--json has goodput (0-1), interval_s, checkpoint_s, failures_per_day, wall_time_s with
    --tokens, and simulated_goodput and simulated_ci95 with --simulate."""
    code, out, _ = _run(capsys, *BASE, "--tokens", "15T", "--tokens-per-step", "16M",
                        "--simulate", "20", "--seed", "3", "--json")
    assert code == 0
    data = json.loads(out)
    assert {"goodput", "interval_s", "checkpoint_s", "failures_per_day", "wall_time_s",
            "simulated_goodput", "simulated_ci95"} <= set(data)
    assert 0 < data["goodput"] < 1 and data["checkpoint_s"] == pytest.approx(20.0)
    assert data["failures_per_day"] == pytest.approx(16384 * 2e-5 * 24)
    work = 15e12 / 16e6 * 5.5
    assert data["wall_time_s"] == pytest.approx(work / data["goodput"])


def test_elastic_reports_both_policies(capsys):
    """--elastic adds wait_for_spare and elastic outcomes; a one-hour wait costs more than an
    elastic restart on 2048 nodes."""
    code, out, _ = _run(capsys, *BASE, "--elastic", "--json")
    data = json.loads(out)
    assert code == 0 and data["elastic"]["goodput"] > data["wait_for_spare"]["goodput"]


def test_model_checkpoint_and_intervals(capsys):
    """--model sizes the checkpoint (14 bytes per parameter); --interval 500steps and 30min
    set the interval; DDP's states are written by rank 0."""
    code, out, _ = _run(capsys, "goodput", "--gpus", "1024", "--step-time", "2s", "--model",
                        "llama3-70b", "--data-parallel", "ddp", "--interval", "500steps",
                        "--json")
    data = json.loads(out)
    assert code == 0 and data["interval_s"] == 1000.0 and data["writers"] == "rank0"
    code, out, _ = _run(capsys, *BASE, "--interval", "30min", "--json")
    assert json.loads(out)["interval_s"] == 1800.0


def test_same_inputs_same_bytes(capsys):
    """The text output, simulation included, is the same bytes on every call."""
    first = _run(capsys, *BASE, "--simulate", "10", "--elastic")
    assert first[0] == 0 and "simulated" in first[1]
    assert _run(capsys, *BASE, "--simulate", "10", "--elastic") == first


@pytest.mark.parametrize("extra", [
    ["--write-bandwidth", "-1GB/s"],
    ["--write-bandwidth", "0"],
    ["--step-time", "5parsecs"],
    ["--interval", "soon"],
    ["--interval", "0steps"],
    ["--interval", "1s"],
    ["--sharded", "--rank0"],
    ["--simulate", "0"],
    ["--simulate", "1000000"],
    ["--simulate", "many"],
    ["--gpus", "0"],
    ["--failures-per-gpu-hour", "-1e-5"],
    ["--failures-per-gpu-hour", "0", "--interval", "auto"],
    ["--tokens", "15T"],
    ["--model", "gpt5"],
    ["--data-parallel", "zero9"],
    ["--elastic-step-time", "1s"],
    ["--restart-time", "forever"],
    ["--horizon", "0"],
    # a lost node out for 1000 h of 5.5 s intervals: too many terms for the elastic sum
    ["--elastic", "--spare-wait", "1000h", "--interval", "1steps", "--restart-time", "0"],
])
def test_bad_inputs_are_one_line(capsys, extra):
    """Each bad input is exit 2 with exactly one line on stderr, naming the flag."""
    argv = [*BASE, *extra]
    if "--model" in extra:
        argv = [a for a in argv if a not in ("--checkpoint-bytes", "2TB")]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and out == ""


@pytest.mark.parametrize("drop", ["--step-time", "--gpus", "--checkpoint-bytes"])
def test_missing_required_flags(capsys, drop):
    """Without --gpus, --step-time, or a checkpoint size (--checkpoint-bytes or --model): one
    line naming what is missing."""
    i = BASE.index(drop)
    code, _, err = _run(capsys, *BASE[:i], *BASE[i + 2:])
    assert code == 2 and err.count("\n") == 1 and drop in err


def test_step_from_plan_and_elastic_from_the_plan_on_fewer_replicas(capsys):
    """--model with --topology and --global-batch takes the step of plan's fastest fitting
    configuration; --elastic times the run on the replicas left after a node is lost."""
    from commsim.plan import plan

    code, out, _ = _run(capsys, "goodput", "--gpus", "16", "--model", "llama2-7b",
                        "-t", "dgx-h100x2", "--global-batch", "64", "--elastic", "--json")
    assert code == 0
    data = json.loads(out)
    best = next(e for e in plan("llama2-7b", "dgx-h100x2", global_batch=64, gpus=16,
                                top=1).result.configs if e.fits)
    assert data["step_time_s"] == best.record["step_time_s"]
    assert data["step_source"].startswith("plan: ") and "on 16 GPUs" in data["step_source"]
    group = best.record["tp"] * best.record["cp"] * best.record["pp"]
    replicas = max(d for d in range(1, 8 // group + 1) if 64 % d == 0)
    fewer = next(e for e in plan("llama2-7b", "dgx-h100x2", global_batch=64,
                                 gpus=group * replicas, top=1).result.configs if e.fits)
    # elastic_slowdown: the fraction of full speed the elastic run loses
    assert data["elastic_slowdown"] == pytest.approx(
        1 - data["step_time_s"] / fewer.record["step_time_s"])


def test_step_from_a_replayed_workload(capsys, tmp_path):
    """--workload with --topology takes the replayed step time."""
    from commsim.replay import replay

    path = tmp_path / "ddp.yaml"
    path.write_text("kind: ddp\nlayers: 4\nforward_time: 1ms\nbackward_time: 2ms\n"
                    "grad_bytes: 25MiB\n")
    code, out, _ = _run(capsys, "goodput", "--gpus", "16", "-t", "dgx-h100x2", "--workload",
                        str(path), "--checkpoint-bytes", "100GB", "--json")
    assert code == 0
    assert json.loads(out)["step_time_s"] == replay(path, "dgx-h100x2").metrics.step_time_s


@pytest.mark.parametrize("argv, named", [
    (["--step-time", "2s", "--global-batch", "8"], "got --step-time, --global-batch"),
    (["--global-batch", "8", "--model", "llama2-7b"], "needs --topology"),
    (["--global-batch", "8", "-t", "dgx-h100x2"], "needs --model"),
    (["--workload", "nowhere.yaml", "-t", "dgx-h100x2"], "nowhere.yaml"),
])
def test_step_sources_are_checked(capsys, argv, named):
    """One step source, with what it needs: anything else is one line naming it."""
    base = ["goodput", "--gpus", "16"] + ([] if "--model" in argv else
                                         ["--checkpoint-bytes", "1TB"])
    code, out, err = _run(capsys, *base, *argv)
    assert code == 2 and err.count("\n") == 1 and named in err
