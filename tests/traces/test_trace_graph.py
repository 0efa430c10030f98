"""Rebuilding a captured step as a step graph, and replaying it on topologies."""

from __future__ import annotations

from pathlib import Path

import pytest
from _synthetic import NELEMS, comm_args, gloo_rank, nccl_rank, write_ranks

from commsim.api import simulate
from commsim.errors import ParseError, SpecError
from commsim.replay.graph import TaskKind
from commsim.traces import (
    load_trace_workload,
    load_workload_or_trace,
    measured_metrics,
    read_traces,
    replay_trace,
    step_window,
    to_step_graph,
)

#: All-reduce pinned to ring so that the expected time is one `commsim run`.
TOPOLOGY = {
    "kind": "switch",
    "ranks": 2,
    "link": {"latency": "10us", "bandwidth": "10GB/s"},
    "algorithms": {"all_reduce": "ring"},
}


def _ring(nbytes: int, topology: dict = TOPOLOGY) -> float:
    return simulate("all_reduce", topology, nbytes, algorithm="ring").time_s


@pytest.fixture
def nccl_dir(tmp_path: Path) -> Path:
    return write_ranks(tmp_path / "nccl", [nccl_rank(r) for r in range(2)])


@pytest.fixture
def gloo_dir(tmp_path: Path) -> Path:
    return write_ranks(tmp_path / "gloo", [gloo_rank(r) for r in range(2)])


def test_nccl_step_graph(nccl_dir: Path) -> None:
    """Per rank: k1 -> k2 -> all_reduce (after k2, the compute before it) -> k3, which waited
    for the all_reduce (it was queued and started 20 us after its end), so k3 counts 120 us:
    its 100 us plus the 20 us after the end, not the wait."""
    graph = to_step_graph(read_traces(nccl_dir))
    names = [(t.name, t.kind.value, t.ranks, t.stream) for t in graph.tasks]
    assert names == [
        ("sm80_xmma_gemm_k1", "compute", (0,), "compute"),
        ("sm80_xmma_gemm_k2", "compute", (0,), "compute"),
        ("sm80_xmma_gemm_k1", "compute", (1,), "compute"),
        ("sm80_xmma_gemm_k2", "compute", (1,), "compute"),
        ("all_reduce #0", "collective", (0, 1), "comm:0"),
        ("elementwise_k3", "compute", (1,), "compute"),
        ("elementwise_k3", "compute", (0,), "compute"),
    ]
    assert graph.tasks[4].deps == (1, 3)  # both ranks' k2
    assert graph.tasks[4].nbytes == 4 * NELEMS
    assert 4 in graph.tasks[5].deps and 4 in graph.tasks[6].deps
    assert [round(t.duration_s * 1e6, 6) for t in graph.tasks] == [200, 200, 200, 200, 0, 120, 120]


def test_nccl_replay_times(nccl_dir: Path) -> None:
    """Replayed step = k1 + k2 + the all_reduce on the topology + k3's 120 us, exactly; the
    measured step is the ProfilerStep#5 span (1 ms)."""
    result = replay_trace(nccl_dir, TOPOLOGY)
    assert result.step_time_s == pytest.approx(400e-6 + _ring(4 * NELEMS) + 120e-6, rel=1e-12)
    assert result.extra["measured_step_time_s"] == pytest.approx(1e-3)
    assert result.extra["trace_steps"] == [5]
    error = (result.step_time_s - 1e-3) / 1e-3 * 100
    assert result.extra["step_time_error_pct"] == pytest.approx(error)
    slower = dict(TOPOLOGY, link={"latency": "10us", "bandwidth": "1GB/s"})
    assert replay_trace(nccl_dir, slower).step_time_s == pytest.approx(
        400e-6 + _ring(4 * NELEMS, slower) + 120e-6, rel=1e-12
    )


