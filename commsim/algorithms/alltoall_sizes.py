"""All-to-allv sizes: the bytes each rank sends each other rank, as ``Call.counts``.

From a matrix (row ``s``, column ``j``: bytes rank ``s`` sends rank ``j``), given as a CSV
file (one row a line, comma-separated), a YAML file (a list of rows) or in Python (a list of
rows, a numpy array); entries are byte counts or sizes such as ``64KiB``. Or from a skew: every
rank sends ``size`` bytes in all, of which the hottest destination, rank 0, gets ``(1 + skew)``
times the even share ``size / p`` (rounded down) and the other ranks split the rest evenly; skew
0 is even (routed tokens of a mixture of experts are never even: the hottest expert's extra
share).

>>> skewed_counts(4, 400, 1.0)[:4]
(200, 66, 67, 67)
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from commsim.errors import SpecError
from commsim.units import parse_size
from commsim.yamlfile import one_document, read_text

MatrixSource = str | Path | Sequence[Sequence[object]]


def skewed_counts(ranks: int, size: int, skew: float) -> tuple[int, ...]:
    """Flattened counts: each rank sends ``size`` bytes, rank 0 ``(1 + skew)`` shares of them."""
    if not skew >= 0:
        raise SpecError(f"--skew must be >= 0, got {skew}")
    p = ranks
    if 1 + skew > p:
        raise SpecError(f"--skew {skew} gives rank 0 more than the whole buffer: at most "
                        f"{p - 1} for {p} ranks")
    hot = int(size * (1 + skew) / p) if p > 1 else size
    rest, others = size - hot, p - 1
    row = [hot] + [rest * (k + 1) // others - rest * k // others for k in range(others)]
    return tuple(row) * p


def matrix_counts(source: MatrixSource, ranks: int) -> tuple[int, ...]:
    """Flattened counts of a ``ranks`` x ``ranks`` matrix (a file path, or rows)."""
    where = "--matrix"
    if isinstance(source, str | Path):
        where = str(source)
        rows = _read_rows(Path(source))
    else:
        rows = [list(row) for row in source]
    if len(rows) != ranks or any(len(row) != ranks for row in rows):
        shape = f"{len(rows)} rows of {sorted({len(r) for r in rows}) or [0]} entries"
        raise SpecError(f"{where}: an all-to-allv matrix for {ranks} ranks is {ranks} x "
                        f"{ranks}, got {shape}")
    out = []
    for s, row in enumerate(rows):
        for j, value in enumerate(row):
            out.append(_entry(value, f"{where}: row {s}, column {j}"))
    return tuple(out)


def _entry(value: object, where: str) -> int:
    if isinstance(value, bool):
        raise SpecError(f"{where}: expected bytes, got {value!r}")
    text = str(value).strip()
    return parse_size(int(text) if text.isdigit() else text, where)


def _read_rows(path: Path) -> list[list[object]]:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".yaml", ".yml"):
        raise SpecError(f"{path}: a matrix file is .csv, .yaml or .yml")
    text = read_text(path, "matrix")
    if suffix == ".csv":
        lines = [line for line in text.splitlines() if line.strip() and
                 not line.lstrip().startswith("#")]
        return [list(row) for row in csv.reader(io.StringIO("\n".join(lines)))]
    doc = one_document(text, str(path), "matrix")
    if not isinstance(doc, list) or not all(isinstance(row, list) for row in doc):
        raise SpecError(f"{path}: expected a list of rows (lists of bytes)")
    return [list(row) for row in doc]
