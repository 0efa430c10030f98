"""Replay a workload: YAML or dict -> spec -> step graph -> timed -> :class:`StepResult`.

>>> r = replay({"kind": "pipeline", "schedule": "gpipe", "stages": 4, "microbatches": 8,
...             "forward_time": "1ms", "backward_time": "2ms"},
...            {"kind": "ring", "ranks": 4, "link": {"latency": "1us", "bandwidth": "100GB/s"}})
>>> round(r.step_time_s / ((8 + 4 - 1) * 3e-3), 12), round(r.idle_fraction, 12) == round(3 / 11, 12)
(1.0, True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from commsim.errors import SpecError
from commsim.network import Network
from commsim.replay import comm, ddp, fields, fsdp, hybrid, pipeline, tensor
from commsim.replay.comm import CommOverrides
from commsim.replay.graph import StepGraph
from commsim.replay.lower import GraphTiming, time_graph
from commsim.replay.metrics import StepMetrics, step_metrics
from commsim.replay.replicas import FoldReport, Unfoldable
from commsim.topology.degrade import apply_what_if
from commsim.topology.what_if import WhatIf, WhatIfSource, factors_for

if TYPE_CHECKING:
    import pandas as pd


class WorkloadSpec(Protocol):
    """What every workload kind's spec provides."""

    @property
    def kind(self) -> str: ...

    def graph(self, network: Network) -> StepGraph: ...

    def extras(self, metrics: StepMetrics) -> dict[str, object]: ...


#: Workload kinds: ``kind`` -> parser of its YAML mapping.
KINDS: dict[str, Callable[[Mapping[str, Any]], WorkloadSpec]] = {
    ddp.KIND: ddp.parse,
    fsdp.KIND: fsdp.parse,
    pipeline.KIND: pipeline.parse,
    tensor.KIND: tensor.parse,
    hybrid.KIND: hybrid.parse,
}

@dataclass(frozen=True, slots=True)
class Configured:
    """A workload spec with the collective overrides its file set (:mod:`.comm`)."""

    spec: WorkloadSpec
    comm: CommOverrides

    @property
    def kind(self) -> str:
        return self.spec.kind

    def graph(self, network: Network) -> StepGraph:
        return self.comm.apply(self.spec.graph(network))

    def extras(self, metrics: StepMetrics) -> dict[str, object]:
        return self.spec.extras(metrics)


#: Columns of :meth:`StepResult.tasks`.
TASK_COLUMNS = (
    "task",
    "name",
    "kind",
    "phase",
    "stream",
    "ranks",
    "collective",
    "algorithm",
    "protocol",
    "nbytes",
    "start_s",
    "end_s",
)


def workload_from_dict(data: object, source: str = "") -> WorkloadSpec:
    """A parsed YAML mapping -> the spec of its ``kind`` (SpecError naming the field path)."""
    try:
        mapping = fields.mapping(data, "")
        if "kind" not in mapping:
            raise SpecError(f"kind: missing required key (known kinds: {', '.join(KINDS)})")
        kind = mapping["kind"]
        if kind not in KINDS:
            raise SpecError(f"kind: unknown workload kind {kind!r} (known: {', '.join(KINDS)})")
        overrides, rest = comm.parse(mapping)
        spec = KINDS[kind](rest)
        return spec if overrides == CommOverrides() else Configured(spec, overrides)
    except SpecError as exc:
        if source:
            raise SpecError(f"{source}: {exc}") from None
        raise


def load_workload(workload: WorkloadSpec | Mapping[str, Any] | str | Path) -> WorkloadSpec:
    """A workload spec from a spec, a parsed mapping or a YAML (or JSON) file path.

    Captured PyTorch profiler traces are a workload too, loaded by
    :func:`commsim.traces.load_trace_workload` (or replayed at once by
    :func:`commsim.traces.replay_trace`): :mod:`commsim.traces` builds on this package, so it
    is not imported here; a trace directory or trace file given here is a SpecError saying so.
    """
    if isinstance(workload, str | Path):
        hint = (
            f"{workload}: captured traces replay through commsim.traces.replay_trace (or "
            "commsim.traces.load_trace_workload, then replay)"
        )
        if Path(workload).is_dir():
            raise SpecError(hint)
        data = fields.read_yaml(workload)
        if isinstance(data, Mapping) and "traceEvents" in data:
            raise SpecError(hint)
        return workload_from_dict(data, str(workload))
    if isinstance(workload, Mapping) or not hasattr(workload, "graph"):
        return workload_from_dict(workload)
    return workload


