"""Workload YAML fields: the readers of :mod:`commsim.fields`, plus the replay-only ones.

Every workload kind reads its keys through this module (``fields.time(value, "forward_time")``),
so workload files follow the same rules and error wording as topology and grid files:
``path: <problem> (got <value>)``; times and sizes need a unit (``2ms``, ``25MiB``; ``0``
needs none); counts are plain integers (``params_per_unit`` also takes ``100M``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from commsim.errors import SpecError, describe
from commsim.fields import (
    boolean,
    check_keys,
    choice,
    count,
    flops,
    fraction,
    join,
    mapping,
    nonnegative_int,
    positive_int,
    size,
    time,
)
from commsim.yamlfile import read_document

__all__ = [
    "algorithm", "boolean", "check_keys", "choice", "count", "each", "flops", "fraction",
    "join", "mapping", "nonnegative_int", "positive_int", "positive_size", "read_yaml", "size",
    "time",
]


def positive_size(value: object, path: str) -> int:
    """Bytes with a unit, > 0."""
    return size(value, path, positive=True)


def algorithm(value: object, path: str) -> str:
    """``auto`` or a registered algorithm's name."""
    from commsim.algorithms import get_algorithm

    if not isinstance(value, str):
        raise SpecError(f"{path}: must be an algorithm name (got {describe(value)})")
    if value.strip().lower() == "auto":
        return "auto"
    try:
        return get_algorithm(value).name
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None


def each(value: object, path: str, count: int, parse: Any, what: str) -> tuple[Any, ...]:
    """A scalar for every one of ``count`` items (stages, units), or a list of one per item."""
    if isinstance(value, list):
        if len(value) != count:
            raise SpecError(
                f"{path}: need one value per {what} ({count}) (got a list of {len(value)})"
            )
        return tuple(parse(v, join(path, i)) for i, v in enumerate(value))
    return (parse(value, path),) * count


def read_yaml(path: str | Path) -> object:
    """The one YAML document of a workload file; SpecError naming the file otherwise."""
    return read_document(path, "workload")
