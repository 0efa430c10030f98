"""YAML files shared by topology, workload and grid input: strict parsing, one-line errors
(the fields inside are read by :mod:`commsim.fields`).

>>> yaml_documents("a: 1\\n---\\nb: 2\\n", "t.yaml")
[{'a': 1}, {'b': 2}]
>>> yaml_documents("a: 1\\na: 2\\n", "t.yaml")
Traceback (most recent call last):
...
commsim.errors.SpecError: t.yaml: duplicate key 'a' at line 2
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from commsim.errors import SpecError


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects duplicate mapping keys instead of keeping the last."""


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
        if not isinstance(key, str | int | float | bool):
            continue  # an unhashable key: the caller's schema check names it
        if key in seen:
            raise SpecError(f"duplicate key {key!r} at line {key_node.start_mark.line + 1}")
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,  # type: ignore[arg-type]
)


def yaml_documents(text: str, source: str) -> list[object]:
    """The non-empty YAML documents of ``text``; one-line SpecError naming ``source``."""
    try:
        return [d for d in yaml.load_all(text, Loader=StrictLoader) if d is not None]
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise SpecError(f"{source}: invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SpecError(f"{source}: invalid YAML: {problem}{where}") from None


def read_text(path: str | Path, what: str) -> str:
    """The text of a ``what`` file (``topology``, ``workload``, ``grid``); one-line SpecError
    naming the file when it is missing or unreadable."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such {what} file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise SpecError(f"{path}: cannot read {what} file ({reason})") from None


def one_document(text: str, source: str, what: str) -> object:
    """The single YAML document of a ``what`` file's ``text``; one-line SpecError naming
    ``source`` when it is empty or holds several."""
    documents = yaml_documents(text, source)
    if not documents:
        raise SpecError(f"{source}: empty {what} file")
    if len(documents) > 1:
        raise SpecError(
            f"{source}: expected one YAML document, found {len(documents)} (one {what} per file)"
        )
    return documents[0]


def read_document(path: str | Path, what: str) -> object:
    """The single YAML document of the ``what`` file at ``path`` (see :func:`one_document`)."""
    return one_document(read_text(path, what), str(path), what)
