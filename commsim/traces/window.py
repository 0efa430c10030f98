"""Which part of a trace is "the step": one ``ProfilerStep#N``, all of them, or the whole trace.

:func:`step_window` picks, per rank, the time window that the replay rebuilds and whose length
is the **measured** step time. ``step`` is

* ``None`` (default): the last ``ProfilerStep#`` every rank has (steady state), or the whole
  trace when there is none;
* an int ``N``: ``ProfilerStep#N`` (an error listing the steps there are when it is missing);
* ``"all"``: from the first common profiler step's start to the last one's end (the whole
  trace when there is none); the replayed time then covers every step.

Work belongs to the window when it was *launched* in it (a GPU kernel by its runtime call), so
a collective issued in a step but finishing after it still counts for that step. On a GPU
trace the rebuilt window spans that work's kernels, from the first start to the last end; on a
CPU trace it is the step annotation itself (the host time before the first op and after the
last one is part of the step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from commsim.errors import SpecError
from commsim.traces.model import CommCall, ComputeOp, RankTrace, TraceModel

Step = int | str | None
_Item = TypeVar("_Item", ComputeOp, CommCall)


@dataclass(frozen=True, slots=True)
class StepWindow:
    """The replayed part of a trace.

    Attributes
    ----------
    steps
        The ``ProfilerStep`` numbers covered (empty: the whole trace).
    windows
        Per rank, ``(start_s, end_s)`` of the step on the model's clock (the annotation, or the
        whole trace): work launched in it belongs to the step, and its length is the measured
        step time.
    spans
        Per rank, the part of the timeline the replay rebuilds: the window itself on a CPU
        trace; on a GPU trace, from the first start to the last end of the step's kernels.
    """

    steps: tuple[int, ...]
    windows: tuple[tuple[float, float], ...]
    spans: tuple[tuple[float, float], ...]

    @property
    def measured_step_time_s(self) -> float:
        """The longest rank's window: the measured counterpart of a replayed step time."""
        return max((end - start for start, end in self.windows), default=0.0)

    def compute(self, rt: RankTrace) -> list[ComputeOp]:
        """The rank's compute launched in its window."""
        return _launched(rt.compute, self.windows[rt.rank])

    def comms(self, rt: RankTrace) -> list[CommCall]:
        """The rank's calls launched in its window, in launch order."""
        return _launched(rt.comms, self.windows[rt.rank])


def _launched(items: Sequence[_Item], window: tuple[float, float]) -> list[_Item]:
    start, end = window
    return [
        x for x in items if start <= (x.start_s if math.isnan(x.launch_s) else x.launch_s) < end
    ]


def parse_step(value: object) -> Step:
    """``None``, ``"all"``, ``"last"`` (None) or a step number, from a flag or an argument."""
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return value  # type: ignore[return-value]
    text = str(value).strip().lower()
    if text == "all":
        return "all"
    if text in ("last", ""):
        return None
    try:
        return int(text)
    except ValueError:
        raise SpecError(
            f"--step: expected a ProfilerStep number, 'last' or 'all', got {value!r}"
        ) from None


def step_window(model: TraceModel, step: Step = None) -> StepWindow:
    """The window of ``step`` on every rank (see the module docstring)."""
    step = parse_step(step)
    numbers = model.step_numbers
    if step is None and numbers:
        chosen: tuple[int, ...] = (numbers[-1],)
    elif step == "all" or step is None:
        chosen = numbers
    else:
        if step not in numbers:
            have = ", ".join(map(str, numbers)) or "none"
            raise SpecError(f"--step {step}: no ProfilerStep#{step} on every rank (steps: {have})")
        chosen = (int(step),)
    windows, spans = [], []
    for rt in model.ranks:
        marks = [s for s in rt.steps if s.number in chosen]
        if marks:
            window = (min(s.start_s for s in marks), max(s.end_s for s in marks))
        else:
            window = (rt.start_s, math.nextafter(rt.end_s, math.inf))  # launches at the end too
        windows.append(window)
        span = window
        if model.flavour == "gpu":
            work: list[ComputeOp | CommCall] = [*_launched(rt.compute, window)]
            work += _launched(rt.comms, window)
            if work:
                span = (min(w.start_s for w in work), max(w.end_s for w in work))
        spans.append(span)
    return StepWindow(chosen, tuple(windows), tuple(spans))