@dataclass(frozen=True, slots=True)
class StepResult:
    """One replayed training step.

    Attributes
    ----------
    workload
        The spec that was replayed (its ``kind``: ddp, fsdp, pipeline, tensor, hybrid).
    topology
        The network's name.
    graph, timing
        The step graph and when each of its tasks started and ended.
    metrics
        Step time, compute, communication, exposed communication, overlap, idle fractions and
        waits for other ranks, per rank and aggregated (see :mod:`commsim.replay.metrics`).
    extra
        Kind-specific results (pipeline bubbles, FSDP memory, hybrid throughput and MFU).
    what_if, compute_factors
        The what-if the step ran under (None: the healthy machine) and each rank's compute
        factor under it (None: every rank at its healthy pace).
    fold
        Whether the data-parallel replicas were folded (:mod:`.replicas`: ``graph`` then holds
        the simulated block of replicas and the collectives spanning the others), or None
        (a kind that does not fold, or ``fold=False``).
    """

    workload: WorkloadSpec
    topology: str
    graph: StepGraph
    timing: GraphTiming
    metrics: StepMetrics
    extra: dict[str, object] = field(default_factory=dict)
    what_if: WhatIf | None = None
    compute_factors: tuple[float, ...] | None = None
    fold: FoldReport | None = None

    @property
    def step_time_s(self) -> float:
        return self.metrics.step_time_s

    @property
    def exposed_comm_s(self) -> float:
        return self.metrics.exposed_comm_s

    @property
    def overlap_fraction(self) -> float:
        return self.metrics.overlap_fraction

    @property
    def idle_fraction(self) -> float:
        return self.metrics.idle_fraction

    def to_dict(self) -> dict[str, object]:
        """The contract's JSON object: the metrics, ``per_rank``, then the kind's extras."""
        out: dict[str, object] = {
            "workload": self.workload.kind,
            "topology": self.topology,
            "ranks": self.graph.ranks,
        }
        metrics = self.metrics.to_dict()
        per_rank = metrics.pop("per_rank")
        out.update(metrics)
        out.update(self.extra)
        if self.fold is not None:
            out["replica_fold"] = self.fold.to_dict()
        out["collectives"] = self.collectives()
        out["per_rank"] = per_rank
        return out

    def collectives(self) -> list[dict[str, object]]:
        """One entry per collective task: what it did and what it ran as (the algorithm and
        NCCL protocol ``commsim run`` chooses for the same call), when it ran."""
        out: list[dict[str, object]] = []
        for index, task in enumerate(self.graph.tasks):
            if task.collective is None:
                continue
            out.append({
                "task": index,
                "name": task.name,
                "collective": task.collective.value,
                "ranks": len(task.ranks),
                "nbytes": task.nbytes,
                "algorithm": self.timing.algorithms[index],
                "protocol": self.timing.protocols[index],
                "start_s": self.timing.start_s[index],
                "end_s": self.timing.end_s[index],
            })
        return out

    def tasks(self) -> pd.DataFrame:
        """One row per task, columns :data:`TASK_COLUMNS` (``ranks`` as a tuple of ints)."""
        import pandas as pd

        rows = []
        for index, task in enumerate(self.graph.tasks):
            rows.append(
                (
                    index,
                    task.name,
                    task.kind.value,
                    task.phase,
                    task.stream,
                    task.ranks,
                    task.collective.value if task.collective else "",
                    self.timing.algorithms[index],
                    self.timing.protocols[index],
                    task.nbytes,
                    self.timing.start_s[index],
                    self.timing.end_s[index],
                )
            )
        return pd.DataFrame(rows, columns=list(TASK_COLUMNS))


