"""Reading Kineto trace files: the tolerated variants, and one-line errors for everything else."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from _synthetic import nccl_rank, write

from commsim.errors import ParseError
from commsim.traces import load_kineto, trace_files
from commsim.traces.kineto import parse_ranks


def test_full_header_is_read(tmp_path: Path) -> None:
    """distributedInfo gives rank, world size, backend and the process groups' ranks."""
    trace = load_kineto(write(nccl_rank(1), tmp_path / "t.json"))
    assert (trace.rank, trace.world_size, trace.backend) == (1, 2, "nccl")
    assert [(g.name, g.desc, g.ranks) for g in trace.process_groups] == [
        ("0", "default_pg", (0, 1))
    ]
    assert trace.device_count == 1
    assert trace.base_time_ns == 1_711_964_646_000_000_000
    assert trace.thread_names[(0, 7)] == "stream 7"
    assert {e.cat for e in trace.events} >= {"kernel", "cpu_op", "cuda_runtime"}


def test_gzip_and_plain_read_alike(tmp_path: Path) -> None:
    """A .json.gz file reads exactly like the same trace uncompressed."""
    plain = load_kineto(write(nccl_rank(0), tmp_path / "r.json"))
    packed = load_kineto(write(nccl_rank(0), tmp_path / "r.json.gz"))
    assert plain.events == packed.events


def test_old_and_quoted_headers(tmp_path: Path) -> None:
    """Old distributedInfo (backend/rank/world_size only), ranks as the string "{}", and no
    deviceProperties are all accepted."""
    old = load_kineto(write(nccl_rank(1, header="old"), tmp_path / "old.json"))
    assert (old.rank, old.world_size, old.process_groups, old.device_count) == (1, 2, (), 0)
    quoted = load_kineto(write(nccl_rank(0, header="quoted"), tmp_path / "q.json"))
    assert quoted.process_groups[0].ranks == ()  # "{}": unknown
    assert quoted.process_groups[0].name == "0"


def test_ranks_strings() -> None:
    """Process-group ranks parse from lists and from the strings kineto writes."""
    assert parse_ranks([0, 1], "x") == (0, 1)
    assert parse_ranks("[0, 1, 2]", "x") == (0, 1, 2)
    assert parse_ranks("{}", "x") == ()
    with pytest.raises(ParseError, match="x: expected a list of ranks"):
        parse_ranks("[0, a]", "x")


def test_int_and_string_timestamps_and_pids(tmp_path: Path) -> None:
    """ts/dur may be ints or numeric strings; numeric string pids become ints, others stay."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": "12", "tid": 12, "ts": 5,
         "dur": "2.5"},
        {"ph": "X", "cat": "Trace", "name": "span", "pid": "Spans", "tid": "x", "ts": 1,
         "dur": 9},
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 3},
    ]  # fmt: skip
    path = tmp_path / "rank3.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_kineto(path)
    assert trace.rank == 3  # from the file name: no distributedInfo
    assert [(e.pid, e.ts_us, e.dur_us) for e in trace.events] == [
        (12, 5.0, 2.5),
        ("Spans", 1.0, 9.0),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b"\x00\x01garbage\xff", "not UTF-8"),
        (b"hello world", "not valid JSON"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1', "truncated JSON"),
        (b'{"schemaVersion": 1}', "no 'traceEvents' key"),
        (b'{"traceEvents": {}}', "'traceEvents' must be a list"),
        (b'{"traceEvents": [{"ph": "X", "name": "a"}]}', r"traceEvents\[0\]: 'X' event without"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": -2}]}', "'dur' must be a number >= 0"),
        (b'{"traceEvents": [], "distributedInfo": {"rank": "x"}}', "distributedInfo.rank"),
        (b'{"traceEvents": [], "distributedInfo": {"rank": 2, "world_size": 2}}', "not below"),
        (b"42", "top level is int"),
        (gzip.compress(b'{"traceEvents": []}', mtime=0)[:-12], "truncated or corrupt gzip"),
    ],
)
def test_bad_files_are_one_line_parse_errors(tmp_path: Path, content: bytes, message: str) -> None:
    """Garbage, empty, truncated and keyless files raise ParseError naming the file."""
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ParseError, match=message) as info:
        load_kineto(path)
    assert str(info.value).startswith(str(path) + ": ")
    assert "\n" not in str(info.value)


def test_missing_file_and_empty_directory(tmp_path: Path) -> None:
    """A missing path or a directory without trace files is a ParseError."""
    with pytest.raises(ParseError, match="no such file"):
        load_kineto(tmp_path / "nope.json")
    with pytest.raises(ParseError, match=r"no \*\.json or \*\.json\.gz trace files"):
        trace_files(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(b"{}"))
    (tmp_path / "a.pt.trace.json").write_text("{}")
    assert [p.name for p in trace_files(tmp_path)] == ["a.pt.trace.json", "b.json.gz"]
