"""The step graph: a training step as tasks on ranks' streams, with explicit dependencies.

Workload generators (:mod:`.ddp`, :mod:`.fsdp`, :mod:`.pipeline`, :mod:`.tensor`,
:mod:`.hybrid`) produce a :class:`StepGraph`; :mod:`.lower` times it on a network. Nothing
here knows which generator built a graph, or anything about time beyond compute durations.

A task is one of

* ``compute``: ``duration_s`` of work on one rank;
* ``collective``: a collective of ``nbytes`` (nccl-tests' size) among a group of global ranks,
  run by a named algorithm (or ``auto``);
* ``send``: ``nbytes`` from ``ranks[0]`` to ``ranks[1]`` (pipeline activations and gradients).

A task starts when every task in ``deps`` has ended. Streams are dependencies too: each task
may name a ``stream``, and :class:`GraphBuilder` makes it depend on the previous task of the
same stream on each of its ranks, so a rank's compute stream (and each of its communication
streams) runs its tasks one at a time, in the order they were added.

Tasks may also account memory: ``mem_start`` bytes are allocated on each of the task's ranks
when it starts and ``mem_end`` bytes (negative: freed) when it ends; ``StepGraph.static_bytes``
is what each rank holds throughout.

>>> b = GraphBuilder(2)
>>> f = [b.compute(r, 1.0, name="fwd", phase="forward") for r in range(2)]
>>> ar = b.collective((0, 1), "all_reduce", 1024, algorithm="ring", name="ar", phase="backward",
...                   deps=f)
>>> g = b.build()
>>> len(g.tasks), g.tasks[ar].deps, g.tasks[ar].collective.value
(3, (0, 1), 'all_reduce')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from commsim.collectives import Collective, parse_collective
from commsim.errors import SpecError

#: The most tasks one step graph may have: building one costs about 10 us and 400 bytes, and
#: timing it (:mod:`.lower`) at least one engine item each (a 70B-parameter model on 256 GPUs,
#: TP 8 x PP 8 x DP 4, 32 micro-batches: 386,304 tasks). Beyond it the workload is refused in
#: one line rather than building for minutes.
MAX_TASKS = 1_000_000


def check_tasks(tasks: int, path: str, value: object) -> None:
    """SpecError naming the field ``path`` when its ``value`` gives a step more than
    :data:`MAX_TASKS` tasks (``tasks``: at least that many, on any number of ranks), before
    anything of that size is built."""
    if tasks > MAX_TASKS:
        raise SpecError(
            f"{path}: {value} gives a step at least {tasks} tasks, more than the {MAX_TASKS} a "
            "step graph may have (timed in seconds)"
        )


class TaskKind(StrEnum):
    """What a task does."""

    COMPUTE = "compute"  #: fixed-duration work on one rank
    COLLECTIVE = "collective"  #: a collective among a group of ranks, on the network
    SEND = "send"  #: a point-to-point transfer ``ranks[0] -> ranks[1]``


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One task of a step graph (see the module docstring).

    Attributes
    ----------
    name
        A label for traces and plots (``"fwd u3"``); need not be unique.
    kind
        compute, collective or send.
    ranks
        Compute: ``(rank,)``; collective: the group's global ranks, in group order (group rank
        ``i`` is ``ranks[i]``); send: ``(src, dst)``.
    deps
        Indices of earlier tasks that must end before this one starts.
    duration_s
        Compute time (compute tasks only).
    collective, nbytes, algorithm, protocol
        What a collective does, on how many bytes, and with which algorithm and NCCL protocol
        (``auto``: what ``commsim run`` would choose for that call on the group, see
        :mod:`commsim.timing`). ``nbytes`` is also a send's size.
    phase
        ``forward``, ``backward``, ``optimizer``, ... (trace and plot colours, filters).
    stream
        The stream the task was queued on (``compute``, ``comm``, ...; empty: none).
    mem_start, mem_end
        Bytes allocated on each of the task's ranks when it starts / ends (negative frees).
    """

    name: str
    kind: TaskKind
    ranks: tuple[int, ...]
    deps: tuple[int, ...] = ()
    duration_s: float = 0.0
    collective: Collective | None = None
    nbytes: int = 0
    algorithm: str = ""
    protocol: str = "auto"
    phase: str = ""
    stream: str = ""
    mem_start: int = 0
    mem_end: int = 0

    def __post_init__(self) -> None:
        if not self.ranks or len(set(self.ranks)) != len(self.ranks):
            raise SpecError(f"task {self.name!r}: ranks must be distinct, got {self.ranks}")
        if self.kind is TaskKind.COMPUTE:
            if len(self.ranks) != 1 or not self.duration_s >= 0:
                raise SpecError(f"task {self.name!r}: compute needs one rank and a duration >= 0")
        elif self.kind is TaskKind.SEND:
            if len(self.ranks) != 2:
                raise SpecError(f"task {self.name!r}: a send needs (src, dst), got {self.ranks}")
        elif self.collective is None:
            raise SpecError(f"task {self.name!r}: a collective task needs its collective")
        if self.nbytes < 0:
            raise SpecError(f"task {self.name!r}: nbytes must not be negative, got {self.nbytes}")


