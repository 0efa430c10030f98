"""The planner's one-pipeline evaluation against the full ``hybrid`` replay of every rank."""

from __future__ import annotations

import pytest

from commsim.plan.compute import LayerTimes
from commsim.plan.config import PlanConfig
from commsim.plan.costs import estimate_step, pipeline_costs, stage_factors
from commsim.plan.models import ModelSpec
from commsim.plan.timing import CollectiveTimer
from commsim.replay import replay, workload_from_dict
from commsim.topology import load_topology
from commsim.topology.what_if import what_if_from_dict


def _hybrid(tp=1, cp=1, pp=1, dp=1, mb=1, gb=8, schedule="1f1b", v=1, data_parallel="fsdp",
            layers=8, split=None):
    out = {
        "kind": "hybrid",
        "model": {"layers": layers, "hidden": 512, "heads": 8, "seq": 256, "vocab": 1000},
        "parallel": {"tp": tp, "cp": cp, "pp": pp, "dp": dp},
        "micro_batch": mb,
        "global_batch": gb,
        "pipeline": {"schedule": schedule, "chunks_per_stage": v},
        "data_parallel": data_parallel,
        "compute": {"flops": "1TFLOP/s", "efficiency": 0.5},
    }
    if split is not None:
        out["pipeline"]["stage_layers"] = split
    return out


