"""commsim.plots: figures returned (never shown), link utilization rebuilt exactly, run --plot."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import commsim
from commsim.cli import main
from commsim.collectives import Collective
from commsim.engine.des import simulate_des
from commsim.plots import (
    link_utilization,
    plot_busbw,
    plot_gantt,
    plot_link_heatmap,
    plot_link_utilization,
    plot_measured_vs_predicted,
    size_ticks,
)
from commsim.results import Result
from commsim.schedule import OpKind, Schedule, Transfer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _net(ranks: int = 4) -> commsim.Network:
    return commsim.switch(ranks, latency="1us", bandwidth="100GB/s")


def _result(transfers: list[Transfer], network: commsim.Network) -> Result:
    """A Result for a hand-built schedule (the engine's timing, no algorithm)."""
    nbytes = max(t.offset + t.nbytes for t in transfers)
    schedule = Schedule(Collective.BROADCAST, "custom", network.ranks, nbytes, 0, 1,
                        tuple(transfers))
    timing = simulate_des(schedule, network)
    return Result(Collective.BROADCAST, "custom", network.name, network.ranks, nbytes, 1, "des",
                  timing.time_s, schedule, timing)


def _carried_s(util: pd.DataFrame) -> np.ndarray:
    """Integral of each link's utilization over time: bytes carried / bandwidth."""
    t = util.index.to_numpy()
    return (util.to_numpy() * np.diff(t, append=t[-1])[:, None]).sum(axis=0)


# -- plot_busbw ----------------------------------------------------------------------------
def test_busbw_one_line_per_algorithm_with_binary_size_ticks(tmp_path):
    net = _net(8)
    sizes = ["1KiB", "64KiB", "4MiB", "256MiB", "1GiB"]
    results = [commsim.simulate("all_reduce", net, s, algorithm=a, engine="analytic")
               for a in ("ring", "recursive_doubling", "binomial_tree") for s in sizes]
    fig = plot_busbw(results)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["binomial_tree", "recursive_doubling", "ring"]
    assert all(len(ln.get_xdata()) == len(sizes) for ln in lines)
    assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "1KiB" and labels[-1] == "1GiB" and "4MiB" in labels
    assert ax.get_ylim()[0] == 0
    ring = next(ln for ln in lines if ln.get_label() == "ring")
    assert ring.get_ydata()[-1] == pytest.approx(results[4].busbw_Bps / 1e9)
    fig.savefig(tmp_path / "busbw.png")
    assert (tmp_path / "busbw.png").read_bytes().startswith(PNG_MAGIC)


def test_busbw_from_a_dataframe_by_topology_and_time_log_log():
    df = pd.DataFrame({
        "topology": ["a", "a", "b", "b", "b"],
        "nbytes": [1024, 2**20, 1024, 2**20, 2**30],
        "time_s": [1e-5, 1e-4, 2e-5, 3e-4, 1e-2],
        "busbw_GBps": [0.1, 10.0, 0.05, 3.5, 100.0],
    })
    fig = plot_busbw(df, by="topology", y="time_s")
    ax = fig.axes[0]
    assert [ln.get_label() for ln in ax.get_lines()] == ["a", "b"]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    assert list(ax.get_lines()[1].get_ydata()) == pytest.approx([20.0, 300.0, 1e4])  # us
    assert "time" in ax.get_ylabel()
    with pytest.raises(ValueError, match="algorithm"):
        plot_busbw(df)  # no algorithm column


def test_size_ticks_are_powers_of_two_and_few():
    assert size_ticks(1024, 8192) == [1024, 2048, 4096, 8192]
    ticks = size_ticks(8, 2**33)
    assert len(ticks) <= 8 and ticks[0] == 8 and all(t & (t - 1) == 0 for t in ticks)


# -- link utilization ----------------------------------------------------------------------
def test_a_lone_transfer_fills_its_links_while_its_bytes_flow():
    net = _net(2)
    r = _result([Transfer(0, 1, 0, 10**8, OpKind.COPY)], net)
    util = link_utilization(r, net)
    assert list(util.columns) == ["gpu0->switch", "switch->gpu1"]
    drain = r.time_s - 1e-6  # arrival minus the route's latency
    assert list(util.index) == pytest.approx([0.0, drain])
    assert util.iloc[0].tolist() == [1.0, 1.0]
    assert util.iloc[-1].tolist() == [0.0, 0.0]
    assert _carried_s(util) == pytest.approx([1e8 / 100e9] * 2)


def test_shared_link_is_never_over_full_under_late_arrivals():
    # 0->1 starts alone; 2->1 starts later (after a small 3->2), shares switch->gpu1 at half
    # rate each, then finishes alone: averaging each transfer's rate would exceed 1 here.
    net = _net(4)
    r = _result([
        Transfer(0, 1, 0, 10**8, OpKind.COPY),
        Transfer(3, 2, 0, 10**7, OpKind.COPY),
        Transfer(2, 1, 0, 10**8, OpKind.COPY, deps=(1,)),
    ], net)
    util = link_utilization(r, net)
    assert util.to_numpy().max() <= 1.0 + 1e-9
    shared = util["switch->gpu1"]
    assert shared.max() == pytest.approx(1.0)
    # while both flow, each uplink carries half
    both = util.index[(util["gpu0->switch"] > 0) & (util["gpu2->switch"] > 0)]
    assert len(both) >= 1
    assert util.loc[both[0], "gpu0->switch"] == pytest.approx(0.5)
    assert util.loc[both[0], "gpu2->switch"] == pytest.approx(0.5)
    expected = {"gpu0->switch": 1e8, "gpu2->switch": 1e8, "switch->gpu1": 2e8,
                "gpu3->switch": 1e7, "switch->gpu2": 1e7}
    carried = dict(zip(util.columns, _carried_s(util), strict=True))
    assert carried == pytest.approx({k: v / 100e9 for k, v in expected.items()})
    # the averaged-rate shortcut would have over-filled the shared link
    ends, starts = r.timing.end_s, r.timing.start_s
    avg = [1e8 / (ends[i] - 1e-6 - starts[i]) / 100e9 for i in (0, 2)]
    assert sum(avg) > 1.0


def test_collective_on_a_preset_conserves_bytes_per_link():
    r = commsim.simulate("all_reduce", "dgx-h100x2", "16MiB", protocol="none")
    net = commsim.load_topology("dgx-h100x2")
    util = link_utilization(r)  # the preset is rebuilt from the result's name
    assert util.to_numpy().max() <= 1.0 + 1e-9
    assert util.to_numpy().max() == pytest.approx(1.0)
    carried: dict[int, float] = {}
    for t in r.schedule.transfers:
        for link in net.route(t.src, t.dst):
            carried[link] = carried.get(link, 0.0) + t.nbytes / net.links[link].bandwidth_Bps
    assert sorted(_carried_s(util)) == pytest.approx(sorted(carried.values()), rel=1e-9)


def test_utilization_needs_transfers_and_the_right_network():
    analytic = commsim.simulate("all_reduce", _net(4), "1MiB", algorithm="ring", engine="analytic")
    with pytest.raises(ValueError, match="discrete-event"):
        link_utilization(analytic, _net(4))
    r = commsim.simulate("all_gather", _net(4), "1MiB", algorithm="ring")
    slow = commsim.switch(4, latency="1ms", bandwidth="100GB/s")
    with pytest.raises(ValueError, match="network the result ran on"):
        link_utilization(r, slow)
    assert link_utilization(r).equals(link_utilization(r, _net(4)))  # r carries its network
    bare = dataclasses.replace(r, network=None)
    with pytest.raises(ValueError, match="pass the network"):
        link_utilization(bare)  # a built network has no preset to rebuild from


def test_plot_link_utilization_and_heatmap(tmp_path):
    net = _net(8)
    r = commsim.simulate("all_gather", net, "8MiB", algorithm="ring", chunks=4)
    fig = plot_link_utilization(r, net, top=3)
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 3
    assert ax.get_ylim() == (0.0, 1.05)
    assert max(max(ln.get_ydata()) for ln in ax.get_lines()) == pytest.approx(1.0)
    assert ax.get_xlim()[1] == pytest.approx(r.time_s * 1e6)
    fig.savefig(tmp_path / "util.png")
    heat = plot_link_heatmap(r, net, top=5, bins=50)
    image = heat.axes[0].get_images()[0].get_array()
    assert image.shape == (5, 50)
    assert float(image.max()) <= 1.0 + 1e-9
    heat.savefig(tmp_path / "heat.png")
    assert (tmp_path / "util.png").read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "heat.png").read_bytes().startswith(PNG_MAGIC)


