"""Captured-trace replay: PyTorch profiler (Kineto) traces of a distributed step, on any topology.

Parse -> trace model -> pure analyses -> DataFrames, then the step graph that
:mod:`commsim.replay` times on a network:

* :mod:`.kineto` reads one rank's trace file (JSON or ``.json.gz``) into a
  :class:`~.kineto.KinetoTrace`;
* :mod:`.model` (with the rules in :mod:`.gpu` for NCCL kernels and :mod:`.cpu` for gloo) builds
  the :class:`~.model.TraceModel`: per rank, compute intervals and communication calls with
  their kind, bytes, group, lane and times; :meth:`~.model.TraceModel.frame` is its DataFrame;
* :mod:`.window` picks the step (a ``ProfilerStep#N``, all of them, or the whole trace);
* :mod:`.analysis` measures the captured step's overlap, exposed communication and idle time,
  and each collective's own time;
* :mod:`.graph` rebuilds the step as a :class:`~commsim.replay.graph.StepGraph`;
* :mod:`.replay` makes it a workload: ``commsim replay trace_dir/ --topology ...``.

>>> # from commsim.traces import read_traces, replay_trace
>>> # model = read_traces("traces/")            # one file per rank
>>> # model.frame()                             # every compute interval and call
>>> # r = replay_trace(model, "dgx-h100x2")     # what if this step ran on that machine
>>> # r.step_time_s, r.extra["measured_step_time_s"]
"""

from commsim.traces.analysis import (
    CALL_COLUMNS,
    MEASURED_COLUMNS,
    collective_times,
    measured_frame,
    measured_metrics,
)
from commsim.traces.comms import CommKind, comm_kind, dtype_size
from commsim.traces.graph import WAIT_SLACK_S, to_step_graph
from commsim.traces.kineto import Event, KinetoTrace, ProcessGroup, load_kineto, trace_files
from commsim.traces.model import (
    FRAME_COLUMNS,
    CommCall,
    ComputeOp,
    RankTrace,
    StepSpan,
    TraceModel,
)
from commsim.traces.read import build_model, read_traces
from commsim.traces.replay import (
    TraceWorkload,
    is_trace_path,
    load_trace_workload,
    load_workload_or_trace,
    replay_trace,
)
from commsim.traces.window import StepWindow, parse_step, step_window

__all__ = [
    "CALL_COLUMNS",
    "FRAME_COLUMNS",
    "MEASURED_COLUMNS",
    "WAIT_SLACK_S",
    "CommCall",
    "CommKind",
    "ComputeOp",
    "Event",
    "KinetoTrace",
    "ProcessGroup",
    "RankTrace",
    "StepSpan",
    "StepWindow",
    "TraceModel",
    "TraceWorkload",
    "build_model",
    "collective_times",
    "comm_kind",
    "dtype_size",
    "is_trace_path",
    "load_kineto",
    "load_trace_workload",
    "load_workload_or_trace",
    "measured_frame",
    "measured_metrics",
    "parse_step",
    "read_traces",
    "replay_trace",
    "step_window",
    "to_step_graph",
    "trace_files",
]
