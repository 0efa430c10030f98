"""``commsim measure`` in-process: a real small run, its output, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from commsim.cli import main
from commsim.measure import read_csv

pytest.importorskip("torch")


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert needle in lines[0], lines[0]


def test_measure_writes_the_csv_and_prints_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out writes the CSV (one row per collective and size) and prints the summary table;
    without --out the CSV goes to stdout. The progress bar stays off when stderr is no TTY."""
    out = tmp_path / "m.csv"
    argv = [
        "measure",
        "--world-size",
        "2",
        "--collectives",
        "allreduce,all-gather",
        "--sizes",
        "4KiB,16KiB",
        "--iterations",
        "2",
        "--rounds",
        "1",
    ]
    assert main([*argv, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "# commsim measure: backend gloo" in captured.out and f"# wrote {out}" in captured.out
    assert captured.err == ""
    rows = read_csv(out)
    assert [(r.collective, r.nbytes) for r in rows] == [
        ("all_gather", 4096),
        ("all_gather", 16384),
        ("all_reduce", 4096),
        ("all_reduce", 16384),
    ]
    assert main(argv[:-4] + ["--sizes", "4KiB", "--iterations", "1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("collective,ranks,nbytes,time_s,") and len(text.splitlines()) == 3


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--backend", "foo"], "--backend: unknown backend 'foo'"),
        (["--world-size", "0"], "--world-size: must be >= 1, got 0"),
        (["--world-size", "two"], "--world-size: invalid world size 'two'"),
        (["--sizes", "1XB"], "--sizes: unknown size unit 'XB' (got '1XB')"),
        (["--sizes", "1KiB,,2KiB"], "--sizes: empty item"),
        (["--collectives", "all_to_all"], "--collectives: unknown collective 'all_to_all'"),
        (["--timeout", "soon"], "--timeout: not a time (got 'soon')"),
        (["--out", "/no/such/dir/m.csv"], "--out /no/such/dir/m.csv: directory"),
        (["--iterations", "x"], "argument --iterations: invalid int value"),
        # once 500 processes importing torch, killed by the kernel after 85 s
        (["--world-size", "500", "--sizes", "4KiB"], "--world-size 500 with --sizes up to"),
        # once a rank killed allocating its buffers
        (["--world-size", "2", "--sizes", "1KiB:1PiB"], "than the"),
    ],
)
def test_errors_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    """Bad flags are one line on stderr, exit status 2, before any process starts."""
    _one_line_error(capsys, ["measure", *argv], needle)


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """measure --help exits 0 and documents the timing flags."""
    assert main(["measure", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--backend", "--world-size", "--collectives", "--sizes", "--out", "--batch"):
        assert flag in out
