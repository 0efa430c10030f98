"""``commsim replay`` and ``commsim bound fsdp`` in-process: JSON keys, files, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commsim.cli import main

TOPO = ["--topology", "dgx-h100"]
KEYS = {
    "step_time_s",
    "compute_time_s",
    "comm_time_s",
    "exposed_comm_s",
    "overlap_fraction",
    "idle_fraction",
    "per_rank",
}


def _write(tmp_path: Path, text: str, name: str = "w.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


DDP = """\
kind: ddp
layers: 2
forward_time: 1ms
backward_time: 10ms
grad_bytes: 25MiB
bucket_bytes: 25MiB
algorithm: ring
optimizer_time: 0
"""

PIPELINE = """\
kind: pipeline
schedule: gpipe
stages: 4
microbatches: 8
chunks_per_stage: 1
forward_time: 1ms
backward_time: 2ms
activation_bytes: 0
"""


def test_replay_json_has_the_contract_keys(tmp_path: Path, capsys) -> None:
    """--json prints the six metrics and per_rank (one object per rank with the same keys)."""
    assert main(["replay", _write(tmp_path, DDP), *TOPO, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out)
    assert len(out["per_rank"]) == 8
    assert all(KEYS - {"per_rank"} <= set(rank) for rank in out["per_rank"])
    assert out["compute_time_s"] == pytest.approx(22e-3)


def test_replay_pipeline_json_reports_the_estimates(tmp_path: Path, capsys) -> None:
    """The pipeline JSON has the exact idle fraction beside p/(p+k) and (p-1)/(k+p-1)."""
    assert main(["replay", _write(tmp_path, PIPELINE), *TOPO, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["step_time_s"] == pytest.approx(11 * 3e-3, rel=1e-12)
    assert out["idle_fraction_exact"] == pytest.approx(3 / 11, rel=1e-12)
    assert out["idle_fraction_estimate"] == 4 / 12 and out["bubble_fraction"] == 3 / 11


def test_replay_text_trace_and_plot(tmp_path: Path, capsys) -> None:
    """Without --json a summary is printed; --trace and --plot write their files."""
    trace, plot = tmp_path / "t.json", tmp_path / "p.png"
    args = ["replay", _write(tmp_path, DDP), *TOPO, "--trace", str(trace), "--plot", str(plot)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "step time" in text and "overlap" in text
    assert json.loads(trace.read_text())["traceEvents"]
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (PIPELINE.replace("stages: 4", "stages: 0"), "stages: must be a positive integer (got 0)"),
        (
            PIPELINE.replace("microbatches: 8", "microbatches: -1"),
            "microbatches: must be a positive",
        ),
        (
            PIPELINE.replace("schedule: gpipe", "schedule: zigzag"),
            "schedule: must be one of gpipe, 1f1b, interleaved (got 'zigzag')",
        ),
        (PIPELINE.replace("stages: 4", "stages: 16"), "stages: 16 stages need 16 ranks"),
        (
            "kind: tensor\ntp: 3\nlayers: 1\nforward_time: 1ms\nbackward_time: 1ms\n"
            "allreduce_bytes: 1MiB\n",
            "tp: 3 does not divide the topology's 8 ranks",
        ),
        (DDP + "bukcet_bytes: 1MiB\n", "bukcet_bytes: unknown key"),
    ],
)
def test_bad_workloads_are_one_line_errors_with_exit_2(
    tmp_path: Path, capsys, text: str, fragment: str
) -> None:
    """Zero/negative counts, unknown schedule, too many stages, non-dividing groups: exit 2."""
    assert main(["replay", _write(tmp_path, text), *TOPO]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and err.startswith("commsim: error: ")


def test_replay_missing_files_and_directories(tmp_path: Path, capsys) -> None:
    """A missing workload file or output directory is one line, exit 2."""
    assert main(["replay", str(tmp_path / "nope.yaml"), *TOPO]) == 2
    assert "no such workload file" in capsys.readouterr().err
    args = ["replay", _write(tmp_path, DDP), *TOPO, "--plot", str(tmp_path / "no" / "p.png")]
    assert main(args) == 2
    assert "does not exist" in capsys.readouterr().err


BOUND = [
    "bound",
    "fsdp",
    "--latency",
    "1us",
    "--bandwidth",
    "50GB/s",
    "--flops",
    "1500e12",
    "--batch",
    "10",
    "--seq",
    "8000",
    "--params-per-layer",
    "1e8",
    "--ranks",
    "64",
]


def test_bound_json_keys(capsys) -> None:
    """The contract's example: lhs_s, rhs_s, comm_bound, min_batch, max_log2_ranks."""
    assert main([*BOUND, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lhs_s"] == pytest.approx(6e-6)
    assert out["comm_bound"] is False and out["min_batch"] == 4
    assert out["max_log2_ranks"] == 3333


def test_bound_null_when_no_rank_count_works(capsys) -> None:
    """max_log2_ranks is null when even one rank is communication bound."""
    args = [*BOUND, "--json", "--bandwidth", "1GB/s", "--batch", "1"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["comm_bound"] is True and out["max_log2_ranks"] is None


def test_bound_text(capsys) -> None:
    """Without --json both sides and the verdict are printed."""
    assert main(BOUND) == 0
    text = capsys.readouterr().out
    assert "compute bound" in text and "min batch" in text


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--latency", "-1us", "--latency: must not be negative (got '-1us')"),
        ("--bandwidth", "0GB/s", "--bandwidth: must be a finite number > 0"),
        ("--batch", "0", "--batch: must be a positive integer"),
        ("--ranks", "x", "--ranks: must be a positive integer"),
        ("--flops", "5furlongs", "--flops: "),
    ],
)
def test_bound_bad_flags(capsys, flag: str, value: str, fragment: str) -> None:
    """Malformed or non-positive inputs are one-line errors, exit 2 (``--flag=-1us`` keeps
    argparse from reading a negative value as an option)."""
    args = list(BOUND)
    i = args.index(flag)
    args[i : i + 2] = [f"{flag}={value}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1
