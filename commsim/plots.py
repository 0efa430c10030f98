"""Plots of simulated collectives, each returned as a :class:`matplotlib.figure.Figure`.

Every function builds its figure with the object-oriented API (``Figure()``, no pyplot and no
global state), so it works headless (Agg), in scripts and in notebooks, and never shows
anything: save with ``fig.savefig("out.png")`` or let a notebook display the returned figure.

* :func:`plot_busbw`: bus bandwidth (or time) against message size, nccl-tests style.
* :func:`link_utilization` / :func:`plot_link_utilization` / :func:`plot_link_heatmap`: how
  busy each network link is over the time of one discrete-event result.
* :func:`plot_gantt`: a replayed training step (``commsim.replay.plot.plot_step``).
* :func:`plot_measured_vs_predicted`: a validation report
  (``commsim.validation.plot.plot_panels``).

>>> import commsim
>>> from commsim.plots import plot_busbw
>>> net = commsim.ring(4, latency="1us", bandwidth="100GB/s")
>>> rs = [commsim.simulate("all_reduce", net, s, algorithm=a)
...       for a in ("ring", "recursive_doubling") for s in ("1KiB", "1MiB", "1GiB")]
>>> fig = plot_busbw(rs)
>>> [line.get_label() for line in fig.axes[0].get_lines()]
['recursive_doubling', 'ring']
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from commsim.results import Result
from commsim.units import format_size

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from commsim.network import Network
    from commsim.replay.step import StepResult
    from commsim.validation.validate import ValidationReport

__all__ = [
    "busbw_frame",
    "link_utilization",
    "plot_busbw",
    "plot_gantt",
    "plot_link_heatmap",
    "plot_link_utilization",
    "plot_measured_vs_predicted",
    "size_ticks",
]

#: What the y axis says for the columns :func:`plot_busbw` knows; others use the column name.
_Y_LABELS = {
    "busbw_GBps": "bus bandwidth (GB/s)",
    "algbw_GBps": "algorithm bandwidth (GB/s)",
    "time_s": "time (us)",
}


# -- bandwidth vs size ---------------------------------------------------------------------
def busbw_frame(results: Iterable[Result] | pd.DataFrame) -> pd.DataFrame:
    """``results`` as a DataFrame with the columns of ``Result.to_dict()`` (a DataFrame is
    returned as a copy, unchanged)."""
    import pandas as pd

    if isinstance(results, pd.DataFrame):
        return results.copy()
    rows = [r.to_dict() for r in results]
    if not rows:
        raise ValueError("no results to plot")
    return pd.DataFrame(rows)


def size_ticks(lo: float, hi: float, most: int = 8) -> list[int]:
    """Powers of two from ``lo`` to ``hi`` (inclusive, widened to powers of two), every
    ``2**k``-th one so that at most ``most`` remain: the x ticks of :func:`plot_busbw`."""
    lo_exp = math.floor(math.log2(max(lo, 1)))
    hi_exp = math.ceil(math.log2(max(hi, 1)))
    step = 1
    while (hi_exp - lo_exp) // step + 1 > most:
        step *= 2
    return [2**e for e in range(lo_exp, hi_exp + 1, step)]


def plot_busbw(
    results: Iterable[Result] | pd.DataFrame,
    *,
    by: str = "algorithm",
    y: str = "busbw_GBps",
    title: str | None = None,
    ax: Axes | None = None,
    figsize: tuple[float, float] = (7.0, 4.5),
) -> Figure:
    """Bandwidth against message size, one line per value of column ``by``.

    Parameters
    ----------
    results
        :class:`commsim.Result` objects, or a DataFrame with the columns ``nbytes``, ``y`` and
        ``by`` (what a size sweep produces; ``Result.to_dict()`` keys).
    by
        The column that splits the lines: ``algorithm`` (default), ``topology``,
        ``collective``, ``ranks``, ... Lines are sorted by its value; points by size.
    y
        ``busbw_GBps`` (default, linear axis), ``algbw_GBps``, or ``time_s`` (drawn in
        microseconds on a log axis: a log-log plot), or any other numeric column.
    title
        The axes' title (default: the collective(s) and topology(-ies) in the data).
    ax
        Draw into this axes instead of a new figure (its figure is returned).

    The x axis is the size in bytes on a log2 scale, labelled in binary units (``1KiB``,
    ``1MiB``, ``1GiB``), as nccl-tests' ``-b/-e/-f`` sweeps are read.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    df = busbw_frame(results)
    for column in ("nbytes", y, by):
        if column not in df.columns:
            raise ValueError(f"no column {column!r} to plot (columns: {', '.join(df.columns)})")
    if df.empty:
        raise ValueError("no results to plot")
    if ax is None:
        fig = Figure(figsize=figsize, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    scale = 1e6 if y == "time_s" else 1.0
    for key, group in sorted(df.groupby(by, sort=False), key=lambda kv: str(kv[0])):
        group = group.sort_values("nbytes")
        ax.plot(group["nbytes"], group[y] * scale, "o-", ms=3, lw=1.5, label=str(key))
    ax.set_xscale("log", base=2)
    ticks = size_ticks(float(df["nbytes"].min()), float(df["nbytes"].max()))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticks(ticks, [format_size(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("message size")
    if y == "time_s":
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_ylabel(_Y_LABELS.get(y, y))
    if title is None:
        parts = [
            ", ".join(sorted({str(v) for v in df[c]}))
            for c in ("collective", "topology")
            if c in df.columns and c != by
        ]
        title = " on ".join(p for p in parts if p)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title=by, fontsize=8, title_fontsize=8)
    return fig


# -- link utilization ----------------------------------------------------------------------
def _network_of(result: Result, network: Network | None) -> Network:
    from commsim.topology import load_topology

    if network is None and result.network is not None:  # what the DES timed it on
        return result.network
    if network is None:
        try:
            network = load_topology(result.topology)
        except Exception as exc:  # a file topology is known by its name only
            raise ValueError(
                f"cannot rebuild topology {result.topology!r} from its name ({exc}); "
                "pass the network the result ran on: network=commsim.load_topology(...)"
            ) from None
    if network.ranks != result.ranks:
        network = network.with_ranks(result.ranks)
    return network


def _link_names(network: Network, used: Sequence[int]) -> list[str]:
    names = []
    for link_id in used:
        link = network.links[link_id]
        names.append(
            link.label or f"{network.devices[link.src].name}->{network.devices[link.dst].name}"
        )
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    return [f"{n} [{i}]" if seen[n] > 1 else n for n, i in zip(names, used, strict=True)]


def _fair_rates(
    flows: dict[int, tuple[int, ...]], capacity: Sequence[float]
) -> dict[int, float]:
    """Max-min fair rates of ``flows`` (id -> links), as the DES shares them
    (:func:`commsim.engine.maxmin.fill_arrays`, on the links they use)."""
    import numpy as np

    from commsim.engine.maxmin import fill_arrays

    ids = list(flows)
    crossed = [link for fid in ids for link in flows[fid]]
    used, local = np.unique(np.asarray(crossed, dtype=np.int64), return_inverse=True)
    per_flow = np.repeat(np.arange(len(ids)), [len(flows[fid]) for fid in ids])
    rates = fill_arrays(per_flow, local, len(ids),
                        np.asarray([capacity[link] for link in used.tolist()], dtype=np.float64))
    return dict(zip(ids, rates.tolist(), strict=True))


def _flows(result: Result, network: Network) -> list[tuple[float, float, tuple[int, ...]]]:
    """``(start, drain, links)`` of every transfer that moves bytes over at least one link:
    its bytes flow from its start until its arrival minus its route's latency (and gamma)."""
    schedule, timing = result.records()
    cols = schedule.columns
    links = network.links
    starts, ends = timing.start_s.tolist(), timing.end_s.tolist()
    span = max(ends, default=0.0)
    tol = 1e-9 * max(span, 1e-12)
    flows: list[tuple[float, float, tuple[int, ...]]] = []
    for index, (src, dst, nbytes, reduce) in enumerate(zip(
            cols.src.tolist(), cols.dst.tolist(), cols.nbytes.tolist(), cols.reduce.tolist(),
            strict=True)):
        path = tuple(network.route(src, dst))
        if not path or nbytes <= 0:
            continue
        delay = sum(links[i].latency_s for i in path)
        if reduce and dst < network.ranks:
            delay += network.gamma_s_per_B * nbytes
        start, drain = starts[index], ends[index] - delay
        if drain < start - tol:
            raise ValueError(
                f"transfer {index} ({src}->{dst}) arrives before its route's "
                f"latency has passed on {network.name!r}: pass the network the result ran on"
            )
        if drain > start:
            flows.append((start, drain, path))
    return flows


def link_utilization(result: Result, network: Network | None = None) -> pd.DataFrame:
    """Each link's utilization over the time of a discrete-event result, as a step function.

    Returns a DataFrame indexed by ``time_s`` (the breakpoints, ascending) with one column per
    link that carried traffic (named like the trace's link tracks, ``gpu0->nvswitch0``): the
    row at ``t`` holds ``sum of the rates of the transfers on the link / its bandwidth`` from
    ``t`` to the next breakpoint; the last row (the last byte's departure) is all zeros.

    The engine records when each transfer started and arrived, not its rate, so the rates are
    rebuilt with the engine's own model: a transfer's bytes flow from its start until its
    arrival minus its route's latency (and, for a reduce into a rank, minus ``gamma x bytes``);
    between consecutive starts and drains the set of flowing transfers is fixed and the rates
    are the max-min fair share of every link (progressive filling), as in the engine. So the
    function is exact under bandwidth sharing (a flow slowed by a neighbour is counted at its
    shared rate, not at its average rate) and a link's utilization never exceeds 1. The
    latency tail of a transfer (bytes in flight after they have left) is not counted.

    ``network`` is the network the result ran on; by default the result's topology is rebuilt
    from its name (a preset; pass the network for a file or a built network).

    Raises
    ------
    ValueError
        An analytic result (no transfers), or a timing that does not fit the network (a
        transfer arriving before its route's latency has passed: another network).
    """
    import numpy as np
    import pandas as pd

    if result.schedule is None or result.timing is None:
        raise ValueError(
            "link utilization needs the discrete-event engine's transfers (engine='des')"
        )
    network = _network_of(result, network)
    capacity = [link.bandwidth_Bps for link in network.links]
    flows = _flows(result, network)
    if not flows:
        return pd.DataFrame({"time_s": [0.0]}).set_index("time_s")

    used = sorted({link for _, _, path in flows for link in path})
    column = {link: i for i, link in enumerate(used)}
    times = sorted({t for start, drain, _ in flows for t in (start, drain)})
    index_of = {t: i for i, t in enumerate(times)}
    begins: list[list[int]] = [[] for _ in times]
    finishes: list[list[int]] = [[] for _ in times]
    for fid, (start, drain, _) in enumerate(flows):
        begins[index_of[start]].append(fid)
        finishes[index_of[drain]].append(fid)
    share = np.zeros((len(times), len(used)))
    active: dict[int, tuple[int, ...]] = {}
    for k in range(len(times) - 1):
        for fid in finishes[k]:
            del active[fid]
        for fid in begins[k]:
            active[fid] = flows[fid][2]
        if not active:
            continue
        for fid, rate in _fair_rates(active, capacity).items():
            for link in active[fid]:
                share[k, column[link]] += rate / capacity[link]
    np.clip(share, 0.0, 1.0, out=share)  # float rounding of the filling, never the model
    return pd.DataFrame(share, index=pd.Index(times, name="time_s"),
                        columns=_link_names(network, used))


def _busiest(util: pd.DataFrame, top: int) -> pd.DataFrame:
    """The ``top`` columns with the most utilization x time (ties: link order)."""
    import numpy as np

    if util.shape[1] == 0:
        return util
    widths = np.diff(util.index.to_numpy(), append=util.index[-1])
    load = (util.to_numpy() * widths[:, None]).sum(axis=0)
    order = sorted(range(len(load)), key=lambda i: (-load[i], i))[: max(top, 0)]
    return util.iloc[:, order]


def plot_link_utilization(
    result: Result,
    network: Network | None = None,
    *,
    top: int = 8,
    util: pd.DataFrame | None = None,
    figsize: tuple[float, float] = (8.0, 4.5),
) -> Figure:
    """Utilization over time (0 to 1, a step line per link) of the ``top`` busiest links.

    Busiest means the most utilization x time (bytes carried over bandwidth). Time is in
    microseconds from the collective's start; see :func:`link_utilization` for how the rates
    are derived (exact max-min fair sharing, latency tails not counted). ``util`` reuses a
    frame from :func:`link_utilization`.
    """
    from matplotlib.figure import Figure

    if util is None:
        util = link_utilization(result, network)
    shown = _busiest(util, top)
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.add_subplot()
    t_us = shown.index.to_numpy() * 1e6
    for name in shown.columns:
        ax.step(t_us, shown[name].to_numpy(), where="post", lw=1.2, label=str(name))
    ax.set_ylim(0.0, 1.05)
    ax.set_xlim(0.0, max(result.time_s * 1e6, float(t_us[-1]) if len(t_us) else 0.0) or 1.0)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("link utilization")
    ax.set_title(
        f"{result.collective.value} {format_size(result.nbytes)}, {result.algorithm} on "
        f"{result.topology}: the {len(shown.columns)} busiest of {util.shape[1]} links",
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    if len(shown.columns):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


def plot_link_heatmap(
    result: Result,
    network: Network | None = None,
    *,
    top: int = 32,
    bins: int = 200,
    util: pd.DataFrame | None = None,
    figsize: tuple[float, float] = (9.0, 5.0),
) -> Figure:
    """A heatmap of link utilization: one row per link (the ``top`` busiest), time across in
    ``bins`` equal bins, each cell the exact time average of the step function over its bin."""
    import numpy as np
    from matplotlib.figure import Figure

    if util is None:
        util = link_utilization(result, network)
    shown = _busiest(util, top)
    edges_t = shown.index.to_numpy()
    end = max(result.time_s, float(edges_t[-1]) if len(edges_t) else 0.0) or 1.0
    grid = np.linspace(0.0, end, bins + 1)
    values = shown.to_numpy()
    # integral of each step function at the grid points, then differences per bin
    cum = np.zeros((len(edges_t), values.shape[1]))
    if len(edges_t) > 1:
        cum[1:] = np.cumsum(values[:-1] * np.diff(edges_t)[:, None], axis=0)

    def integral(t: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(edges_t, t, side="right") - 1, 0, None)
        k = np.minimum(k, len(edges_t) - 1)
        return cum[k] + values[k] * np.clip(t - edges_t[k], 0.0, None)[:, None]

    heat = np.diff(integral(grid), axis=0) / np.diff(grid)[:, None] if len(edges_t) else None
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.add_subplot()
    if heat is not None and values.shape[1]:
        image = ax.imshow(
            np.clip(heat.T, 0.0, 1.0),
            aspect="auto",
            interpolation="nearest",
            cmap="viridis",
            vmin=0.0,
            vmax=1.0,
            extent=(0.0, end * 1e6, len(shown.columns) - 0.5, -0.5),
        )
        fig.colorbar(image, ax=ax, label="utilization")
    ax.set_yticks(range(len(shown.columns)), [str(c) for c in shown.columns], fontsize=6)
    ax.set_xlabel("time (us)")
    ax.set_title(
        f"{result.collective.value} {format_size(result.nbytes)}, {result.algorithm} on "
        f"{result.topology}: link utilization",
        fontsize=10,
    )
    return fig


# -- thin wrappers over the replay and validation plots -------------------------------------
def plot_gantt(step: StepResult, **options: Any) -> Figure:
    """The Gantt chart of a replayed step (``commsim.replay.plot.plot_step``: a compute and a
    communication row per rank; ``ranks=[...]`` or ``max_ranks=N`` pick the rows)."""
    from commsim.replay.plot import plot_step

    return plot_step(step, **options)


def plot_measured_vs_predicted(report: ValidationReport, *, title: str | None = None) -> Figure:
    """Measured (dots) and predicted (line) busbw against size, one panel per (collective,
    ranks) of a validation report (``commsim.validation.plot.plot_panels``)."""
    from commsim.validation.plot import plot_panels

    return plot_panels(report, title=title)
