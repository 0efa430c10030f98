"""One answer per question: every entry point gives the same time for the same collective.

On every preset (GPU and TPU, plus a two-host GPU machine where NCCL composes its pipelined
trees), for each collective at 4 KiB, 1 MiB and 256 MiB, on all ranks and on a subset: the
``commsim run`` table and ``--json``, the Python API, a ``sweep`` row, ``validate``'s predicted
column and a one-collective replay report the same time (to 1e-9 relative: the replay runs the
transfers after NCCL's launch latency inside a larger simulation, so its sums round
differently). File outputs never change a printed byte, on one preset of each kind of path a
call can take to its files.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

import commsim
from commsim.cli import main
from commsim.replay.graph import GraphBuilder
from commsim.replay.lower import time_graph
from commsim.topology import list_presets, load_topology

COLLECTIVES = ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce")
SIZES = (4096, 1 << 20, 256 << 20)
#: A one-GPU server preset (``pcie-v100``) is a node of a cluster: it runs as two of them.
PRESETS = [p.name if p.ranks > 1 else f"{p.name}x2" for p in list_presets()] + ["dgx-h100x2"]
RTOL = 1e-9
#: One preset of each kind of path from a call to its files (writing every preset's files
#: took over two minutes of the suite, three quarters of it on presets that repeat one of
#: these paths): an NVSwitch node under NCCL; per-pair NVLink (hybrid cube-mesh); GPUs joined
#: through host memory (no P2P); NVLink bridges beside PCIe (no LL128); hosts whose all_reduce
#: is NCCL's pipelined tree or NVLS across hosts (schedules of pieces); one GPU per host, over the
#: network; more ranks than the DES ranks candidates for (72); a TPU torus (no NCCL).
FILE_OUTPUT_PRESETS = ["dgx-a100", "dgx1-v100", "geforce-gen4-8gpu", "pcie-nvbridge-8gpu",
                       "dgx-h100x2", "pcie-v100x2", "gb200-nvl72", "tpu-v4-64"]


def _groups(preset: str) -> list[int | None]:
    """All ranks, and the first half (a group that is a subset of the ranks)."""
    return [None, load_topology(preset).ranks // 2]


def _run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, object]:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _table_time_us(text: str) -> float:
    """The time(us) column of the one data row of a ``commsim run`` table."""
    rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(rows) == 1, text
    return float(rows[0].split()[3])


def _replay_time(preset: str, collective: str, nbytes: int, ranks: int | None) -> float:
    """A step of one collective, zero compute, replayed on the topology's first ranks."""
    network = load_topology(preset)
    group = tuple(range(ranks if ranks is not None else network.ranks))
    builder = GraphBuilder(network.ranks)
    builder.collective(group, collective, nbytes, name="only", phase="backward")
    return time_graph(builder.build(), network).step_time_s


def _sweep_times(preset: str, ranks: int | None) -> dict[tuple[str, int], float]:
    grid = {"topologies": [preset], "collectives": list(COLLECTIVES),
            "sizes": [f"{n}B" for n in SIZES]}
    if ranks is not None:
        grid["ranks"] = [ranks]
    frame = commsim.run_sweep(grid)
    assert frame["error"].isna().all(), frame["error"].dropna().tolist()
    return {(r.collective, int(r.nbytes)): float(r.time_s) for r in frame.itertuples()}


def _validate_times(capsys: pytest.CaptureFixture[str], tmp_path: Path, preset: str,
                    ranks: int) -> dict[tuple[str, int], float]:
    path = tmp_path / "m.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["collective", "ranks", "nbytes", "time_s"])
        for collective in COLLECTIVES:
            for nbytes in SIZES:
                writer.writerow([collective, ranks, nbytes, 1.0])
    report = _run_json(capsys, ["validate", str(path), "--topology", preset])
    return {(r["collective"], r["nbytes"]): r["predicted_time_s"] for r in report["rows"]}


