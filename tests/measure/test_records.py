"""The measurement CSV: columns, a lossless round trip, strict reading, the summary table."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from commsim.errors import ParseError
from commsim.measure import Measurement, format_csv, parse_csv, read_csv, write_csv
from commsim.measure.calibrate import csv_backend, is_cpu_measurement
from commsim.measure.launcher import percentile, summarize
from commsim.measure.table import format_table
from commsim.measurements import COLUMNS

HEAD = "collective,ranks,nbytes,time_s\n"
DATA = Path(__file__).parents[1] / "data" / "measure" / "gloo-vm-2cpu.csv"


def _row(**change: object) -> Measurement:
    base = dict(
        collective="all_gather",
        ranks=4,
        nbytes=1 << 20,
        time_s=2.5e-3,
        time_p10_s=2e-3,
        time_p90_s=3e-3,
        time_min_s=1.9e-3,
        time_max_s=4e-3,
        iterations=12,
        warmups=2,
        backend="gloo",
        world_size=4,
        torch_version="2.13.0+cpu",
        host="vm",
        cpus=2,
        device="cpu",
    )
    return Measurement(**(base | change))  # type: ignore[arg-type]


def test_columns_start_with_the_contract_and_round_trip(tmp_path: Path) -> None:
    """The header starts collective, ranks, nbytes, time_s; writing then reading gives equal
    rows (floats written exactly), algbw/busbw follow nccl-tests' factors."""
    rows = [_row(), _row(collective="sendrecv", ranks=2, world_size=2, time_s=1e-3)]
    path = tmp_path / "m.csv"
    write_csv(rows, path)
    text = path.read_text()
    assert text.splitlines()[0] == ",".join(COLUMNS)
    assert COLUMNS[:4] == ("collective", "ranks", "nbytes", "time_s")
    assert read_csv(path) == rows
    assert rows[0].busbw_GBps == pytest.approx((1 << 20) / 2.5e-3 / 1e9 * 3 / 4)
    assert rows[1].busbw_GBps == rows[1].algbw_GBps


def test_reads_files_with_only_the_required_columns() -> None:
    """Other tools' CSVs with collective, ranks, nbytes, time_s load; missing fields are NaN
    or empty, unknown columns are ignored."""
    rows = parse_csv("time_s,nbytes,ranks,collective,comment\n0.5,1024,2,all_reduce,x\n")
    assert rows[0].collective == "all_reduce" and rows[0].nbytes == 1024
    assert math.isnan(rows[0].time_p10_s) and rows[0].backend == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty measurement file"),
        ("collective,ranks,nbytes\nall_reduce,2,4\n", "missing column 'time_s'"),
        ("collective,ranks,nbytes,time_s\n", "no measurement rows"),
        ("collective,ranks,nbytes,time_s\nallreduce,2,4,x\n", "m.csv:2: column 'time_s'"),
        ("collective,ranks,nbytes,time_s\ngather,2,4,1\n", "unknown collective 'gather'"),
        (f"{HEAD}all_reduce,0,4,1\n", "'ranks': must be a positive integer"),
        (f"{HEAD}all_reduce,2,-4,1\n", "'nbytes': must be an integer >= 0"),
        (f"{HEAD}all_reduce,2,4,0\n", "'time_s': must be a finite number > 0"),
    ],
)
def test_malformed_files_are_one_line_errors(text: str, message: str) -> None:
    """Each problem is a ParseError naming the file (and line and column where there is one)."""
    with pytest.raises(ParseError, match=message) as info:
        parse_csv(text, "m.csv")
    assert "\n" not in str(info.value) and str(info.value).startswith("m.csv")


def test_missing_file(tmp_path: Path) -> None:
    """A missing file is a ParseError naming it."""
    with pytest.raises(ParseError, match="no such measurement file"):
        read_csv(tmp_path / "nope.csv")


def test_summary_statistics() -> None:
    """A raw worker row becomes median, p10/p90 (linear interpolation), min, max, count."""
    raw = {"collective": "broadcast", "ranks": 2, "nbytes": 8, "samples": [4.0, 1.0, 3.0, 2.0]}
    row = summarize(raw)
    assert (row.time_s, row.time_min_s, row.time_max_s, row.iterations) == (2.5, 1.0, 4.0, 4)
    assert row.time_p10_s == pytest.approx(1.3) and row.time_p90_s == pytest.approx(3.7)
    assert percentile([5.0], 90) == 5.0


def test_table_and_csv_text() -> None:
    """The summary table names backend, torch and host and has one line per row; the CSV text
    has a header and one line per row."""
    table = format_table([_row(), _row(nbytes=2 << 20)])
    assert "backend gloo, torch 2.13.0+cpu, host vm (2 cpus, cpu)" in table.splitlines()[0]
    assert len(table.splitlines()) == 5 and "busbw(GB/s)" in table
    assert len(format_csv([_row()]).splitlines()) == 2


def test_the_shipped_measurement() -> None:
    """tests/data holds a real gloo measurement (2 and 4 ranks, 6 operations, 9 sizes) that
    the calibration tests use; it is recognized as a CPU-host (gloo) measurement."""
    rows = read_csv(DATA)
    assert len(rows) == 2 * 6 * 9
    assert {r.collective for r in rows} == {
        "broadcast",
        "reduce",
        "all_gather",
        "reduce_scatter",
        "all_reduce",
        "sendrecv",
    }
    assert csv_backend(DATA) == "gloo" and is_cpu_measurement(DATA)
    assert csv_backend(DATA.parent / "missing.csv") is None
