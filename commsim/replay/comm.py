"""How a replay times its collectives: algorithm and protocol overrides.

Every collective of a step is timed as ``commsim run`` times the same call
(:mod:`commsim.timing`); these overrides say what to ask it, in a workload file (any kind)::

    protocol: LL128                    # every collective's NCCL protocol
    algorithms: {all_reduce: ring}     # per collective kind
    protocols: {all_gather: Simple}

and on the command line (``commsim replay --algorithm ring --protocol Simple``). For each
collective the first that is set wins: the command line, the file's per-kind entry, the file's
``protocol:`` (or, for the algorithm, the kind's own ``algorithm:`` fields), else ``auto``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from commsim import fields
from commsim.collectives import Collective, parse_collective
from commsim.errors import SpecError
from commsim.replay.graph import StepGraph, TaskKind
from commsim.timing import canonical_algorithm, canonical_protocol

#: The workload keys this module reads (for every kind).
KEYS = ("protocol", "algorithms", "protocols")


@dataclass(frozen=True, slots=True)
class CommOverrides:
    """Algorithm and protocol for every collective, and per collective kind (None / absent:
    not overridden)."""

    algorithm: str | None = None
    protocol: str | None = None
    algorithms: tuple[tuple[Collective, str], ...] = ()
    protocols: tuple[tuple[Collective, str], ...] = ()

    def __post_init__(self) -> None:
        if self.algorithm is not None:
            object.__setattr__(self, "algorithm", canonical_algorithm(self.algorithm))
        if self.protocol is not None:
            object.__setattr__(self, "protocol", canonical_protocol(self.protocol))

    def apply(self, graph: StepGraph) -> StepGraph:
        """``graph`` with these overrides written into its collective tasks."""
        if self == CommOverrides():
            return graph
        algorithms, protocols = dict(self.algorithms), dict(self.protocols)
        tasks = []
        for task in graph.tasks:
            if task.kind is TaskKind.COLLECTIVE and task.collective is not None:
                task = replace(
                    task,
                    algorithm=algorithms.get(task.collective) or self.algorithm or task.algorithm,
                    protocol=protocols.get(task.collective) or self.protocol or task.protocol,
                )
            tasks.append(task)
        return replace(graph, tasks=tuple(tasks))


def _per_kind(value: object, path: str, canonical: Any) -> tuple[tuple[Collective, str], ...]:
    out = []
    for key, name in fields.mapping(value, path).items():
        try:
            out.append((parse_collective(key), canonical(name)))
        except SpecError as exc:
            raise SpecError(f"{path}.{key}: {exc}") from None
    return tuple(sorted(out, key=lambda item: item[0].value))


def parse(data: Mapping[str, Any]) -> tuple[CommOverrides, dict[str, Any]]:
    """The overrides a workload mapping sets, and the mapping without their keys."""
    rest = {k: v for k, v in data.items() if k not in KEYS}
    protocol = data.get("protocol")
    if protocol is not None:
        try:
            protocol = canonical_protocol(protocol)
        except SpecError as exc:
            raise SpecError(f"protocol: {exc}") from None
    overrides = CommOverrides(
        protocol=protocol,
        algorithms=_per_kind(data.get("algorithms", {}), "algorithms", canonical_algorithm),
        protocols=_per_kind(data.get("protocols", {}), "protocols", canonical_protocol),
    )
    return overrides, rest
