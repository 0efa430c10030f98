"""``--recompute moe`` (Megatron-Core's ``--recompute-modules moe``): each MoE layer's MLP half
(router, dispatch, experts, combine) runs its forward again before its backward, and keeps only
its input; the rest of the layer as ``none``."""

from __future__ import annotations

import pytest

from commsim.cli import main
from commsim.errors import SpecError
from commsim.plan import SearchSpace, plan, replay_workload, workload_dict
from commsim.plan.compute import hardware_flops_per_token, model_flops_per_token
from commsim.plan.models import catalogue_model
from commsim.replay import replay

#: Qwen3-30B-A3B at TP 2, expert TP 1, EP 2, PP 4 on one DGX H100: one replica, so the
#: replay has no traffic the planner's one pipeline does not see.
SPACE = dict(tp=(2,), etp=(1,), ep=(2,), pp=(4,), micro_batch=(1,), schedule=(("1f1b", 1),),
             data_parallel=("zero1",))


def _records():
    out = plan("qwen3-30b-a3b", "dgx-h100", global_batch=8, seq=2048, top=0, engine="auto",
               space=SearchSpace(**SPACE, recompute=("none", "moe")))
    return out, {c.record["recompute"]: c for c in out.result.configs}


def test_the_moe_half_runs_again_and_keeps_only_its_input():
    """Against ``none``: a longer step (each MoE half's forward again, its all-to-alls too),
    fewer activations, and the hardware FLOPs of one more forward of the MoE halves."""
    _, by = _records()
    none, moe = by["none"].record, by["moe"].record
    assert moe["step_time_s"] > none["step_time_s"]
    assert moe["memory"]["activations"] < none["memory"]["activations"]
    # the same model FLOPs per step; the hardware's count the recomputed halves too
    assert moe["model_tflops_per_gpu"] * moe["step_time_s"] == pytest.approx(
        none["model_tflops_per_gpu"] * none["step_time_s"])
    assert moe["hardware_tflops_per_gpu"] > moe["model_tflops_per_gpu"]
    model = catalogue_model("qwen3-30b-a3b")
    assert model.moe is not None
    half = (model.hidden * model.moe.experts
            + model.moe.top_k * model.expert_params)  # router and top-k experts (no shared)
    assert hardware_flops_per_token(model, "moe") == pytest.approx(
        model_flops_per_token(model) + 2 * model.moe_layers * half)


def test_replay_of_moe_recompute_gives_the_planned_step():
    """The replay runs the recomputed MoE half (compute and all-to-alls) before each MoE
    layer's backward: the planner's step to rounding without data-parallel traffic."""
    out, by = _records()
    best = by["moe"]
    spec = replay_workload(workload_dict(out.model, best.config, 8, out.stack), "dgx-h100")
    result = replay(spec, "dgx-h100")
    assert result.step_time_s == pytest.approx(best.record["step_time_s"], rel=1e-9)
    names = {t.name for t in result.graph.tasks}
    assert "bwd L1 mb0 recompute dispatch" in names and "bwd L1 mb0 recompute experts" in names


def test_moe_recompute_of_a_dense_model_is_one_line(capsys: pytest.CaptureFixture[str]):
    assert main(["plan", "llama3-8b", "-t", "dgx-h100", "--global-batch", "8",
                 "--recompute", "moe"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--recompute moe: llama3-8b has no experts" in err
    out = plan("llama3-8b", "dgx-h100", global_batch=8, seq=2048, top=1,
               space=SearchSpace(tp=(8,), pp=(1,), recompute=("none",)))
    data = workload_dict(out.model, out.result.configs[0].config, 8, out.stack)
    data["recompute"] = "moe"
    with pytest.raises(SpecError, match="recompute: moe recomputes mixtures of experts"):
        replay_workload(data, "dgx-h100")
