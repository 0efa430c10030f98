"""Rules for GPU (NCCL) traces: kernels on ``(device, stream)`` lanes, classified as HTA does.

Compute is every ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` event that HolisticTraceAnalysis'
communication regex does not match. Communication is every NCCL kernel (``ncclDevKernel_*`` from
NCCL 2.19, ``ncclKernel_*`` before; docs/traces.md). What a kernel does comes from,
in order:

1. its own args: kineto copies ``record_param_comms``' ``Collective name``, ``In/Out msg
   nelems``, ``dtype``, ``Group size`` and the process group's name and ranks onto it;
2. the ``record_param_comms`` op it was launched from: the one enclosing the runtime event with
   the kernel's ``correlation``, else the CPU op with the kernel's ``External id`` (or the one
   enclosing that op), else the ``record_param_comms`` with args of the same order on the rank;
3. its name (the collective) and the enclosing ``nccl:<op>`` annotation's ``Input Dims`` and
   ``Input type`` (old traces whose ``record_param_comms`` has no args).

Bytes follow nccl-tests: ``nelems x sizeof(dtype)`` of the output for all_gather, of the input
for reduce_scatter, of the larger buffer otherwise. The group is ``Process Group Ranks``, else
``pg_config``'s entry for ``Process Group Name``, else ``Global rank start/stride`` and ``Group
size``, else the default group. A kernel's **launch** is its runtime event's start (else the
kernel's own start).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

from commsim.traces.comms import HTA_COMM, CommKind, comm_kind, dtype_size, full_buffer_bytes
from commsim.traces.events import default_group, group_by_name, seconds, span, steps, tensor_bytes
from commsim.traces.kineto import Event, KinetoTrace, parse_ranks
from commsim.traces.model import CommCall, ComputeOp, RankTrace

#: Event categories that run on a GPU stream.
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime"})
#: Everything on the device's timeline, annotations projected onto streams included.
_GPU_SIDE = GPU_CATS | {"gpu_user_annotation"}


def _lane(e: Event) -> str:
    device = e.args.get("device", e.pid)
    stream = e.args.get("stream", e.tid)
    return f"gpu:{device}:{stream}"


class _Pool:
    """Events of one kind indexed per thread by start, to find the one enclosing a time."""

    def __init__(self, events: list[Event]) -> None:
        self.by_tid: dict[object, tuple[list[float], list[Event]]] = {}
        for e in sorted(events, key=lambda e: (e.ts_us, -e.dur_us)):
            starts, items = self.by_tid.setdefault(e.tid, ([], []))
            starts.append(e.ts_us)
            items.append(e)

    def enclosing(self, at: Event) -> Event | None:
        """The innermost event on ``at``'s thread that contains ``at``'s start."""
        starts, items = self.by_tid.get(at.tid, ([], []))
        i = bisect.bisect_right(starts, at.ts_us) - 1
        # events on one thread nest: the latest-starting one still open is the innermost
        for j in range(i, max(i - 64, -1), -1):
            if items[j].end_us >= at.ts_us:
                return items[j]
        return None


class _Records:
    """The rank's ``record_param_comms`` ops and ``nccl:*`` annotations, for lookups."""

    def __init__(self, trace: KinetoTrace) -> None:
        cpu = [e for e in trace.events if e.cat not in _GPU_SIDE and isinstance(e.pid, int)]
        params = [e for e in cpu if e.name == "record_param_comms"]
        notes = [e for e in cpu if e.name.startswith("nccl:") and comm_kind(e.name) is not None]
        self.params, self.notes = _Pool(params), _Pool(notes)
        self.with_args = sorted(
            (e for e in params if "Collective name" in e.args), key=lambda e: e.ts_us
        )
        self.annotations = sorted(notes, key=lambda e: e.ts_us)
        self.by_external: dict[object, Event] = {}
        self.runtime: dict[object, Event] = {}
        for e in cpu:
            if e.cat in _RUNTIME_CATS:
                if "correlation" in e.args:
                    self.runtime[e.args["correlation"]] = e
            elif e.args.get("External id") is not None:
                self.by_external.setdefault(e.args["External id"], e)

    def param_for(self, kernel: Event, order: int) -> tuple[Event | None, Event | None]:
        """(``record_param_comms`` with args or None, ``nccl:*`` annotation or None)."""
        launch = self.runtime.get(kernel.args.get("correlation"))
        anchor = launch or self.by_external.get(kernel.args.get("External id"))
        param = note = None
        if anchor is not None:
            param = anchor if anchor.name == "record_param_comms" else self.params.enclosing(anchor)
            note = anchor if anchor.name.startswith("nccl:") else self.notes.enclosing(anchor)
        if param is not None and "Collective name" not in param.args:
            param = None
        if param is None and anchor is None and order < len(self.with_args):
            param = self.with_args[order]
        if note is None and anchor is None and order < len(self.annotations):
            note = self.annotations[order]
        return param, note


