"""The planner's one-pipeline evaluation against the full ``hybrid`` replay of every rank."""

from __future__ import annotations

import pytest

from commsim.plan.compute import LayerTimes
from commsim.plan.config import PlanConfig
from commsim.plan.costs import estimate_step, pipeline_costs
from commsim.plan.models import ModelSpec
from commsim.plan.timing import CollectiveTimer
from commsim.replay import replay, workload_from_dict
from commsim.topology import load_topology


def _hybrid(tp=1, cp=1, pp=1, dp=1, mb=1, gb=8, schedule="1f1b", v=1, data_parallel="fsdp",
            layers=8):
    return {
        "kind": "hybrid",
        "model": {"layers": layers, "hidden": 512, "heads": 8, "seq": 256, "vocab": 1000},
        "parallel": {"tp": tp, "cp": cp, "pp": pp, "dp": dp},
        "micro_batch": mb,
        "global_batch": gb,
        "pipeline": {"schedule": schedule, "chunks_per_stage": v},
        "data_parallel": data_parallel,
        "compute": {"flops": "1TFLOP/s", "efficiency": 0.5},
    }


def _reduced(workload, topology, engine="des"):
    """The planner's step of ``workload``, fed the replay's own compute times."""
    spec = workload_from_dict(workload)
    m, par = spec.model, spec.parallel
    model = ModelSpec(name="x", layers=m.layers, hidden=m.hidden, heads=m.heads,
                      kv_heads=m.heads, ffn_hidden=4 * m.hidden, vocab=m.vocab, seq=m.seq)
    cfg = PlanConfig(tp=par.tp, cp=par.cp, pp=par.pp, dp=par.dp, micro_batch=spec.micro_batch,
                     schedule=spec.schedule, chunks=spec.chunks_per_stage,
                     data_parallel=spec.data_parallel, recompute="none")
    fwd, bwd = spec.layer_times()
    logits = spec.logits_time()
    times = LayerTimes(fwd / 2, fwd / 2, bwd / 2, bwd / 2, 0.0, 0.0, logits, 2 * logits, False)
    timer = CollectiveTimer(load_topology(topology), engine)
    costs = pipeline_costs(cfg, model, times, timer, spec.microbatches, params=spec.layer_params)
    return estimate_step(costs).step_time_s


# Cases where no two groups' traffic shares a link at the same time (DP without PP, or PP
# without DP): there the reduced evaluation must equal the replay to rounding.
CASES = [
    dict(),
    dict(dp=8),
    dict(dp=8, data_parallel="ddp"),
    dict(tp=2, dp=4),
    dict(tp=8),
    dict(pp=4, gb=16),
    dict(pp=2, schedule="gpipe", gb=4),
    dict(tp=2, pp=4, gb=32, mb=2),
    dict(tp=4, pp=2, gb=16, data_parallel="ddp"),
    dict(tp=2, pp=4, schedule="interleaved", v=2, gb=8),
    dict(tp=8, pp=2, gb=8),
    dict(tp=2, pp=8, schedule="interleaved", v=2, gb=16, layers=32),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_reduced_equals_full_replay(case):
    """One pipeline with each collective timed once gives the replay's step time (1e-9)."""
    workload = _hybrid(**case)
    topology = "dgx-h100x2"
    full = replay(workload, topology).metrics.step_time_s
    assert _reduced(workload, topology) == pytest.approx(full, rel=1e-9)


def test_des_and_analytic_collectives_agree():
    """Timing the planner's collectives with the DES instead of the closed forms changes
    nothing on an uncontended machine."""
    workload = _hybrid(tp=2, dp=4, data_parallel="ddp")
    assert _reduced(workload, "dgx-a100", "des") == pytest.approx(
        _reduced(workload, "dgx-a100", "analytic"), rel=1e-12)


def test_contention_is_the_documented_difference():
    """With DP and PP traffic through the same ports the replay shares bandwidth and is
    slower; the reduced evaluation is a lower bound within a small margin."""
    workload = _hybrid(tp=2, pp=2, dp=2, data_parallel="ddp")
    full = replay(workload, "dgx-a100").metrics.step_time_s
    reduced = _reduced(workload, "dgx-a100")
    assert reduced <= full
    assert reduced == pytest.approx(full, rel=1e-3)