def test_gloo_step_graph_splits_at_launch_and_waits(gloo_dir: Path) -> None:
    """gloo: the op that launches the all_reduce is split at the launch (the all_reduce
    depends on the first part only); copy_bucket_to_grad, which started 10 us after the
    all_reduce ended, depends on it; idle host time before ops and after the last one counts
    (the step lasts its 2 ms annotation), the waiting does not."""
    graph = to_step_graph(read_traces(gloo_dir))
    rank0 = [t for t in graph.tasks if t.ranks == (0,)]
    assert [(t.name[:22], round(t.duration_s * 1e6, 6)) for t in rank0] == [
        ("aten::linear", 250),  # 50 idle + 200
        ("autograd::engine::eval", 150),  # 50 idle + 100 up to the launch
        ("autograd::engine::eval", 300),  # the rest, after the launch
        ("torch.distributed.ddp.", 100),  # 10 after the all_reduce's end + 90
        ("aten::add_", 300),  # 100 idle + 200
        ("host", 100),  # after the last op, up to the step's end
    ]
    (ar,) = [i for i, t in enumerate(graph.tasks) if t.kind is TaskKind.COLLECTIVE]
    assert graph.tasks[ar].stream == "comm:0:0"
    split = [i for i, t in enumerate(graph.tasks) if t.ranks == (0,)][1]
    assert split in graph.tasks[ar].deps
    copy = [i for i, t in enumerate(graph.tasks) if t.name.startswith("torch.distributed")]
    assert all(ar in graph.tasks[i].deps for i in copy)


def test_gloo_replay_is_compute_chain_plus_exposed_all_reduce(gloo_dir: Path) -> None:
    """The replayed gloo step is max(launch + all_reduce, end of the launching op) plus the
    500 us after it, on a fast network (hidden) and on a slow one (exposed)."""
    fast = replay_trace(gloo_dir, TOPOLOGY)
    t = _ring(2 << 20)
    # launch at 400; the all_reduce ends at 400 + t; the launching op's rest ends at 700
    expected = 400e-6 + max(t, 300e-6) + 100e-6 + 300e-6 + 100e-6
    assert fast.step_time_s == pytest.approx(expected, rel=1e-12)
    # a link that makes the ring all-reduce of 2 MiB take 1100 us: wait from 700 to 1500
    bandwidth = (2 << 20) / (1100e-6 - 2 * 10e-6)
    slow = dict(TOPOLOGY, link={"latency": "10us", "bandwidth": f"{bandwidth!r}B/s"})
    t_slow = _ring(2 << 20, slow)
    assert replay_trace(gloo_dir, slow).step_time_s == pytest.approx(
        400e-6 + t_slow + 100e-6 + 300e-6 + 100e-6, rel=1e-12
    )


def test_measured_metrics_are_hta_overlap(gloo_dir: Path, nccl_dir: Path) -> None:
    """Measured: gloo all_reduce [460, 1500] under compute [460, 700]: 240 of 1040 us hidden;
    compute 200 + 400 + 90 + 200 = 890 us of the 2 ms step. NCCL: nothing overlaps."""
    gloo = measured_metrics(read_traces(gloo_dir))
    assert gloo.comm_time_s == pytest.approx(1040e-6)
    assert gloo.exposed_comm_s == pytest.approx(800e-6)
    assert gloo.overlap_fraction == pytest.approx(240 / 1040)
    assert gloo.compute_time_s == pytest.approx(890e-6)
    assert gloo.idle_fraction == pytest.approx(1 - 890 / 2000)
    assert gloo.step_time_s == pytest.approx(2e-3)
    nccl = measured_metrics(read_traces(nccl_dir))
    assert (nccl.overlap_fraction, nccl.comm_time_s) == (0.0, pytest.approx(280e-6))
    assert nccl.compute_time_s == pytest.approx(500e-6)