def _group(args: Mapping[str, Any], trace: KinetoTrace, world: int) -> tuple[str, tuple[int, ...]]:
    name = str(args.get("Process Group Name", ""))
    ranks = parse_ranks(args.get("Process Group Ranks"), f"{trace.source}: Process Group Ranks")
    if not ranks and name:
        ranks = group_by_name(trace, name)
    size = args.get("Group size")
    if not ranks and isinstance(size, int) and size > 0 and "Global rank start" in args:
        start, stride = int(args["Global rank start"]), int(args.get("Global rank stride", 1) or 1)
        ranks = tuple(start + i * stride for i in range(size))
    if not ranks:
        default_name, default_ranks = default_group(trace, world)
        if not isinstance(size, int) or size == len(default_ranks):
            return name or default_name, default_ranks
        ranks = tuple(range(size))
    return name or "[" + ",".join(map(str, ranks)) + "]", ranks


def _bytes_from_args(kind: CommKind, args: Mapping[str, Any]) -> int | None:
    size = dtype_size(args.get("dtype", ""))
    if size is None:
        return None
    try:
        n_in = int(args.get("In msg nelems", 0) or 0)
        n_out = int(args.get("Out msg nelems", 0) or 0)
    except (TypeError, ValueError):
        return None
    if kind is CommKind.ALL_TO_ALL or kind.p2p:
        return max(n_in, n_out) * size
    return full_buffer_bytes(kind, n_in * size, n_out * size)


def _bytes_from_dims(note: Event) -> int | None:
    dims, types = note.args.get("Input Dims"), note.args.get("Input type")
    if not isinstance(dims, list):
        return None
    sizes = [tensor_bytes(dims, types, index=i) for i in range(len(dims))]
    known = [s for s in sizes if s is not None]
    return max(known) if known else None


def _peer(kind: CommKind, args: Mapping[str, Any], group: tuple[int, ...]) -> int | None:
    key = {CommKind.SEND: "Dst Rank", CommKind.RECV: "Src Rank"}.get(kind)
    if key is None or key not in args:
        return None
    try:
        local = int(args[key])
    except (TypeError, ValueError):
        return None
    return group[local] if 0 <= local < len(group) else local


def rank_trace(
    trace: KinetoTrace, rank: int, world: int, shift_us: float, notes: list[str]
) -> RankTrace:
    """The :class:`RankTrace` of one GPU trace (see the module docstring)."""
    records = _Records(trace)
    gpu = [e for e in trace.events if e.cat in GPU_CATS]

    def launch_us(e: Event) -> float:
        launch = records.runtime.get(e.args.get("correlation"))
        return launch.ts_us if launch is not None else e.ts_us

    comm_kernels = sorted(
        (e for e in gpu if e.cat == "kernel" and HTA_COMM.match(e.name)),
        key=lambda e: (launch_us(e), e.ts_us),
    )
    comms: list[CommCall] = []
    for order, kernel in enumerate(comm_kernels):
        param, note = records.param_for(kernel, order)
        args: Mapping[str, Any] = kernel.args
        if "Collective name" not in args and param is not None:
            args = param.args
        kind = comm_kind(str(args.get("Collective name", ""))) or comm_kind(kernel.name)
        if kind is None or kind is CommKind.SEND_RECV:
            kind = comm_kind(note.name) if note is not None else kind
        if kind is None or kind is CommKind.SEND_RECV:
            notes.append(f"rank {rank}: {kernel.name[:60]}: unknown collective; ignored")
            continue
        nbytes = _bytes_from_args(kind, args) if "Collective name" in args else None
        if nbytes is None and note is not None:
            nbytes = _bytes_from_dims(note)
        if nbytes is None:
            notes.append(f"rank {rank}: {kernel.name[:60]}: size unknown; taken as 0")
            nbytes = 0
        pg, group = _group(args, trace, world)
        comms.append(
            CommCall(
                kind=kind,
                nbytes=nbytes,
                group=group,
                pg=pg,
                lane=_lane(kernel),
                launch_s=seconds(launch_us(kernel), shift_us),
                start_s=seconds(kernel.ts_us, shift_us),
                end_s=seconds(kernel.end_us, shift_us),
                name=kernel.name,
                peer=_peer(kind, args, group),
            )
        )
    compute = [
        ComputeOp(
            name=e.name,
            lane=_lane(e),
            start_s=seconds(e.ts_us, shift_us),
            end_s=seconds(e.end_us, shift_us),
            launch_s=seconds(launch_us(e), shift_us),
        )
        for e in sorted(gpu, key=lambda e: e.ts_us)
        if not (e.cat == "kernel" and HTA_COMM.match(e.name))
    ]
    start, end = span(trace, shift_us)
    return RankTrace(
        rank=rank,
        source=trace.source,
        flavour="gpu",
        compute=tuple(compute),
        comms=tuple(comms),
        steps=steps(trace, shift_us),
        start_s=start,
        end_s=end,
    )
