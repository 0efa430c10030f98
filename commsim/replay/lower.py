"""Time a step graph on a network: lower its tasks to engine items, run them in one DES.

Lowering, task by task (in the graph's topological order):

* compute -> one :class:`~commsim.engine.tasks.Delay` of its duration;
* collective -> a zero-length *gate* delay that waits for the task's deps, the schedule of the
  collective (built by the same algorithms as ``commsim run``, on group ranks ``0..g-1``) with
  its ranks remapped to the group's global ranks and its first transfers waiting on the gate,
  and a zero-length *join* delay after its last transfers; the task runs from the gate's end
  to the join's end;
* send -> one copy transfer (a zero-byte send is a zero-length delay).

Everything runs in one simulation, so collectives of different groups that overlap in time share
the bandwidth of the links they both use.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.algorithms import build_schedule, get_algorithm
from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.engine.tasks import Delay, simulate_items
from commsim.network import Network
from commsim.replay.graph import StepGraph, TaskKind
from commsim.schedule import OpKind, Schedule, Transfer


@dataclass(frozen=True, slots=True)
class GraphTiming:
    """When each task started and ended, and the algorithm each collective ran with."""

    start_s: tuple[float, ...]
    end_s: tuple[float, ...]
    algorithms: tuple[str, ...]

    @property
    def step_time_s(self) -> float:
        return max(self.end_s, default=0.0)


def group_network(network: Network, group: tuple[int, ...]) -> Network:
    """The machine seen by a group: group rank ``i`` runs on global rank ``group[i]``'s device."""
    if group == tuple(range(network.ranks)):
        return network
    return network.rebuilt(rank_devices=tuple(network.rank_devices[r] for r in group))


def group_call(
    network: Network, group: tuple[int, ...], collective: Collective, nbytes: int
) -> Call:
    """The :class:`Call` of a collective among ``group``, with its ranks' hosts when known."""
    hosts = None
    if len(group) > 1 and network.host_of(group[0]) is not None:
        hosts = tuple(int(network.host_of(r) or 0) for r in group)
    return Call(collective=collective, ranks=len(group), nbytes=nbytes, hosts=hosts)


class _Resolver:
    """Caches the algorithm ``auto`` picks and the schedules built, per distinct call."""

    def __init__(self, network: Network) -> None:
        self.network = network
        self.names: dict[tuple[object, ...], str] = {}
        self.schedules: dict[tuple[object, ...], Schedule] = {}

    def algorithm(self, call: Call, group: tuple[int, ...], requested: str) -> str:
        if requested and requested != "auto":
            return get_algorithm(requested).name
        key = (call, group)
        name = self.names.get(key)
        if name is None:
            from commsim.api import choose_algorithm

            name = choose_algorithm(call, group_network(self.network, group))
            self.names[key] = name
        return name

    def schedule(self, call: Call, name: str) -> Schedule:
        key = (call, name)
        schedule = self.schedules.get(key)
        if schedule is None:
            schedule = build_schedule(call, name)
            self.schedules[key] = schedule
        return schedule


def time_graph(graph: StepGraph, network: Network) -> GraphTiming:
    """Simulate ``graph`` on ``network`` (whose first ``graph.ranks`` ranks it uses)."""
    if graph.ranks > network.ranks:
        from commsim.errors import SpecError

        raise SpecError(
            f"the workload needs {graph.ranks} ranks, topology {network.name!r} has {network.ranks}"
        )
    resolver = _Resolver(network)
    items: list[Transfer | Delay] = []
    first: list[int] = []  # item whose end is the task's start
    last: list[int] = []  # item whose end is the task's end
    algorithms: list[str] = []
    for task in graph.tasks:
        deps = tuple(sorted({last[d] for d in task.deps}))
        name = ""
        if task.kind is TaskKind.COMPUTE:
            items.append(Delay(task.duration_s, deps))
            first.append(len(items) - 1)
            last.append(len(items) - 1)
        elif task.kind is TaskKind.SEND:
            src, dst = task.ranks
            if task.nbytes > 0:
                items.append(Transfer(src, dst, 0, task.nbytes, OpKind.COPY, deps))
            else:
                items.append(Delay(0.0, deps))
            first.append(len(items) - 1)
            last.append(len(items) - 1)
        else:
            assert task.collective is not None
            call = group_call(network, task.ranks, task.collective, task.nbytes)
            name = resolver.algorithm(call, task.ranks, task.algorithm)
            schedule = resolver.schedule(call, name)
            gate = len(items)
            items.append(Delay(0.0, deps))
            base = len(items)
            group = task.ranks
            used: set[int] = set()
            for t in schedule.transfers:
                used.update(t.deps)
                items.append(
                    Transfer(
                        group[t.src],
                        group[t.dst],
                        t.offset,
                        t.nbytes,
                        t.op,
                        tuple(base + d for d in t.deps) if t.deps else (gate,),
                    )
                )
            sinks = tuple(base + i for i in range(len(schedule.transfers)) if i not in used)
            items.append(Delay(0.0, sinks or (gate,)))
            first.append(gate)
            last.append(len(items) - 1)
        algorithms.append(name)
    timing = simulate_items(items, network)
    return GraphTiming(
        start_s=tuple(timing.start_s[i] for i in first),
        end_s=tuple(timing.end_s[i] for i in last),
        algorithms=tuple(algorithms),
    )
