"""Read the fields of YAML input (topology, workload and grid files) strictly, by field path.

Every reader takes the value and its field path (``intra.latency``, ``layers[2].grad_bytes``)
and returns it checked, or raises :class:`~commsim.errors.SpecError` worded
``path: <problem> (got <value>)``. The one rule that differs from command-line flags: a
latency, time, size or bandwidth **must carry a unit** (``2us``, ``25MiB``, ``100GB/s``); a
plain number is an error that shows the accepted form, except ``0``, which needs none. Counts
(ranks, nodes, dims, channels, stages, ...) are plain integers.

>>> time("2us", "intra.latency"), size(0, "activation_bytes")
(2e-06, 0)
>>> time(2, "intra.latency")
Traceback (most recent call last):
...
commsim.errors.SpecError: intra.latency: 2 has no unit (write 2us, 2ms or 2s)
>>> check_keys({"latency": "1us", "bandwith": 1}, ("latency", "bandwidth"), (), "link")
Traceback (most recent call last):
...
commsim.errors.SpecError: link.bandwith: unknown key (allowed: bandwidth, latency)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from commsim.errors import SpecError, describe
from commsim.units import (
    parse_bandwidth,
    parse_count,
    parse_flops,
    parse_size,
    parse_size_range,
    parse_time,
    split_quantity,
)

__all__ = [
    "bandwidth",
    "boolean",
    "check_keys",
    "choice",
    "count",
    "describe",
    "flops",
    "fraction",
    "join",
    "mapping",
    "nonnegative_int",
    "positive_int",
    "sequence",
    "size",
    "size_range",
    "string",
    "time",
]


def join(path: str, key: str | int) -> str:
    """``join("layers", 2)`` -> ``layers[2]``; ``join("parallel", "tp")`` -> ``parallel.tp``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _fail(path: str, problem: str, value: object) -> SpecError:
    where = f"{path}: " if path else ""
    return SpecError(f"{where}{problem} (got {describe(value)})")


# -- structure -----------------------------------------------------------------------------
def mapping(value: object, path: str) -> Mapping[Any, Any]:
    """``value`` if it is a mapping."""
    if not isinstance(value, Mapping):
        raise _fail(path, "must be a mapping", value)
    return value


def sequence(value: object, path: str) -> list[Any]:
    """``value`` if it is a list."""
    if not isinstance(value, list):
        raise _fail(path, "must be a list", value)
    return value


def check_keys(
    data: Mapping[Any, Any],
    required: Sequence[str],
    optional: Sequence[str],
    path: str,
    context: str = "",
) -> None:
    """Raise on the first unknown key (sorted) or missing required key of ``data``;
    ``context`` (`` for kind 'ring'``) follows the problem."""
    allowed = set(required) | set(optional)
    unknown = sorted((k for k in data if k not in allowed), key=str)
    if unknown:
        names = ", ".join(sorted(allowed))
        raise SpecError(f"{join(path, str(unknown[0]))}: unknown key{context} (allowed: {names})")
    for key in required:
        if key not in data:
            raise SpecError(f"{join(path, key)}: missing required key{context}")


# -- scalars -------------------------------------------------------------------------------
def string(value: object, path: str) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, "must be a non-empty string", value)
    return value


def boolean(value: object, path: str) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise _fail(path, "must be true or false", value)
    return value


def positive_int(value: object, path: str) -> int:
    """An integer >= 1 (bools, floats and strings are not)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(path, "must be a positive integer", value)
    return value


def nonnegative_int(value: object, path: str) -> int:
    """An integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(path, "must be an integer >= 0", value)
    return value


def count(value: object, path: str) -> int:
    """A whole count >= 1, with an optional multiplier: ``100M`` -> 100000000."""
    number = parse_count(value, path)
    if number < 1 or number != int(number):
        raise _fail(path, "must be a positive whole number", value)
    return int(number)


def fraction(value: object, path: str) -> float:
    """A number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise _fail(path, "must be a number in (0, 1]", value)
    return float(value)


def choice(value: object, path: str, options: Sequence[str]) -> str:
    """One of ``options`` (``-`` accepted for ``_``, any case)."""
    text = value.strip().lower().replace("-", "_") if isinstance(value, str) else ""
    if text not in options:
        raise _fail(path, f"must be one of {', '.join(options)}", value)
    return text


# -- quantities: a unit is required --------------------------------------------------------
#: Each quantity's units for the "has no unit" hint: for a number >= 1, then for one below.
_FORMS = {
    "time": (("us", "ms", "s"), ("s",), "1us"),
    "size": (("B", "KiB", "MiB"), ("B",), "1KiB"),
    "bandwidth": (("GB/s", "Gbps", "B/s"), ("B/s",), "100GB/s"),
}


def _unit_required(value: object, path: str, what: str) -> None:
    """Raise when ``value`` is a number (or a numeric string) other than 0 without a unit."""
    quantity = split_quantity(value)
    if quantity is None or quantity[1] or quantity[0] == 0:
        return
    number = quantity[0]
    text = value.strip() if isinstance(value, str) else f"{value:g}"
    large, small, example = _FORMS[what]
    if 1 <= number < 1e6:
        forms = [f"{text}{unit}" for unit in large]
        written = f"{', '.join(forms[:-1])} or {forms[-1]}"
    else:
        written = f"{text}{small[0]}, or e.g. {example}"
    raise SpecError(f"{path}: {text} has no unit (write {written})")


def time(value: object, path: str) -> float:
    """Seconds >= 0 from a time with a unit: ``2ms`` -> 0.002 (``0`` needs none)."""
    _unit_required(value, path, "time")
    return parse_time(value, path)


def size(value: object, path: str, *, positive: bool = False) -> int:
    """Bytes from a size with a unit: ``25MiB`` (``0`` needs none); > 0 if ``positive``."""
    _unit_required(value, path, "size")
    nbytes = parse_size(value, path)
    if positive and nbytes <= 0:
        raise _fail(path, "must be > 0", value)
    return nbytes


def size_range(value: object, path: str) -> list[int]:
    """A size or a range ``MIN:MAX[:FACTOR]``, both ends with units: ``1KiB:1MiB:4``."""
    if isinstance(value, str) and ":" in value:
        return parse_size_range(value, path, parse=size)
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise _fail(path, "must be a size or MIN:MAX[:FACTOR]", value)
    return [size(value, path)]


def bandwidth(value: object, path: str) -> float:
    """Bytes per second > 0 from a bandwidth with a unit: ``100GB/s``, ``400Gbps``."""
    _unit_required(value, path, "bandwidth")
    rate = parse_bandwidth(value, path)
    if rate <= 0:
        raise _fail(path, "must be > 0", value)
    return rate


def flops(value: object, path: str) -> float:
    """FLOP/s > 0: ``989TFLOP/s`` (a plain number is FLOP/s)."""
    rate = parse_flops(value, path)
    if rate <= 0:
        raise _fail(path, "must be > 0", value)
    return rate
