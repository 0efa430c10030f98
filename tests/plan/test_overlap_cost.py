"""What overlapped gradient reductions cost the compute they overlap (``Stack.overlap_cost``,
:mod:`commsim.plan.interference`): the same charge in ``plan`` and in ``replay``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from commsim.plan import SearchSpace, Stack, plan
from commsim.plan.blocks import PipelineCosts
from commsim.plan.bounds import layer_costs
from commsim.plan.costs import pipeline_costs
from commsim.plan.device import network_device
from commsim.plan.evaluate import evaluate_pipeline
from commsim.plan.interference import charge, hbm_bytes, load
from commsim.plan.stack import named_stack
from commsim.plan.timing import CollectiveTimer
from commsim.plan.workload import replay_workload, workload_dict
from commsim.replay import replay
from commsim.topology import load_topology

# gpt3-2.7b on one dgx-h100, FSDP over 8 GPUs, one micro-batch: each layer's reduce-scatter
# overlaps the backward of the layers below it, and no two groups' traffic shares a link
CASE = dict(model="gpt3-2.7b", topology="dgx-h100", global_batch=8,
            space=SearchSpace(tp=(1,), pp=(1,), data_parallel=("fsdp",), recompute=("none",)))


def _planned(stack: Stack):
    out = plan(CASE["model"], CASE["topology"], global_batch=CASE["global_batch"],
               space=CASE["space"], top=1, engine="auto", stack=stack)
    return out, out.result.configs[0]


def test_charge_by_hand():
    """H100 (132 SMs, 3.35 TB/s at 0.9 of it): a 25 MiB all-reduce between two GPUs taking
    1 ms holds 20 SMs (0.1515 of them) and receives 2 x 1/2 of it, moving 3 x 25 MiB of HBM
    (26 us at 3.015 TB/s):
    the SMs bind, 151.5 us of charge under 10 ms of backward; under 0.5 ms of it, the compute
    slowed throughout (0.5 x 0.1515 / 0.8485 = 89.3 us)."""
    device = network_device(load_topology("dgx-h100"))
    assert device.sms == 132 and device.hbm_Bps == pytest.approx(3.015e12)
    nbytes = hbm_bytes("all_reduce", 25 << 20, 2)
    assert nbytes == 3 * (25 << 20)
    held = load(1e-3, 20 / device.sms, nbytes, device.hbm_Bps)
    assert held == pytest.approx(1e-3 * 20 / 132)
    assert charge(1e-3, held / 1e-3, 10e-3) == pytest.approx(151.5e-6, rel=1e-3)
    assert charge(1e-3, held / 1e-3, 0.5e-3) == pytest.approx(89.3e-6, rel=1e-3)
    # over NVLink the HBM binds: 8 GPUs' 200 MiB all-reduce in 0.9 ms moves 3 x 2 x 7/8 of it
    assert load(0.9e-3, 20 / 132, hbm_bytes("all_reduce", 200 << 20, 8), 3.015e12) \
        == pytest.approx(3 * 2 * 7 / 8 * (200 << 20) / 3.015e12)


def test_one_reduction_grows_the_planned_step_by_its_charge():
    """Two layers (forward 2 s each, backward 4 s each), one micro-batch: the reduction of
    3 s issued after layer 1's backward (at 8 s) hides under layer 0's (8-12 s); holding a
    quarter of the device it slows that compute by 3 x 0.25 = 0.75 s, so the step, 12.5 s
    (layer 0's 0.5 s reduction after 12 s), becomes 13.25 s."""
    costs = PipelineCosts(schedule="1f1b", pp=1, chunks=1, microbatches=1, layers_per_chunk=2,
                          attn_fwd=1.0, mlp_fwd=1.0, attn_bwd=2.0, mlp_bwd=2.0, tp_ar=(0.0,),
                          cp_gather=(0.0,), cp_rs=(0.0,), reduce=({1: 3.0, 0: 0.5},))
    assert evaluate_pipeline(costs).step_time_s == 12.5
    extra = charge(3.0, 0.25, 4.0)
    assert extra == 0.75
    charged = replace(costs, overlap=({1: extra},))
    assert evaluate_pipeline(charged).step_time_s == 13.25


def test_the_replay_runs_the_same_charge_after_the_same_layer():
    """A charge given to the replay's blocks runs on every rank's compute stream right after
    that layer's last backward: the replayed step grows by exactly it, as the plan's does."""
    out, best = _planned(Stack(overlap_cost=False))
    workload = workload_dict(out.model, best.config, 8, out.stack)
    spec = replay_workload(workload, CASE["topology"])
    assert spec.block_times().overlap_s == ()
    before = replay(spec, CASE["topology"]).step_time_s
    assert before == pytest.approx(best.record["step_time_s"], rel=1e-9)
    layer = out.model.layers - 1  # its reduce-scatter overlaps every other layer's backward
    blocks = replace(spec.block_times(), overlap_s=({layer: 1e-3},))
    after = replay(replace(spec, blocks=blocks), CASE["topology"]).step_time_s
    assert after - before == pytest.approx(1e-3, rel=1e-6)


def test_plan_and_replay_agree_with_the_cost_on():
    """On by default: the planner's charges (one per layer whose reduce-scatter has backward
    compute left to overlap) lengthen its step by their sum, and the replay of the written
    workload, given the same charges from the same functions, gives the same step."""
    out, best = _planned(Stack())
    _, unslowed = _planned(Stack(overlap_cost=False))
    spec = replay_workload(workload_dict(out.model, best.config, 8, out.stack), "dgx-h100")
    (charges,) = spec.block_times().overlap_s
    assert len(charges) == out.model.layers - 1 and all(x > 0 for x in charges.values())
    on, off = best.record["step_time_s"], unslowed.record["step_time_s"]
    assert on - off == pytest.approx(sum(charges.values()), rel=1e-9)
    assert replay(spec, "dgx-h100").step_time_s == pytest.approx(on, rel=1e-9)


def test_off_leaves_the_pipeline_uncharged():
    """``overlap_cost`` off (``--no-overlap-cost``, a workload's ``stack: {overlap_cost:
    false}``): no charges, the evaluation today's; written and read back as it was."""
    stack = named_stack("current", overlap_cost=False)
    assert stack == Stack(overlap_cost=False) and "no-overlap-cost" in stack.label()
    out, best = _planned(stack)
    workload = workload_dict(out.model, best.config, 8, out.stack)
    assert workload["stack"]["overlap_cost"] is False
    assert replay_workload(workload, "dgx-h100").block_times().overlap_s == ()
    model, cfg = out.model, best.config
    device = network_device(load_topology("dgx-h100"))
    times = layer_costs(model, device, cfg.tp, cfg.cp, cfg.micro_batch, cfg.recompute, stack)
    (costs,) = pipeline_costs(cfg, model, times, CollectiveTimer(load_topology("dgx-h100")), 1,
                              stack=stack, device=device)
    assert costs.overlap == ()
