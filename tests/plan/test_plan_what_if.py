"""``commsim plan --what-if``: each stage at its slowest rank's pace, the healthy step beside,
which rank paces the step, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commsim.cli import main
from commsim.errors import SpecError
from commsim.plan import SearchSpace, plan

SMALL = ["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32"]
#: Every layout of 8 GPUs with 1 or 2 stages, every one timed.
SPACE = SearchSpace(tp=(1, 2), pp=(1, 2), cp=(1,), micro_batch=(1,), data_parallel=("ddp",),
                    recompute=("none",))


def _plan(what_if: object = None):
    return plan("gpt3-1.3b", "dgx-a100", global_batch=32, space=SPACE, top=0, what_if=what_if)


def test_one_slow_gpu_slows_every_configuration_through_its_stage():
    """Rank 5 at x1.3: every configuration is slower than its healthy step and no slower than
    1.3x (only its stage runs slower); without pipelining (one stage, DP over all ranks) the
    step is paced by it all the way: its compute is 1.3x, the others wait at the
    reduction. The records say which rank, where, and each stage's factor; healthy_step_time_s
    is the healthy plan's step for the same configuration."""
    healthy = {e.config.label(): e.record for e in _plan().result.configs}
    out = _plan({"ranks": {5: {"compute": 1.3}}})
    for e in out.result.configs:
        r, base = e.record, healthy[e.config.label()]
        assert r["healthy_step_time_s"] == base["step_time_s"]
        assert 1.0 < r["slowdown"] <= 1.3 + 1e-12
        assert r["slowdown"] == pytest.approx(r["step_time_s"] / r["healthy_step_time_s"])
        assert (r["slowest_rank"], r["slowest_compute_factor"]) == (5, 1.3)
        stage = 5 // (e.config.tp * e.config.cp) % e.config.pp
        assert r["slowest_rank_stage"] == stage
        assert r["slowest_rank_replica"] == 5 // (e.config.tp * e.config.cp * e.config.pp)
        assert r["stage_compute_factors"] == [1.3 if p == stage else 1.0
                                              for p in range(e.config.pp)]
        if e.config.pp == 1:  # compute only, then the reduction: 1.3x its compute
            assert r["compute_time_s"] == pytest.approx(1.3 * base["compute_time_s"])


def test_without_slow_ranks_the_plan_is_the_healthy_one():
    """A factor of 1 changes no step time, and a what-if of links only adds no slowest rank."""
    healthy = _plan()
    same = _plan({"ranks": {0: {"compute": 1.0}}})
    assert [e.record["step_time_s"] for e in same.result.configs] == \
        [e.record["step_time_s"] for e in healthy.result.configs]
    links = _plan({"links": {"gpu0->*": {"latency": "1us"}}})
    assert "slowest_rank" not in links.result.configs[0].record
    assert all(e.record["slowdown"] >= 1 for e in links.result.configs)


def test_a_rank_beyond_the_gpus_is_a_one_line_error(tmp_path: Path, capsys):
    """A slow rank the plan's GPUs do not have: SpecError naming it (and the file); exit 2."""
    with pytest.raises(SpecError, match=r"^ranks\.8: the run has 8 ranks \(0\.\.7\)$"):
        _plan({"ranks": {8: {"compute": 2}}})
    path = tmp_path / "far.yaml"
    path.write_text("ranks:\n  6: {compute: 2}\n")
    assert main(["plan", *SMALL, "--gpus", "4", "--what-if", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "far.yaml: ranks.6: the run has 4 ranks (0..3)" in err


def test_cli_prints_the_note_the_healthy_step_and_json_keys(tmp_path: Path, capsys):
    """plan --what-if: the ranking says which rank paces the step, with the healthy step and
    the slowdown per row; --json has what_if and the per-config keys; --csv their columns;
    without --what-if none of them."""
    path = tmp_path / "slow-gpu.yaml"
    path.write_text("ranks:\n  2: {compute: 1.25}\n")
    assert main(["plan", *SMALL, "--top", "3", "--what-if", str(path)]) == 0
    text = capsys.readouterr().out
    assert "what-if 'slow-gpu'" in text and "rank 2 is the slowest GPU (compute x1.25)" in text
    assert "healthy slower  slowest rank" in text
    assert main(["plan", *SMALL, "--top", "3", "--what-if", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["what_if"] == "slow-gpu"
    first = data["configs"][0]
    assert first["slowest_rank"] == 2 and first["slowdown"] > 1
    assert all(c["healthy_step_time_s"] is None for c in data["configs"][3:])
    # 'healthy': the re-timed configurations on the machine without the file, same keys
    healthy = data["healthy"]
    assert len(healthy["configs"]) == 3 and healthy["gpus"] == data["gpus"]
    for c, h in zip(data["configs"], healthy["configs"], strict=False):
        assert (h["tp"], h["pp"], h["step_time_s"]) == (c["tp"], c["pp"], c["healthy_step_time_s"])
        assert h["mfu"] == pytest.approx(c["mfu"] * c["step_time_s"] / h["step_time_s"])
    assert main(["plan", *SMALL, "--top", "3", "--what-if", str(path), "--csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert header[-8:] == ["fits", "healthy_step_time_s", "slowdown", "slowest_rank",
                           "slowest_compute_factor", "slowest_rank_stage",
                           "slowest_rank_replica", "reason"]
    assert main(["plan", *SMALL, "--top", "3", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "what_if" not in plain and "healthy" not in plain
    assert "slowdown" not in plain["configs"][0]


def test_the_planners_memo_tells_apart_groups_a_changed_link_touches():
    """On a degraded machine a group with a rank on the host of a changed NIC is timed on its
    own, not as the alike group of a healthy host: (3, 11) crosses GPU 3's half-speed NIC,
    (2, 10) does not."""
    from commsim.plan.timing import CollectiveTimer
    from commsim.topology import load_topology
    from commsim.topology.degrade import apply_what_if

    net, _ = apply_what_if(load_topology("dgx-h100x2"),
                           {"links": {"gpu3->fabric": {"bandwidth": 0.5},
                                      "fabric->gpu3": {"bandwidth": 0.5}}})
    timer = CollectiveTimer(net, "analytic")
    healthy = timer.collective("all_reduce", (2, 10), 2**30)
    assert timer.collective("all_reduce", (3, 11), 2**30) > 1.5 * healthy
    assert CollectiveTimer(load_topology("dgx-h100x2")).exact == frozenset()
