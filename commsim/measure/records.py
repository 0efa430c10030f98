"""Rows of a measurement and their CSV file: what ``commsim measure`` writes.

One row per (collective, world size, size). The columns, in file order:

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

>>> m = Measurement(collective="all_reduce", ranks=2, nbytes=1048576, time_s=0.001)
>>> round(m.busbw_GBps, 3)
1.049
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from commsim.errors import ParseError

#: Collective names a measurement row may carry.
ROW_COLLECTIVES = frozenset(
    {"broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce", "sendrecv"}
)


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw/algbw factor; 1 for broadcast, reduce and sendrecv."""
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective in ("all_gather", "reduce_scatter"):
        return (ranks - 1) / ranks
    return 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One measured row (see the module docstring for the columns)."""

    collective: str
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

    @property
    def algbw_GBps(self) -> float:
        """``nbytes / time_s`` in GB/s."""
        return self.nbytes / self.time_s / 1e9 if self.time_s > 0 else math.nan

    @property
    def busbw_GBps(self) -> float:
        """algbw times the bus factor of the collective."""
        return self.algbw_GBps * bus_factor(self.collective, self.ranks)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Measurement:
        """Build from a mapping with at least the field names (extra keys are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})  # type: ignore[arg-type]

    def to_row(self) -> dict[str, object]:
        """The CSV row: every field plus ``algbw_GBps`` and ``busbw_GBps``, in file order."""
        data = dataclasses.asdict(self)
        out: dict[str, object] = {}
        for name in COLUMNS:
            if name == "algbw_GBps":
                out[name] = self.algbw_GBps
            elif name == "busbw_GBps":
                out[name] = self.busbw_GBps
            else:
                out[name] = data[name]
        return out


COLUMNS = (
    "collective",
    "ranks",
    "nbytes",
    "time_s",
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
REQUIRED = ("collective", "ranks", "nbytes", "time_s")
_INTS = ("ranks", "nbytes", "iterations", "warmups", "world_size", "cpus")
_FLOATS = ("time_s", "time_p10_s", "time_p90_s", "time_min_s", "time_max_s")


def _format(value: object) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def format_csv(rows: Iterable[Measurement]) -> str:
    """The CSV text of ``rows`` (header line first, ``\\n`` line ends)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_format(v) for v in row.to_row().values()])
    return out.getvalue()


def write_csv(rows: Iterable[Measurement], path: str | Path) -> None:
    """Write ``rows`` to ``path`` (see :func:`format_csv`)."""
    Path(path).write_text(format_csv(rows), encoding="utf-8")


def parse_csv(text: str, source: str = "<csv>") -> list[Measurement]:
    """Rows of a measurement CSV; only ``collective, ranks, nbytes, time_s`` are required.

    Unknown columns are ignored, so files from other tools with these four columns load too.
    A missing column, an empty file or a malformed value is a one-line ParseError naming
    ``source``, the line and the column.
    """
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    if not header:
        raise ParseError(
            f"{source}: empty measurement file (want a CSV header with {', '.join(REQUIRED)})"
        )
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ParseError(f"{source}: missing column {missing[0]!r} (have: {', '.join(header)})")
    rows = []
    for line, record in enumerate(reader, start=2):
        rows.append(_parse_row(record, f"{source}:{line}"))
    if not rows:
        raise ParseError(f"{source}: no measurement rows")
    return rows


def _parse_row(record: Mapping[str, str | None], where: str) -> Measurement:
    values: dict[str, object] = {}
    fields = {f.name for f in dataclasses.fields(Measurement)}
    for name, text in record.items():
        if name not in fields or text is None or (text == "" and name not in REQUIRED):
            continue
        try:
            if name in _INTS:
                values[name] = int(text)
            elif name in _FLOATS:
                values[name] = float(text)
            else:
                values[name] = text
        except ValueError:
            raise ParseError(f"{where}: column {name!r}: invalid value {text!r}") from None
    collective = str(values.get("collective", ""))
    if collective not in ROW_COLLECTIVES:
        raise ParseError(
            f"{where}: column 'collective': unknown collective {collective!r} "
            f"(known: {', '.join(sorted(ROW_COLLECTIVES))})"
        )
    ranks, nbytes, time_s = values["ranks"], values["nbytes"], values["time_s"]
    if not (isinstance(ranks, int) and isinstance(nbytes, int) and isinstance(time_s, float)):
        raise ParseError(f"{where}: columns ranks, nbytes and time_s are required")
    if ranks < 1:
        raise ParseError(f"{where}: column 'ranks': must be >= 1, got {ranks}")
    if nbytes < 0:
        raise ParseError(f"{where}: column 'nbytes': must be >= 0, got {nbytes}")
    if not (math.isfinite(time_s) and time_s > 0):
        raise ParseError(f"{where}: column 'time_s': must be a positive time, got {time_s}")
    return Measurement(**values)  # type: ignore[arg-type]


def read_csv(path: str | Path) -> list[Measurement]:
    """Read a measurement CSV file (see :func:`parse_csv`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParseError(f"{path}: no such measurement file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ParseError(f"{path}: cannot read measurement file ({reason})") from None
    return parse_csv(text, str(path))


def format_table(rows: Sequence[Measurement]) -> str:
    """An nccl-tests-like summary: a header naming backend, torch and host, then one line per
    row (times in microseconds, bandwidths in GB/s).

    >>> table = format_table([Measurement(collective="all_reduce", ranks=2, nbytes=1 << 20,
    ...                                   time_s=1e-3, backend="gloo")])
    >>> table.splitlines()[0]
    '# commsim measure: backend gloo'
    >>> table.splitlines()[-1].split()
    ['all_reduce', '2', '1048576', '1000.00', 'nan', 'nan', '1.05', '1.05']
    """
    if not rows:
        return ""
    first = rows[0]
    about = [f"backend {first.backend or '?'}"]
    if first.torch_version:
        about.append(f"torch {first.torch_version}")
    if first.host:
        about.append(f"host {first.host} ({first.cpus} cpus, {first.device})")
    lines = [
        f"# commsim measure: {', '.join(about)}",
        "#",
        f"# {'collective':>10}  {'ranks':>5}  {'size':>10}  {'time(us)':>11}  {'p10(us)':>11}  "
        f"{'p90(us)':>11}  {'algbw(GB/s)':>11}  {'busbw(GB/s)':>11}",
    ]
    for r in rows:
        lines.append(
            f"  {r.collective:>10}  {r.ranks:>5}  {r.nbytes:>10}  {r.time_s * 1e6:>11.2f}  "
            f"{r.time_p10_s * 1e6:>11.2f}  {r.time_p90_s * 1e6:>11.2f}  "
            f"{r.algbw_GBps:>11.2f}  {r.busbw_GBps:>11.2f}"
        )
    return "\n".join(lines)
