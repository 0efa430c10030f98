"""Tests of commsim.export (transfers CSV, Perfetto trace) and commsim.table."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest

from commsim.collectives import Collective
from commsim.engine.des import simulate_des
from commsim.export import TraceKeep, trace_events, trace_size, write_trace, write_transfers_csv
from commsim.network import Device, Link, Network
from commsim.results import TRANSFER_COLUMNS, Result
from commsim.schedule import OpKind, ScheduleBuilder
from commsim.table import format_table
from commsim.trace_events import Slice, lanes, us


def _star_network() -> Network:
    """Three GPUs behind one switch: every transfer crosses two links, gpu->sw and sw->gpu."""
    devices = (
        Device("gpu0", "gpu"),
        Device("gpu1", "gpu"),
        Device("gpu2", "gpu"),
        Device("sw", "switch"),
    )
    links = []
    for gpu in range(3):
        links.append(Link(gpu, 3, 1e-6, 1e9))
        links.append(Link(3, gpu, 1e-6, 1e9))
    return Network("star3", devices, tuple(links), (0, 1, 2))


def _result() -> tuple[Result, Network]:
    """Rank 0 sends to ranks 1 and 2 at once (sharing its uplink), then 1 reduces into 2."""
    network = _star_network()
    b = ScheduleBuilder()
    a = b.add(0, 1, 0, 1000, OpKind.COPY)
    c = b.add(0, 2, 1000, 1000, OpKind.COPY)
    b.add(1, 2, 0, 1000, OpKind.REDUCE, [a, c])
    schedule = b.build(Collective.BROADCAST, "handmade", 3, 2000)
    timing = simulate_des(schedule, network)
    result = Result(
        collective=Collective.BROADCAST,
        algorithm="handmade",
        topology="star3",
        ranks=3,
        nbytes=2000,
        chunks=1,
        engine="des",
        time_s=timing.time_s,
        schedule=schedule,
        timing=timing,
    )
    return result, network


def test_transfers_csv_columns_and_time(tmp_path: Path) -> None:
    """The CSV has exactly the contract's columns, one row per transfer, max(end_s) == time."""
    result, _ = _result()
    path = write_transfers_csv(result, tmp_path / "t.csv")
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0].keys()) == TRANSFER_COLUMNS
    assert path.read_text().splitlines()[0] == "src,dst,start_s,end_s,nbytes,offset,op"
    assert len(rows) == 3
    assert max(float(r["end_s"]) for r in rows) == result.time_s
    assert [r["op"] for r in rows] == ["copy", "copy", "reduce"]
    assert [(int(r["offset"]), int(r["nbytes"])) for r in rows] == [
        (0, 1000),
        (1000, 1000),
        (0, 1000),
    ]


def test_transfers_csv_needs_des_engine(tmp_path: Path) -> None:
    """An analytic result has no transfers: asking for them is a clear ValueError."""
    result = Result(
        collective=Collective.ALL_REDUCE,
        algorithm="ring",
        topology="x",
        ranks=2,
        nbytes=8,
        chunks=1,
        engine="analytic",
        time_s=1.0,
    )
    with pytest.raises(ValueError, match="discrete-event"):
        write_transfers_csv(result, tmp_path / "t.csv")


def test_trace_layout() -> None:
    """A process per rank with send/recv threads, and a 'links' process naming each link."""
    result, network = _result()
    trace = trace_events(result, network)
    events = trace["traceEvents"]
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    procs = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert procs == {0: "rank 0 (gpu0)", 1: "rank 1 (gpu1)", 2: "rank 2 (gpu2)", 3: "links"}
    # rank 0 sends two transfers at once: two send lanes
    assert names[(0, 1)] == "send" and names[(0, 2)] == "send #2"
    assert "gpu0->sw" in names.values() and "sw->gpu2" in names.values()
    slices = [e for e in events if e["ph"] == "X"]
    assert {e["name"] for e in slices} == {
        "r0->r1 [0,1000) copy",
        "r0->r2 [1000,2000) copy",
        "r1->r2 [0,1000) reduce",
    }
    # each transfer: one send slice, one recv slice, one per link of its 2-hop route
    assert len(slices) == 3 * (2 + 2)
    assert trace["otherData"]["time_s"] == result.time_s


def test_trace_slices_valid_and_do_not_overlap() -> None:
    """Every X event has ts/dur/pid/tid, and slices on one (pid, tid) never overlap."""
    result, network = _result()
    events = trace_events(result, network)["traceEvents"]
    by_track: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e["ph"] != "X":
            continue
        assert {"ts", "dur", "pid", "tid", "name"} <= e.keys()
        assert e["dur"] >= 0
        by_track[(e["pid"], e["tid"])].append((e["ts"], e["dur"]))
    for spans in by_track.values():
        spans.sort()
        for (ts0, dur0), (ts1, _) in zip(spans, spans[1:], strict=False):
            assert round((ts0 + dur0) * 1000) <= round(ts1 * 1000)


