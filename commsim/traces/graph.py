"""Rebuild a captured step as a :class:`~commsim.replay.graph.StepGraph` that any topology can time.

:func:`to_step_graph` keeps what the trace measured about compute and lets the simulator decide
communication. Per rank, over the step's span (:mod:`.window`):

* **Compute tasks**, in trace order on the rank's ``compute`` stream, one per compute interval
  (concurrent GPU kernels on several streams are first merged into one busy interval, as HTA
  does). Each task lasts its interval **plus the idle time before it** (Python, launch
  overhead, data loading: host work that the same program would do again), except the part of
  that idle time spent waiting for communication (below). A CPU op that launches a collective
  is split at the launch.
* **Communication tasks**: calls are matched across ranks by their order within each process
  group (P2P sends and receives by order per (source, destination) pair), checked to agree on
  kind and group (the largest size wins), and become one collective task of the call's bytes
  among the group's ranks, on the group's communication stream: ``comm:<pg>`` for NCCL (one
  stream per group), or ``comm:<pg>:<i>`` for gloo, whose calls round-robin over the group's
  runloop threads (as many streams as the trace shows threads). The five collectives and
  barrier (a 0- or 1-byte all_reduce) are simulated by the topology's algorithms; all_to_all,
  gather and scatter become point-to-point sends between a gate and a join on each member's
  stream.
* **Dependencies from the trace order**: a call depends on the compute task before its launch
  on every member (GPU: the last compute that ended before the NCCL kernel began). Compute
  depends on a call when the rank *waited* for it: the call ended while the compute lane was
  idle and the next compute started soon after, at most ``wait_slack_s`` or a quarter of the
  time the lane had been idle before the end (:data:`WAIT_SLACK_FRACTION`) later. That waiting
  time is not compute; what is left of the idle time after the call's end is.

The graph is then a pure function of the model: a faster network shortens the waits, a slower
one lengthens them, and compute stays as measured.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from commsim.errors import ParseError
from commsim.replay.graph import GraphBuilder, StepGraph
from commsim.traces.comms import CommKind
from commsim.traces.model import CommCall, ComputeOp, TraceModel
from commsim.traces.window import Step, StepWindow, step_window

#: A compute waited for the calls that ended while its lane was idle if it started at most
#: this long after the last of them ended...
WAIT_SLACK_S = 200e-6
#: ... or at most this fraction of the time the lane had been idle before that end (a busy
#: host wakes a blocked thread late: 0.24 ms after a 5.4 ms wait on a 2-core machine).
WAIT_SLACK_FRACTION = 0.25


@dataclass(slots=True)
class _Block:
    """A compute task to add: its interval, what it waited for, the time it counts."""

    name: str
    phase: str
    start_s: float
    end_s: float
    duration_s: float = 0.0
    waits: list[int] = field(default_factory=list)  # global call ids


@dataclass(slots=True)
class MatchedCall:
    """A call matched across ranks: what it does, who takes part, each member's own record.

    ``key`` is the process group's name, ``index`` the call's order in it (P2P: in its
    (source, destination) pair); ``stream`` the replay stream it is queued on. ``deps`` and
    ``done`` are filled while the graph is built.
    """

    key: str
    index: int
    kind: CommKind
    nbytes: int
    group: tuple[int, ...]
    stream: str
    peer: int | None
    members: dict[int, CommCall]
    deps: dict[int, int | None] = field(default_factory=dict)  # rank -> compute task index
    done: dict[int, int] = field(default_factory=dict)  # rank -> task whose end is the end


def _merge(ops: Sequence[ComputeOp], split_at: Sequence[float]) -> list[_Block]:
    """Overlapping intervals merged (HTA); then split where a launch falls inside one."""
    blocks: list[_Block] = []
    for op in sorted(ops, key=lambda o: (o.start_s, -o.end_s)):
        if blocks and op.start_s < blocks[-1].end_s:
            blocks[-1].end_s = max(blocks[-1].end_s, op.end_s)
        else:
            blocks.append(_Block(op.name, op.phase, op.start_s, op.end_s))
    cuts = sorted(split_at)
    out: list[_Block] = []
    j = 0
    for block in blocks:
        while j < len(cuts) and cuts[j] <= block.start_s:
            j += 1
        start = block.start_s
        while j < len(cuts) and cuts[j] < block.end_s:
            out.append(_Block(block.name, block.phase, start, cuts[j]))
            start = cuts[j]
            j += 1
        out.append(_Block(block.name, block.phase, start, block.end_s))
    return out


def _waits(
    blocks: list[_Block], calls: list[tuple[float, int]], begin: float, slack: float
) -> None:
    """Fill each block's duration and the calls it waited for (``calls``: (end, id), sorted)."""
    previous, k = begin, 0
    for block in blocks:
        while k < len(calls) and calls[k][0] <= previous:
            k += 1
        ended = []
        while k < len(calls) and calls[k][0] <= block.start_s:
            ended.append(calls[k])
            k += 1
        resume = previous
        if ended and block.start_s - ended[-1][0] <= max(
            slack, WAIT_SLACK_FRACTION * (ended[-1][0] - previous)
        ):
            block.waits = [cid for _, cid in ended]
            resume = ended[-1][0]
        block.duration_s = block.end_s - resume
        previous = block.end_s


