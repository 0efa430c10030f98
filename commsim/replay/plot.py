"""A Gantt chart of a replayed step: per rank, a compute row and a communication row.

Bars are coloured by phase (forward, backward, optimizer, gradient reduction, p2p, ...); the
communication row of a rank shows the union of its collectives and sends, so overlapping
streams read as one busy interval, exactly what the metrics count. The figure is built with
:class:`matplotlib.figure.Figure` (no pyplot, no global state) and returned, never shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from commsim.replay.graph import TaskKind
from commsim.replay.metrics import union

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from commsim.replay.step import StepResult

#: Bar colour of each phase (tab10); other phases use grey.
PHASE_COLORS = {
    "forward": "#1f77b4",
    "backward": "#ff7f0e",
    "optimizer": "#2ca02c",
    "gradient": "#d62728",
    "p2p": "#9467bd",
}
COMM_COLOR = "#7f7f7f"


def plot_step(
    result: StepResult, *, ranks: Sequence[int] | None = None, max_ranks: int = 32
) -> Figure:
    """The step's Gantt chart: time (ms) across, two rows per rank (compute above, comm below).

    ``ranks`` picks the ranks to draw (default: the first ``max_ranks``).
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    graph, timing = result.graph, result.timing
    shown = list(ranks) if ranks is not None else list(range(min(graph.ranks, max_ranks)))
    row = {rank: i for i, rank in enumerate(shown)}
    compute: dict[int, dict[str, list[tuple[float, float]]]] = {r: {} for r in shown}
    comm: dict[int, list[tuple[float, float]]] = {r: [] for r in shown}
    for index, task in enumerate(graph.tasks):
        start, end = timing.start_s[index] * 1e3, timing.end_s[index] * 1e3
        for rank in task.ranks:
            if rank not in row:
                continue
            if task.kind is TaskKind.COMPUTE:
                compute[rank].setdefault(task.phase, []).append((start, end - start))
            else:
                comm[rank].append((start, end))
    fig = Figure(figsize=(10, 1.0 + 0.45 * len(shown)))
    ax = fig.add_subplot()
    phases: set[str] = set()
    for rank in shown:
        y = row[rank]
        for phase, bars in sorted(compute[rank].items()):
            phases.add(phase)
            ax.broken_barh(
                bars,
                (y - 0.4, 0.38),
                facecolors=PHASE_COLORS.get(phase, "#bcbd22"),
                edgecolor="white",
                linewidth=0.3,
            )
        spans = [(a, b - a) for a, b in union(comm[rank])]
        ax.broken_barh(spans, (y + 0.02, 0.38), facecolors=COMM_COLOR)
    ax.set_yticks(range(len(shown)), [f"rank {r}" for r in shown])
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlabel("time (ms)")
    m = result.metrics
    ax.set_title(
        f"{result.workload.kind} on {result.topology}: step {m.step_time_s * 1e3:.3f} ms, "
        f"exposed comm {m.exposed_comm_s * 1e3:.3f} ms, overlap {m.overlap_fraction:.0%}, "
        f"idle {m.idle_fraction:.0%}",
        fontsize=9,
    )
    handles = [
        Patch(color=PHASE_COLORS.get(p, "#bcbd22"), label=p or "compute") for p in sorted(phases)
    ]
    handles.append(Patch(color=COMM_COLOR, label="communication"))
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False
    )
    fig.tight_layout()
    return fig


def save_step_plot(result: StepResult, path: str, **options: object) -> None:
    """Draw :func:`plot_step` and save it (format from the suffix, e.g. ``.png``)."""
    fig = plot_step(result, **options)  # type: ignore[arg-type]
    fig.savefig(path, dpi=120)
