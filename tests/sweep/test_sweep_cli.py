"""``commsim sweep`` in-process: outputs (table, JSON, CSV, Parquet), byte-identical files
whatever the executor, and one-line errors with exit status 2."""

from __future__ import annotations

import doctest
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

import commsim.sweep
import commsim.sweep.grid
import commsim.sweep.progress
from commsim.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["sweep", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_text_table(grid_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(capsys, str(grid_file), "--jobs", "1")
    assert status == 0 and err == ""  # stderr is not a terminal: no progress bar
    lines = out.splitlines()
    assert lines[0] == "# commsim sweep: 192 collective points"
    assert "# commsim sweep: 4 workload points" in lines
    assert re.fullmatch(r"# \d+ of 196 points could not run \(see error\)", lines[-1])
    assert any("auto:" in line for line in lines)


def test_json_rows(grid_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, str(grid_file), "--jobs", "1", "--json", "--quiet")
    rows = json.loads(out)
    assert status == 0 and len(rows) == 196
    failed = [r for r in rows if r["error"]]
    assert failed and all(r["time_s"] is None for r in failed)
    assert rows[0]["kind"] == "collective" and rows[-1]["kind"] == "workload"


def test_csv_identical_for_every_executor(
    grid_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], dask_scheduler: str
) -> None:
    outs = []
    for name, flags in (
        ("one.csv", ["--jobs", "1"]),
        ("two.csv", ["--jobs", "2"]),
        ("dask.csv", ["--scheduler", dask_scheduler]),
    ):
        out = tmp_path / name
        status, stdout, err = _run(capsys, str(grid_file), "--out", str(out), *flags)
        assert (status, stdout, err) == (0, "", "")
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]


def test_csv_and_parquet_round_trip(
    grid_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    frame = commsim.sweep.run_sweep(grid_file, jobs=1)
    csv, parquet = tmp_path / "s.csv", tmp_path / "s.parquet"
    assert _run(capsys, str(grid_file), "-j", "1", "-o", str(csv))[0] == 0
    assert _run(capsys, str(grid_file), "-j", "2", "-o", str(parquet))[0] == 0
    back = pd.read_parquet(parquet)
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    from_csv = pd.read_csv(csv)
    assert list(from_csv.columns) == list(frame.columns)
    pd.testing.assert_frame_equal(from_csv, frame, check_dtype=False, check_exact=True)
    again = tmp_path / "again.parquet"
    assert _run(capsys, str(grid_file), "-j", "1", "-o", str(again))[0] == 0
    assert again.read_bytes() == parquet.read_bytes()


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("topologies: [dgx-h100]\ncollectives: [all_reduce]\nsizes: [1KiB]\nsize: 1\n", [],
         "size: unknown key (allowed: "),
        ("topologies: [dgx-h100]\ncollectives: [all_reduce]\nsizes: [12XB]\n", [],
         "sizes[0]: unknown size unit 'XB' (got '12XB')"),
        ("topologies: [dgx-h100, nope.yaml]\ncollectives: [all_reduce]\nsizes: [1B]\n", [],
         "topologies[1]: unknown topology 'nope.yaml'"),
        ("topologies: [dgx-h100]\ncollectives: [all_reduce]\nsizes: [1B]\nalgorithms: [x]\n",
         [], "algorithms[0]: unknown algorithm 'x'"),
        ("topologies: [dgx-h100]\ncollectives: []\nsizes: [1B]\n", [],
         "collectives: must list at least one value (got an empty list)"),
        ("topologies: [dgx-h100]\nworkloads: [w.yaml]\n", [], "no such workload file"),
        ("topologies: [dgx-h100]\ncollectives: [all_reduce]\nsizes: [1B]\n", ["--out", "x.txt"],
         "unknown format '.txt'"),
        ("topologies: [dgx-h100]\ncollectives: [all_reduce]\nsizes: [1B]\n",
         ["--out", "no/such/dir/x.csv"], "does not exist"),
        ("topologies: [dgx-h100]\ncollectives: [all_reduce]\nsizes: [1B]\n", ["--jobs", "0"],
         "--jobs: must be a positive integer"),
        ("topologies: [dgx-h100]\ncollectives: [all_reduce]\nsizes: [1B]\n",
         ["--jobs", "2", "--scheduler", "tcp://127.0.0.1:1"], "give one"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(
    text: str,
    extra: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    grid = tmp_path / "grid.yaml"
    grid.write_text(text)
    status, out, err = _run(capsys, str(grid), "-j", "1", *extra)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("commsim: error: ")
    assert message in err and "Traceback" not in err


def test_missing_grid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, str(tmp_path / "none.yaml"))
    assert status == 2 and err.strip().endswith("none.yaml: no such grid file")


@pytest.mark.parametrize(
    ("module", "extra", "message"),
    [("distributed", ["--scheduler", "tcp://127.0.0.1:8786"], "needs dask.distributed"),
     ("pyarrow", ["--out", "x.parquet"], "Parquet needs pyarrow")],
)  # fmt: skip
def test_missing_optional_packages_are_one_line(
    module: str,
    extra: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    monkeypatch.chdir(tmp_path)
    grid = tmp_path / "grid.yaml"
    grid.write_text("topologies: dgx-h100\ncollectives: all_reduce\nsizes: 1KiB\n")
    status, out, err = _run(capsys, str(grid), *extra)
    assert status == 2 and out == "" and err.count("\n") == 1 and message in err


def test_doctests() -> None:
    for module in (commsim.sweep, commsim.sweep.grid, commsim.sweep.progress):
        failed, _ = doctest.testmod(module)
        assert failed == 0, module.__name__
