"""One description of a step: ``plan``'s ranked configuration, written as a ``hybrid`` workload
and replayed with every rank simulated, gives the planner's step time."""

from __future__ import annotations

import json

import pytest

from commsim.cli import main
from commsim.errors import SpecError
from commsim.plan import SearchSpace, Stack, plan
from commsim.plan.config import PlanConfig, rank_order
from commsim.plan.models import CATALOGUE, catalogue_model
from commsim.plan.stack import named_stack
from commsim.plan.workload import replay_workload, workload_dict
from commsim.replay import replay

ONE = {"none": ("none",), "selective": ("selective",), "full": ("full",)}

# One small-cluster configuration per catalogue model (sequence and batch cut where the
# catalogue's would only make the DES slower, not the step different in kind): every data
# parallelism, recompute, pipeline schedule and expert-parallel size appears somewhere.
CASES = {
    "gpt3-1.3b": ("dgx-h100x2", 32, None, dict(tp=(2,), pp=(2,), schedule=(("1f1b", 1),),
                                               data_parallel=("ddp",))),
    "gpt3-2.7b": ("dgx-h100", 8, None, dict(tp=(1,), pp=(1,), data_parallel=("fsdp",))),
    "gpt3-6.7b": ("dgx-h100", 8, None, dict(tp=(8,), data_parallel=("zero1",))),
    "gpt3-13b": ("dgx-h100", 8, None, dict(tp=(1,), pp=(8,), schedule=(("gpipe", 1),))),
    "gpt3-175b": ("dgx-h100x2", 4, 1024, dict(tp=(8,), pp=(2,), micro_batch=(1,),
                                              schedule=(("1f1b", 1),))),
    "megatron-145b": ("dgx-h100", 4, 1024, dict(tp=(8,), micro_batch=(2,))),
    "megatron-1t": ("dgx-h100", 2, 512, dict(tp=(8,), micro_batch=(1,))),
    "llama2-7b": ("dgx-a100", 8, None, dict(tp=(2,), pp=(1,), data_parallel=("zero2",))),
    "llama2-13b": ("dgx-h100", 8, None, dict(tp=(1,), cp=(2,), pp=(1,),
                                             data_parallel=("ddp",))),
    "llama2-70b": ("dgx-h100", 8, None, dict(tp=(8,), micro_batch=(1,))),
    "llama3-8b": ("dgx-h100", 8, 2048, dict(tp=(2,), pp=(4,), schedule=(("interleaved", 2),))),
    "llama3-70b": ("dgx-h100", 4, 2048, dict(tp=(4,), pp=(2,), micro_batch=(1,),
                                             schedule=(("1f1b", 1),))),
    "llama3-405b": ("dgx-h100", 2, 1024, dict(tp=(8,), micro_batch=(1,))),
    "mpt-1b": ("dgx-h100", 16, None, dict(tp=(1,), pp=(1,), data_parallel=("ddp",))),
    "mpt-3b": ("dgx-h100", 8, None, dict(tp=(1,), pp=(2,), schedule=(("1f1b", 1),),
                                         data_parallel=("zero1",))),
    "mpt-7b": ("dgx-h100", 8, None, dict(tp=(2,), pp=(1,), data_parallel=("fsdp",),
                                         recompute=("selective",))),
    "mpt-13b": ("dgx-h100", 8, None, dict(tp=(8,), micro_batch=(2,))),
    "mpt-30b": ("dgx-h100", 8, None, dict(tp=(8,), micro_batch=(1,), recompute=("full",))),
    "mpt-70b": ("dgx-h100", 4, None, dict(tp=(8,), micro_batch=(1,))),
    "mistral-7b": ("dgx-h100", 8, 2048, dict(tp=(1,), pp=(1,), data_parallel=("ddp",))),
    "mixtral-8x7b": ("dgx-h100", 8, 4096, dict(tp=(2,), pp=(1,), ep=(4,),
                                               data_parallel=("fsdp",))),
    "mixtral-8x22b": ("dgx-h100", 4, 2048, dict(tp=(2,), pp=(1,), ep=(2,), micro_batch=(1,),
                                                data_parallel=("zero1",))),
    "deepseek-v3": ("dgx-h100", 8, 1024, dict(tp=(1,), pp=(1,), ep=(8,), micro_batch=(1,),
                                              data_parallel=("fsdp",))),
    "qwen3-30b-a3b": ("dgx-h100", 8, None, dict(tp=(1,), pp=(1,), ep=(8,),
                                                data_parallel=("ddp",))),
    "qwen3-235b-a22b": ("dgx-h100", 8, 1024, dict(tp=(1,), pp=(2,), ep=(4,), micro_batch=(1,),
                                                  schedule=(("1f1b", 1),))),
    "gpt-oss-120b": ("dgx-h100", 8, 2048, dict(tp=(2,), pp=(1,), ep=(4,), micro_batch=(1,),
                                               data_parallel=("fsdp",))),
}