@dataclass(frozen=True, slots=True)
class StepGraph:
    """A step: ``ranks`` ranks (``0..ranks-1``) and tasks in a topological order.

    ``static_bytes`` is each rank's memory held for the whole step (e.g. sharded parameters,
    gradients and optimizer states), or None when the workload does not account memory.
    """

    ranks: int
    tasks: tuple[Task, ...]
    static_bytes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for index, task in enumerate(self.tasks):
            if any(not 0 <= dep < index for dep in task.deps):
                raise SpecError(f"task {index} ({task.name!r}): deps must be earlier tasks")
            if any(not 0 <= r < self.ranks for r in task.ranks):
                raise SpecError(
                    f"task {index} ({task.name!r}): rank out of range 0..{self.ranks - 1}"
                )
        if self.static_bytes is not None and len(self.static_bytes) != self.ranks:
            raise SpecError(f"static_bytes lists {len(self.static_bytes)} ranks, not {self.ranks}")

    @property
    def tracks_memory(self) -> bool:
        return self.static_bytes is not None


@dataclass(slots=True)
class GraphBuilder:
    """Appends tasks in a topological order, adding stream-order dependencies.

    Every ``add``-like method returns the new task's index, for later ``deps``.
    """

    ranks: int
    tasks: list[Task] = field(default_factory=list)
    _last: dict[tuple[int, str], int] = field(default_factory=dict)

    def _add(self, task: Task) -> int:
        if len(self.tasks) >= MAX_TASKS:
            raise SpecError(
                f"the step graph has more than {MAX_TASKS} tasks on {self.ranks} ranks, more "
                "than are timed in seconds: fewer layers, units, micro-batches or ranks"
            )
        index = len(self.tasks)
        if task.stream:
            deps = set(task.deps)
            for rank in task.ranks:
                key = (rank, task.stream)
                last = self._last.get(key)
                if last is not None:
                    deps.add(last)
                self._last[key] = index
            # a frozen task's deps are set once, here, before anything else sees it
            object.__setattr__(task, "deps", tuple(sorted(deps)))
        elif list(task.deps) != sorted(set(task.deps)):
            object.__setattr__(task, "deps", tuple(sorted(set(task.deps))))
        self.tasks.append(task)
        return index

    def compute(
        self,
        rank: int,
        duration_s: float,
        *,
        name: str,
        phase: str,
        deps: Iterable[int] = (),
        stream: str = "compute",
        mem_start: int = 0,
        mem_end: int = 0,
    ) -> int:
        """``duration_s`` of work on ``rank``, after ``deps`` and the stream's previous task."""
        return self._add(
            Task(
                name=name,
                kind=TaskKind.COMPUTE,
                ranks=(rank,),
                deps=tuple(deps),
                duration_s=float(duration_s),
                phase=phase,
                stream=stream,
                mem_start=mem_start,
                mem_end=mem_end,
            )
        )

    def collective(
        self,
        group: Sequence[int],
        collective: Collective | str,
        nbytes: int,
        *,
        algorithm: str = "auto",
        protocol: str = "auto",
        name: str,
        phase: str,
        deps: Iterable[int] = (),
        stream: str = "comm",
        mem_start: int = 0,
        mem_end: int = 0,
    ) -> int:
        """A collective among ``group`` (global ranks), queued on each member's ``stream``."""
        return self._add(
            Task(
                name=name,
                kind=TaskKind.COLLECTIVE,
                ranks=tuple(group),
                deps=tuple(deps),
                collective=parse_collective(collective),
                nbytes=int(nbytes),
                algorithm=algorithm,
                protocol=protocol,
                phase=phase,
                stream=stream,
                mem_start=mem_start,
                mem_end=mem_end,
            )
        )

    def send(
        self,
        src: int,
        dst: int,
        nbytes: int,
        *,
        name: str,
        phase: str,
        deps: Iterable[int] = (),
        stream: str = "",
    ) -> int:
        """``nbytes`` from ``src`` to ``dst`` (no stream by default: it waits only on ``deps``)."""
        return self._add(
            Task(
                name=name,
                kind=TaskKind.SEND,
                ranks=(src, dst),
                deps=tuple(deps),
                nbytes=int(nbytes),
                phase=phase,
                stream=stream,
            )
        )

    def stream_tails(self, rank: int) -> list[int]:
        """The last task of each of ``rank``'s streams, so far."""
        return sorted(i for (r, _), i in self._last.items() if r == rank)

    def build(self, static_bytes: Sequence[int] | None = None) -> StepGraph:
        """The graph (``static_bytes``: per-rank memory held all step, to account memory)."""
        static = None if static_bytes is None else tuple(int(b) for b in static_bytes)
        return StepGraph(self.ranks, tuple(self.tasks), static)
