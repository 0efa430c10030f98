"""``commsim replay`` on captured traces: directories and files, JSON keys, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _synthetic import gloo_rank, nccl_rank, write, write_ranks

from commsim.cli import main

TOPOLOGY = "kind: switch\nranks: 2\nlink: {latency: 10us, bandwidth: 10GB/s}\n"


@pytest.fixture
def topology(tmp_path: Path) -> str:
    path = tmp_path / "topo.yaml"
    path.write_text(TOPOLOGY)
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_directory_of_gz_traces_json(
    tmp_path: Path, topology: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory of per-rank .json.gz files replays; --json has the contract keys, per_rank
    and the measured step time."""
    directory = write_ranks(tmp_path / "t", [nccl_rank(r) for r in range(2)], ".json.gz")
    status, out, err = _run(capsys, "replay", str(directory), "--topology", topology, "--json")
    assert (status, err) == (0, "")
    data = json.loads(out)
    for key in ("step_time_s", "compute_time_s", "comm_time_s", "exposed_comm_s",
                "overlap_fraction", "idle_fraction", "measured_step_time_s"):  # fmt: skip
        assert isinstance(data[key], float)
    assert [r["rank"] for r in data["per_rank"]] == [0, 1]
    assert data["measured_step_time_s"] == pytest.approx(1e-3)
    assert data["trace_backend"] == "nccl"


def test_text_output_and_step_flag(
    tmp_path: Path, topology: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The text summary shows the measured step; --step picks a ProfilerStep; trace and plot
    files are written as for YAML workloads."""
    directory = write_ranks(tmp_path / "g", [gloo_rank(r) for r in range(2)])
    trace, plot = tmp_path / "step.json", tmp_path / "step.png"
    status, out, _ = _run(
        capsys, "replay", str(directory), "-t", topology, "--step", "2",
        "--trace", str(trace), "--plot", str(plot),
    )  # fmt: skip
    assert status == 0
    assert "measured step" in out and "2.000 ms" in out
    assert json.loads(trace.read_text())["traceEvents"]
    assert plot.stat().st_size > 0


def test_single_file_of_a_one_rank_world(
    tmp_path: Path, topology: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One trace file (world_size 1, no collectives) replays as its compute."""
    trace = gloo_rank(0)
    trace["distributedInfo"] = {"backend": "gloo", "rank": 0, "world_size": 1}
    trace["traceEvents"] = [e for e in trace["traceEvents"] if "gloo" not in e["name"]
                            and "c10d" not in e["name"]]  # fmt: skip
    path = write(trace, tmp_path / "solo.json")
    status, out, _ = _run(capsys, "replay", str(path), "-t", topology, "--json")
    assert status == 0
    assert json.loads(out)["step_time_s"] == pytest.approx(2e-3)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"\x89PNG garbage", "not"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1, "dur"', "truncated JSON"),
        (b'{"hello": 1}', "no 'traceEvents' key"),
    ],
)
def test_bad_trace_is_one_line_exit_2(
    tmp_path: Path,
    topology: str,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    message: str,
) -> None:
    """Garbage, empty, truncated or keyless trace files: one line on stderr naming the file,
    exit status 2, nothing on stdout."""
    path = tmp_path / "rank0.json"
    path.write_bytes(content)
    for target in (path, tmp_path):  # the file, and the directory holding it
        status, out, err = _run(capsys, "replay", str(target), "-t", topology)
        assert status == 2 and out == ""
        assert err.startswith(f"commsim: error: {path}: ") and message in err
        assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "{dir}/missing.json"], "missing.json: no such file"),
        (["replay", "{dir}/empty"], "no *.json or *.json.gz trace files"),
        (["replay", "{dir}/w.yaml", "--step", "3"], "--step 3: only for captured traces"),
        (["replay", "{dir}/gloo", "--step", "9"], "no ProfilerStep#9"),
        (["replay", "{dir}/gloo", "--step", "x"], "--step: expected a ProfilerStep number"),
        (["replay", "{dir}/gloo", "-t", "dgx-h100", "--ranks"], "unrecognized arguments"),
    ],
)
def test_usage_errors(
    tmp_path: Path,
    topology: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    """Missing paths, empty directories, --step misuse: one line, exit 2."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "w.yaml").write_text("kind: ddp\nlayers: 1\n")
    write_ranks(tmp_path / "gloo", [gloo_rank(r) for r in range(2)])
    args = [a.format(dir=tmp_path) for a in argv]
    if "-t" not in args:
        args += ["-t", topology]
    status, _, err = _run(capsys, *args)
    assert status == 2
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["ddp.yaml", "ddp.json"])
def test_yaml_and_json_workloads_still_replay(
    tmp_path: Path, topology: str, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """The trace path does not change workloads, in YAML or in JSON (a JSON object with a
    workload kind and no traceEvents is a workload, not a trace)."""
    spec = {"kind": "ddp", "layers": 1, "forward_time": "1ms", "backward_time": "2ms",
            "grad_bytes": "1MiB"}  # fmt: skip
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    status, out, _ = _run(capsys, "replay", str(path), "-t", topology, "--json")
    assert status == 0
    data = json.loads(out)
    assert data["workload"] == "ddp" and "measured_step_time_s" not in data