def replay(
    workload: WorkloadSpec | Mapping[str, Any] | str | Path,
    topology: Network | str | Path | Mapping[str, Any],
    *,
    algorithm: str | None = None,
    protocol: str | None = None,
    what_if: WhatIfSource | None = None,
    fold: bool = True,
) -> StepResult:
    """Replay one training step of ``workload`` on ``topology``.

    Parameters
    ----------
    workload
        A YAML file, a parsed mapping (``kind: ddp | fsdp | pipeline | tensor | hybrid``), a
        spec (captured traces: :func:`commsim.traces.replay_trace`).
    topology
        A preset name, a topology YAML file, a parsed mapping or a built network.
    algorithm, protocol
        Override every collective's algorithm / NCCL protocol (above the workload's own
        settings, :mod:`commsim.replay.comm`); each collective is timed as ``commsim run``
        times the same call.
    what_if
        A what-if (a file, its mapping or a parsed :class:`~commsim.topology.what_if.WhatIf`,
        docs/what-if.md): the step on the degraded machine, each rank's compute times its
        factor (slow ranks, jitter); a collective starts when its slowest member reaches it.
        None: the healthy machine.
    fold
        Simulate one block of data-parallel replicas for all where they are images of one
        another (``hybrid``; :mod:`commsim.replay.replicas`: the same step, exactly); False:
        every replica.
    """
    from commsim.topology import load_topology

    spec = load_workload(workload)
    network = load_topology(topology)  # type: ignore[arg-type]
    parsed = None
    if what_if is not None:
        network, parsed = apply_what_if(network, what_if)
    overrides = CommOverrides(algorithm, protocol)
    inner = spec.spec if isinstance(spec, Configured) else spec
    unfolded = None  # why a hybrid step's replicas are not folded
    if fold and isinstance(inner, hybrid.HybridSpec):
        folded = _replay_folded(spec, inner, network, overrides, parsed, what_if)
        if isinstance(folded, StepResult):
            return folded
        unfolded = folded
    try:
        graph = overrides.apply(spec.graph(network))
    except SpecError as exc:  # too big: say why the replicas were not folded
        if unfolded is None:
            raise
        raise SpecError(f"{exc}; replicas not folded: {unfolded.reason}") from None
    factors = None
    if parsed is not None and parsed.changes_compute:
        factors = tuple(_compute_factors(parsed, graph.ranks, what_if).tolist())
    timing = time_graph(graph, network, factors)
    metrics = step_metrics(graph, timing)
    return StepResult(spec, network.name, graph, timing, metrics, spec.extras(metrics),
                      parsed, factors, unfolded)


def _replay_folded(spec: WorkloadSpec, inner: hybrid.HybridSpec, network: Network,
                   overrides: CommOverrides, what_if: WhatIf | None,
                   source: object) -> StepResult | FoldReport:
    """The step replayed from one block of replicas (:mod:`.replicas`), or, where its
    replicas are not images of one another, why not."""
    replicas = inner.parallel.dp
    try:
        graph, fold = inner.folded_graph(network)
        graph = overrides.apply(spec.comm.apply(graph) if isinstance(spec, Configured)
                                else graph)
        factors = None
        if what_if is not None and what_if.changes_compute:
            every = _compute_factors(what_if, graph.ranks, source)
            if not np.array_equal(every, every[fold.shift[:graph.ranks]]):
                raise Unfoldable("the what-if's compute factors differ between replicas")
            factors = tuple(every.tolist())
        timing = time_graph(graph, network, factors, fold)
    except Unfoldable as exc:
        return FoldReport(replicas, replicas, str(exc))
    metrics = step_metrics(graph, timing, fold.images()[:graph.ranks])
    return StepResult(spec, network.name, graph, timing, metrics, spec.extras(metrics),
                      what_if, factors, FoldReport(replicas, fold.simulated))


def _compute_factors(what_if: WhatIf, ranks: int, source: object) -> np.ndarray:
    """The what-if's compute factor of each of the step's ``ranks`` ranks; a rank it names
    beyond them is a SpecError naming the file."""
    return factors_for(what_if, ranks, source)