def test_process_groups_are_matched_separately(tmp_path: Path) -> None:
    """Calls on two process groups become two collectives on two comm streams."""
    traces = []
    for rank in range(2):
        trace = nccl_rank(rank)
        events = trace["traceEvents"]
        kernel = next(e for e in events if e["name"].startswith("ncclDev"))
        other = dict(kernel, tid=21, ts=kernel["ts"] + 300, dur=10.0)
        other["args"] = dict(kernel["args"], stream=21, **comm_args(pg="1", n_in=8, n_out=8))
        other["args"].pop("correlation")
        events.append(other)
        traces.append(trace)
    graph = to_step_graph(read_traces(write_ranks(tmp_path, traces)))
    colls = [(t.name, t.stream, t.nbytes) for t in graph.tasks if t.kind is TaskKind.COLLECTIVE]
    assert colls == [("all_reduce #0", "comm:0", 4 * NELEMS), ("all_reduce #0 pg 1", "comm:1", 32)]


def test_ranks_that_do_not_line_up_are_errors(tmp_path: Path) -> None:
    """A collective only one rank launched, or different kinds at the same position."""
    one = nccl_rank(1)
    one["traceEvents"] = [e for e in one["traceEvents"] if not e["name"].startswith("ncclDev")]
    with pytest.raises(ParseError, match=r"rank\(s\) 1 did not launch it"):
        to_step_graph(read_traces(write_ranks(tmp_path / "a", [nccl_rank(0), one])))
    other = nccl_rank(1, params=comm_args("broadcast"))
    with pytest.raises(ParseError, match="do not line up"):
        to_step_graph(read_traces(write_ranks(tmp_path / "b", [nccl_rank(0), other])))


def test_step_selection(tmp_path: Path, gloo_dir: Path) -> None:
    """Default: the last ProfilerStep; N: that one; all: every step; a missing N is an error;
    without ProfilerStep annotations the whole trace is the step."""
    model = read_traces(gloo_dir)
    assert step_window(model).steps == (2,)
    assert step_window(model, "all").steps == (2,)
    assert step_window(model, "2").measured_step_time_s == pytest.approx(2e-3)
    with pytest.raises(SpecError, match=r"--step 7: no ProfilerStep#7 on every rank \(steps: 2\)"):
        step_window(model, 7)
    with pytest.raises(SpecError, match="--step"):
        step_window(model, "first")
    bare = []
    for rank in range(2):
        trace = gloo_rank(rank)
        trace["traceEvents"] = [
            e for e in trace["traceEvents"] if not e["name"].startswith("ProfilerStep")
        ]
        bare.append(trace)
    window = step_window(read_traces(write_ranks(tmp_path / "bare", bare)))
    assert window.steps == ()
    assert window.measured_step_time_s == pytest.approx(1910e-6 - 40e-6)  # first to last event


def test_workload_interface(gloo_dir: Path) -> None:
    """A trace workload replays through commsim.replay.replay like a YAML workload; its JSON
    has the contract keys, then the measured step next to the predicted one."""
    from commsim.replay import replay

    result = replay(load_trace_workload(gloo_dir, "all"), TOPOLOGY)
    out = result.to_dict()
    for key in (
        "step_time_s", "compute_time_s", "comm_time_s", "exposed_comm_s", "overlap_fraction",
        "idle_fraction", "per_rank", "measured_step_time_s", "step_time_error_pct", "measured",
    ):  # fmt: skip
        assert key in out
    assert out["workload"] == "trace"
    assert set(out["measured"]) >= {"step_time_s", "overlap_fraction", "per_rank"}
    assert len(result.tasks()) == len(result.graph.tasks)
    # a path works through the trace-aware loader; commsim.replay.replay (below commsim.traces)
    # refuses it with a message naming the way
    path = str(gloo_dir)
    assert replay(load_workload_or_trace(path), TOPOLOGY).step_time_s == result.step_time_s
    with pytest.raises(SpecError, match="commsim.traces.replay_trace"):
        replay(path, TOPOLOGY)
