"""Measured rows and their CSV: one record for ``commsim measure``, nccl-tests logs, ``validate``
and ``calibrate``.

A :class:`Measurement` is one timed operation: a collective, or (``commsim measure`` only) the
``sendrecv`` ping-pong between ranks 0 and 1. The CSV has a header with at least
``collective, ranks, nbytes, time_s`` (any order; unknown columns are ignored), may carry
``# ...`` comment lines and blank lines, and ``nbytes`` may carry a unit (``1MiB``). The
columns ``commsim measure`` writes, in file order:

==================  ===========================================================================
``collective``      ``broadcast``, ``reduce``, ``all_gather``, ``reduce_scatter``, ``all_reduce``,
                    or ``sendrecv`` (ping-pong between ranks 0 and 1; time is one way, half the
                    round trip)
``ranks``           processes in the job (the world size)
``nbytes``          bytes of the full buffer, as nccl-tests counts them
``time_s``          median over iterations of the slowest rank's time of one call
``time_p10_s``      10th percentile of the same (spread)
``time_p90_s``      90th percentile
``time_min_s``      fastest iteration
``time_max_s``      slowest iteration
``algbw_GBps``      ``nbytes / time_s`` in GB/s (10^9 B/s)
``busbw_GBps``      algbw times nccl-tests' bus factor (sendrecv: 1)
``iterations``      timed calls behind the row
``warmups``         untimed calls before them
``backend``         ``gloo`` or ``nccl``
``world_size``      processes launched (equal to ``ranks``)
``torch_version``   ``torch.__version__`` of the workers
``host``            host name
``cpus``            ``os.cpu_count()`` of the host
``device``          ``cpu`` or the GPU's name
==================  ===========================================================================

A CSV may also carry ``dtype`` (the element type, as nccl-tests prints it: ``float``,
``bfloat16``, ...); nccl-tests logs give every row theirs. ``validate`` shows it where the rows
have several (a ``-d all`` run); the prediction does not depend on it.

>>> m = Measurement(collective="allreduce", ranks=2, nbytes=1048576, time_s=0.001)
>>> m.collective is Collective.ALL_REDUCE, round(m.busbw_GBps, 3)
(True, 1.049)
>>> [r.nbytes for r in filter_rows([m], sizes=[(1024, 1 << 20)])]
[1048576]
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from commsim.collectives import Collective, parse_collective
from commsim.errors import ParseError, SpecError
from commsim.units import parse_size

#: The ``collective`` of a ping-pong row (``commsim measure``): a measured operation that is
#: not a collective, so nothing predicts it as one.
POINT_TO_POINT = "sendrecv"
_POINT_TO_POINT_NAMES = ("sendrecv", "send_recv", "pingpong", "ping_pong")

#: The columns every measurements CSV has (the contract's), in this order when written.
REQUIRED = ("collective", "ranks", "nbytes", "time_s")
#: Every column, in the order ``commsim measure`` writes them.
COLUMNS = (
    *REQUIRED,
    "time_p10_s",
    "time_p90_s",
    "time_min_s",
    "time_max_s",
    "algbw_GBps",
    "busbw_GBps",
    "iterations",
    "warmups",
    "backend",
    "world_size",
    "torch_version",
    "host",
    "cpus",
    "device",
)
_INTS = ("ranks", "iterations", "warmups", "world_size", "cpus")
_FLOATS = ("time_s", "time_p10_s", "time_p90_s", "time_min_s", "time_max_s")

#: A size filter (``--sizes`` item): ``(low, high)`` bytes, inclusive (exact: low == high).
SizeFilter = tuple[int, int]

#: What a row's ``collective`` can be: a :class:`Collective`, or ``str`` for rows that may be
#: the ping-pong (:data:`POINT_TO_POINT`). ``Measurement[Collective]`` holds collectives only.
C = TypeVar("C", bound=str, covariant=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement(Generic[C]):
    """One measured row (see the module docstring for the columns).

    ``collective`` is given as a :class:`Collective` or any spelling
    :func:`~commsim.collectives.parse_collective` accepts (kept as the :class:`Collective`), or
    as ``sendrecv`` (kept as :data:`POINT_TO_POINT`). ``ranks >= 1``, ``nbytes >= 0`` and a
    finite ``time_s > 0`` are checked (SpecError naming the field).
    """

    collective: C
    ranks: int
    nbytes: int
    time_s: float
    time_p10_s: float = math.nan
    time_p90_s: float = math.nan
    time_min_s: float = math.nan
    time_max_s: float = math.nan
    iterations: int = 0
    warmups: int = 0
    backend: str = ""
    world_size: int = 0
    torch_version: str = ""
    host: str = ""
    cpus: int = 0
    device: str = ""
    dtype: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.collective, Collective):
            name = str(self.collective).strip().lower().replace("-", "_")
            try:
                kind = POINT_TO_POINT if name in _POINT_TO_POINT_NAMES else parse_collective(name)
            except SpecError as exc:
                raise SpecError(f"collective: {exc}") from None
            object.__setattr__(self, "collective", kind)  # the parsed input, not a derived value
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise SpecError(f"ranks: must be a positive integer, got {self.ranks!r}")
        if isinstance(self.nbytes, bool) or not isinstance(self.nbytes, int) or self.nbytes < 0:
            raise SpecError(f"nbytes: must be an integer >= 0, got {self.nbytes!r}")
        if not isinstance(self.time_s, int | float) or not (
            math.isfinite(self.time_s) and self.time_s > 0
        ):
            raise SpecError(f"time_s: must be a finite number > 0, got {self.time_s!r}")

    @property
    def is_collective(self) -> bool:
        """False for the ping-pong (:data:`POINT_TO_POINT`) rows."""
        return isinstance(self.collective, Collective)

    @property
    def algbw_GBps(self) -> float:
        """``nbytes / time_s`` in GB/s."""
        return self.nbytes / self.time_s / 1e9

    @property
    def busbw_GBps(self) -> float:
        """algbw times nccl-tests' bus factor (:meth:`Collective.busbw_factor`; ping-pong: 1)."""
        if isinstance(self.collective, Collective):
            return self.algbw_GBps * self.collective.busbw_factor(self.ranks)
        return self.algbw_GBps

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Measurement[str]:
        """Build from a mapping with at least the required fields (extra keys are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})  # type: ignore[arg-type]

    def to_row(self) -> dict[str, object]:
        """The CSV row: every field plus ``algbw_GBps`` and ``busbw_GBps``, in file order."""
        derived = {"algbw_GBps": self.algbw_GBps, "busbw_GBps": self.busbw_GBps}
        return {name: derived.get(name, getattr(self, name, None)) for name in COLUMNS}


def collectives_only(rows: Iterable[Measurement[str]]) -> list[Measurement[Collective]]:
    """The rows that time a collective (ping-pong rows left out), in order."""
    return [row for row in rows if row.is_collective]  # type: ignore[misc]


def filter_rows(
    rows: Sequence[Measurement[C]],
    *,
    sizes: Sequence[SizeFilter] | None = None,
    collectives: Sequence[Collective | str] | None = None,
    ranks: Sequence[int] | None = None,
) -> list[Measurement[C]]:
    """The rows matching every given filter (None: no filter), in their original order.

    ``collectives`` may name them in any spelling :func:`parse_collective` accepts.
    """
    wanted = None if collectives is None else {parse_collective(c) for c in collectives}
    out = []
    for row in rows:
        if sizes is not None and not any(low <= row.nbytes <= high for low, high in sizes):
            continue
        if wanted is not None and row.collective not in wanted:
            continue
        if ranks is not None and row.ranks not in ranks:
            continue
        out.append(row)
    return out


# -- the CSV ----------------------------------------------------------------------------------
def _format(value: object) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def format_csv(
    rows: Iterable[Measurement[str]],
    *,
    columns: Sequence[str] = COLUMNS,
    comments: Sequence[str] = (),
    extra: Mapping[str, Sequence[object]] | None = None,
) -> str:
    """The CSV text: ``# comment`` lines, the header, one line per row (floats written exactly,
    ``\\n`` line ends). ``columns``: which of :data:`COLUMNS` (default all; :data:`REQUIRED`
    for the contract's four); ``extra``: more columns, one value per row, after them."""
    rows = list(rows)
    extra = dict(extra or {})
    for name, values in extra.items():
        if name in columns:
            raise SpecError(f"extra column {name!r} clashes with a written column")
        if len(values) != len(rows):
            raise SpecError(f"extra column {name!r} has {len(values)} values for {len(rows)} rows")
    out = io.StringIO()
    for comment in comments:
        out.write(f"# {' '.join(str(comment).split())}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*columns, *extra])
    for i, row in enumerate(rows):
        cells = row.to_row() | {"time_s": float(row.time_s)}
        writer.writerow(
            [_format(cells[name]) for name in columns] + [extra[name][i] for name in extra]
        )
    return out.getvalue()


def write_csv(rows: Iterable[Measurement[str]], path: str | Path, **options: object) -> None:
    """Write ``rows`` to ``path`` (see :func:`format_csv` for the ``options``)."""
    Path(path).write_text(format_csv(rows, **options), encoding="utf-8")  # type: ignore[arg-type]


def parse_csv(text: str, source: str = "<csv>") -> list[Measurement[str]]:
    """Rows of a measurements CSV given as text; only the :data:`REQUIRED` columns must be there.

    A missing column, an empty file, a row of the wrong length or a malformed value is a
    one-line ParseError naming ``source``, the line and the column.
    """
    lines = [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise ParseError(
            f"{source}: empty measurement file (want a CSV header with {', '.join(REQUIRED)})"
        )
    header_number, header_line = lines[0]
    header = [name.strip() for name in next(csv.reader([header_line]))]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ParseError(
            f"{source}:{header_number}: missing column {missing[0]!r} (need "
            f"{', '.join(REQUIRED)}; have: {', '.join(header)})"
        )
    rows = []
    for number, line in lines[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise ParseError(
                f"{source}:{number}: {len(cells)} fields, the header has {len(header)}"
            )
        rows.append(_parse_row(dict(zip(header, cells, strict=True)), f"{source}:{number}"))
    if not rows:
        raise ParseError(f"{source}: header but no measurement rows")
    return rows


def _parse_row(record: Mapping[str, str], where: str) -> Measurement[str]:
    values: dict[str, object] = {}
    fields = {f.name for f in dataclasses.fields(Measurement)}
    for name, raw in record.items():
        text = raw.strip()
        if name not in fields or (text == "" and name not in REQUIRED):
            continue
        try:
            if name == "nbytes":
                values[name] = _int_or_size(text)
            elif name in _INTS:
                values[name] = int(text)
            elif name in _FLOATS:
                values[name] = float(text)
            else:
                values[name] = text
        except (ValueError, SpecError):
            raise ParseError(f"{where}: column {name!r}: invalid value {text!r}") from None
    try:
        return Measurement(**values)  # type: ignore[arg-type]
    except SpecError as exc:  # "field: why" -> "column 'field': why"
        field, _, why = str(exc).partition(": ")
        raise ParseError(f"{where}: column {field!r}: {why}") from None


def _int_or_size(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return parse_size(text, "nbytes")


def read_csv(path: str | Path) -> list[Measurement[str]]:
    """Read a measurements CSV file (see :func:`parse_csv`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParseError(f"{path}: no such measurement file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ParseError(f"{path}: cannot read measurement file ({reason})") from None
    return parse_csv(text, str(path))