@pytest.mark.parametrize("preset", PRESETS)
def test_every_entry_point_gives_the_same_time(
    preset: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """run (table and JSON), the API, sweep, validate and replay agree on every call."""
    for ranks in _groups(preset):
        used = ranks if ranks is not None else load_topology(preset).ranks
        swept = _sweep_times(preset, ranks)
        validated = _validate_times(capsys, tmp_path, preset, used)
        extra = [] if ranks is None else ["--ranks", str(ranks)]
        for collective in COLLECTIVES:
            for nbytes in SIZES:
                argv = ["run", collective, "-t", preset, "-s", str(nbytes), *extra]
                api = commsim.simulate(collective, preset, nbytes, ranks=ranks)
                run = _run_json(capsys, argv)
                assert main(argv) == 0
                table_us = _table_time_us(capsys.readouterr().out)
                where = f"{preset} {collective} {nbytes} B on {used} ranks"
                assert run["time_s"] == api.time_s, where
                assert run["algorithm"] == api.algorithm and run["protocol"] == api.protocol
                assert table_us == pytest.approx(api.time_s * 1e6, abs=0.006), where
                assert swept[(collective, nbytes)] == api.time_s, where
                assert validated[(collective, nbytes)] == api.time_s, where
                replayed = _replay_time(preset, collective, nbytes, ranks)
                assert replayed == pytest.approx(api.time_s, rel=RTOL), where


def _printed_times(text: str) -> list[str]:
    return re.findall(r'"time_s": [^,\n]+|^\s+\d+\s+\S+\s+\d+\s+\S+', text, re.M)


@pytest.mark.parametrize("preset", FILE_OUTPUT_PRESETS)
def test_file_outputs_never_change_a_printed_time(
    preset: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Adding --trace --transfers (and --plot for all_reduce) leaves the printed table and
    JSON byte-identical; where the chosen algorithm has no schedule (a call NCCL's composed
    estimate times across hosts) the command says so in one line instead of choosing another."""
    for collective in COLLECTIVES:
        base = ["run", collective, "-t", preset, "-s", "1MiB"]
        files = ["--trace", str(tmp_path / "t.json"), "--transfers", str(tmp_path / "t.csv")]
        if collective == "all_reduce":
            files += ["--plot", str(tmp_path / "t.png")]
        result = commsim.simulate(collective, preset, "1MiB")
        for fmt in ([], ["--json"]):
            assert main([*base, *fmt]) == 0
            plain = capsys.readouterr().out
            status = main([*base, *fmt, *files])
            captured = capsys.readouterr()
            if result.schedule is None:
                assert status == 2 and "composed" in captured.err
                assert captured.err.count("\n") == 1
                continue
            assert status == 0, captured.err
            assert captured.out == plain and _printed_times(plain)
        if result.schedule is not None:
            rows = (tmp_path / "t.csv").read_text().splitlines()[1:]
            latest = max(float(row.split(",")[3]) for row in rows)
            assert latest == pytest.approx(result.time_s, rel=RTOL)


def test_api_transfers_are_the_chosen_algorithms() -> None:
    """From Python, ``transfers()`` of an ``auto`` result are the records of the algorithm it
    chose, also under the closed form (from a simulation that gives the same time)."""
    for engine in ("des", "analytic"):
        r = commsim.simulate("all_reduce", "dgx-h100", "1MiB", engine=engine)
        df = r.transfers()
        assert df["end_s"].max() == pytest.approx(r.time_s, rel=RTOL)
    tree = commsim.simulate("all_reduce", "dgx-h100x4", "1MiB")
    assert tree.algorithm == "hierarchical_pipelined"
    assert tree.transfers()["end_s"].max() == pytest.approx(tree.time_s, rel=RTOL)
    closed = commsim.simulate("all_reduce", "dgx-h100x4", "1MiB", engine="analytic")
    with pytest.raises(commsim.CommsimError, match="composed estimate"):
        closed.transfers()


#: Machines of several hosts whose ``auto`` all_reduce is NCCL's tree (small and medium
#: sizes), NVLS or CollNet across hosts: one NVSwitch generation each, the hybrid cube-mesh
#: of V100s, one GPU per host, and InfiniBand SHARP; and two whose schedules run to many
#: thousand transfers (hosts of 72 GB200: 20,736 a piece of the tree; NVLS across 16 hosts:
#: 17 million dependencies at 256 MiB, where the budget affords fewer pieces than wanted).
ACROSS_HOSTS = ["dgx-h100x2", "dgx-a100x4", "aws-p3dnx2", "pcie-v100x2", "gb200-nvl72x2",
                "dgx-h100x16"]
#: Their traces keep the first host's first GPUs: all 165,888 transfers of the GB200 tree at
#: 256 MiB took longer to write as JSON events (13-30 s) than to simulate.
TRACE_RANKS = {"gb200-nvl72x2": ["--trace-ranks", "0-7"], "dgx-h100x16": ["--trace-ranks", "0-7"]}


@pytest.mark.parametrize("preset", ACROSS_HOSTS)
def test_the_default_across_hosts_has_transfers_and_they_change_nothing(
    preset: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """At 4 KiB, 1 MiB and 256 MiB, the all_reduce NCCL's model picks across hosts (its tree,
    NVLS or CollNet: schedules now) writes a trace and transfers whose latest end is the
    printed time, and adding them changes no printed byte; the API's transfers are the
    same records."""
    for size in ("4KiB", "1MiB", "256MiB"):
        base = ["run", "all_reduce", "-t", preset, "-s", size, "--json"]
        assert main(base) == 0
        plain = capsys.readouterr().out
        files = ["--trace", str(tmp_path / "t.json"), "--transfers", str(tmp_path / "t.csv"),
                 *TRACE_RANKS.get(preset, [])]
        assert main([*base, *files]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out == plain
        printed = json.loads(plain)["time_s"]
        rows = (tmp_path / "t.csv").read_text().splitlines()[1:]
        assert max(float(row.split(",")[3]) for row in rows) == pytest.approx(printed,
                                                                              rel=RTOL)
        api = commsim.simulate("all_reduce", preset, size)
        assert api.time_s == printed and len(api.transfers()) == len(rows)


def test_contended_closed_form_refuses_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Under --engine analytic, records come only from a simulation that reproduces the
    closed-form time: the double binary tree shares switch ports (the DES is slower than its
    closed form), so --transfers is a one-line refusal naming both times, and no file."""
    path = tmp_path / "t.csv"
    argv = ["run", "all_reduce", "-t", "dgx-h100", "-s", "1GiB", "--protocol", "none",
            "--algorithm", "double_binary_tree", "--engine", "analytic", "--transfers", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "contention" in err and "--engine des" in err
    assert not path.exists()


def test_answers_do_not_depend_on_what_was_asked_before() -> None:
    """A result (its time, algorithm and records) is the same whether or not earlier calls on
    the same network ranked its algorithm as a loser and dropped that loser's records."""
    fresh = commsim.simulate("all_reduce", commsim.load_topology("dgx-h100"), "1MiB",
                             algorithm="ring", protocol="LL128")
    network = commsim.load_topology("dgx-h100")
    commsim.simulate("all_reduce", network, "1MiB", algorithm="ring")  # LL128 may lose here
    again = commsim.simulate("all_reduce", network, "1MiB", algorithm="ring", protocol="LL128")
    assert again.to_dict() == fresh.to_dict() and again.schedule is not None
    assert again.transfers().equals(fresh.transfers())
