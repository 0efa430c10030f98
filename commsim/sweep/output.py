"""A sweep's rows -> one tidy DataFrame, CSV/Parquet files, JSON, or a text table.

Columns are the union of the rows' keys in first-seen order (so collective columns come first,
then workload columns), with ``error`` last. A column whose values are all ints is ``int64``,
or pandas' nullable ``Int64`` when some rows lack it; floats are ``float64`` (NaN where
missing); anything else (names, ``error``) is ``object`` with ``None`` where missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commsim.cliargs import check_output
from commsim.errors import SpecError

if TYPE_CHECKING:
    import pandas as pd

Row = dict[str, object]

#: File formats of ``--out``, by suffix.
FORMATS = (".csv", ".parquet")


def columns(rows: Sequence[Row]) -> list[str]:
    """The union of the rows' keys, first seen first, ``error`` last."""
    seen = list(dict.fromkeys(key for row in rows for key in row))
    if "error" in seen:
        seen.remove("error")
        seen.append("error")
    return seen


def _column(values: list[object]) -> Any:
    import numpy as np
    import pandas as pd

    present = [v for v in values if v is not None]
    missing = len(present) < len(values)
    if present and all(isinstance(v, bool) for v in present):
        return pd.array(values, dtype="boolean" if missing else "bool")
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.array(values, dtype="Int64") if missing else np.array(values, dtype=np.int64)
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return np.array([math.nan if v is None else v for v in values], dtype=np.float64)
    return pd.array(values, dtype=object)


def to_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """The tidy table: one row per point, in the given (grid) order."""
    import pandas as pd

    names = columns(rows)
    return pd.DataFrame(
        {name: _column([row.get(name) for row in rows]) for name in names}, columns=names
    )


def check_out(path: str | Path) -> str:
    """The format of ``--out PATH`` (``.csv`` or ``.parquet``), checked before any work:
    a known suffix, an existing directory, pyarrow installed for Parquet."""
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise SpecError(
            f"--out {path}: unknown format {suffix or 'no suffix'!r} (want .csv or .parquet)"
        )
    check_output("--out", path)
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise SpecError(
                f"--out {path}: Parquet needs pyarrow (pip install 'commsim[sweep]' or pyarrow)"
            ) from None
    return suffix


def write_table(frame: pd.DataFrame, path: str | Path) -> None:
    """Write the sweep's table as CSV or Parquet (by the suffix of ``path``)."""
    if check_out(path) == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False, engine="pyarrow")


def records(frame: pd.DataFrame) -> list[dict[str, object]]:
    """The rows as JSON-ready dicts (NaN and missing values as None)."""
    out = []
    for row in frame.astype(object).itertuples(index=False, name=None):
        out.append({name: _plain(v) for name, v in zip(frame.columns, row, strict=True)})
    return out


def _plain(value: object) -> object:
    import pandas as pd

    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    item = getattr(value, "item", None)  # numpy scalars -> Python
    return item() if callable(item) else value


# -- text ----------------------------------------------------------------------------------
def _num(value: object, scale: float, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value) * scale:.{digits}f}"  # type: ignore[arg-type]


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def _block(title: str, headers: list[str], cells: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    left = [not h.endswith(")") and h not in ("ranks", "size(B)", "chunks") for h in headers]

    def line(values: list[str], prefix: str) -> str:
        parts = [
            v.ljust(w) if lft else v.rjust(w)
            for v, w, lft in zip(values, widths, left, strict=True)
        ]
        return (prefix + "  ".join(parts)).rstrip()

    return [title, line(headers, "# "), *(line(r, "  ") for r in cells)]


def format_sweep(frame: pd.DataFrame) -> str:
    """A readable table: the collective points, then the workload points; failed points show
    ``-`` for their numbers and their error at the end of the line."""
    rows = records(frame)
    lines: list[str] = []
    coll = [r for r in rows if r.get("kind") == "collective"]
    work = [r for r in rows if r.get("kind") == "workload"]
    if coll:
        headers = [
            "topology", "ranks", "collective", "algorithm", "engine", "size(B)", "chunks",
            "time(us)", "algbw(GB/s)", "busbw(GB/s)", "error",
        ]  # fmt: skip
        cells = []
        for r in coll:
            algo = _text(r.get("algorithm"))
            if r.get("protocol"):
                algo = f"{algo}/{r['protocol']}"
            if r.get("requested_algorithm") == "auto":
                algo = f"auto:{algo}" if r.get("algorithm") else "auto"
            cells.append(
                [
                    _text(r.get("topology")),
                    _text(r.get("ranks")),
                    _text(r.get("collective")),
                    algo,
                    _text(r.get("engine")),
                    _text(r.get("nbytes")),
                    _text(r.get("chunks")),
                    _num(r.get("time_s"), 1e6, 2),
                    _num(r.get("algbw_GBps"), 1, 2),
                    _num(r.get("busbw_GBps"), 1, 2),
                    _text(r.get("error") or ""),
                ]
            )
        lines += _block(f"# commsim sweep: {len(coll)} collective points", headers, cells)
    if work:
        headers = [
            "topology", "ranks", "workload", "kind", "step(ms)", "compute(ms)", "comm(ms)",
            "exposed(ms)", "overlap(%)", "idle(%)", "error",
        ]  # fmt: skip
        cells = [
            [
                _text(r.get("topology")),
                _text(r.get("ranks")),
                _text(r.get("workload")),
                _text(r.get("workload_kind")),
                _num(r.get("step_time_s"), 1e3, 3),
                _num(r.get("compute_time_s"), 1e3, 3),
                _num(r.get("comm_time_s"), 1e3, 3),
                _num(r.get("exposed_comm_s"), 1e3, 3),
                _num(r.get("overlap_fraction"), 100, 1),
                _num(r.get("idle_fraction"), 100, 1),
                _text(r.get("error") or ""),
            ]
            for r in work
        ]
        if lines:
            lines.append("#")
        lines += _block(f"# commsim sweep: {len(work)} workload points", headers, cells)
    failed = sum(1 for r in rows if r.get("error"))
    if failed:
        lines.append(f"# {failed} of {len(rows)} points could not run (see error)")
    return "\n".join(lines)
