"""Measured metrics of a captured step, from the trace alone (HolisticTraceAnalysis style).

:func:`measured_metrics` computes, per rank over the step's window (:mod:`.window`), the same
quantities that :mod:`commsim.replay.metrics` computes for a replayed step, so the two can be
compared key by key:

* ``compute_time_s``: length of the union of the rank's compute intervals (memory kernels,
  which HTA does not count as computation, excluded);
* ``comm_time_s``: length of the union of its communication calls' execution intervals (NCCL
  kernels; gloo runloop annotations);
* ``exposed_comm_s``: the part of that union not covered by compute; ``overlap_fraction`` =
  ``(comm - exposed) / comm``, which is HTA's comm/comp overlap (docs/traces.md:
  the time where both merged sets are busy over the merged communication time);
* ``idle_fraction``: ``(window - compute) / window``; ``step_time_s``: the window's length.

HTA computes these from GPU kernels only and so has nothing to say about CPU/gloo traces; here
the same definitions apply to the CPU lanes (main-thread ops, runloop annotations).

:func:`measured_frame` is the per-rank DataFrame. :func:`collective_times` measures each call
matched across ranks: the time from the last member's start to the last member's end, when
the call itself ran once everyone had joined; its first four columns are those of a
``commsim measure`` CSV, so a topology can be calibrated on the step's own collectives.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from commsim.replay.metrics import METRIC_KEYS, RankMetrics, StepMetrics, length, uncovered, union
from commsim.traces.comms import HTA_MEMORY
from commsim.traces.graph import match_calls
from commsim.traces.model import TraceModel
from commsim.traces.window import Step, StepWindow, step_window

if TYPE_CHECKING:
    import pandas as pd

#: Columns of :func:`measured_frame`: ``rank`` then :data:`commsim.replay.metrics.METRIC_KEYS`.
MEASURED_COLUMNS = ("rank", *METRIC_KEYS)


def _clip(intervals: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def measured_metrics(
    model: TraceModel, step: Step = None, window: StepWindow | None = None
) -> StepMetrics:
    """The captured step's metrics (see the module docstring); aggregates as in the replay."""
    window = window or step_window(model, step)
    ranks = []
    for rt in model.ranks:
        lo, hi = window.windows[rt.rank]
        if model.flavour == "gpu":
            lo, hi = window.spans[rt.rank]
        busy = union(
            _clip(
                [
                    (op.start_s, op.end_s)
                    for op in window.compute(rt)
                    if not HTA_MEMORY.match(op.name)
                ],
                lo,
                hi,
            )
        )
        talk = union(_clip([(c.start_s, c.end_s) for c in window.comms(rt)], lo, hi))
        compute_s, comm_s = length(busy), length(talk)
        exposed = uncovered(talk, busy)
        step_s = window.windows[rt.rank][1] - window.windows[rt.rank][0]
        ranks.append(
            RankMetrics(
                rank=rt.rank,
                step_time_s=step_s,
                compute_time_s=compute_s,
                comm_time_s=comm_s,
                exposed_comm_s=exposed,
                overlap_fraction=(comm_s - exposed) / comm_s if comm_s > 0 else 0.0,
                idle_fraction=max(0.0, (step_s - compute_s) / step_s) if step_s > 0 else 0.0,
            )
        )
    count = max(len(ranks), 1)
    total_comm = math.fsum(r.comm_time_s for r in ranks)
    hidden = math.fsum(r.comm_time_s - r.exposed_comm_s for r in ranks)
    return StepMetrics(
        step_time_s=window.measured_step_time_s,
        compute_time_s=math.fsum(r.compute_time_s for r in ranks) / count,
        comm_time_s=total_comm / count,
        exposed_comm_s=math.fsum(r.exposed_comm_s for r in ranks) / count,
        overlap_fraction=hidden / total_comm if total_comm > 0 else 0.0,
        idle_fraction=math.fsum(r.idle_fraction for r in ranks) / count,
        per_rank=tuple(ranks),
    )


def measured_frame(model: TraceModel, step: Step = None) -> pd.DataFrame:
    """One row per rank, columns :data:`MEASURED_COLUMNS` (seconds and fractions).

    ``step_time_s`` is the rank's window (its ``ProfilerStep`` span, or its trace's span);
    the other columns are defined in the module docstring.
    """
    import pandas as pd

    metrics = measured_metrics(model, step)
    rows = [[r.rank, *(getattr(r, k) for k in METRIC_KEYS)] for r in metrics.per_rank]
    return pd.DataFrame(rows, columns=list(MEASURED_COLUMNS))


#: Columns of :func:`collective_times`.
CALL_COLUMNS = (
    "collective",
    "ranks",
    "nbytes",
    "time_s",
    "pg",
    "index",
    "launch_s",
    "start_s",
    "end_s",
)


def collective_times(
    model: TraceModel, step: Step = None, window: StepWindow | None = None
) -> pd.DataFrame:
    """One row per call of the step matched across ranks, in launch order.

    Columns: ``collective`` (``all_reduce``, ..., ``send`` for a matched send/recv pair);
    ``ranks`` (members); ``nbytes`` (nccl-tests' size; P2P: the bytes sent); ``time_s``
    (``end_s - start_s``); ``pg`` and ``index`` (the call's process group and its order
    there); ``launch_s`` (the first member's launch); ``start_s`` (the last member's start:
    from then on everyone is in the call); ``end_s`` (the last member's end).
    """
    import pandas as pd

    window = window or step_window(model, step)
    calls, _ = match_calls(model, window)
    rows = []
    for call in calls:
        members = list(call.members.values())
        start = max(c.start_s for c in members)
        end = max(c.end_s for c in members)
        rows.append(
            (call.kind.value, len(call.group), call.nbytes, max(0.0, end - start), call.key,
             call.index, min(c.launch_s for c in members), start, end)
        )  # fmt: skip
    frame = pd.DataFrame(rows, columns=list(CALL_COLUMNS))
    return frame.sort_values("launch_s", kind="stable", ignore_index=True)
