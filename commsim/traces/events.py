"""Helpers over one rank's Kineto events shared by the CPU and GPU rules.

Profiler steps, the rank's time span, process-group lookup, tensor bytes from ``Input Dims`` and
``Input type``, and the phase (forward/backward/optimizer) a CPU interval belongs to.

>>> tensor_bytes([[[524800]], [], []], ["TensorList", "", ""], ["float"])
2099200
>>> tensor_bytes([[2000], [1000]], ["float", "float"], index=0)
8000
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from commsim.traces.comms import dtype_size
from commsim.traces.kineto import Event, KinetoTrace
from commsim.traces.model import StepSpan

_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def seconds(ts_us: float, shift_us: float) -> float:
    """A file time (us) as seconds from the model's origin."""
    return (ts_us + shift_us) * 1e-6


def steps(trace: KinetoTrace, shift_us: float) -> tuple[StepSpan, ...]:
    """The host's ``ProfilerStep#N`` annotations, by number (the longest if a number repeats;
    their projections onto GPU streams are ignored)."""
    found: dict[int, Event] = {}
    for e in trace.events:
        match = _STEP.match(e.name)
        if match and isinstance(e.pid, int) and e.cat != "gpu_user_annotation":
            number = int(match.group(1))
            if number not in found or e.dur_us > found[number].dur_us:
                found[number] = e
    return tuple(
        StepSpan(n, seconds(e.ts_us, shift_us), seconds(e.end_us, shift_us))
        for n, e in sorted(found.items())
    )


def span(trace: KinetoTrace, shift_us: float) -> tuple[float, float]:
    """First start and last end of the rank's events (kineto's string-pid spans excluded)."""
    real = [e for e in trace.events if isinstance(e.pid, int)]
    if not real:
        return 0.0, 0.0
    return (
        seconds(min(e.ts_us for e in real), shift_us),
        seconds(max(e.end_us for e in real), shift_us),
    )


def default_group(trace: KinetoTrace, world: int) -> tuple[str, tuple[int, ...]]:
    """The default process group's name and ranks (``pg_config``'s ``default_pg``, else all)."""
    for pg in trace.process_groups:
        if pg.desc == "default_pg" or (pg.name == "0" and not pg.desc):
            return pg.name, pg.ranks or tuple(range(world))
    return "0", tuple(range(world))


def group_by_name(trace: KinetoTrace, name: str) -> tuple[int, ...]:
    """A process group's ranks from ``pg_config`` (empty when unknown)."""
    for pg in trace.process_groups:
        if pg.name == name:
            return pg.ranks
    return ()


def _shape_numel(shape: object) -> int | None:
    if isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape):
        return math.prod(shape)
    return None


def tensor_bytes(
    dims: object, types: object, fallback_types: Sequence[object] = (), index: int | None = None
) -> int | None:
    """Bytes of the tensor arguments described by ``Input Dims``/``Input type``.

    ``index`` picks one argument (else all tensor arguments are summed). A ``TensorList``
    argument's dims nest one level deeper and its dtype comes from ``fallback_types`` (the
    gloo annotation's ``Input type``). None when any needed dtype is unknown or nothing is
    a tensor.
    """
    if not isinstance(dims, list):
        return None
    types_list = types if isinstance(types, list) else []
    picks = range(len(dims)) if index is None else [index]
    total, seen = 0, False
    for i in picks:
        if i >= len(dims):
            return None
        kind = str(types_list[i]) if i < len(types_list) else ""
        if kind in ("TensorList", "GenericList"):
            shapes = dims[i] if isinstance(dims[i], list) else []
            dtypes = list(fallback_types) or [""]
        else:
            if dtype_size(kind) is None:
                continue  # not a tensor argument ('', Scalar, ScalarList, ...)
            shapes, dtypes = [dims[i]], [kind]
        for j, shape in enumerate(shapes):
            numel = _shape_numel(shape)
            size = dtype_size(dtypes[min(j, len(dtypes) - 1)])
            if numel is None or size is None:
                return None
            total += numel * size
            seen = True
    return total if seen else None


def phases(events: Sequence[Event], tid: object, times_us: Sequence[float]) -> list[str]:
    """The phase (forward, backward, optimizer or empty) at each of the sorted ``times_us``
    on thread ``tid``: the innermost phase span (annotation or autograd op) open then.
    """
    spans = sorted(
        (
            (e.ts_us, -e.dur_us, e.end_us, p)
            for e in events
            if e.tid == tid and (p := _phase_of(e.name))
        ),
    )
    out: list[str] = []
    stack: list[tuple[float, str]] = []  # (end, phase) of the open spans, innermost last
    i = 0
    for t in times_us:
        while i < len(spans) and spans[i][0] <= t:
            stack.append((spans[i][2], spans[i][3]))
            i += 1
        while stack and stack[-1][0] <= t:
            stack.pop()
        # a span that ended under a still-open inner one: drop it lazily as well
        live = [phase for end, phase in stack if end > t]
        out.append(live[-1] if live else "")
    return out


def _phase_of(name: str) -> str:
    if name.startswith("autograd::engine::evaluate_function") or name == "## backward ##":
        return "backward"
    if name.startswith("Optimizer.") or name == "## optimizer ##":
        return "optimizer"
    if name.endswith(".forward") or name in ("## forward ##", "forward"):
        return "forward"
    return ""
