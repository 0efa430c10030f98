"""Parse human units at the boundary: sizes, times and bandwidths into SI floats/ints.

``1GiB`` = 2**30 B, ``1GB`` = 1e9 B, ``64KiB``, ``512B``; ``1us``, ``2.5ms``, ``1s``;
``100GB/s``, ``400Gbps`` (bits per second). Plain numbers are taken as the SI unit
(bytes, seconds, bytes per second) on command-line flags; YAML fields go through
:mod:`commsim.fields`, which insists on a unit. Errors read ``NAME: <problem> (got <value>)``.

>>> parse_size("1GiB"), parse_time("2.5ms"), parse_bandwidth("400Gbps")
(1073741824, 0.0025, 50000000000.0)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from commsim.errors import SpecError, describe

_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµ/]*)\s*$")

#: The largest size commsim simulates: a buffer past 1 PiB is a typo, not a collective.
MAX_SIZE = 2**50

SIZE_UNITS: dict[str, float] = {
    "": 1, "B": 1,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
    "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40,  # nccl-tests style -b 8M
}
TIME_UNITS: dict[str, float] = {
    "": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12,
    "min": 60.0, "h": 3600.0,
}
BANDWIDTH_UNITS: dict[str, float] = {
    "": 1.0, "B/s": 1.0, "Bps": 1.0,
    "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
    "KiB/s": 2**10, "MiB/s": 2**20, "GiB/s": 2**30, "TiB/s": 2**40,
    "bps": 1 / 8, "Kbps": 1e3 / 8, "Mbps": 1e6 / 8, "Gbps": 1e9 / 8, "Tbps": 1e12 / 8,
    "Kb/s": 1e3 / 8, "Mb/s": 1e6 / 8, "Gb/s": 1e9 / 8, "Tb/s": 1e12 / 8,
}
FLOPS_UNITS: dict[str, float] = {
    "": 1.0, "FLOP/s": 1.0, "FLOPS": 1.0,
    "GFLOP/s": 1e9, "TFLOP/s": 1e12, "PFLOP/s": 1e15,
    "GFLOPS": 1e9, "TFLOPS": 1e12, "PFLOPS": 1e15,
}
COUNT_UNITS: dict[str, float] = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def _label(name: str) -> str:
    return f"{name}: " if name else ""


def split_quantity(value: object) -> tuple[float, str] | None:
    """``"2.5ms"`` -> ``(2.5, "ms")``, ``3`` -> ``(3.0, "")``; None when not a number with an
    optional unit (bools are not numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value), ""
    if isinstance(value, str):
        match = QUANTITY.match(value)
        if match is not None:
            return float(match.group(1)), match.group(2)
    return None


def _parse(value: object, units: dict[str, float], what: str, name: str) -> float:
    """Return ``value`` in SI units; raise SpecError naming it when malformed or negative."""
    label = _label(name)
    quantity = split_quantity(value)
    if quantity is None:
        raise SpecError(f"{label}not a {what} (got {describe(value)})")
    number, unit = quantity
    if unit not in units:
        raise SpecError(f"{label}unknown {what} unit {unit!r} (got {describe(value)})")
    if not math.isfinite(number):
        raise SpecError(f"{label}must be finite (got {describe(value)})")
    if number < 0:
        raise SpecError(f"{label}must not be negative (got {describe(value)})")
    scale = units[unit]
    # divide by the exact inverse: "5us" -> 5e-06 exactly, not 4.9999999999999996e-06
    result = number / round(1 / scale) if scale < 1 else number * scale
    if not math.isfinite(result):  # "1e300GB/s": finite as written, not in bytes per second
        raise SpecError(f"{label}too large (got {describe(value)})")
    return result


def parse_size(value: object, name: str = "") -> int:
    """Bytes as an int: ``"1GiB"`` -> 1073741824. Fractional bytes and sizes above
    :data:`MAX_SIZE` (1 PiB) are errors."""
    nbytes = _parse(value, SIZE_UNITS, "size", name)
    if nbytes > MAX_SIZE:
        raise SpecError(
            f"{_label(name)}above 1PiB, the largest size commsim simulates (got {describe(value)})"
        )
    if nbytes != int(nbytes):
        raise SpecError(f"{_label(name)}not a whole number of bytes (got {describe(value)})")
    return int(nbytes)


def parse_time(value: object, name: str = "") -> float:
    """Seconds: ``"2.5ms"`` -> 0.0025."""
    return _parse(value, TIME_UNITS, "time", name)


def parse_bandwidth(value: object, name: str = "") -> float:
    """Bytes per second: ``"100GB/s"`` -> 1e11, ``"400Gbps"`` -> 5e10."""
    return _parse(value, BANDWIDTH_UNITS, "bandwidth", name)


def parse_flops(value: object, name: str = "") -> float:
    """FLOP per second: ``"989TFLOP/s"`` -> 9.89e14."""
    return _parse(value, FLOPS_UNITS, "FLOP rate", name)


def parse_count(value: object, name: str = "") -> float:
    """A count with an optional multiplier: ``"100M"`` -> 1e8."""
    return _parse(value, COUNT_UNITS, "count", name)


#: The most sizes one ``MIN:MAX[:FACTOR]`` range may give (a factor near 1 is a typo).
MAX_RANGE_SIZES = 4096


def parse_size_range(
    text: str, name: str = "--size", parse: Callable[[object, str], int] = parse_size
) -> list[int]:
    """``"1KiB"`` -> [1024]; ``"1KiB:16KiB"`` -> [1024, 2048, ..., 16384]; ``MIN:MAX:FACTOR``.
    ``parse`` reads each end (:func:`commsim.fields.size` for YAML, which wants units).

    >>> parse_size_range("1KiB:4KiB")
    [1024, 2048, 4096]
    """
    parts = str(text).split(":")
    if len(parts) == 1:
        return [parse(parts[0], name)]
    got = f"(got {describe(text)})"
    if len(parts) not in (2, 3):
        raise SpecError(f"{name}: not a size range MIN:MAX[:FACTOR] {got}")
    low, high = parse(parts[0], name), parse(parts[1], name)
    factor = 2.0
    if len(parts) == 3:
        try:
            factor = float(parts[2])
        except ValueError:
            raise SpecError(f"{name}: the factor {parts[2]!r} is not a number {got}") from None
    if factor <= 1 or not math.isfinite(factor):
        raise SpecError(f"{name}: the factor must be > 1 {got}")
    if high < low:
        raise SpecError(f"{name}: MAX < MIN {got}")
    sizes, size = [], low
    if size == 0:
        sizes.append(0)
        size = 1
    while size <= high:
        sizes.append(size)
        if len(sizes) > MAX_RANGE_SIZES:
            raise SpecError(f"{name}: more than {MAX_RANGE_SIZES} sizes in one range {got}")
        nxt = int(size * factor)
        size = nxt if nxt > size else size + 1
    return sizes


def format_size(nbytes: float) -> str:
    """Short human form using binary prefixes: 1073741824 -> '1GiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{int(nbytes // scale)}{unit}"
    return f"{int(nbytes)}B"