def _lane_counts(model: TraceModel, window: StepWindow) -> dict[str, int]:
    """Per process group, how many threads/streams its calls ran on (most over ranks)."""
    lanes: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for rt in model.ranks:
        for call in window.comms(rt):
            lanes[call.pg][rt.rank].add(call.lane)
    return {pg: max(len(s) for s in per.values()) for pg, per in lanes.items()}


def match_calls(
    model: TraceModel, window: StepWindow
) -> tuple[list[MatchedCall], list[list[tuple[CommCall, int]]]]:
    """The step's calls matched across ranks, and per rank its (call, index into the first
    list) in launch order. ParseError when the ranks' calls do not line up."""
    gloo = model.flavour == "cpu"
    lanes = _lane_counts(model, window) if gloo else {}
    queues: dict[tuple[object, int], list[int]] = defaultdict(list)
    calls: list[MatchedCall] = []
    per_rank: list[list[tuple[CommCall, int]]] = []
    seen: dict[tuple[int, object], int] = defaultdict(int)
    for rt in model.ranks:
        mine = []
        for call in window.comms(rt):
            pair: tuple[int, int] | None = None
            if call.kind.p2p:
                if call.peer is None:
                    raise ParseError(f"rank {rt.rank}: {call.name} has no peer rank in the trace")
                send = call.kind is CommKind.SEND
                pair = (rt.rank, call.peer) if send else (call.peer, rt.rank)
            key = (call.pg, pair)
            n = seen[(rt.rank, key)]
            seen[(rt.rank, key)] += 1
            queue = queues[(key, n)]
            if not queue:
                group: tuple[int, ...]
                if pair is not None:
                    stream, group, kind = f"p2p:{call.pg}", pair, CommKind.SEND
                else:
                    count = lanes.get(call.pg, 1)
                    stream = f"comm:{call.pg}:{n % count}" if gloo else f"comm:{call.pg}"
                    group, kind = call.group, call.kind
                calls.append(
                    MatchedCall(call.pg, n, kind, call.nbytes, group, stream, call.peer, {})
                )
                queue.append(len(calls) - 1)
            cid = queue[0]
            _join(calls[cid], rt.rank, call)
            mine.append((call, cid))
        per_rank.append(mine)
    for c in calls:
        missing = [r for r in c.group if r not in c.members]
        if missing:
            what = f"{c.kind.value} #{c.index} of process group {c.key!r}"
            raise ParseError(
                f"{what}: rank(s) {', '.join(map(str, missing))} did not launch it in the "
                "replayed step (traces of different steps, or a call outside the step?)"
            )
    return calls, per_rank


def _join(call: MatchedCall, rank: int, mine: CommCall) -> None:
    if rank not in call.group:
        raise ParseError(
            f"rank {rank}: {mine.kind.value} #{call.index} of process group {call.key!r} "
            f"is in group {list(call.group)}, which rank {rank} is not part of"
        )
    if call.members and not call.kind.p2p:
        first = next(iter(call.members.values()))
        if first.kind is not mine.kind or first.group != mine.group:
            raise ParseError(
                f"call #{call.index} of process group {call.key!r}: rank {rank} launched "
                f"{mine.kind.value} on {list(mine.group)}, another rank {first.kind.value} on "
                f"{list(first.group)}: the ranks' traces do not line up"
            )
    call.members[rank] = mine
    call.nbytes = max(call.nbytes, mine.nbytes)


