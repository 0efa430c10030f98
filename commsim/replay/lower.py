"""Time a step graph on a network: lower its tasks to engine items, run them in one DES.

Every collective is timed exactly as ``commsim run`` times the same call
(:class:`~commsim.timing.Timer`: NCCL's choice of algorithm and protocol, its launch latency,
in-network reduction) and then placed in the step's one simulation. Lowering, task by task (in
the graph's topological order):

* compute -> one :class:`~commsim.engine.tasks.Delay` of its duration (times its rank's
  compute factor under a what-if's slow ranks and jitter, ``compute_factors``);
* collective -> a zero-length *gate* that waits for the task's deps, a delay of NCCL's launch
  latency, the transfers of the evaluation the timer chose (its schedule on group ranks
  ``0..g-1``, remapped to the group's global ranks, each on the view of the network it was
  timed on: the protocol's latency and bandwidth, an in-network reduction's ports), and a
  zero-length *join* after its last transfers. NCCL's tree, NVLS and CollNet across hosts are
  pipelined schedules too (:mod:`commsim.nccl_tree`) and contend like any other; only where
  their time is the composed estimate of their phases (the closed form, or a schedule beyond
  the DES's budget for them) do they take that time as a delay, not contending;
* send -> the topology's point-to-point model (:meth:`~commsim.timing.Timer.point_to_point`):
  its launch latency, then one copy transfer on its view (a zero-byte send takes no time).

Everything runs in one simulation, so collectives of different groups that overlap in time share
the bandwidth of the links they both use. Alone, a collective takes exactly ``commsim run``'s
time for it. A collective's gate waits for the deps of every member, so a collective starts
when its last member reaches it: a slow rank holds back the whole group.

With a :class:`~commsim.replay.replicas.ReplicaFold` the graph holds one block of replicas
(and the collectives spanning blocks, with that block's deps): a spanning collective keeps the
transfers leaving the block, each dependency on another's mapped to its representative, and
every route crosses the block's images of its links (:mod:`.replicas`): the step is the full
one's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from commsim.algorithms.estimate import estimate_des_bytes
from commsim.budget import fits, memory_budget, over_budget
from commsim.engine.tasks import DELAY, NETWORK, Items, simulate_items
from commsim.errors import SpecError
from commsim.network import Network
from commsim.progress import Progress
from commsim.replay.graph import StepGraph, Task, TaskKind
from commsim.replay.replicas import ReplicaFold, Unfoldable, check_links, fold_schedule
from commsim.results import Result
from commsim.schedule import Columns
from commsim.timing import CollectiveCall, Timer

#: From this many tasks on, lowering draws a progress bar (on a terminal): about 20 us a task.
PROGRESS_MIN_TASKS = 100_000
#: Tasks lowered between two updates of that bar.
PROGRESS_TASKS = 4096
#: Items added between two checks of the memory budget.
MEMORY_CHECK_ITEMS = 65_536


@dataclass(frozen=True, slots=True)
class GraphTiming:
    """When each task started and ended, and what each collective ran as: its algorithm
    (empty for other tasks) and NCCL protocol (None: plain alpha-beta, or not a collective)."""

    start_s: tuple[float, ...]
    end_s: tuple[float, ...]
    algorithms: tuple[str, ...]
    protocols: tuple[str | None, ...] = ()

    @property
    def step_time_s(self) -> float:
        return max(self.end_s, default=0.0)


#: A collective's transfers placed as items (:meth:`_Lowering._place`): src, dst, nbytes,
#: reduce, view, dep_ptr, deps relative to the block (-1: its start), the sinks (relative).
_Block = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray,
               np.ndarray]


class _Lowering:
    """Items of one step: the tasks' engine items and the network views they run on."""

    def __init__(self, network: Network, fold: ReplicaFold | None = None) -> None:
        self.network = network
        self.fold = fold
        self.timer = Timer.of(network)
        self.items = Items()
        self.views: list[Network] = []
        # id(view of a group) -> (index in views, the view: held, so that its id stays its own)
        self._view_index: dict[int, tuple[int, Network]] = {}
        self._checked: set[int] = set()  # ids of the views of spanning collectives checked
        # (collective, nbytes, group, algorithm, protocol) -> the call timed and placed
        self._placed: dict[tuple[object, ...], tuple[Result, _Block | None]] = {}
        self._p2p: tuple[Network, float] | None = None

    def view(self, network: Network) -> int:
        """Index of ``network`` (a view of this network's links, group-ranked) re-ranked as
        the step's global network; :data:`~commsim.engine.tasks.NETWORK` when it is the
        network itself (plain transfers)."""
        if network.links is self.network.links:
            return NETWORK
        key = id(network)
        if key not in self._view_index:
            self._view_index[key] = (len(self.views), network)
            view = network.rebuilt(rank_devices=self.network.rank_devices)
            self.views.append(view if self.fold is None else self.fold.folded(view))
        return self._view_index[key][0]

    def collective(self, task: Task, deps: tuple[int, ...]) -> tuple[int, int, Result]:
        """(first item, last item, timed call) of a collective task."""
        assert task.collective is not None
        key = (task.collective, task.nbytes, task.ranks, task.algorithm, task.protocol)
        placed = self._placed.get(key)
        if placed is None:  # a call is timed and placed once, then its blocks are copies
            placed = self._placed[key] = self._place(CollectiveCall(
                collective=task.collective, nbytes=task.nbytes, group=task.ranks,
                algorithm=task.algorithm or "auto", protocol=task.protocol))
        result, block = placed
        gate = self.items.delay(0.0, deps)
        if block is None:  # a composed estimate: its time, no transfers
            return gate, self.items.delay(result.time_s, (gate,)), result
        start = self.items.delay(result.launch_s, (gate,)) if result.launch_s else gate
        base = self.items.count
        src, dst, nbytes, reduce, view, ptr, waits, sinks = block
        self.items.block(src, dst, nbytes, reduce, view, ptr,
                         np.where(waits < 0, start, waits + base))
        return gate, self.items.delay(0.0, tuple((sinks + base).tolist()) or (start,)), result

    def _place(self, call: CollectiveCall) -> tuple[Result, _Block | None]:
        """The call timed, and its transfers as a block of items (None: a composed estimate,
        no transfers): on global ranks, their deps relative to the block's first item, -1
        for the item the block starts after."""
        result = self.timer.time(call)
        if result.schedule is None and result.records_error is None:
            result = result.with_records()  # a symmetric ring's transfers may meet others'
        if result.schedule is None:
            return result, None
        assert result.network is not None and call.group is not None
        cols = result.schedule.columns
        kept, dep_ptr, dep_idx = np.arange(len(cols)), cols.dep_ptr, cols.dep_idx
        if self.fold is not None and self.fold.spans(call.group):
            folded = fold_schedule(self.fold, cols, np.array(call.group, dtype=np.int64))
            kept, dep_ptr, dep_idx = _folded_deps(cols, *folded)
            if id(result.network) not in self._checked:  # held by the views: ids stay
                check_links(result.network, self.fold.link_image)
                self._checked.add(id(result.network))
        ranks = np.array(call.group, dtype=np.int64)
        p, total = len(ranks), self.network.ranks

        def placed(ends: np.ndarray) -> np.ndarray:  # ranks, then switches
            return np.where(ends < p, ranks[np.minimum(ends, p - 1)], total + ends - p)

        counts = np.diff(dep_ptr)
        # a transfer without dependencies waits for the start item instead
        ptr = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(np.maximum(counts, 1), out=ptr[1:])
        waits = np.full(int(ptr[-1]), -1, dtype=np.int64)
        waits[np.repeat(ptr[:-1] - dep_ptr[:-1], counts) + np.arange(len(dep_idx))] = dep_idx
        used = np.zeros(len(cols), dtype=bool)
        used[cols.dep_idx] = True
        return result, (placed(cols.src[kept]), placed(cols.dst[kept]), cols.nbytes[kept],
                        cols.reduce[kept], self.view(result.network), ptr, waits,
                        np.flatnonzero(~used[kept]))

    def send(self, task: Task, deps: tuple[int, ...]) -> tuple[int, int]:
        """(first item, last item) of a send task."""
        if task.nbytes <= 0:
            only = self.items.delay(0.0, deps)
            return only, only
        if self._p2p is None:
            self._p2p = self.timer.point_to_point()
        view, launch = self._p2p
        begin = None
        if launch:
            begin = self.items.delay(launch, deps)
            deps = (begin,)
        src, dst = task.ranks
        end = self.items.transfer(src, dst, task.nbytes, False, deps, self.view(view))
        return (end if begin is None else begin), end


