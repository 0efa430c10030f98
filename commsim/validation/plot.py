"""Measured vs predicted bus bandwidth against message size (what ``validate --plot`` draws).

One panel per (collective, ranks) of a :class:`~commsim.validation.validate.ValidationReport`:
busbw in GB/s over size in bytes on a log axis, measured as dots, predicted as a line, the
median |error| in the title. Built with :class:`matplotlib.figure.Figure` (no pyplot, no global
state) and returned, never shown; :func:`save_plot` writes a PNG with metadata stripped, so the
same report gives the same bytes.
"""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from commsim.validation.validate import ValidationReport, ValidationRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _groups(report: ValidationReport) -> dict[tuple[str, int], list[ValidationRow]]:
    groups: dict[tuple[str, int], list[ValidationRow]] = {}
    for row in report.rows:
        groups.setdefault((row.collective.value, row.ranks), []).append(row)
    return groups


def _draw(ax: Axes, rows: list[ValidationRow], title: str, *, log_y: bool = False) -> None:
    rows = sorted(rows, key=lambda r: r.nbytes)
    sizes = [r.nbytes for r in rows]
    ax.plot(sizes, [r.measured_busbw_Bps / 1e9 for r in rows], "o", ms=4, color="#1f77b4",
            label="measured")
    ax.plot(sizes, [r.predicted_busbw_Bps / 1e9 for r in rows], "-", lw=1.5, color="#d62728",
            label="predicted")
    ax.set_xscale("log", base=2)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    median = statistics.median(abs(r.error_pct) for r in rows)
    ax.set_title(f"{title}\nmedian |error| {median:.1f}%", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")


def plot_report(report: ValidationReport) -> list[Figure]:
    """One figure per (collective, ranks): measured and predicted busbw vs size."""
    from matplotlib.figure import Figure

    figures = []
    for (collective, ranks), rows in _groups(report).items():
        fig = Figure(figsize=(6.0, 4.0), layout="constrained")
        _draw(fig.add_subplot(), rows, f"{collective}, {ranks} ranks on {report.topology}")
        figures.append(fig)
    return figures


def plot_panels(report: ValidationReport, *, title: str | None = None) -> Figure:
    """Every (collective, ranks) group of ``report`` as a panel of one figure."""
    from matplotlib.figure import Figure

    groups = _groups(report)
    columns = min(3, len(groups))
    lines = -(-len(groups) // columns)
    fig = Figure(figsize=(5.0 * columns, 3.6 * lines), layout="constrained")
    for index, ((collective, ranks), rows) in enumerate(groups.items(), start=1):
        ax = fig.add_subplot(lines, columns, index)
        _draw(ax, rows, f"{collective}, {ranks} ranks on {report.topology}")
    if title:
        fig.suptitle("\n".join(textwrap.wrap(title, 70 * columns)), fontsize=8)
    return fig


def save_labelled_plot(
    panels: list[tuple[str, list[ValidationRow]]], path: str | Path, *, title: str = ""
) -> None:
    """One panel per labelled group of rows (e.g. one per log of a hardware family), busbw
    on a log axis too, written as a PNG like :func:`save_plot`."""
    from matplotlib.figure import Figure

    columns = min(3, len(panels))
    lines = -(-len(panels) // columns)
    fig = Figure(figsize=(5.0 * columns, 3.8 * lines), layout="constrained")
    for index, (label, rows) in enumerate(panels, start=1):
        heading = "\n".join(textwrap.wrap(label, 60, break_on_hyphens=False))
        _draw(fig.add_subplot(lines, columns, index), rows, heading, log_y=True)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.savefig(Path(path), format="png", dpi=80, metadata={"Software": None})


def save_plot(report: ValidationReport, path: str | Path, *, title: str | None = None) -> None:
    """Write :func:`plot_panels` as a PNG (deterministic: no timestamp metadata)."""
    fig = plot_panels(report, title=title)
    fig.savefig(Path(path), format="png", dpi=100, metadata={"Software": None})
