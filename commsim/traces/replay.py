"""A captured trace as a replay workload: ``commsim replay trace_dir/ --topology ...``.

:class:`TraceWorkload` has the interface of :mod:`commsim.replay.step`'s workload specs
(``kind``, ``graph(network)``, ``extras(metrics)``), so :func:`commsim.replay.replay` times it
like any other workload. Its extras put the measured step next to the predicted one:
``measured_step_time_s`` (the step as captured), ``step_time_error_pct`` (predicted versus
measured, in percent), ``measured`` (the captured step's metrics, same keys as the replay's,
from :func:`commsim.traces.analysis.measured_metrics`), and where it came from (``trace``,
``trace_backend``, ``trace_steps``, ``trace_notes``).

>>> # r = replay_trace("traces/", "dgx-h100x2")
>>> # r.step_time_s, r.extra["measured_step_time_s"]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from commsim.replay.graph import StepGraph
from commsim.replay.metrics import StepMetrics
from commsim.replay.step import StepResult, WorkloadSpec, load_workload, replay
from commsim.topology.what_if import WhatIfSource
from commsim.traces.analysis import measured_metrics
from commsim.traces.graph import WAIT_SLACK_S, to_step_graph
from commsim.traces.kineto import is_trace_name
from commsim.traces.model import TraceModel
from commsim.traces.read import read_traces
from commsim.traces.window import Step, StepWindow, parse_step, step_window

if TYPE_CHECKING:
    from commsim.network import Network

KIND = "trace"


@dataclass(frozen=True, slots=True)
class TraceWorkload:
    """One captured step, ready to replay (build it with :func:`load_trace_workload`).

    Attributes
    ----------
    model
        The trace model.
    window
        The replayed step (:func:`commsim.traces.window.step_window`).
    step_graph
        The graph :func:`commsim.traces.graph.to_step_graph` built from them.
    source
        The path the traces came from.
    """

    kind: ClassVar[str] = KIND
    model: TraceModel
    window: StepWindow
    step_graph: StepGraph
    source: str = ""

    def graph(self, network: Network) -> StepGraph:
        """The step graph (the same on every network: only communication is simulated)."""
        return self.step_graph

    def measured(self) -> StepMetrics:
        """The captured step's own metrics."""
        return measured_metrics(self.model, window=self.window)

    def extras(self, metrics: StepMetrics) -> dict[str, object]:
        """Measured next to predicted (see the module docstring)."""
        measured = self.measured()
        step = measured.step_time_s
        error = (metrics.step_time_s - step) / step * 100 if step > 0 else None
        out: dict[str, object] = {
            "measured_step_time_s": step,
            "step_time_error_pct": error,
            "measured": measured.to_dict(),
            "trace": self.source,
            "trace_backend": self.model.backend,
            "trace_steps": list(self.window.steps),
        }
        if self.model.notes:
            out["trace_notes"] = list(self.model.notes)
        return out


#: A ``.json`` file smaller than this is read to tell a JSON workload from a trace.
_SMALL_JSON_BYTES = 1 << 20


def is_trace_path(path: object) -> bool:
    """Whether ``commsim replay PATH`` means a captured trace: a directory, or a ``.json`` or
    ``.json.gz`` file, unless it is a small JSON object with a workload ``kind`` and no
    ``traceEvents`` (YAML is a superset of JSON: such a file stays a workload, as before)."""
    if not isinstance(path, str | Path):
        return False
    p = Path(path)
    if p.is_dir():
        return True
    if not is_trace_name(p):
        return False
    if p.suffix.lower() == ".json" and p.is_file() and p.stat().st_size < _SMALL_JSON_BYTES:
        try:
            data = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return True  # let the trace reader say what is wrong with it
        return not (isinstance(data, dict) and "kind" in data and "traceEvents" not in data)
    return True


def load_trace_workload(
    path: str | Path | Sequence[str | Path] | TraceModel,
    step: Step | str = None,
    *,
    wait_slack_s: float = WAIT_SLACK_S,
) -> TraceWorkload:
    """Read traces (a directory of per-rank files, one file, a list of files, or a model) and
    build the workload of ``step`` (None: the last profiler step; N; ``"all"``)."""
    model = path if isinstance(path, TraceModel) else read_traces(path)
    source = (
        ""
        if isinstance(path, TraceModel)
        else (str(path) if isinstance(path, str | Path) else ", ".join(map(str, path)))
    )
    step = parse_step(step)
    window = step_window(model, step)
    graph = to_step_graph(model, wait_slack_s=wait_slack_s, window=window)
    return TraceWorkload(model=model, window=window, step_graph=graph, source=source)


def load_workload_or_trace(
    workload: WorkloadSpec | Mapping[str, Any] | str | Path, step: Step | str = None
) -> WorkloadSpec:
    """What ``commsim replay PATH`` (and a sweep's ``workloads:`` entry) means: captured traces
    where :func:`is_trace_path` says so (their ``step``), else
    :func:`commsim.replay.load_workload` (a spec, a mapping, a YAML file)."""
    if is_trace_path(workload):
        return load_trace_workload(workload, step)  # type: ignore[arg-type]
    return load_workload(workload)


def replay_trace(
    path: str | Path | Sequence[str | Path] | TraceModel,
    topology: Network | str | Path | Mapping[str, Any],
    step: Step | str = None,
    *,
    wait_slack_s: float = WAIT_SLACK_S,
    what_if: WhatIfSource | None = None,
) -> StepResult:
    """Replay one captured step on ``topology`` (a preset, a file, a mapping or a network;
    ``what_if``: on the machine a what-if file describes, as :func:`commsim.replay.replay`)."""
    return replay(load_trace_workload(path, step, wait_slack_s=wait_slack_s), topology,
                  what_if=what_if)
