"""Which way the predictions err, and at which sizes: the signed error, family by family.

Part of ``benchmarks/validate_presets.py``. The |error| tables say how far the predictions
miss; these say which way. A model that is as often slow as fast has a signed median near
zero; one that leaves out a cost has most rows on one side, and the sizes where the signed
error is largest say where that cost sits (the floor, the mid-size ramp, the bandwidth).

- :func:`bias_table`: per family and overall, the signed median error below 1 MiB and at
  1 MiB and above, the share of rows predicted too fast and how many runs' own signed median
  is negative.
- :func:`size_table`: per family, on one node and across nodes, the signed median error in
  each size band (a factor of 16 apart).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from typing import Protocol

from _spread import SPLIT, Run, by_family

from commsim.validation.validate import ValidationReport

#: size_table's bands: each from its bound up to the next (bytes).
SIZE_BANDS = (0, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20)


class Predicted(Run, Protocol):
    """What this module reads of one predicted run (``validate_presets.Result``): its family
    (:class:`~_spread.Run`), the hosts it spanned and its report."""

    @property
    def nodes(self) -> int: ...
    @property
    def report(self) -> ValidationReport: ...


def bias_table(results: Sequence[Predicted], families: Sequence[str]) -> list[list[str]]:
    """Per family and overall: signed median, rows too fast, runs too fast, per band."""
    table = [["family", "< 1 MiB signed median %", "rows too fast", "runs too fast",
              ">= 1 MiB signed median %", "rows too fast", "runs too fast"]]
    for family, members in by_family(results, families):
        row = [family]
        for large in (False, True):
            per_run = [[x.error_pct for x in r.report.rows if (x.nbytes >= SPLIT) == large]
                       for r in members]
            per_run = [errors for errors in per_run if errors]
            pooled = [e for errors in per_run for e in errors]
            if not pooled:
                row += ["–", "–", "–"]
                continue
            fast = sum(e < 0 for e in pooled)
            runs = sum(statistics.median(errors) < 0 for errors in per_run)
            row += [f"{statistics.median(pooled):+.1f}", f"{100 * fast / len(pooled):.0f}%",
                    f"{runs} of {len(per_run)}"]
        table.append(row)
    return table


def _band_label(i: int) -> str:
    def size(n: int) -> str:
        return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"

    if i == 0:
        return f"< {size(SIZE_BANDS[1])}"
    if i == len(SIZE_BANDS) - 1:
        return f">= {size(SIZE_BANDS[i])}"
    return f"{size(SIZE_BANDS[i])}-{size(SIZE_BANDS[i + 1])}"


def size_table(results: Sequence[Predicted], families: Sequence[str]) -> list[list[str]]:
    """Per family, one node and several: the signed median error % (rows) per size band."""
    table = [["family", "nodes", *(_band_label(i) for i in range(len(SIZE_BANDS)))]]
    for family, members in by_family(results, families, overall=False):
        for several in (False, True):
            runs = [r for r in members if (r.nodes > 1) == several]
            if not runs:
                continue
            bands: list[list[float]] = [[] for _ in SIZE_BANDS]
            for run in runs:
                for x in run.report.rows:
                    bands[bisect.bisect_right(SIZE_BANDS, x.nbytes) - 1].append(x.error_pct)
            table.append([family, "several" if several else "one", *(
                f"{statistics.median(b):+.1f} ({len(b)})" if b else "–" for b in bands)])
    return table
