"""Helpers shared by the benchmark scripts: best-of-N timing, plain-text tables, ``--quick``."""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """The smallest wall time of ``repeat`` calls of ``fn``, and the last call's value."""
    best, value = float("inf"), None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value  # type: ignore[return-value]


def max_rss_mib() -> float:
    """This process's peak resident memory so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Right-aligned columns (left-aligned when the header starts with ``<``)."""
    names = [h.lstrip("<") for h in headers]
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(n), *(len(r[i]) for r in cells)) for i, n in enumerate(names)]
    left = [h.startswith("<") for h in headers]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.ljust(w) if lft else v.rjust(w)
            for v, w, lft in zip(values, widths, left, strict=True)
        ).rstrip()

    return "\n".join([line(names), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value == 0 or 1e-3 <= abs(value) < 1e5:
            return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
        return f"{value:.3e}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def parse_args(parser: argparse.ArgumentParser, quick: dict[str, object], what: str,
               argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``parser``'s arguments plus ``--quick``: the same code path on the smallest inputs, a
    single repeat, for the test suite (``tests/test_benchmarks_quick.py``); its figures mean
    nothing. ``quick`` holds the defaults ``--quick`` changes (an argument given explicitly
    still wins), ``what`` says in a few words what it runs."""
    parser.add_argument("--quick", action="store_true", help=f"{what}, for the test suite")
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**quick)
        args = parser.parse_args(argv)
    return args