def _add_call(b: GraphBuilder, call: MatchedCall) -> None:
    """Add the call's tasks; fill ``call.done`` with each rank's completion task."""
    deps = {d for d in call.deps.values() if d is not None}
    name = f"{call.kind.value} #{call.index}" + (f" pg {call.key}" if call.key != "0" else "")
    collective = call.kind.collective
    if call.kind is CommKind.SEND:
        src, dst = call.group
        task = b.send(src, dst, call.nbytes, name=name, phase="comm", deps=deps, stream=call.stream)
        call.done = {src: task, dst: task}
        return
    if collective is not None:
        task = b.collective(call.group, collective, call.nbytes, name=name, phase="comm",
                            deps=deps, stream=call.stream)  # fmt: skip
        call.done = {r: task for r in call.group}
        return
    # all_to_all, gather, scatter: point-to-point sends between a gate and a join per member
    gates = [b.compute(r, 0.0, name=name, phase="comm", deps=deps, stream=call.stream)
             for r in call.group]  # fmt: skip
    p = len(call.group)
    if call.kind is CommKind.ALL_TO_ALL:
        pairs = [(s, d, call.nbytes // p) for s in call.group for d in call.group if s != d]
    else:
        root = call.group[0] if call.peer is None else call.peer
        pairs = [
            (r, root, call.nbytes) if call.kind is CommKind.GATHER else (root, r, call.nbytes)
            for r in call.group
            if r != root
        ]
    sends: dict[int, list[int]] = defaultdict(list)
    for s, d, n in pairs:
        task = b.send(s, d, n, name=name, phase="comm", deps=gates)
        sends[s].append(task)
        sends[d].append(task)
    call.done = {
        r: b.compute(r, 0.0, name=name, phase="comm", deps=sends[r], stream=call.stream)
        for r in call.group
    }


def to_step_graph(
    model: TraceModel,
    step: Step = None,
    *,
    wait_slack_s: float = WAIT_SLACK_S,
    window: StepWindow | None = None,
) -> StepGraph:
    """The step graph of one captured step (see the module docstring).

    Parameters
    ----------
    model
        The trace model (:func:`commsim.traces.read_traces`).
    step
        ``None`` (the last profiler step), a ``ProfilerStep`` number, or ``"all"``
        (:func:`commsim.traces.window.step_window`).
    wait_slack_s
        Delay from a call's end to the next compute within which that compute counts as
        having waited for it (longer delays count when short against the idle time before).
    window
        The step's window when already computed (then ``step`` is ignored).
    """
    if not (wait_slack_s >= 0 and math.isfinite(wait_slack_s)):
        raise ValueError(f"wait_slack_s must be a finite number >= 0, got {wait_slack_s!r}")
    window = window or step_window(model, step)
    calls, per_rank = match_calls(model, window)
    gpu = model.flavour == "gpu"
    pieces = [
        _rank_pieces(model, window, rt.rank, mine, gpu, wait_slack_s)
        for rt, mine in zip(model.ranks, per_rank, strict=True)
    ]
    return _assemble(model.world_size, pieces, calls)


def _rank_pieces(
    model: TraceModel,
    window: StepWindow,
    rank: int,
    mine: list[tuple[CommCall, int]],
    gpu: bool,
    slack: float,
) -> list[_Block | int]:
    """One rank's compute blocks and launches (call ids) in trace order."""
    rt = model.ranks[rank]
    begin, end = window.spans[rank]
    anchors = [(c.start_s if gpu else c.launch_s, cid) for c, cid in mine]
    blocks = _merge(
        [op for op in window.compute(rt) if op.start_s < end],
        [] if gpu else [a for a, _ in anchors],
    )
    for block in blocks:
        block.end_s = min(block.end_s, end)
    if not gpu:  # the host time after the last op is part of the step
        blocks.append(_Block("host", "", end, end))
    _waits(blocks, sorted((c.end_s, cid) for c, cid in mine), begin, slack)
    if not gpu and blocks[-1].duration_s <= 0 and not blocks[-1].waits:
        blocks.pop()
    order: list[tuple[float, int, _Block | int]] = [(blk.end_s, 0, blk) for blk in blocks]
    order += [(at, 1, cid) for at, cid in anchors]  # a launch after the block ending there
    order.sort(key=lambda x: (x[0], x[1]))
    return [item for _, _, item in order]


def _assemble(ranks: int, pieces: list[list[_Block | int]], calls: list[MatchedCall]) -> StepGraph:
    """Add every rank's pieces in an order the builder accepts: a launch records the rank's
    last compute (the call is added once every member has launched it); a block waits until
    the calls it depends on are added."""
    b = GraphBuilder(ranks)
    cursor = [0] * ranks
    last: list[int | None] = [None] * ranks
    remaining = sum(len(p) for p in pieces)
    while remaining:
        progressed = False
        for rank, items in enumerate(pieces):
            while cursor[rank] < len(items):
                item = items[cursor[rank]]
                if isinstance(item, int):
                    call = calls[item]
                    call.deps[rank] = last[rank]
                    if len(call.deps) == len(call.group):
                        _add_call(b, call)
                else:
                    if any(not calls[cid].done for cid in item.waits):
                        break
                    last[rank] = b.compute(
                        rank,
                        max(item.duration_s, 0.0),
                        name=item.name,
                        phase=item.phase,
                        deps=[calls[cid].done[rank] for cid in item.waits],
                    )
                cursor[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = [r for r in range(ranks) if cursor[r] < len(pieces[r])]
            raise ParseError(
                f"cannot order the step: rank(s) {', '.join(map(str, stuck))} wait for calls "
                "that other ranks never launch in the replayed step"
            )
    return b.build()
