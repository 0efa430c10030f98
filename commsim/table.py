"""Format results as an nccl-tests-like text table (what ``commsim run`` prints).

>>> from commsim.collectives import Collective
>>> from commsim.results import Result
>>> r = Result(collective=Collective.ALL_REDUCE, algorithm="ring", topology="ring8", ranks=8,
...            nbytes=1 << 20, chunks=1, engine="des", time_s=25e-6)
>>> print(format_table([r]))  # doctest: +NORMALIZE_WHITESPACE
# commsim run all_reduce: topology ring8, 8 ranks, engine des
#
#      size  algorithm           chunks     time(us)  algbw(GB/s)  busbw(GB/s)
#       (B)
    1048576  ring                     1        25.00        41.94        73.40
"""

from __future__ import annotations

from collections.abc import Sequence

from commsim.results import Result

#: Width of the algorithm column (wider when a longer name is shown).
ALGORITHM_WIDTH = 32
_UNITS = f"#{'(B)':>10}"


def _head(width: int) -> str:
    return (
        f"#{'size':>10}  {'algorithm':<{width}}  {'chunks':>6}  {'time(us)':>11}  "
        f"{'algbw(GB/s)':>11}  {'busbw(GB/s)':>11}"
    )


def format_row(result: Result, width: int = ALGORITHM_WIDTH) -> str:
    """One row: size in bytes, algorithm (``/protocol`` when NCCL's were modelled), chunks,
    time in us, algbw and busbw in GB/s."""
    return (
        f"{result.nbytes:>11}  {result.label:<{width}}  {result.chunks:>6}  "
        f"{result.time_s * 1e6:>11.2f}  {result.algbw_Bps / 1e9:>11.2f}  "
        f"{result.busbw_Bps / 1e9:>11.2f}"
    )


def format_table(results: Sequence[Result], *, root: int | None = None) -> str:
    """A header naming what ran, then one row per result (nccl-tests' ``-b/-e/-f`` layout).

    The header describes the first result; every row is a size of the same run. ``root`` is
    shown for broadcast and reduce. Several rows end with their mean busbw, as nccl-tests'
    ``# Avg bus bandwidth`` line.
    """
    if not results:
        return ""
    first = results[0]
    title = (
        f"# commsim run {first.collective.value}: topology {first.topology}, "
        f"{first.ranks} ranks, engine {first.engine}"
    )
    if first.collective.rooted and root is not None:
        title += f", root {root}"
    width = max(ALGORITHM_WIDTH, *(len(r.label) for r in results))
    lines = [title, "#", _head(width), _UNITS]
    lines.extend(format_row(r, width) for r in results)
    if len(results) > 1:
        mean = sum(r.busbw_Bps for r in results) / len(results) / 1e9
        lines.append(f"# Avg bus bandwidth: {mean:.2f} GB/s")
    notes = dict.fromkeys(r.note for r in results if r.note)
    lines.extend(f"# note: {note}" for note in notes)
    return "\n".join(lines)


def format_healthy(healthy: Sequence[Result], degraded: Sequence[Result], what_if: str) -> str:
    """The healthy machine's rows under a what-if's table, and how much slower each size
    runs with the what-if."""
    width = max(ALGORITHM_WIDTH, *(len(r.label) for r in healthy))
    lines = [f"# the healthy machine (without what-if {what_if!r}):"]
    lines.extend(format_row(r, width) for r in healthy)
    lines.extend(
        f"# {h.nbytes} B: {d.time_s / h.time_s:.3f}x the healthy time" if h.time_s > 0
        else f"# {h.nbytes} B: no time either way"
        for h, d in zip(healthy, degraded, strict=True))
    return "\n".join(lines)
