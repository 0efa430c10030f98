"""Slow ranks and jitter in replay: a what-if's compute factors, collectives that wait for their
slowest member, and each rank's wait for others (JSON, text, trace)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from commsim.cli import main
from commsim.errors import SpecError
from commsim.replay import replay
from commsim.replay.trace import step_trace_events
from commsim.topology.what_if import what_if_from_dict

#: Links so fast that a 1-byte all-reduce adds nothing to a step of milliseconds (1e-30 s).
FREE = {"kind": "fully_connected", "ranks": 4, "link": {"latency": 0, "bandwidth": "1e30B/s"}}
#: DDP whose all-reduces cost nothing but still synchronise the ranks.
DDP = {"kind": "ddp", "layers": 2, "forward_time": "1ms", "backward_time": "2ms",
       "grad_bytes": "1B", "bucket_bytes": "1B", "optimizer_time": "0.5ms"}
GPIPE = {"kind": "pipeline", "schedule": "gpipe", "stages": 2, "microbatches": 1,
         "forward_time": "1ms", "backward_time": "2ms"}


def _slow(rank: int, factor: float) -> dict[str, object]:
    return {"ranks": {rank: {"compute": factor}}}


@pytest.mark.parametrize("factor", [1.0, 1.25, 1.5, 3.0])
@pytest.mark.parametrize("rank", [0, 2])
def test_a_straggler_delays_a_synchronous_ddp_step_by_f_minus_one_times_its_compute(
        rank: int, factor: float) -> None:
    """A straggler at factor f delays a DDP step without communication cost (its all-reduces
    still synchronise every rank) by exactly (f - 1) x its compute: 2 forwards, 2 backwards
    and the optimizer step, 6.5 ms."""
    healthy = replay(DDP, FREE)
    slow = replay(DDP, FREE, what_if=_slow(rank, factor))
    compute = slow.graph.tasks  # the straggler's compute, as the workload gives it
    own = sum(t.duration_s for t in compute if t.kind.value == "compute" and t.ranks == (rank,))
    assert own == pytest.approx(6.5e-3, rel=1e-12)
    assert healthy.step_time_s == pytest.approx(6.5e-3, rel=1e-12)
    assert slow.step_time_s - healthy.step_time_s == pytest.approx((factor - 1) * own,
                                                                   rel=1e-12, abs=1e-15)


def test_collectives_wait_for_their_slowest_member_and_the_others_wait() -> None:
    """Each all-reduce starts when the straggler's backward reaches it; the other ranks wait
    (f - 1) x the forward and backward they run before the last all-reduce (the optimizer
    comes after it), the straggler not at all; wait_time_s is the mean over ranks."""
    f = 1.5
    slow = replay(DDP, FREE, what_if=_slow(2, f))
    starts = [c["start_s"] for c in slow.collectives()]
    # backward in reverse layer order: layer 1's bucket after 2 fwd + 1 bwd, layer 0's after 2 bwd
    assert starts == pytest.approx([f * 4e-3, f * 6e-3], rel=1e-12)
    waits = [r.wait_s for r in slow.metrics.per_rank]
    assert waits[2] == 0.0
    assert [waits[r] for r in (0, 1, 3)] == pytest.approx([(f - 1) * 6e-3] * 3, rel=1e-12)
    assert slow.metrics.wait_time_s == pytest.approx(sum(waits) / 4, rel=1e-12)
    assert replay(DDP, FREE).metrics.wait_time_s == 0.0


def test_a_slow_pipeline_stage_makes_the_next_stage_wait_for_its_sends() -> None:
    """GPipe, 2 stages, 1 micro-batch: healthy, stage 1 waits 1 ms for the forward and stage 0
    3 ms for the backward (the bubble is waiting for a sender); stage 0 at 2x makes stage 1
    wait 2 ms, and the step grows by stage 0's whole compute (3 ms)."""
    healthy = replay(GPIPE, FREE)
    assert [r.wait_s for r in healthy.metrics.per_rank[:2]] == pytest.approx([3e-3, 1e-3])
    slow = replay(GPIPE, FREE, what_if=_slow(0, 2.0))
    assert slow.step_time_s == pytest.approx(healthy.step_time_s + 3e-3, rel=1e-12)
    assert [r.wait_s for r in slow.metrics.per_rank[:2]] == pytest.approx([3e-3, 2e-3])


