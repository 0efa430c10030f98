"""How far real runs disagree among themselves: the floor under any model's error.

Part of ``benchmarks/validate_presets.py`` (its fourth table); no prediction is made here, the
figures come from the logs alone.

- **Out-of-place vs in-place**: nccl-tests times every size twice, out of place and in place,
  the same call on the same GPUs a moment apart; their difference is the run's own noise
  (``|in-place - out-of-place| / out-of-place``, median over the rows that have both).
- **Runs the model cannot tell apart**: runs whose inputs to the model are the same (preset,
  collective, ranks, GPUs per host thread, NCCL release, forced algorithm) get the same
  prediction at every size. Where such runs measure ``t_min`` and ``t_max`` at one size, no
  prediction is within ``(t_max - t_min) / (t_max + t_min)`` of both (the best one,
  ``2 t_min t_max / (t_min + t_max)``, misses both by that much): a floor under the worst error
  of any model given only what the logs state. The median is over the (group, size) pairs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from commsim.validation.nccl_tests import NcclTestsLog

SPLIT = 1 << 20  # the size bands: < 1 MiB, >= 1 MiB


class Run(Protocol):
    """What this module reads of one predicted run (``validate_presets.Result``)."""

    @property
    def label(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def log(self) -> NcclTestsLog: ...


R = TypeVar("R", bound=Run)  # a run of the caller's own type, which its ``key`` reads


def self_disagreement(log: NcclTestsLog) -> list[tuple[int, float]]:
    """(size, |in-place - out-of-place| / out-of-place) for every row that has both sides."""
    return [(row.nbytes, abs(row.in_place_time_s - row.time_s) / row.time_s)
            for row in log.rows
            if row.nbytes > 0 and row.in_place_time_s is not None and not row.in_place_only
            and row.time_s > 0]


def minimax_error(times: Sequence[float]) -> float:
    """The smallest worst-case relative error one prediction can make on all ``times``.

    >>> round(minimax_error([1.0, 3.0]), 3), minimax_error([2.0])
    (0.5, 0.0)
    """
    low, high = min(times), max(times)
    return (high - low) / (high + low)


def indistinguishable(runs: Sequence[R],
                      key: Callable[[R], tuple[object, ...]]) -> list[list[R]]:
    """Groups of two or more runs with the same model inputs (``key``), in input order."""
    groups: dict[tuple[object, ...], list[R]] = {}
    for run in runs:
        groups.setdefault(key(run), []).append(run)
    return [members for members in groups.values() if len(members) > 1]


def group_floors(members: Sequence[Run]) -> list[tuple[int, float]]:
    """(size, minimax error) at every size that two or more of the runs measured."""
    times: dict[int, list[float]] = {}
    for run in members:
        for row in run.log.rows:
            if row.nbytes > 0:
                times.setdefault(row.nbytes, []).append(row.time_s)
    return [(size, minimax_error(ts)) for size, ts in sorted(times.items()) if len(ts) > 1]


def _median_pct(pairs: Sequence[tuple[int, float]], large: bool) -> str:
    values = [v for size, v in pairs if (size >= SPLIT) == large]
    return f"{100 * statistics.median(values):.1f}" if values else "–"


def by_family(runs: Sequence[R], families: Sequence[str],
              overall: bool = True) -> list[tuple[str, list[R]]]:
    """``(family, its runs)`` for each of ``families`` that has runs, in that order, then
    ``("overall", every run)`` unless ``overall`` is False: the rows of the per-family tables."""
    groups = [(f, [r for r in runs if r.family == f]) for f in families]
    return [(f, rs) for f, rs in groups if rs] + ([("overall", list(runs))] if overall else [])


def spread_table(runs: Sequence[R], families: Sequence[str],
                 key: Callable[[R], tuple[object, ...]]) -> list[list[str]]:
    """Per family and overall: the runs' own noise and the floor set by indistinguishable runs."""
    table = [["family", "rows with both sides", "oop vs ip < 1 MiB median %",
              "oop vs ip >= 1 MiB median %", "indistinguishable runs (groups)",
              "floor < 1 MiB median %", "floor >= 1 MiB median %"]]
    for family, members in by_family(runs, families):
        noise = [pair for r in members for pair in self_disagreement(r.log)]
        groups = indistinguishable(members, key)
        floors = [pair for g in groups for pair in group_floors(g)]
        table.append([family, str(len(noise)), _median_pct(noise, False),
                      _median_pct(noise, True),
                      f"{sum(map(len, groups))} ({len(groups)})",
                      _median_pct(floors, False), _median_pct(floors, True)])
    return table


def group_table(runs: Sequence[R],
                key: Callable[[R], tuple[object, ...]]) -> list[list[str]]:
    """One line per group of indistinguishable runs: who, how many shared sizes, the floor."""
    table = [["runs the model cannot tell apart", "shared sizes",
              "floor < 1 MiB median %", "floor >= 1 MiB median %", "floor worst %"]]
    for members in indistinguishable(runs, key):
        floors = group_floors(members)
        worst = f"{100 * max(v for _, v in floors):.1f}" if floors else "–"
        table.append(["; ".join(r.label for r in members), str(len(floors)),
                      _median_pct(floors, False), _median_pct(floors, True), worst])
    return table