def test_every_catalogue_model_has_a_case():
    """The agreement below covers the whole catalogue."""
    assert sorted(CASES) == sorted(CATALOGUE)


def _planned(name: str):
    topology, batch, seq, axes = CASES[name]
    axes = {"recompute": ("none",), **axes}
    out = plan(name, topology, global_batch=batch, seq=seq, space=SearchSpace(**axes), top=1,
               engine="auto")
    return out, out.result.configs[0], topology


@pytest.mark.parametrize("name", sorted(CASES))
def test_replay_of_the_written_workload_gives_the_planned_step(name):
    """``replay`` of the configuration ``plan`` ranked first, written as a workload, gives
    the planner's step within 1% (exactly where no two groups' traffic shares a link: the
    replay sees contention the one-pipeline evaluation does not, and is then slower)."""
    out, best, topology = _planned(name)
    workload = workload_dict(out.model, best.config, out.global_batch, out.stack)
    full = replay(replay_workload(workload, topology), topology)
    planned = best.record["step_time_s"]
    assert full.step_time_s == pytest.approx(planned, rel=1e-2)
    assert full.step_time_s >= planned * (1 - 1e-9)
    extra = full.to_dict()
    assert extra["mfu"] == pytest.approx(best.record["mfu"], rel=1e-2)
    assert extra["params"] == out.model.params


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_recompute_agrees_exactly_without_contention(recompute):
    """Without DP and PP traffic at once (one pipeline of TP and PP only), each recompute and
    the optimizer step give the planner's step to rounding."""
    out = plan("llama3-8b", "dgx-h100", global_batch=8, seq=2048, top=1, engine="auto",
               space=SearchSpace(tp=(2,), pp=(4,), schedule=(("1f1b", 1),),
                                 recompute=ONE[recompute]))
    best = out.result.configs[0]
    spec = replay_workload(workload_dict(out.model, best.config, 8, out.stack), "dgx-h100")
    assert spec.block_times().optimizer_s and all(spec.block_times().optimizer_s)
    full = replay(spec, "dgx-h100").step_time_s
    assert full == pytest.approx(best.record["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("stack", ["megatron-2021", "llama3"])
@pytest.mark.parametrize(("axes", "exact"), [
    (dict(tp=(1,), pp=(8,), schedule=(("gpipe", 1),)), True),
    (dict(tp=(2,), pp=(2,), schedule=(("1f1b", 1),), data_parallel=("ddp", "zero2")), False),
])
def test_each_stack_is_replayed_as_planned(stack, axes, exact):
    """The stacks' differences (blocking sends with a TP all-gather on arrival, one gradient
    reduction after the backward, fp32 gradients, unfused attention) are lowered as the
    planner times them: to rounding on one pipeline, within 1e-3 where the replay's received
    activations are all-gathered beside the stage's own TP traffic."""
    out = plan("gpt3-6.7b", "dgx-h100", global_batch=16, top=1, engine="auto",
               stack=named_stack(stack), space=SearchSpace(recompute=("none",), **axes))
    best = out.result.configs[0]
    spec = replay_workload(workload_dict(out.model, best.config, 16, out.stack), "dgx-h100")
    full = replay(spec, "dgx-h100").step_time_s
    assert full == pytest.approx(best.record["step_time_s"], rel=1e-9 if exact else 1e-3)


def test_fp8_is_replayed_as_planned():
    """``--precision fp8`` (the stack's ``precision``) is written with the stack and times the
    same GEMMs in the replay: the planner's step to rounding on one pipeline."""
    stack = named_stack("current", None, "fp8")
    out = plan("llama3-8b", "dgx-h100", global_batch=8, seq=2048, top=1, engine="auto",
               stack=stack, space=SearchSpace(tp=(2,), pp=(4,), schedule=(("1f1b", 1),),
                                              recompute=("none",)))
    best = out.result.configs[0]
    workload = workload_dict(out.model, best.config, 8, out.stack)
    assert workload["stack"]["precision"] == "fp8"
    full = replay(replay_workload(workload, "dgx-h100"), "dgx-h100").step_time_s
    assert full == pytest.approx(best.record["step_time_s"], rel=1e-9)


def test_fp8_experts_are_replayed_as_planned():
    """A mixture of experts in fp8 replays the planner's step to rounding: its expert GEMMs
    at the fp8 peak, and FP8 all-to-alls toward the experts (the forward's dispatch, the
    backward's gradient of the combine) beside bf16 ones back (one replica: no DP traffic)."""
    stack = named_stack("current", None, "fp8")
    out = plan("qwen3-30b-a3b", "dgx-h100", global_batch=8, seq=2048, top=1, engine="auto",
               stack=stack, space=SearchSpace(tp=(2,), etp=(1,), ep=(2,), pp=(4,),
                                              micro_batch=(1,), schedule=(("1f1b", 1),),
                                              recompute=("none",)))
    best = out.result.configs[0]
    spec = replay_workload(workload_dict(out.model, best.config, 8, out.stack), "dgx-h100")
    moe = spec.block_times().moe
    assert moe is not None and moe.to_experts_bytes < moe.from_experts_bytes
    full = replay(spec, "dgx-h100").step_time_s
    assert full == pytest.approx(best.record["step_time_s"], rel=1e-9)


def test_experts_are_all_to_alls_over_the_ep_groups_in_the_one_des():
    """A MoE layer's dispatch and combine are all-to-alls among the expert-parallel group
    (4 per layer and micro-batch), timed in the step's DES; skew makes the step slower."""
    out, best, topology = _planned("mixtral-8x7b")
    workload = workload_dict(out.model, best.config, out.global_batch, out.stack)
    result = replay(replay_workload(workload, topology), topology)
    a2a = [c for c in result.collectives() if c["collective"] == "all_to_all"]
    layers, k, cfg = out.model.layers, best.microbatches, best.config
    assert len(a2a) == 4 * layers * k * cfg.tp * cfg.dp // cfg.ep
    assert {c["ranks"] for c in a2a} == {cfg.ep}
    workload["model"]["moe"]["skew"] = 1.0
    skewed = replay(replay_workload(workload, topology), topology)
    assert skewed.step_time_s > result.step_time_s


def test_cli_writes_the_ranked_workload_and_replay_times_it(tmp_path, capsys):
    """``commsim plan --write-workload K FILE`` writes the K-th configuration;
    ``commsim replay FILE`` times it to the planner's step."""
    path = tmp_path / "second.yaml"
    args = ["plan", "qwen3-30b-a3b", "-t", "dgx-h100", "--global-batch", "16", "--tp", "1",
            "--pp", "1", "--ep", "8", "--recompute", "none", "--data-parallel", "ddp,fsdp",
            "--engine", "auto", "--top", "3", "--json", "--write-workload", "2", str(path)]
    assert main(args) == 0
    captured = capsys.readouterr()
    second = json.loads(captured.out)["configs"][1]
    assert "wrote configuration 2" in captured.err
    assert main(["replay", str(path), "-t", "dgx-h100", "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["step_time_s"] == pytest.approx(second["step_time_s"], rel=1e-2)


@pytest.mark.parametrize(("change", "message"), [
    (lambda w: w["model"].update(kv_head=8), "model.kv_head: unknown key"),
    (lambda w: w.update(stack={"grad_overlap": "yes"}), "stack.grad_overlap"),
    (lambda w: w.update(stack="fast"), "--stack 'fast': unknown"),
    (lambda w: w["parallel"].update(ep=3), "parallel.ep: 3"),
    (lambda w: w.update(data_parallel="zero3"), "data_parallel"),
    (lambda w: w["parallel"].update(order="dp-first"), "parallel.order"),
    (lambda w: w.update(stack="pytorch-fsdp"), "stack.fsdp_reshard"),
    (lambda w: w.update(stack={"precision": "fp4"}), "stack.precision"),
    (lambda w: w.update(compute={"flops": "1PFLOP/s"}), "compute.efficiency: missing"),
])
def test_bad_planned_workloads_name_the_field(change, message):
    """A bad key or value of the planner's description is a SpecError naming its field."""
    workload = workload_dict(CATALOGUE["mixtral-8x7b"], _planned_cfg(), 16,
                             Stack())
    change(workload)
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        replay_workload(workload, "dgx-h100")


def _planned_cfg():
    from commsim.plan.config import PlanConfig

    return PlanConfig(tp=1, cp=1, pp=1, dp=8, micro_batch=1, schedule="1f1b", chunks=1,
                      data_parallel="fsdp", recompute="none", ep=8)


def test_flat_compute_overrides_the_device(tmp_path):
    """``compute: {flops, efficiency}`` beside the planner's keys replaces the device's peak
    and efficiencies: half the FLOP/s, a slower step."""
    workload = workload_dict(CATALOGUE["gpt3-1.3b"], _dense_cfg(), 8,
                             Stack())
    base = replay(replay_workload(workload, "dgx-h100"), "dgx-h100").step_time_s
    workload["compute"] = {"flops": "400TFLOP/s", "efficiency": 0.5}
    slow = replay(replay_workload(workload, "dgx-h100"), "dgx-h100").step_time_s
    assert slow > base


def _dense_cfg():
    from commsim.plan.config import PlanConfig

    return PlanConfig(tp=1, cp=1, pp=1, dp=8, micro_batch=1, schedule="1f1b", chunks=1,
                      data_parallel="ddp", recompute="none")


def test_the_flat_replay_api_points_to_the_planners_reader():
    """The replay package alone cannot time the planner's description: its error says where
    to go."""
    workload = workload_dict(CATALOGUE["gpt3-1.3b"], _dense_cfg(), 8,
                             Stack())
    with pytest.raises(SpecError, match="commsim.plan.replay_workload"):
        replay(workload, "dgx-h100")


def test_a_bad_planned_workload_file_is_one_line_exit_2(tmp_path, capsys):
    """``commsim replay`` of a planned workload file with a bad key: one line naming the file
    and the field, exit 2."""
    import yaml

    workload = workload_dict(CATALOGUE["mixtral-8x7b"], _planned_cfg(), 16, Stack())
    workload["model"]["moe"]["top_k"] = 9
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(workload), encoding="utf-8")
    assert main(["replay", str(path), "-t", "dgx-h100"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(path) in err and "moe.top_k" in err



def test_dualpipe_and_an_unknown_overlap_are_refused_in_one_line() -> None:
    """DualPipe (planned by a closed form) is not replayed as if exposed: the workload's
    replay refuses it, naming the field (``ep-overlap`` is lowered:
    tests/plan/test_combined_1f1b.py); a stack mapping that names an unknown overlap is
    refused the same way."""
    model = catalogue_model("mixtral-8x7b")
    cfg = PlanConfig(tp=1, cp=1, pp=1, dp=8, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="zero1", recompute="full", ep=8,
                     order=rank_order(has_experts=True))
    workload = workload_dict(model, cfg, 8, Stack(moe_overlap="dualpipe"))
    with pytest.raises(SpecError, match=r"stack.moe_overlap: dualpipe is planned"):
        replay_workload(workload, "dgx-h100")
    workload["stack"] = {"moe_overlap": "sometimes"}
    with pytest.raises(SpecError, match=r"stack.moe_overlap"):
        replay_workload(workload, "dgx-h100")