def _reduced(workload, topology, engine="des", factors=None):
    """The planner's step of ``workload``, fed the replay's own compute times (``factors``:
    each rank's compute factor under a what-if)."""
    spec = workload_from_dict(workload)
    m, par = spec.model, spec.parallel
    model = ModelSpec(name="x", layers=m.layers, hidden=m.hidden, heads=m.heads,
                      kv_heads=m.heads, ffn_hidden=4 * m.hidden, vocab=m.vocab, seq=m.seq)
    cfg = PlanConfig(tp=par.tp, cp=par.cp, pp=par.pp, dp=par.dp, micro_batch=spec.micro_batch,
                     schedule=spec.schedule, chunks=spec.chunks_per_stage,
                     data_parallel=spec.data_parallel, recompute="none",
                     stage_layers=spec.stage_layers)
    fwd, bwd = spec.layer_times()
    logits = spec.logits_time()
    times = LayerTimes(fwd / 2, fwd / 2, bwd / 2, bwd / 2, 0.0, 0.0, logits, 2 * logits, False)
    timer = CollectiveTimer(load_topology(topology), engine)
    per_stage = () if factors is None else stage_factors(cfg, factors)
    costs = pipeline_costs(cfg, model, times, timer, spec.microbatches, params=spec.layer_params,
                           compute_factor=per_stage)
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
    # uneven stages (Megatron-LM's first/last options and Llama 3's embedding/loss chunks)
    dict(pp=2, gb=8, layers=7, split=[3, 4]),
    dict(tp=2, pp=4, schedule="gpipe", gb=8, layers=13, split=[2, 4, 4, 3]),
    dict(tp=4, pp=4, gb=16, mb=2, layers=10, split=[2, 3, 3, 2]),
    dict(tp=2, pp=4, schedule="interleaved", v=2, gb=8, layers=22, split=[5, 6, 6, 5]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_reduced_equals_full_replay(case):
    """One pipeline with each collective timed once gives the replay's step time (1e-9)."""
    workload = _hybrid(**case)
    topology = "dgx-h100x2"
    full = replay(workload, topology).metrics.step_time_s
    assert _reduced(workload, topology) == pytest.approx(full, rel=1e-9)


# Uneven stages with data parallelism across pipelines: FSDP gathers and reductions of each
# stage's own layers (in chunks of different sizes), DP and PP traffic sharing ports as in
# test_contention_is_the_documented_difference. And Llama 3's first model chunk of only the
# embedding: its micro-batches' activations leave together, two sends sharing one link that
# the reduced evaluation times apart (7e-7 s a send on NVLink).
UNEVEN_DP = [
    dict(tp=2, pp=4, schedule="interleaved", v=4, gb=8, layers=14, split=[3, 4, 4, 3]),
    dict(pp=2, dp=4, gb=16, layers=7, split=[3, 4]),
    dict(pp=2, dp=4, gb=16, layers=7, split=[3, 4], data_parallel="ddp"),
    dict(pp=4, dp=2, gb=8, layers=14, split=[3, 4, 4, 3], schedule="interleaved", v=4),
]


@pytest.mark.parametrize("case", UNEVEN_DP,
                         ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_uneven_stages_with_data_parallelism_agree_with_the_replay(case):
    """Uneven stages and several replicas, or sends at once: the reduced evaluation gives the
    replay's step as closely as for even stages (the only difference the shared links, 1e-3;
    the reduced step is then a lower bound)."""
    workload = _hybrid(**case)
    full = replay(workload, "dgx-h100x2").metrics.step_time_s
    reduced = _reduced(workload, "dgx-h100x2")
    assert reduced <= full * (1 + 1e-12)
    assert reduced == pytest.approx(full, rel=1e-3)


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


# One slow rank, placed in each kind of group: a TP rank of a stage, a stage of a pipeline,
# a replica of DP, a CP rank, the last stage (its logits).
STRAGGLERS = [
    (dict(dp=8), 5),
    (dict(dp=8, data_parallel="ddp"), 0),
    (dict(tp=2, dp=4), 3),
    (dict(tp=8), 6),
    (dict(pp=4, gb=16), 1),
    (dict(pp=4, gb=16), 3),
    (dict(tp=2, pp=4, gb=32, mb=2), 5),
    (dict(tp=2, pp=4, schedule="interleaved", v=2, gb=8), 2),
    (dict(tp=4, pp=2, gb=16, data_parallel="ddp"), 7),
    (dict(cp=2, dp=4), 3),
    (dict(pp=2, gb=8, layers=7, split=[3, 4]), 0),
    (dict(tp=2, pp=4, schedule="interleaved", v=2, gb=8, layers=22, split=[5, 6, 6, 5]), 7),
]


@pytest.mark.parametrize(("case", "rank"), STRAGGLERS,
                         ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
                         if isinstance(c, dict) else f"slow={c}")
def test_a_straggler_in_the_reduced_evaluation_equals_the_full_replay(case, rank):
    """One slow GPU (compute x1.5): the planner's one pipeline, each stage at its slowest
    rank's factor, gives the replay's step with the same what-if (1e-9), where every rank is
    simulated and collectives wait for their slowest member."""
    workload = _hybrid(**case)
    what_if = {"ranks": {rank: {"compute": 1.5}}}
    full = replay(workload, "dgx-h100x2", what_if=what_if)
    factors = what_if_from_dict(what_if).compute_factors(full.graph.ranks)
    assert full.step_time_s > replay(workload, "dgx-h100x2").step_time_s
    assert _reduced(workload, "dgx-h100x2", factors=factors) == pytest.approx(
        full.step_time_s, rel=1e-9)


def test_jitter_in_the_reduced_evaluation_is_an_upper_bound_of_the_replay():
    """Jitter on every rank: each stage at the slowest factor over all replicas bounds the
    replay's step from above (exact when the slowest ranks share a replica), and is at least
    the healthy step's."""
    workload = _hybrid(pp=2, dp=4, gb=16, data_parallel="ddp")
    what_if = {"jitter": {"distribution": "lognormal", "sigma": 0.1, "seed": 3}}
    full = replay(workload, "dgx-h100x2", what_if=what_if).step_time_s
    factors = what_if_from_dict(what_if).compute_factors(8)
    reduced = _reduced(workload, "dgx-h100x2", factors=factors)
    assert full <= reduced * (1 + 1e-9)
    assert reduced > _reduced(workload, "dgx-h100x2")
