"""The trace model: what each rank computed and communicated, read from Kineto traces.

:func:`commsim.traces.read.build_model` turns the per-rank
:class:`~commsim.traces.kineto.KinetoTrace` files into a :class:`TraceModel` (this module holds
the model's types only, so that the rules that fill it import it and it imports none of them):
for every rank, its **compute** intervals (:class:`ComputeOp`), its **communication calls**
(:class:`CommCall`: kind, bytes in nccl-tests' convention, the group's global ranks, the lane
it ran on, when it was launched, started and ended) and its profiler steps
(:class:`StepSpan`). Two sets of rules fill it (docs/traces.md):

* **GPU traces** (``kernel`` events present; :mod:`.gpu`): compute is every GPU kernel, memcpy
  and memset that HolisticTraceAnalysis' regexes do not classify as communication, on its
  ``(device, stream)`` lane; communication is every NCCL kernel, described by its own args
  (kineto copies ``record_param_comms``' onto it), else by the ``record_param_comms`` it was
  launched from, else by its name and the ``nccl:*`` annotation's ``Input Dims``.
* **CPU traces** (gloo; :mod:`.cpu`): compute is the top-level ``cpu_op`` events of the main
  thread (nested ops are inside their parents' time, so nothing is counted twice);
  communication is each ``c10d::<op>_`` call on the caller's thread (its launch) matched to the
  ``gloo:<op>`` annotation of the ``pt_gloo_runloop`` thread that ran it, with bytes from the
  annotation's ``Input Dims`` and ``Input type`` (gloo traces have no ``record_param_comms``).

Times are seconds from the earliest event of any rank, ranks aligned on their absolute clocks
(``baseTimeNanoseconds + ts``). :meth:`TraceModel.frame` is the flat DataFrame view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from commsim.traces.comms import CommKind

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class ComputeOp:
    """One compute interval on a rank's compute lane.

    ``lane`` is ``cpu:<tid>`` (CPU traces) or ``gpu:<device>:<stream>``; ``phase`` is
    ``forward``, ``backward``, ``optimizer`` or empty (from the enclosing annotations);
    ``launch_s`` is when the host issued it (a kernel's runtime call; a CPU op's start).
    """

    name: str
    lane: str
    start_s: float
    end_s: float
    phase: str = ""
    launch_s: float = float("nan")

    @property
    def dur_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class CommCall:
    """One communication call of one rank.

    Attributes
    ----------
    kind
        What it does (:class:`~commsim.traces.comms.CommKind`).
    nbytes
        nccl-tests' size: the full buffer (all_gather: gathered output; reduce_scatter:
        unreduced input); for send/recv, gather and scatter the bytes one rank sends or gets.
    group
        The group's global ranks, in group order.
    pg
        The process group's name (``""`` when the trace does not say).
    peer
        P2P: the other rank (global); gather/scatter: the root (global); else None.
    lane
        Where it ran: ``gloo:<tid>`` (a gloo runloop thread) or ``gpu:<device>:<stream>``.
    launch_s
        When the caller issued it (the ``c10d::`` op's start; GPU: the kernel launch).
    start_s, end_s
        When it ran on its lane.
    name
        The trace's name for it (``c10d::allreduce_``, ``ncclDevKernel_AllReduce_...``).
    """

    kind: CommKind
    nbytes: int
    group: tuple[int, ...]
    pg: str
    lane: str
    launch_s: float
    start_s: float
    end_s: float
    name: str
    peer: int | None = None

    @property
    def dur_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class StepSpan:
    """A ``ProfilerStep#<number>`` annotation of one rank."""

    number: int
    start_s: float
    end_s: float

    @property
    def dur_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class RankTrace:
    """Everything the model holds about one rank (see the module docstring).

    ``compute`` and ``comms`` are sorted by start (``comms`` by launch); ``start_s``/``end_s``
    span every event of the rank's file.
    """

    rank: int
    source: str
    flavour: str
    compute: tuple[ComputeOp, ...]
    comms: tuple[CommCall, ...]
    steps: tuple[StepSpan, ...]
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class TraceModel:
    """A distributed step as captured: one :class:`RankTrace` per rank ``0..world_size-1``.

    ``flavour`` is ``gpu`` (NCCL kernels) or ``cpu`` (gloo); ``notes`` lists what the rules
    could not take literally (calls with unknown sizes, unmatched annotations, ...).
    """

    backend: str
    flavour: str
    ranks: tuple[RankTrace, ...]
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=())

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def step_numbers(self) -> tuple[int, ...]:
        """``ProfilerStep`` numbers every rank has, in order."""
        common = set.intersection(*(set(s.number for s in r.steps) for r in self.ranks))
        return tuple(sorted(common))

    def frame(self) -> pd.DataFrame:
        """One row per compute interval and per communication call, sorted by rank and start.

        Columns: ``rank`` (int); ``kind`` (``compute`` or the call's kind: ``all_reduce``,
        ``send``, ...); ``name`` (op, kernel or annotation name); ``lane`` (``cpu:<tid>``,
        ``gloo:<tid>``, ``gpu:<device>:<stream>``); ``phase`` (compute: forward, backward,
        optimizer or empty); ``start_s``, ``end_s``, ``dur_s`` (seconds from the model's
        origin); ``launch_s`` (when the host issued it); ``nbytes`` (calls:
        nccl-tests' size; compute: 0); ``group`` (calls: tuple of global ranks; compute:
        empty tuple); ``pg`` (process group name or empty); ``peer`` (P2P peer or
        gather/scatter root; else -1).
        """
        import pandas as pd

        columns = list(FRAME_COLUMNS)
        rows: list[tuple[object, ...]] = []
        for rt in self.ranks:
            for op in rt.compute:
                rows.append(
                    (rt.rank, "compute", op.name, op.lane, op.phase, op.start_s, op.end_s,
                     op.dur_s, op.launch_s, 0, (), "", -1)
                )  # fmt: skip
            for c in rt.comms:
                rows.append(
                    (rt.rank, c.kind.value, c.name, c.lane, "", c.start_s, c.end_s, c.dur_s,
                     c.launch_s, c.nbytes, c.group, c.pg, -1 if c.peer is None else c.peer)
                )  # fmt: skip
        frame = pd.DataFrame(rows, columns=columns)
        return frame.sort_values(["rank", "start_s"], kind="stable", ignore_index=True)


#: Columns of :meth:`TraceModel.frame`.
FRAME_COLUMNS = (
    "rank",
    "kind",
    "name",
    "lane",
    "phase",
    "start_s",
    "end_s",
    "dur_s",
    "launch_s",
    "nbytes",
    "group",
    "pg",
    "peer",
)
