"""Measured rows (collective, ranks, bytes, time) and the measurements CSV that holds them.

A :class:`Measurement` is one timed collective: what ``commsim measure`` writes, what an
nccl-tests log yields, and what ``validate`` and ``calibrate`` consume. The CSV has a header
with at least ``collective, ranks, nbytes, time_s`` (any order; other columns are kept by
nobody and ignored), and may carry ``# ...`` comment lines (environment, provenance).

>>> from commsim.collectives import Collective
>>> rows = [Measurement(collective=Collective.ALL_REDUCE, ranks=4, nbytes=1024, time_s=2e-5)]
>>> [r.nbytes for r in filter_rows(rows, sizes=parse_sizes_flag("1KiB,1MiB"))]
[1024]
>>> parse_sizes_flag("64KiB:1MiB")
[(65536, 1048576)]
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from commsim.collectives import Collective, parse_collective
from commsim.errors import ParseError, SpecError
from commsim.units import parse_size

#: The contract's columns, in the order :func:`write_measurements` writes them.
MEASUREMENT_COLUMNS = ("collective", "ranks", "nbytes", "time_s")

#: A ``--sizes`` item: ``(low, high)`` bytes, inclusive (an exact size has low == high).
SizeFilter = tuple[int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One measured collective.

    Parameters
    ----------
    collective : Collective
        What ran.
    ranks : int
        World size (>= 1).
    nbytes : int
        nccl-tests' ``size``: the full buffer (all_gather output, reduce_scatter input).
    time_s : float
        Measured seconds (a median over iterations), > 0.
    """

    collective: Collective
    ranks: int
    nbytes: int
    time_s: float

    def __post_init__(self) -> None:
        if not isinstance(self.collective, Collective):
            raise SpecError(f"collective: must be a Collective, got {self.collective!r}")
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise SpecError(f"ranks: must be a positive integer, got {self.ranks!r}")
        if isinstance(self.nbytes, bool) or not isinstance(self.nbytes, int) or self.nbytes < 0:
            raise SpecError(f"nbytes: must be an integer >= 0, got {self.nbytes!r}")
        if not isinstance(self.time_s, int | float) or not (
            math.isfinite(self.time_s) and self.time_s > 0
        ):
            raise SpecError(f"time_s: must be a finite number > 0, got {self.time_s!r}")

    def to_dict(self) -> dict[str, object]:
        """The row as the CSV writes it."""
        return {
            "collective": self.collective.value,
            "ranks": self.ranks,
            "nbytes": self.nbytes,
            "time_s": self.time_s,
        }


def _cell(row: Mapping[str, str | None], key: str, where: str) -> str:
    value = row.get(key)
    if value is None or not value.strip():
        raise ParseError(f"{where}: empty {key!r}")
    return value.strip()


def _parse_row(row: Mapping[str, str | None], where: str) -> Measurement:
    try:
        collective = parse_collective(_cell(row, "collective", where))
    except SpecError as exc:
        raise ParseError(f"{where}: {exc}") from None
    text = _cell(row, "ranks", where)
    try:
        ranks = int(text)
    except ValueError:
        raise ParseError(f"{where}: ranks {text!r} is not an integer") from None
    text = _cell(row, "nbytes", where)
    try:
        nbytes = int(text) if text.isdigit() else parse_size(text, "nbytes")
    except SpecError as exc:
        raise ParseError(f"{where}: {exc}") from None
    text = _cell(row, "time_s", where)
    try:
        time_s = float(text)
    except ValueError:
        raise ParseError(f"{where}: time_s {text!r} is not a number") from None
    try:
        return Measurement(collective=collective, ranks=ranks, nbytes=nbytes, time_s=time_s)
    except SpecError as exc:
        raise ParseError(f"{where}: {exc}") from None


#: Rows of these kinds (``commsim measure``'s ping-pong) are skipped: they are not collectives.
POINT_TO_POINT = ("sendrecv", "send_recv", "pingpong")


def parse_measurements(text: str, source: str = "<csv>") -> list[Measurement]:
    """Rows of a measurements CSV given as text (see :func:`read_measurements`)."""
    lines = [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise ParseError(f"{source}: no measurements (empty file)")
    header_number, header_line = lines[0]
    header = [name.strip() for name in next(csv.reader([header_line]))]
    missing = [c for c in MEASUREMENT_COLUMNS if c not in header]
    if missing:
        raise ParseError(
            f"{source}:{header_number}: not a measurements CSV: header lacks "
            f"{', '.join(missing)} (need {', '.join(MEASUREMENT_COLUMNS)})"
        )
    rows: list[Measurement] = []
    for number, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise ParseError(
                f"{source}:{number}: {len(cells)} fields, the header has {len(header)}"
            )
        record = dict(zip(header, cells, strict=True))
        if record["collective"].strip().lower() in POINT_TO_POINT:
            continue  # `commsim measure` ping-pong rows: measured, not a collective to predict
        rows.append(_parse_row(record, f"{source}:{number}"))
    if not rows:
        raise ParseError(f"{source}: header but no measurement rows")
    return rows


def read_measurements(path: str | Path) -> list[Measurement]:
    """Read a measurements CSV.

    The header must hold ``collective, ranks, nbytes, time_s`` (any order, extra columns
    ignored); blank lines and ``#`` lines are skipped; ``nbytes`` may carry a unit (``1MiB``).

    Raises
    ------
    ParseError
        One line naming the file (and line): unreadable, empty, no such columns, a bad value.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParseError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ParseError(f"{source}: cannot read ({reason})") from None
    return parse_measurements(text, source)


def format_measurements(
    rows: Sequence[Measurement],
    *,
    comments: Sequence[str] = (),
    extra: Mapping[str, Sequence[object]] | None = None,
) -> str:
    """The CSV text: ``# comment`` lines, the header, one line per row (``repr`` floats)."""
    extra = dict(extra or {})
    for name, values in extra.items():
        if name in MEASUREMENT_COLUMNS:
            raise SpecError(f"extra column {name!r} clashes with a contract column")
        if len(values) != len(rows):
            raise SpecError(f"extra column {name!r} has {len(values)} values for {len(rows)} rows")
    out = io.StringIO()
    for comment in comments:
        out.write(f"# {' '.join(str(comment).split())}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*MEASUREMENT_COLUMNS, *extra])
    for i, row in enumerate(rows):
        writer.writerow(
            [row.collective.value, row.ranks, row.nbytes, repr(float(row.time_s))]
            + [extra[name][i] for name in extra]
        )
    return out.getvalue()


def write_measurements(
    rows: Sequence[Measurement],
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


def filter_rows(
    rows: Sequence[Measurement],
    *,
    sizes: Sequence[SizeFilter] | None = None,
    collectives: Sequence[Collective] | None = None,
    ranks: Sequence[int] | None = None,
) -> list[Measurement]:
    """The rows matching every given filter (None: no filter), in their original order."""
    out = []
    for row in rows:
        if sizes is not None and not any(low <= row.nbytes <= high for low, high in sizes):
            continue
        if collectives is not None and row.collective not in collectives:
            continue
        if ranks is not None and row.ranks not in ranks:
            continue
        out.append(row)
    return out
