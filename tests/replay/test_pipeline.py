"""Pipeline parallelism: schedules as data, the textbook bubbles reproduced exactly, activations."""

from __future__ import annotations

import pytest

from commsim.errors import ScheduleError, SpecError
from commsim.replay import PipeOp, replay, stage_orders
from commsim.replay.pipeline import emit_pipeline

F, B = 2.0**-10, 2.0**-9  # forward and backward per micro-batch per stage (~1 ms, ~2 ms): exact


def _run(schedule: str, p: int, k: int, v: int = 1):
    workload = {
        "kind": "pipeline",
        "schedule": schedule,
        "stages": p,
        "microbatches": k,
        "chunks_per_stage": v,
        "forward_time": f"{F!r}s",
        "backward_time": f"{B!r}s",
    }
    return replay(
        workload,
        {"kind": "ring", "ranks": max(p, 2), "link": {"latency": "1us", "bandwidth": "1GB/s"}},
    )


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("p", "k"), [(4, 8), (4, 1), (4, 3), (2, 16), (8, 8), (1, 5), (5, 7)])
def test_gpipe_and_1f1b_match_the_textbook_exactly(schedule: str, p: int, k: int) -> None:
    """Uniform stages, no activation traffic: step = (k+p-1)(f+b) exactly, idle = (p-1)/(k+p-1)."""
    r = _run(schedule, p, k)
    assert r.step_time_s == (k + p - 1) * (F + B)
    assert r.idle_fraction == pytest.approx((p - 1) / (k + p - 1), rel=1e-12, abs=1e-15)
    for rank in r.metrics.per_rank:
        assert rank.compute_time_s == k * (F + B)
        assert rank.comm_time_s == 0.0 and rank.overlap_fraction == 0.0


@pytest.mark.parametrize(
    ("p", "k", "v"), [(4, 8, 2), (4, 4, 2), (2, 4, 4), (4, 12, 4), (3, 6, 2), (8, 16, 2), (4, 8, 1)]
)
def test_interleaved_matches_the_textbook_exactly(p: int, k: int, v: int) -> None:
    """Interleaved 1F1B, v chunks per device: step = (k + (p-1)/v)(f+b) for k a multiple of p."""
    r = _run("interleaved", p, k, v)
    assert r.step_time_s == (k + (p - 1) / v) * (F + B)
    assert r.idle_fraction == pytest.approx((p - 1) / (v * k + p - 1), rel=1e-12)


def test_json_reports_exact_idle_beside_the_estimates() -> None:
    """The JSON has the simulated idle fraction, p/(p+k) and (p-1)/(k+p-1) side by side."""
    out = _run("1f1b", 4, 8).to_dict()
    assert out["idle_fraction_exact"] == out["idle_fraction"]
    assert out["idle_fraction_estimate"] == 4 / 12
    assert out["bubble_fraction"] == 3 / 11
    assert out["bubble_fraction_interleaved"] == 3 / 11
    assert out["idle_fraction"] == pytest.approx(3 / 11, rel=1e-12)
    assert [s["stage"] for s in out["stage_times"]] == [0, 1, 2, 3]


def test_1f1b_order_is_warmup_steady_cooldown() -> None:
    """Device d runs p-1-d warm-up forwards, alternates a forward and a backward, then drains."""
    orders = stage_orders("1f1b", stages=3, microbatches=4)
    assert [str(op) for op in orders[0]] == ["F0", "F1", "F2", "B0", "F3", "B1", "B2", "B3"]
    assert [str(op) for op in orders[2]] == ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]
    gpipe = stage_orders("gpipe", stages=2, microbatches=2)
    assert [str(op) for op in gpipe[1]] == ["F0", "F1", "B0", "B1"]


def test_interleaved_order_runs_every_chunk_of_every_microbatch_once() -> None:
    """Each device runs forward and backward of each (micro-batch, chunk) exactly once."""
    p, k, v = 4, 8, 3
    for order in stage_orders("interleaved", stages=p, microbatches=k, chunks=v):
        for kind in "FB":
            ops = sorted((op.microbatch, op.chunk) for op in order if op.kind == kind)
            assert ops == [(m, c) for m in range(k) for c in range(v)]


def test_a_deadlocking_order_is_a_schedule_error() -> None:
    """Orders whose devices each wait on the other cannot be lowered: ScheduleError."""
    bad = [[PipeOp("B", 0), PipeOp("F", 0)], [PipeOp("F", 0), PipeOp("B", 0)]]
    with pytest.raises(ScheduleError, match="deadlocks"):
        emit_pipeline(bad, chunks=1, run_op=lambda d, op, deps: [], transfer=lambda *a: [])


def test_activation_sends_cost_network_time(fully_connected) -> None:
    """activation_bytes go stage to stage as p2p sends: GPipe with p=2, k=1 waits for both sends."""
    nbytes = 2**20
    net = fully_connected(2)
    r = replay(
        {
            "kind": "pipeline",
            "schedule": "gpipe",
            "stages": 2,
            "microbatches": 1,
            "forward_time": f"{F!r}s",
            "backward_time": f"{B!r}s",
            "activation_bytes": f"{nbytes}B",
        },
        net,
    )
    send = 2**-20 + nbytes / 2**30  # latency + size / bandwidth
    assert r.step_time_s == pytest.approx(2 * (F + B) + 2 * send, rel=1e-12)
    sends = r.tasks().query("kind == 'send'")
    assert list(sends["ranks"]) == [(0, 1), (1, 0)]


def test_per_stage_times_set_the_slowest_stage_as_the_bottleneck(fully_connected) -> None:
    """forward_time/backward_time may list one value per stage; GPipe's step follows the slowest."""
    r = replay(
        {
            "kind": "pipeline",
            "schedule": "gpipe",
            "stages": 2,
            "microbatches": 4,
            "forward_time": [f"{F!r}s", f"{2 * F!r}s"],
            "backward_time": [f"{B!r}s", f"{2 * B!r}s"],
        },
        fully_connected(2),
    )
    # stage 1 is the bottleneck: F0 on stage 0, then 4 forwards and 4 backwards on stage 1,
    # then the last backward on stage 0.
    assert r.step_time_s == F + 4 * 2 * (F + B) + B
    assert r.to_dict()["stage_times"][1]["forward_time_s"] == 2 * F


def test_more_stages_than_ranks_is_an_error(fully_connected) -> None:
    """A pipeline of 8 stages cannot run on 4 ranks."""
    with pytest.raises(SpecError, match=r"^stages: 8 stages need 8 ranks"):
        replay(
            {
                "kind": "pipeline",
                "stages": 8,
                "microbatches": 8,
                "forward_time": f"{F!r}s",
                "backward_time": f"{B!r}s",
            },
            fully_connected(4),
        )
