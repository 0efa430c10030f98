"""Rules for CPU (gloo) traces: main-thread ops are compute, gloo runloop annotations are comms.

A gloo trace has no ``record_param_comms`` and no kernels (docs/traces.md). A
collective is a ``c10d::<op>_`` ``cpu_op`` on the calling thread (the enqueue, about 100 us: its
start is the **launch**) plus a ``gloo:<op>`` ``user_annotation`` on a ``pt_gloo_runloop``
thread (the execution: **start** and **end**). Each launch is matched to the earliest unmatched
execution of a compatible kind that starts after it (gloo runs ``_reduce_scatter_base_`` as
``gloo:all_reduce``); sizes come from the execution's ``Input Dims`` times its ``Input type``
(the ``c10d::`` op's ``TensorList`` arguments carry no dtype). gloo traces do not name the
process group of a call: every call is taken to be on the default group. P2P peers and
gather/scatter roots come from the ``c10d::`` op's ``Concrete Inputs``.

Compute is the **top-level** ``cpu_op`` events of the main thread (the thread with the
``ProfilerStep#`` annotations, else the one whose tid is the pid): an op nested in another
lies inside its parent's interval and is not counted again. Ops that only block
(``c10d::wait``, ``aten::wait``) are not compute.
"""

from __future__ import annotations

from collections import Counter

from commsim.traces.comms import CommKind, comm_kind
from commsim.traces.events import default_group, phases, seconds, span, steps, tensor_bytes
from commsim.traces.kineto import Event, KinetoTrace, Lane
from commsim.traces.model import CommCall, ComputeOp, RankTrace

#: Blocking ops: the thread waits in them, it does not compute.
WAIT_OPS = frozenset({"c10d::wait", "aten::wait", "c10d::barrier_wait", "Work.wait"})

#: ``Concrete Inputs`` index of the peer or root rank, per launch kind.
_PEER_INDEX = {
    CommKind.SEND: 2,
    CommKind.RECV: 2,
    CommKind.GATHER: 3,
    CommKind.SCATTER: 3,
}


def _runloop_tids(trace: KinetoTrace) -> set[Lane]:
    tids = {tid for (_, tid), name in trace.thread_names.items() if "gloo" in name.lower()}
    for e in trace.events:
        if e.cat == "user_annotation" and e.name.startswith("gloo:") and e.tid != e.pid:
            tids.add(e.tid)
    return tids


def main_thread(trace: KinetoTrace, exclude: set[Lane]) -> Lane | None:
    """The thread that runs the training loop."""
    step_tids = Counter(e.tid for e in trace.events if e.name.startswith("ProfilerStep#"))
    if step_tids:
        return step_tids.most_common(1)[0][0]
    busy: Counter[Lane] = Counter()
    for e in trace.events:
        if e.cat == "cpu_op" and isinstance(e.pid, int) and e.tid not in exclude:
            if e.tid == e.pid:
                return e.tid
            busy[e.tid] += int(e.dur_us)
    return busy.most_common(1)[0][0] if busy else None


def top_level(events: list[Event]) -> list[Event]:
    """The events not nested in an earlier one (sorted by start, longest first on ties)."""
    out: list[Event] = []
    end = float("-inf")
    for e in sorted(events, key=lambda e: (e.ts_us, -e.dur_us)):
        if e.ts_us >= end:
            out.append(e)
            end = e.end_us
        elif e.end_us > end:  # overlaps its predecessor without nesting: keep the remainder
            out.append(Event(e.name, e.cat, e.pid, e.tid, end, e.end_us - end, e.args))
            end = e.end_us
    return out


def _start(e: Event) -> float:
    return e.ts_us


def _compatible(launch: CommKind, execution: CommKind) -> bool:
    if launch is CommKind.REDUCE_SCATTER:
        return execution in (CommKind.REDUCE_SCATTER, CommKind.ALL_REDUCE)
    return launch is execution


def _peer(launch: Event, kind: CommKind, group: tuple[int, ...]) -> int | None:
    index = _PEER_INDEX.get(kind)
    concrete = launch.args.get("Concrete Inputs")
    if index is None or not isinstance(concrete, list) or index >= len(concrete):
        return None
    try:
        local = int(concrete[index])
    except (TypeError, ValueError):
        return None
    return group[local] if 0 <= local < len(group) else None


