"""The step's Perfetto trace and Gantt chart."""

from __future__ import annotations

import json
from pathlib import Path

from matplotlib.figure import Figure

from commsim.replay import replay
from commsim.replay.plot import plot_step, save_step_plot
from commsim.replay.trace import step_trace_events, write_step_trace

TOPO = {"kind": "fully_connected", "ranks": 4, "link": {"latency": "1us", "bandwidth": "10GB/s"}}
FSDP = {
    "kind": "fsdp",
    "units": 3,
    "params_per_unit": "10M",
    "forward_time": "1ms",
    "backward_time": "3ms",
    "algorithm": "ring",
}


def test_trace_has_compute_and_comm_tracks_per_rank(tmp_path: Path) -> None:
    """One process per rank with compute and comm threads; slices on one thread never overlap;
    each collective appears once on each member rank; the file is deterministic."""
    r = replay(FSDP, TOPO)
    trace = step_trace_events(r)
    events = trace["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    for rank in range(4):
        assert (rank, "compute") in names and (rank, "comm") in names
    slices = [e for e in events if e["ph"] == "X"]
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in slices:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:], strict=False))
    collectives = len(r.tasks().query("kind == 'collective'"))
    assert sum(1 for e in slices if e["args"]["kind"] == "collective") == 4 * collectives
    a, b = write_step_trace(r, tmp_path / "a.json"), write_step_trace(r, tmp_path / "b.json")
    assert a.read_bytes() == b.read_bytes()
    assert json.loads(a.read_text())["otherData"]["workload"] == "fsdp"


def test_plot_returns_a_figure(tmp_path: Path) -> None:
    """plot_step returns a matplotlib Figure with one row per rank; save_step_plot writes a PNG."""
    r = replay(FSDP, TOPO)
    fig = plot_step(r)
    assert isinstance(fig, Figure)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [f"rank {i}" for i in range(4)]
    path = tmp_path / "step.png"
    save_step_plot(r, str(path))
    assert path.read_bytes()[:4] == b"\x89PNG"
