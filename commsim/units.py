"""Parse human units at the boundary: sizes, times and bandwidths into SI floats/ints.

``1GiB`` = 2**30 B, ``1GB`` = 1e9 B, ``64KiB``, ``512B``; ``1us``, ``2.5ms``, ``1s``;
``100GB/s``, ``400Gbps`` (bits per second). Plain numbers are taken as the SI unit
(bytes, seconds, bytes per second).

>>> parse_size("1GiB"), parse_time("2.5ms"), parse_bandwidth("400Gbps")
(1073741824, 0.0025, 50000000000.0)
"""

from __future__ import annotations

import math
import re

from commsim.errors import SpecError

_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_PATTERN = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-z/]*)\s*$")

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


def _parse(value: object, units: dict[str, float], what: str, name: str) -> float:
    """Return ``value`` in SI units; raise SpecError naming it when malformed or negative."""
    label = f"{name}: " if name else ""
    if isinstance(value, bool):
        raise SpecError(f"{label}invalid {what} {value!r}")
    if isinstance(value, int | float):
        number, unit = float(value), ""
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise SpecError(f"{label}invalid {what} {value!r}")
        number, unit = float(match.group(1)), match.group(2)
        if unit not in units:
            raise SpecError(f"{label}unknown unit {unit!r} in {what} {value!r}")
    else:
        raise SpecError(f"{label}invalid {what} {value!r}")
    if not math.isfinite(number):
        raise SpecError(f"{label}{what} must be finite, got {value!r}")
    if number < 0:
        raise SpecError(f"{label}{what} must not be negative, got {value!r}")
    scale = units[unit]
    if scale < 1:  # divide by the exact inverse: "5us" -> 5e-06 exactly, not 4.9999999999999996e-06
        return number / round(1 / scale)
    return number * scale


def parse_size(value: object, name: str = "") -> int:
    """Bytes as an int: ``"1GiB"`` -> 1073741824. Fractional bytes are an error."""
    nbytes = _parse(value, SIZE_UNITS, "size", name)
    if nbytes != int(nbytes):
        label = f"{name}: " if name else ""
        raise SpecError(f"{label}size {value!r} is not a whole number of bytes")
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


def parse_size_range(text: str, name: str = "--size") -> list[int]:
    """``"1KiB"`` -> [1024]; ``"1KiB:16KiB"`` -> [1024, 2048, ..., 16384]; ``MIN:MAX:FACTOR``.

    >>> parse_size_range("1KiB:4KiB")
    [1024, 2048, 4096]
    """
    parts = str(text).split(":")
    if len(parts) == 1:
        return [parse_size(parts[0], name)]
    if len(parts) not in (2, 3):
        raise SpecError(f"{name}: invalid size range {text!r} (want MIN:MAX[:FACTOR])")
    low, high = parse_size(parts[0], name), parse_size(parts[1], name)
    factor = 2.0
    if len(parts) == 3:
        try:
            factor = float(parts[2])
        except ValueError:
            raise SpecError(f"{name}: invalid factor {parts[2]!r} in size range {text!r}") from None
    if factor <= 1 or not math.isfinite(factor):
        raise SpecError(f"{name}: factor must be > 1 in size range {text!r}")
    if high < low:
        raise SpecError(f"{name}: MAX < MIN in size range {text!r}")
    sizes, size = [], low
    if size == 0:
        sizes.append(0)
        size = 1
    while size <= high:
        sizes.append(size)
        nxt = int(size * factor)
        size = nxt if nxt > size else size + 1
    return sizes


def format_size(nbytes: float) -> str:
    """Short human form using binary prefixes: 1073741824 -> '1GiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{int(nbytes // scale)}{unit}"
    return f"{int(nbytes)}B"
