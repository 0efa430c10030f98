"""A sweep grid: YAML (or a dict) -> a validated :class:`Grid` -> its points, in grid order.

Every malformed value is a :class:`~commsim.errors.SpecError` naming the key, its index and the
value (``sizes[1]: unknown size unit 'XB' (got '5XB')``), prefixed with the grid file when there
is one; values are read by :mod:`commsim.fields` (sizes need a unit, as in every YAML file). Names
(collectives, algorithms, topologies, workloads) are resolved here, once, so that a point only
fails for a reason of its own (an algorithm that cannot run its collective, too many ranks).

>>> grid = load_grid({"collectives": "all_reduce", "sizes": ["1KiB:4KiB"],
...                   "algorithms": ["ring", "auto"], "topologies": ["dgx-h100"]})
>>> [(p.algorithm, p.nbytes) for p in grid.points()]
[('ring', 1024), ('ring', 2048), ('ring', 4096), ('auto', 1024), ('auto', 2048), ('auto', 4096)]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commsim import fields
from commsim.errors import SpecError, describe
from commsim.yamlfile import read_document

#: Keys of a grid, in the order their axes nest (the last varies fastest).
COLLECTIVE_KEYS = (
    "topologies", "ranks", "engine", "protocol", "chunks", "collectives", "algorithms", "sizes",
)
WORKLOAD_KEYS = ("workloads",)
GRID_KEYS = (*COLLECTIVE_KEYS, *WORKLOAD_KEYS)
#: The most points one grid may have: every row is held until the table is written (about a
#: kilobyte each), and even analytic points take a fraction of a millisecond.
MAX_POINTS = 1_000_000


@dataclass(frozen=True, slots=True)
class Topology:
    """One entry of ``topologies``: its label (the network's name) and what to load.

    ``ref`` is a preset name (workers keep its network cached) or a validated spec (files and
    inline mappings are read once, here, so workers never need the grid's files).
    """

    label: str
    ranks: int
    ref: Any


@dataclass(frozen=True, slots=True)
class Workload:
    """One entry of ``workloads``: its label (the path as written, or ``name``/``kind[i]``)."""

    label: str
    spec: Any


@dataclass(frozen=True, slots=True)
class CollectivePoint:
    """One collective to simulate."""

    topology: Topology
    ranks: int | None
    engine: str
    chunks: int | None
    collective: str
    algorithm: str
    nbytes: int
    protocol: str = "auto"


@dataclass(frozen=True, slots=True)
class WorkloadPoint:
    """One training step to replay."""

    topology: Topology
    workload: Workload


Point = CollectivePoint | WorkloadPoint


@dataclass(frozen=True, slots=True)
class Grid:
    """A validated grid: each axis as a tuple of resolved values (see ``docs/sweep.md``)."""

    topologies: tuple[Topology, ...]
    ranks: tuple[int | None, ...] = (None,)
    engine: tuple[str, ...] = ("des",)
    protocol: tuple[str, ...] = ("auto",)
    chunks: tuple[int | None, ...] = (None,)
    collectives: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = ("auto",)
    sizes: tuple[int, ...] = ()
    workloads: tuple[Workload, ...] = ()
    source: str = ""

    def points(self) -> Iterator[Point]:
        """Every point in grid order: the collective points (axes nested in the order of
        :data:`COLLECTIVE_KEYS`, sizes fastest), then the workload points (topologies outer)."""
        if self.collectives:
            for topo, ranks, engine, proto, chunks, coll, algo, nbytes in itertools.product(
                self.topologies,
                self.ranks,
                self.engine,
                self.protocol,
                self.chunks,
                self.collectives,
                self.algorithms,
                self.sizes,
            ):
                yield CollectivePoint(topo, ranks, engine, chunks, coll, algo, nbytes, proto)
        for topo, workload in itertools.product(self.topologies, self.workloads):
            yield WorkloadPoint(topo, workload)

    def __len__(self) -> int:
        collective = 0
        if self.collectives:
            collective = len(self.topologies) * len(self.ranks) * len(self.engine)
            collective *= len(self.protocol) * len(self.chunks) * len(self.collectives)
            collective *= len(self.algorithms) * len(self.sizes)
        return collective + len(self.topologies) * len(self.workloads)


# -- reading -------------------------------------------------------------------------------
def read_grid_file(path: str | Path) -> object:
    """The one YAML document of a grid file (SpecError naming the file otherwise)."""
    return read_document(path, "grid")


def load_grid(grid: Grid | str | Path | Mapping[str, Any], base: str | Path | None = None) -> Grid:
    """A :class:`Grid` from a grid YAML file, a parsed mapping, or a Grid (returned as is).

    Relative file paths in the grid resolve against ``base``: by default the grid file's
    directory, or the current directory for a mapping.
    """
    if isinstance(grid, Grid):
        return grid
    if isinstance(grid, str | Path):
        source = str(grid)
        data = read_grid_file(grid)
        folder = Path(grid).resolve().parent if base is None else Path(base)
    else:
        source, data = "", grid
        folder = Path.cwd() if base is None else Path(base)
    try:
        return _parse(data, folder, source)
    except SpecError as exc:
        if source:
            raise SpecError(f"{source}: {exc}") from None
        raise


def _parse(data: object, folder: Path, source: str) -> Grid:
    if not isinstance(data, Mapping):
        keys = ", ".join(GRID_KEYS)
        raise SpecError(f"a grid must be a mapping of {keys} (got {describe(data)})")
    fields.check_keys(data, (), GRID_KEYS, "")
    has_collectives = "collectives" in data
    if not has_collectives and "workloads" not in data:
        raise SpecError("nothing to sweep: give collectives (with sizes) and/or workloads")
    if "topologies" not in data:
        raise SpecError("topologies: missing required key")
    if has_collectives and "sizes" not in data:
        raise SpecError("sizes: missing (collectives need sizes)")
    if not has_collectives:
        for key in ("sizes", "algorithms", "ranks", "engine", "protocol", "chunks"):
            if key in data:
                raise SpecError(f"{key}: applies to collectives, and the grid has none")
    axes: dict[str, Any] = {"source": source}
    axes["topologies"] = tuple(
        _topology(v, f"topologies[{i}]", folder) for i, v in enumerate(_items(data, "topologies"))
    )
    if has_collectives:
        axes["collectives"] = _axis(data, "collectives", _collective)
        axes["sizes"] = tuple(n for sizes in _axis(data, "sizes", fields.size_range) for n in sizes)
        optional: dict[str, Callable[[object, str], Any]] = {
            "algorithms": _algorithm,
            "ranks": _count,
            "engine": _engine,
            "protocol": _protocol,
            "chunks": _count,
        }
        for key, parse in optional.items():
            if key in data:
                axes[key] = _axis(data, key, parse)
    if "workloads" in data:
        axes["workloads"] = tuple(
            _workload(v, i, folder) for i, v in enumerate(_items(data, "workloads"))
        )
    grid = Grid(**axes)
    if len(grid) > MAX_POINTS:
        raise SpecError(f"the grid has {len(grid)} points, more than the {MAX_POINTS} one sweep "
                        "runs (its rows are held in memory): split it into several grids")
    return grid


def _axis(
    data: Mapping[str, Any], key: str, parse: Callable[[object, str], Any]
) -> tuple[Any, ...]:
    """Every value of ``key`` parsed, errors naming ``key[i]``."""
    return tuple(parse(v, f"{key}[{i}]") for i, v in enumerate(_items(data, key)))


def _items(data: Mapping[str, Any], key: str) -> list[Any]:
    """A key's values: a list, or one scalar/mapping taken as a list of one."""
    value = data[key]
    items = list(value) if isinstance(value, list) else [value]
    if not items:
        raise SpecError(f"{key}: must list at least one value (got an empty list)")
    return items


# -- axes ----------------------------------------------------------------------------------
def _collective(value: object, path: str) -> str:
    from commsim.collectives import parse_collective

    if not isinstance(value, str):
        raise SpecError(f"{path}: must be a collective name (got {describe(value)})")
    try:
        return parse_collective(value).value
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None


def _algorithm(value: object, path: str) -> str:
    from commsim.algorithms import get_algorithm

    if not isinstance(value, str):
        raise SpecError(f"{path}: must be an algorithm name or auto (got {describe(value)})")
    from commsim.nccl import PIPELINED

    if value.strip().lower() in ("auto", PIPELINED):  # NCCL's trees: on NCCL topologies
        return value.strip().lower()
    try:
        return get_algorithm(value).name
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None


def _count(value: object, path: str) -> int | None:
    """A positive int, or None (null: the topology's/algorithm's default)."""
    return None if value is None else fields.positive_int(value, path)


def _engine(value: object, path: str) -> str:
    from commsim.api import ENGINES

    if value not in ENGINES:
        raise SpecError(
            f"{path}: unknown engine (got {describe(value)}; known: {', '.join(ENGINES)})"
        )
    return str(value)


def _protocol(value: object, path: str) -> str:
    """``auto``, ``none`` or an NCCL protocol, canonical spelling (see ``commsim run``)."""
    from commsim.api import canonical_protocol

    try:
        return canonical_protocol(value)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None


def _resolve(value: str, folder: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else folder / path


def _topology(value: object, path: str, folder: Path) -> Topology:
    from commsim.topology import load_topology, topology_spec
    from commsim.topology.presets import preset_names, preset_spec

    try:
        if isinstance(value, str):
            names = preset_names()
            try:
                spec = preset_spec(value)
            except SpecError:
                if value in names or any(value.startswith(n + "x") for n in names):
                    raise  # a preset with a bad xN suffix
                file = _resolve(value, folder)
                if not file.is_file():
                    raise SpecError(
                        f"unknown topology {value!r} (not a preset, and no such file "
                        f"{str(file)!r}; presets: {', '.join(names)})"
                    ) from None
                spec = topology_spec(file)
            else:
                return Topology(label=value, ranks=spec.num_ranks, ref=value)
        elif isinstance(value, Mapping):
            spec = topology_spec(value)
        else:
            raise SpecError(
                f"must be a preset name, a topology file or a mapping (got {describe(value)})"
            )
        network = load_topology(spec)  # validates fully; gives the name a mapping builds to
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
    return Topology(label=network.name, ranks=network.ranks, ref=spec)


def _workload(value: object, index: int, folder: Path) -> Workload:
    from commsim.replay.step import workload_from_dict
    from commsim.traces.replay import load_workload_or_trace

    path = f"workloads[{index}]"
    try:
        if isinstance(value, str):
            file = _resolve(value, folder)
            if not file.exists():
                raise SpecError(f"no such workload file {str(file)!r}")
            return Workload(label=value, spec=load_workload_or_trace(file))
        if isinstance(value, Mapping):
            data = dict(value)
            name = data.pop("name", None)
            if name is not None and not isinstance(name, str):
                fields.string(name, "name")
            spec = workload_from_dict(data)
            return Workload(label=name or f"{spec.kind}[{index}]", spec=spec)
        raise SpecError(f"must be a workload file or a mapping (got {describe(value)})")
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