def _folded_deps(cols: Columns, kept: np.ndarray,
                 rep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kept, dep_ptr, dep_idx) of the kept transfers: each dependency ``k`` of a kept
    transfer becomes kept transfer ``rep[k]`` (once), by position among the kept."""
    width = max(len(kept), 1)
    slot = np.full(len(cols), -1, dtype=np.int64)
    slot[kept] = np.arange(len(kept))
    owner = np.repeat(slot, np.diff(cols.dep_ptr))
    edges = np.unique(owner * width + rep[cols.dep_idx])
    waits, on = np.divmod(edges[edges >= 0], width)
    ptr = np.zeros(len(kept) + 1, dtype=np.int64)
    np.cumsum(np.bincount(waits, minlength=len(kept)), out=ptr[1:])
    return kept, ptr, on


def _check_memory(items: int, ranks: int) -> None:
    """SpecError, in one line, once the step's items would not fit the memory budget."""
    need = estimate_des_bytes(items)
    if not fits(need):
        raise SpecError(
            f"the step's simulation would hold more than {items} items (compute, launches and "
            f"every transfer of its collectives) on {ranks} ranks, "
            f"{over_budget(need, memory_budget())}: "
            "fewer layers, units, micro-batches or ranks"
        )


def time_graph(graph: StepGraph, network: Network,
               compute_factors: Sequence[float] | None = None,
               fold: ReplicaFold | None = None) -> GraphTiming:
    """Simulate ``graph`` on ``network`` (whose first ``graph.ranks`` ranks it uses); with
    ``compute_factors`` (one per rank of the graph) rank ``r``'s compute takes
    ``compute_factors[r]`` times its duration. With ``fold``, ``graph`` is block 0 of a step
    with that replica symmetry (:mod:`.replicas`; Unfoldable where the step breaks it)."""
    if compute_factors is not None and len(compute_factors) != graph.ranks:
        raise SpecError(f"{len(compute_factors)} compute factors for {graph.ranks} ranks")
    if graph.ranks > network.ranks:
        raise SpecError(
            f"the workload needs {graph.ranks} ranks, topology {network.name!r} has {network.ranks}"
        )
    lowering = _Lowering(network, fold)
    bar = Progress(f"lowering {len(graph.tasks)} tasks", "task",
                   enabled=len(graph.tasks) >= PROGRESS_MIN_TASKS)
    try:
        first, last, algorithms, protocols = _lower_tasks(graph, lowering, bar, compute_factors)
    finally:
        bar.close()
    table = lowering.items.table()
    if fold is not None:
        moves = table.view != DELAY
        fold.check_routes(network, table.columns.src[moves], table.columns.dst[moves])
        network = fold.folded(network)
    timing = simulate_items(table, network, lowering.views)
    return GraphTiming(
        start_s=tuple(timing.start_s[first].tolist()),
        end_s=tuple(timing.end_s[last].tolist()),
        algorithms=tuple(algorithms),
        protocols=tuple(protocols),
    )