def _nbytes(kind: CommKind, launch: Event, execution: Event | None, group_size: int) -> int | None:
    gloo_types = execution.args.get("Input type", []) if execution else []
    gloo_types = gloo_types if isinstance(gloo_types, list) else []
    if execution is not None:
        got = tensor_bytes(execution.args.get("Input Dims"), gloo_types)
        if got is not None:
            return got * group_size if kind is CommKind.ALL_GATHER else got
    dims, types = launch.args.get("Input Dims"), launch.args.get("Input type")
    if kind in (CommKind.ALL_GATHER, CommKind.REDUCE_SCATTER) and isinstance(types, list):
        # _allgather_base_(output, input), _reduce_scatter_base_(output, input): the larger
        first = tensor_bytes(dims, types, gloo_types, index=0)
        second = tensor_bytes(dims, types, gloo_types, index=1)
        if first is not None or second is not None:
            return max(first or 0, second or 0)
    if kind is CommKind.BARRIER:
        return tensor_bytes(dims, types, gloo_types) or 0
    return tensor_bytes(dims, types, gloo_types, index=0)


def rank_trace(
    trace: KinetoTrace, rank: int, world: int, shift_us: float, notes: list[str]
) -> RankTrace:
    """The :class:`RankTrace` of one CPU trace (see the module docstring)."""
    runloops = _runloop_tids(trace)
    main = main_thread(trace, runloops)
    comms = _comms(trace, rank, world, shift_us, notes, runloops)
    compute = _compute(trace, main, shift_us)
    start, end = span(trace, shift_us)
    return RankTrace(
        rank=rank,
        source=trace.source,
        flavour="cpu",
        compute=tuple(compute),
        comms=tuple(sorted(comms, key=lambda c: c.launch_s)),
        steps=steps(trace, shift_us),
        start_s=start,
        end_s=end,
    )


def _comms(
    trace: KinetoTrace,
    rank: int,
    world: int,
    shift_us: float,
    notes: list[str],
    runloops: set[Lane],
) -> list[CommCall]:
    """Each ``c10d::`` launch, matched to the first later compatible ``gloo:`` annotation."""
    pg, group = default_group(trace, world)
    by_thread: dict[Lane, list[Event]] = {}
    for e in trace.events:
        if e.cat == "cpu_op" and e.name.startswith("c10d::") and e.tid not in runloops:
            if comm_kind(e.name) is not None:
                by_thread.setdefault(e.tid, []).append(e)
    # a c10d op calling another is one call
    launches = sorted((e for ops in by_thread.values() for e in top_level(ops)), key=_start)
    executions = sorted(
        (e for e in trace.events if e.name.startswith("gloo:") and comm_kind(e.name) is not None),
        key=_start,
    )
    used = [False] * len(executions)
    first_unused = 0
    comms: list[CommCall] = []
    for launch in launches:
        kind = comm_kind(launch.name)
        assert kind is not None
        match = None
        while first_unused < len(executions) and used[first_unused]:
            first_unused += 1
        for i in range(first_unused, len(executions)):
            execution = executions[i]
            if used[i] or execution.ts_us < launch.ts_us:
                continue
            found = comm_kind(execution.name)
            if found is not None and _compatible(kind, found):
                used[i], match = True, execution
                break
        if match is None:
            notes.append(
                f"rank {rank}: {launch.name} at {launch.ts_us:.3f} us has no gloo annotation; "
                "its own interval is used"
            )
        nbytes = _nbytes(kind, launch, match, len(group))
        if nbytes is None:
            notes.append(
                f"rank {rank}: size of {launch.name} unknown (record_shapes=False?); taken as 0"
            )
            nbytes = 0
        ran = match or launch
        comms.append(
            CommCall(
                kind=kind,
                nbytes=nbytes,
                group=group,
                pg=pg,
                lane=f"gloo:{ran.tid}",
                launch_s=seconds(launch.ts_us, shift_us),
                start_s=seconds(ran.ts_us, shift_us),
                end_s=seconds(ran.end_us, shift_us),
                name=launch.name,
                peer=_peer(launch, kind, group),
            )
        )
    if unmatched := used.count(False):
        notes.append(
            f"rank {rank}: {unmatched} gloo annotation(s) without a c10d launch in the trace "
            "(issued before profiling started?) are ignored"
        )
    return comms


def _compute(trace: KinetoTrace, main: Lane | None, shift_us: float) -> list[ComputeOp]:
    """The main thread's top-level ``cpu_op`` events (waits left out), each with its phase."""
    compute: list[ComputeOp] = []
    if main is None:
        return compute
    ops = [e for e in trace.events if e.tid == main and e.cat == "cpu_op"]
    ops = [op for op in top_level(ops) if op.name not in WAIT_OPS]
    for op, phase in zip(ops, phases(trace.events, main, [op.ts_us for op in ops]), strict=True):
        compute.append(
            ComputeOp(
                name=op.name,
                lane=f"cpu:{main}",
                start_s=seconds(op.ts_us, shift_us),
                end_s=seconds(op.end_us, shift_us),
                phase=phase,
                launch_s=seconds(op.ts_us, shift_us),
            )
        )
    return compute
