"""Imports flow one way: no cycles among commsim's modules, and each layer imports only those
below it (the layers are drawn in docs/design.md, "Layers").

Every import counts: at the top of a module, inside a function, and under ``TYPE_CHECKING``
(a cycle hidden in a function or a type-only import is still two modules that need each other).
The one exception is a module importing its own package's ``__init__``, which is how a package
re-exports its names.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1] / "commsim"

#: Layers, lowest first: a module may import its own layer and those below it, never above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("units", "errors", "gcpause", "collectives", "yamlfile", "fields", "cliargs", "progress",
     "trace_events", "budget", "lazy_rows", "sized_lru"),
    ("network", "links", "devices", "schedule", "measurements"),
    ("algorithms", "checker"),
    ("topology",),
    ("engine",),
    ("results", "nccl", "nccl_composed", "nccl_tree", "nccl_paths", "nccl_caps", "nccl_tables",
     "bound"),
    ("timing",),
    ("api", "export", "table"),
    ("replay",),
    ("traces", "validation", "measure", "sweep", "plots", "plan", "goodput"),
    ("cli", "run_cli", "__main__", "__init__"),
)
#: Modules that sit above their package's layer: each package's command line.
CLI_MODULES = ("cli",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """The commsim modules ``name`` imports, anywhere in its source."""
    known = _modules()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    out = set()
    for target in found:
        while target and target not in known:
            target = target.rpartition(".")[0]
        own_package = known.get(target, Path()).name == "__init__.py" and name.startswith(
            target + "."
        )
        if target and target != name and not own_package:
            out.add(target)
    return out


@cache
def _graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(_imports(name, path)) for name, path in _modules().items()}


def _cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycles() -> None:
    """No two commsim modules import each other, directly or through others."""
    assert _cycles(_graph()) == []


def test_nccl_never_imports_the_layers_above_it() -> None:
    """The NCCL model sits under the timing layer and never imports it or the API."""
    above = {"commsim.api", "commsim.timing", "commsim.cli"}
    assert not _graph()["commsim.nccl"] & above


def _layer(name: str) -> int:
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    if parts[-1] in CLI_MODULES:
        return len(LAYERS) - 1
    for rank, members in enumerate(LAYERS):
        if top in members:
            return rank
    raise AssertionError(f"{name}: in no layer of LAYERS (add it there and to docs/design.md)")


def test_every_module_imports_only_its_layer_and_below() -> None:
    """Each import goes to the module's own layer or a lower one (see :data:`LAYERS`)."""
    upward = [
        f"{name} -> {target}"
        for name, targets in sorted(_graph().items())
        for target in sorted(targets)
        if _layer(target) > _layer(name)
    ]
    assert upward == []


@pytest.mark.parametrize(
    ("packages", "forbidden"),
    [
        (("engine", "algorithms", "topology"), ("api", "replay", "cli", "nccl", "results")),
        (("algorithms",), ("engine",)),
    ],
)
def test_lower_layers_never_import_the_upper(
    packages: tuple[str, ...], forbidden: tuple[str, ...]
) -> None:
    """Nothing in the engine, the algorithms or the topology imports the API, replay, the CLI,
    the NCCL model or results; the algorithms do not import the engine."""
    bad = [
        f"{name} -> {target}"
        for name, targets in _graph().items()
        if name.split(".")[1:2] and name.split(".")[1] in packages
        for target in targets
        if target.split(".")[1:2] and target.split(".")[1] in forbidden
    ]
    assert bad == []


def _third_party(name: str) -> set[str]:
    tree = ast.parse(_modules()[name].read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize(
    ("library", "allowed"),
    [
        ("simpy", ("engine",)),
        (
            "pandas",
            ("results", "export", "plots", "replay", "validation", "sweep", "measure", "traces"),
        ),
    ],
)
def test_heavy_libraries_stay_in_their_layers(library: str, allowed: tuple[str, ...]) -> None:
    """Only the engine imports SimPy; only the result, export, plot, replay, validation, sweep,
    measure and trace modules import pandas."""
    users = sorted(name for name in _modules() if library in _third_party(name))
    assert users, f"nobody imports {library}: the rule is stale"
    assert [u for u in users if u.split(".")[1] not in allowed] == []


def test_closed_forms_and_the_des_are_independent() -> None:
    """The closed forms never import the discrete-event engine and vice versa (each is the
    other's oracle); only ``engine/evaluate``, the one door to both, imports both."""
    des = {"commsim.engine.des", "commsim.engine.batched", "commsim.engine.maxmin",
           "commsim.engine.exact", "commsim.engine.reuse", "commsim.engine.tasks"}
    door = {"commsim.engine", "commsim.engine.evaluate"}
    closed = {n for n in _modules() if n.startswith("commsim.engine.")} - des - door
    assert [f"{a} -> {b}" for a in closed for b in _graph()[a] if b in des] == []
    assert [f"{a} -> {b}" for a in des for b in _graph()[a] if b in closed] == []