def test_the_trace_has_a_wait_thread_with_each_ranks_waits() -> None:
    """The trace shows the waits: a 'wait' thread on each rank that waited, whose slices add
    up to the rank's wait_s (to the nanosecond) and name the task waited for; the straggler
    has none; otherData names the what-if."""
    slow = replay(DDP, FREE, what_if={"name": "slow2", **_slow(2, 1.5)})
    trace = step_trace_events(slow)
    events = trace["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["name"] == "thread_name"}
    for rank, metrics in enumerate(slow.metrics.per_rank):
        waits = [e for e in events if e["ph"] == "X" and e["pid"] == rank
                 and threads[(rank, e["tid"])] == "wait"]
        assert sum(e["dur"] for e in waits) == pytest.approx(metrics.wait_s * 1e6, abs=1e-3)
        assert all(e["name"] == "wait" and e["args"]["waits_for"].startswith("allreduce")
                   for e in waits)
        assert bool(waits) == (rank != 2)
    assert trace["otherData"]["what_if"] == "slow2"


def test_jitter_is_seeded_and_each_rank_runs_at_its_drawn_factor() -> None:
    """Jitter draws one factor per rank from the seed: the same seed gives the same step, the
    factors are WhatIf.compute_factors', and the step is the slowest rank's compute (the
    all-reduces cost nothing)."""
    jitter = {"jitter": {"distribution": "lognormal", "sigma": 0.2, "seed": 7}}
    a, b = replay(DDP, FREE, what_if=jitter), replay(DDP, FREE, what_if=jitter)
    assert a.step_time_s == b.step_time_s
    factors = what_if_from_dict(jitter).compute_factors(4)
    assert a.compute_factors == tuple(factors.tolist())
    # the last all-reduce waits for the slowest backward; each rank then runs its optimizer
    expected = 6e-3 * factors.max() + 0.5e-3 * factors[np.argmax(factors)]
    assert a.step_time_s == pytest.approx(max(expected, float((6.5e-3 * factors).max())),
                                          rel=1e-12)
    other = replay(DDP, FREE, what_if={"jitter": {**jitter["jitter"], "seed": 8}})
    assert other.step_time_s != a.step_time_s


def test_a_what_if_of_links_only_keeps_every_rank_at_its_healthy_pace() -> None:
    """A what-if without ranks or jitter has no compute factors, and a factor of 1 changes no
    time: the healthy step to the bit."""
    healthy = replay(DDP, FREE)
    assert replay(DDP, FREE, what_if=_slow(1, 1.0)).timing == healthy.timing
    links = replay(DDP, FREE, what_if={"links": {"*": {"latency": "0s"}}})
    assert links.compute_factors is None and links.timing == healthy.timing


def test_a_rank_beyond_the_steps_ranks_is_a_one_line_error(tmp_path: Path) -> None:
    """A straggler the step does not have is a SpecError naming the rank and the step's
    ranks (and the file); on the command line one line, exit 2."""
    with pytest.raises(SpecError, match=r"^ranks\.4: the run has 4 ranks \(0\.\.3\)$"):
        replay(DDP, FREE, what_if=_slow(4, 1.5))
    path = tmp_path / "far.yaml"
    path.write_text("ranks:\n  2: {compute: 1.5}\n")
    with pytest.raises(SpecError, match=r"far\.yaml: ranks\.2: the run has 2 ranks"):
        replay(GPIPE, FREE, what_if=str(path))


def _files(tmp_path: Path) -> tuple[str, str]:
    workload = tmp_path / "ddp.yaml"
    workload.write_text(json.dumps(DDP))
    what_if = tmp_path / "slow.yaml"
    what_if.write_text("ranks:\n  5: {compute: 1.3}\n")
    return str(workload), str(what_if)


def test_cli_json_reports_the_degraded_step_beside_the_healthy_one(tmp_path: Path,
                                                                   capsys) -> None:
    """replay --what-if --json: the degraded step's keys, what_if, compute_factors, healthy
    (the same keys) and slowdown; without --what-if, none of those four."""
    workload, what_if = _files(tmp_path)
    assert main(["replay", workload, "-t", "dgx-h100", "--what-if", what_if, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["what_if"] == "slow"
    assert out["compute_factors"] == [1.0] * 5 + [1.3] + [1.0] * 2
    assert set(out["healthy"]) == set(out) - {"what_if", "compute_factors", "healthy",
                                              "slowdown"}
    assert out["slowdown"] == pytest.approx(out["step_time_s"] / out["healthy"]["step_time_s"])
    assert out["slowdown"] > 1.2
    assert all("wait_s" in r for r in out["per_rank"]) and out["per_rank"][5]["wait_s"] == 0
    assert main(["replay", workload, "-t", "dgx-h100", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert not {"what_if", "healthy", "slowdown", "compute_factors"} & set(plain)
    assert plain == out["healthy"]


def test_cli_text_prints_waits_factors_and_the_healthy_step(tmp_path: Path, capsys) -> None:
    """replay --what-if: the heading names the what-if, each rank's wait and factor, then the
    healthy step's aggregates and the slowdown; errors are one line, exit 2."""
    workload, what_if = _files(tmp_path)
    assert main(["replay", workload, "-t", "dgx-h100", "--what-if", what_if]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].endswith(", what-if 'slow'")
    assert "wait(ms)  factor" in text and "# the healthy machine (without what-if 'slow'):" in text
    assert "x the healthy step" in text.splitlines()[-1]
    far = tmp_path / "far.yaml"
    far.write_text("ranks:\n  8: {compute: 2}\n")
    assert main(["replay", workload, "-t", "dgx-h100", "--what-if", str(far)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ranks.8: the run has 8 ranks (0..7)" in err