def _lower_tasks(
    graph: StepGraph, lowering: _Lowering, bar: Progress, factors: Sequence[float] | None
) -> tuple[list[int], list[int], list[str], list[str | None]]:
    """Every task's items, in order: per task the item whose end is its start, the item whose
    end is its end, and the algorithm and protocol a collective ran as."""
    first: list[int] = []
    last: list[int] = []
    algorithms: list[str] = []
    protocols: list[str | None] = []
    memory_checked = 0  # items at which the budget is next checked
    for done, task in enumerate(graph.tasks):
        if done % PROGRESS_TASKS == 0:
            bar.update_to(done, len(graph.tasks))
        deps = tuple(sorted({last[d] for d in task.deps}))
        algorithm, protocol = "", None
        if lowering.fold is not None and task.kind is not TaskKind.COLLECTIVE and (
                lowering.fold.spans(task.ranks)):
            raise Unfoldable(f"task {task.name!r} sends across replica blocks")
        if task.kind is TaskKind.COMPUTE:
            duration = task.duration_s
            if factors is not None:
                duration *= factors[task.ranks[0]]
            begin = end = lowering.items.delay(duration, deps)
        elif task.kind is TaskKind.SEND:
            begin, end = lowering.send(task, deps)
        else:
            begin, end, result = lowering.collective(task, deps)
            algorithm, protocol = result.algorithm, result.protocol
        if lowering.items.count > memory_checked:
            _check_memory(lowering.items.count, graph.ranks)
            memory_checked = lowering.items.count + MEMORY_CHECK_ITEMS
        first.append(begin)
        last.append(end)
        algorithms.append(algorithm)
        protocols.append(protocol)
    _check_memory(lowering.items.count, graph.ranks)
    bar.update_to(len(graph.tasks), len(graph.tasks))
    return first, last, algorithms, protocols