# -- wrappers ------------------------------------------------------------------------------
def test_gantt_and_measured_vs_predicted_return_figures(tmp_path):
    from commsim.replay import replay
    from commsim.validation import Measurement, validate

    step = replay({"kind": "ddp", "layers": 2, "forward_time": "1ms", "backward_time": "2ms",
                   "grad_bytes": "8MiB", "algorithm": "ring"}, _net(4))
    fig = plot_gantt(step)
    assert isinstance(fig, Figure)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        f"rank {r}" for r in range(4)]
    fig.savefig(tmp_path / "gantt.png")
    rows = [Measurement(collective=Collective.ALL_REDUCE, ranks=4, nbytes=n, time_s=t)
            for n, t in ((2**20, 5e-5), (2**24, 4e-4))]
    report = validate(rows, _net(4), algorithm="ring")
    fig = plot_measured_vs_predicted(report, title="two rows")
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert [ln.get_label() for ln in fig.axes[0].get_lines()] == ["measured", "predicted"]
    fig.savefig(tmp_path / "validate.png")


# -- commsim run --plot --------------------------------------------------------------------
def test_run_plot_busbw_for_a_range_and_utilization_for_one_size(tmp_path, capsys):
    out = tmp_path / "range.png"
    assert main(["run", "all_reduce", "-t", "dgx-h100", "-s", "1KiB:1MiB:4",
                 "--plot", str(out)]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC)
    one = tmp_path / "one.png"
    assert main(["run", "all_gather", "-t", "dgx-h100", "-s", "4MiB", "--plot", str(one)]) == 0
    assert one.read_bytes().startswith(PNG_MAGIC)
    capsys.readouterr()