def test_trace_file_is_json_and_deterministic(tmp_path: Path) -> None:
    """The trace file parses as JSON and two runs write byte-identical files."""
    first, network = _result()
    second, _ = _result()
    a = write_trace(first, tmp_path / "a.json", network).read_bytes()
    b = write_trace(second, tmp_path / "b.json", network).read_bytes()
    assert a == b
    assert json.loads(a)["displayTimeUnit"] == "ns"


def test_lanes_greedy() -> None:
    """Greedy lanes: back-to-back slices share a lane, overlapping ones get a new lane."""
    found = lanes([Slice(0, 10, 0), Slice(10, 20, 1), Slice(5, 15, 2), Slice(15, 30, 3)])
    assert [[s.index for s in lane] for lane in found] == [[0, 1], [2, 3]]


@pytest.mark.parametrize("ns", [0, 1, 999, 1001, 123_456_789, 10**13 + 7])
def test_us_round_trips_to_ns(ns: int) -> None:
    """Microsecond floats convert back to the exact ns both by truncation and by rounding."""
    assert int(us(ns) * 1000.0) == ns
    assert round(us(ns) * 1000.0) == ns


def test_table_rows() -> None:
    """The table has a header naming the run and one row per size with time in us, GB/s."""
    result, _ = _result()
    text = format_table([result, result], root=0)
    lines = text.splitlines()
    assert lines[0].startswith("# commsim run broadcast: topology star3, 3 ranks")
    assert "root 0" in lines[0]
    assert "time(us)" in text and "algbw(GB/s)" in text and "busbw(GB/s)" in text
    rows = [line for line in lines if not line.startswith("#")]
    assert len(rows) == 2
    fields = rows[0].split()
    assert fields[0] == "2000" and fields[1] == "handmade"
    assert float(fields[3]) == pytest.approx(result.time_s * 1e6, abs=0.005)
    assert lines[-1].startswith("# Avg bus bandwidth")


def test_table_doctest() -> None:
    """The examples in commsim.table's docstrings run and print what they show."""
    import doctest

    import commsim.table

    assert doctest.testmod(commsim.table).failed == 0


def test_trace_keeps_ranks_and_links() -> None:
    """``TraceKeep``: the transfers from or to some ranks, or the lanes of some links and
    the transfers crossing them; trace_size counts exactly the slices written."""
    result, network = _result()

    def slices(keep: TraceKeep | None) -> list[dict]:
        events = trace_events(result, network, keep)["traceEvents"]
        return [e for e in events if e["ph"] == "X"]

    every = slices(None)
    assert trace_size(result, network)[0] == len(every) == 12
    to_1 = slices(TraceKeep(ranks=frozenset({1})))  # r0->r1 and r1->r2
    assert {e["name"] for e in to_1} == {"r0->r1 [0,1000) copy", "r1->r2 [0,1000) reduce"}
    assert trace_size(result, network, TraceKeep(ranks=frozenset({1})))[0] == len(to_1) == 8
    into_2 = slices(TraceKeep(links="sw->gpu2"))  # the two transfers to rank 2, one link lane
    lanes_of = {e["cat"] for e in into_2}
    assert {e["name"] for e in into_2} == {"r0->r2 [1000,2000) copy", "r1->r2 [0,1000) reduce"}
    assert lanes_of == {"send", "recv", "link"}
    assert len([e for e in into_2 if e["cat"] == "link"]) == 2
    assert trace_size(result, network, TraceKeep(links="sw->gpu2"))[0] == len(into_2) == 6


def test_trace_size_estimates_the_file(tmp_path: Path) -> None:
    """The estimate is the written file's size within 10% on a real schedule (a ring of 16
    GPUs over two DGX H100 hosts), and keeping ranks shrinks both."""
    import commsim

    result = commsim.simulate("all_reduce", "dgx-h100x2", "1MiB", algorithm="ring").with_records()
    for keep in (None, TraceKeep(ranks=frozenset(range(4)))):
        path = write_trace(result, tmp_path / "t.json", result.network, keep)
        estimate = trace_size(result, result.network, keep)[1]
        assert abs(estimate - path.stat().st_size) < 0.1 * path.stat().st_size


def test_run_refuses_a_huge_trace_before_writing(tmp_path: Path, capsys) -> None:
    """``--trace-max-size``: one line naming the size and the ways to narrow it, exit 2, no
    file; ``--trace-ranks`` brings the same trace under the limit."""
    from commsim.cli import main

    out = tmp_path / "t.json"
    argv = ["run", "all_reduce", "-t", "dgx-h100x2", "-s", "1MiB", "-a", "ring",
            "--trace", str(out), "--trace-max-size", "100KiB"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--trace-ranks" in err[0] and "MB" in err[0]
    assert not out.exists()
    assert main([*argv, "--trace-ranks", "0"]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert all(0 in (e["args"]["src"], e["args"]["dst"]) for e in events if e["ph"] == "X")
