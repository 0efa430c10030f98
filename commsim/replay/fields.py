"""Read workload YAML fields strictly: every error names the field path and the value.

Sizes, times and FLOP rates accept unit strings (``25MiB``, ``2ms``, ``989TFLOP/s``) through
:mod:`commsim.units`; plain numbers are SI. Counts are integers (``params_per_unit`` also takes
``100M``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from commsim.errors import SpecError, describe
from commsim.units import parse_count, parse_flops, parse_size, parse_time
from commsim.yamlfile import read_text, yaml_documents


def join(path: str, key: str | int) -> str:
    """``join("layers", 2)`` -> ``layers[2]``; ``join("parallel", "tp")`` -> ``parallel.tp``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def mapping(value: object, path: str) -> Mapping[str, Any]:
    """``value`` if it is a mapping with string keys."""
    if not isinstance(value, Mapping):
        raise SpecError(f"{path or 'workload'}: must be a mapping, got {describe(value)}")
    return value


def check_keys(
    data: Mapping[str, Any],
    required: Sequence[str],
    optional: Sequence[str],
    path: str,
    context: str = "",
) -> None:
    """Raise on the first unknown key (sorted) or missing required key."""
    allowed = set(required) | set(optional)
    unknown = sorted((k for k in data if k not in allowed), key=str)
    if unknown:
        names = ", ".join(sorted(allowed))
        where = join(path, str(unknown[0]))
        raise SpecError(f"{where}: unknown key{context} (allowed: {names})")
    for key in required:
        if key not in data:
            raise SpecError(f"{join(path, key)}: missing required key{context}")


def positive_int(value: object, path: str) -> int:
    """An integer >= 1 (bools and floats are not)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{path}: must be a positive integer, got {describe(value)}")
    return value


def nonnegative_int(value: object, path: str) -> int:
    """An integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"{path}: must be an integer >= 0, got {describe(value)}")
    return value


def size(value: object, path: str) -> int:
    """Bytes: ``25MiB`` or a whole number."""
    return parse_size(value, path)


def positive_size(value: object, path: str) -> int:
    """Bytes, > 0."""
    nbytes = parse_size(value, path)
    if nbytes <= 0:
        raise SpecError(f"{path}: must be > 0, got {describe(value)}")
    return nbytes


def time(value: object, path: str) -> float:
    """Seconds: ``2ms`` or a number >= 0."""
    return parse_time(value, path)


def count(value: object, path: str) -> int:
    """A whole count >= 1, with an optional multiplier: ``100M`` -> 100000000."""
    number = parse_count(value, path)
    if number < 1 or number != int(number):
        raise SpecError(f"{path}: must be a positive whole number, got {describe(value)}")
    return int(number)


def flops(value: object, path: str) -> float:
    """FLOP/s, > 0: ``989TFLOP/s``."""
    rate = parse_flops(value, path)
    if rate <= 0:
        raise SpecError(f"{path}: must be > 0, got {describe(value)}")
    return rate


def fraction(value: object, path: str) -> float:
    """A number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise SpecError(f"{path}: must be a number in (0, 1], got {describe(value)}")
    return float(value)


def boolean(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{path}: must be true or false, got {describe(value)}")
    return value


def choice(value: object, path: str, options: Sequence[str]) -> str:
    """One of ``options`` (``-`` accepted for ``_``, any case)."""
    text = value.strip().lower().replace("-", "_") if isinstance(value, str) else ""
    if text not in options:
        raise SpecError(f"{path}: unknown value {value!r} (known: {', '.join(options)})")
    return text


def algorithm(value: object, path: str) -> str:
    """``auto`` or a registered algorithm's name."""
    from commsim.algorithms import get_algorithm

    if not isinstance(value, str):
        raise SpecError(f"{path}: must be an algorithm name, got {describe(value)}")
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
            raise SpecError(f"{path}: lists {len(value)} values, need one per {what} ({count})")
        return tuple(parse(v, join(path, i)) for i, v in enumerate(value))
    return (parse(value, path),) * count


# -- YAML ----------------------------------------------------------------------------------
def read_yaml(path: str | Path) -> object:
    """The one YAML document of a workload file; SpecError naming the file otherwise."""
    source = str(path)
    documents = yaml_documents(read_text(path, "workload"), source)
    if len(documents) != 1:
        raise SpecError(f"{source}: expected one YAML document, found {len(documents)}")
    return documents[0]