def test_run_plot_errors_are_one_line_exit_2(tmp_path, capsys):
    """--plot into a missing directory, or of a result without transfers, is one line and
    exit 2 with no file; under the closed form one size still plots (records reproduced)."""
    missing = tmp_path / "no" / "such" / "dir.png"
    assert main(["run", "all_reduce", "-t", "dgx-h100", "-s", "1MiB",
                 "--plot", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--plot" in err and "does not exist" in err
    # one size under the closed form: link utilization from the simulation that reproduces it
    assert main(["run", "all_reduce", "-t", "dgx-h100", "-s", "1MiB", "--engine", "analytic",
                 "--plot", str(tmp_path / "a.png")]) == 0
    assert (tmp_path / "a.png").exists()
    capsys.readouterr()
    # NCCL's choice across hosts is a schedule: it plots; under the closed form its time is
    # the composed estimate, which has no transfers to plot: one line, no file
    assert main(["run", "all_reduce", "-t", "dgx-h100x2", "-s", "1MiB",
                 "--plot", str(tmp_path / "d.png")]) == 0
    assert (tmp_path / "d.png").exists()
    capsys.readouterr()
    assert main(["run", "all_reduce", "-t", "dgx-h100x2", "-s", "1MiB", "--engine",
                 "analytic", "--plot", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "composed" in err
    assert not (tmp_path / "c.png").exists()
    # a range with the analytic engine plots busbw
    assert main(["run", "all_reduce", "-t", "tpu-v5e-256", "-s", "1KiB:1GiB:32",
                 "--algorithm", "ring", "--engine", "analytic",
                 "--plot", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "b.png").exists()
