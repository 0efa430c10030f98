"""What ``validate`` and ``calibrate`` read: the collective rows of a measurements CSV, and the
``--sizes`` / ``--collectives`` flags that select among them.

The record and its CSV are :mod:`commsim.measurements` (shared with ``commsim measure``);
here ping-pong rows are left out, since nothing predicts them as collectives, and the file is
written with the contract's four columns.

>>> from commsim.collectives import Collective
>>> rows = [Measurement(collective=Collective.ALL_REDUCE, ranks=4, nbytes=1024, time_s=2e-5)]
>>> [r.nbytes for r in filter_rows(rows, sizes=parse_sizes_flag("1KiB,1MiB"))]
[1024]
>>> parse_sizes_flag("64KiB:1MiB")
[(65536, 1048576)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from commsim.collectives import Collective, parse_collective
from commsim.errors import ParseError, SpecError
from commsim.measurements import (
    REQUIRED,
    Measurement,
    SizeFilter,
    collectives_only,
    filter_rows,
    format_csv,
    parse_csv,
    read_csv,
)
from commsim.units import parse_size

__all__ = [
    "MEASUREMENT_COLUMNS",
    "Measurement",
    "SizeFilter",
    "filter_rows",
    "format_measurements",
    "parse_collectives_flag",
    "parse_measurements",
    "parse_sizes_flag",
    "read_measurements",
    "write_measurements",
]

#: The contract's columns, in the order :func:`write_measurements` writes them.
MEASUREMENT_COLUMNS = REQUIRED


def _collective_rows(rows: list[Measurement[str]], source: str) -> list[Measurement[Collective]]:
    out = collectives_only(rows)
    if not out:
        raise ParseError(f"{source}: no collective rows (only ping-pong)")
    return out


def parse_measurements(text: str, source: str = "<csv>") -> list[Measurement[Collective]]:
    """The collective rows of a measurements CSV given as text (see :func:`read_measurements`)."""
    return _collective_rows(parse_csv(text, source), source)


def read_measurements(path: str | Path) -> list[Measurement[Collective]]:
    """The collective rows of a measurements CSV (:func:`commsim.measurements.read_csv`).

    The header must hold ``collective, ranks, nbytes, time_s`` (any order, extra columns
    ignored); blank lines and ``#`` lines are skipped; ``nbytes`` may carry a unit (``1MiB``);
    ``sendrecv`` (ping-pong) rows are left out.

    Raises
    ------
    ParseError
        One line naming the file (and line): unreadable, empty, no such columns, a bad value.
    """
    return _collective_rows(read_csv(path), str(path))


def format_measurements(
    rows: Sequence[Measurement[Collective]],
    *,
    comments: Sequence[str] = (),
    extra: Mapping[str, Sequence[object]] | None = None,
) -> str:
    """The CSV text with the contract's columns: ``# comment`` lines, the header, one line per
    row (``repr`` floats), then the ``extra`` columns."""
    return format_csv(rows, columns=MEASUREMENT_COLUMNS, comments=comments, extra=extra)


def write_measurements(
    rows: Sequence[Measurement[Collective]],
    path: str | Path,
    *,
    comments: Sequence[str] = (),
    extra: Mapping[str, Sequence[object]] | None = None,
) -> None:
    """Write ``rows`` as a measurements CSV (contract columns first, then ``extra``)."""
    Path(path).write_text(format_measurements(rows, comments=comments, extra=extra), "utf-8")


def parse_sizes_flag(text: str, name: str = "--sizes") -> list[SizeFilter]:
    """``"64KiB,1MiB"`` -> exact sizes; an item ``MIN:MAX`` keeps sizes in [MIN, MAX].

    >>> parse_sizes_flag("1KiB, 4KiB:8KiB")
    [(1024, 1024), (4096, 8192)]
    """
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise SpecError(f"{name}: empty list of sizes")
    out: list[SizeFilter] = []
    for item in items:
        if not item:
            raise SpecError(f"{name}: empty item in {text!r}")
        parts = item.split(":")
        if len(parts) == 1:
            size = parse_size(item, name)
            out.append((size, size))
        elif len(parts) == 2:
            low = parse_size(parts[0], name) if parts[0].strip() else 0
            high = parse_size(parts[1], name) if parts[1].strip() else 2**63
            if high < low:
                raise SpecError(f"{name}: MAX < MIN in {item!r}")
            out.append((low, high))
        else:
            raise SpecError(f"{name}: invalid item {item!r} (a size or MIN:MAX)")
    return out


def parse_collectives_flag(text: str, name: str = "--collectives") -> list[Collective]:
    """``"all_reduce,broadcast"`` (any accepted spelling) -> collectives, in order, unique."""
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise SpecError(f"{name}: empty list of collectives")
    out: list[Collective] = []
    for item in items:
        try:
            collective = parse_collective(item)
        except SpecError as exc:
            raise SpecError(f"{name}: {exc}") from None
        if collective not in out:
            out.append(collective)
    return out
