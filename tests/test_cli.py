"""Tests of the ``commsim`` command line, run in-process through ``main([...])``."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from commsim.cli import main

RING8 = "kind: ring\nranks: 8\nlink: {latency: 1us, bandwidth: 100GB/s}\n"
RING6 = "kind: ring\nranks: 6\nlink: {latency: 1us, bandwidth: 100GB/s}\n"
JSON_KEYS = {
    "collective": str,
    "algorithm": str,
    "topology": str,
    "ranks": int,
    "nbytes": int,
    "time_s": float,
    "algbw_GBps": float,
    "busbw_GBps": float,
}


@pytest.fixture
def ring8(tmp_path: Path) -> str:
    """An 8-rank ring topology file, 1 us and 100 GB/s per link."""
    path = tmp_path / "ring8.yaml"
    path.write_text(RING8)
    return str(path)


@pytest.fixture
def ring6(tmp_path: Path) -> str:
    """A 6-rank ring topology file (not a power of two)."""
    path = tmp_path / "ring6.yaml"
    path.write_text(RING6)
    return str(path)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    """Run ``commsim run ... --json`` and return the parsed output (exit status must be 0)."""
    assert main(["run", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def assert_one_line_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str
) -> str:
    """``argv`` exits 2 with exactly one line on stderr, no traceback, naming ``needles``."""
    status = main(argv)
    captured = capsys.readouterr()
    assert status == 2, captured
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert captured.out == ""
    return lines[0]


# -- run: results --------------------------------------------------------------------------
def test_run_single_size_json(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """One size prints one JSON object with the contract's keys and types."""
    out = run_json(
        capsys,
        "all_reduce",
        "--topology",
        ring8,
        "--size",
        "1GiB",
        "--algorithm",
        "ring",
        "--chunks",
        "1",
    )
    assert isinstance(out, dict)
    for key, kind in JSON_KEYS.items():
        assert isinstance(out[key], kind), key
    assert out["collective"] == "all_reduce" and out["algorithm"] == "ring"
    assert out["ranks"] == 8 and out["nbytes"] == 2**30
    # ring all-reduce on a ring: 2(p-1) steps of alpha + n/(p beta)
    assert out["time_s"] == pytest.approx(14 * (1e-6 + 2**30 / 8 / 100e9), rel=1e-9)
    assert out["algbw_GBps"] == pytest.approx(2**30 / out["time_s"] / 1e9)
    assert out["busbw_GBps"] == pytest.approx(out["algbw_GBps"] * 2 * 7 / 8)


def test_run_range_json(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """A range MIN:MAX:FACTOR prints a list, one object per size, in increasing size."""
    out = run_json(capsys, "all-reduce", "--topology", ring8, "--size", "1KiB:1MiB:4")
    assert isinstance(out, list)
    assert [row["nbytes"] for row in out] == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert all(set(JSON_KEYS) <= row.keys() for row in out)
    times = [row["time_s"] for row in out]
    assert times == sorted(times)


def test_run_json_is_deterministic(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """The same command prints the same bytes twice (stable key order)."""
    argv = ["run", "all_gather", "--topology", ring8, "--size", "1MiB", "--json"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == first
    assert list(json.loads(first))[:3] == ["collective", "algorithm", "topology"]


def test_run_table(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """Without --json, run prints an nccl-tests-like table: one row per size."""
    assert main(["run", "reduce_scatter", "-t", ring8, "-s", "1KiB:64KiB", "-a", "ring"]) == 0
    out = capsys.readouterr().out
    assert "time(us)" in out and "algbw(GB/s)" in out and "busbw(GB/s)" in out
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert [int(r[0]) for r in rows] == [1024 * 2**i for i in range(7)]
    assert all(r[1] == "ring" for r in rows)


def test_run_preset_and_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    """A preset name works as --topology, and --ranks uses its first R ranks."""
    out = run_json(
        capsys, "all_reduce", "--topology", "dgx-h100", "--size", "64MiB", "--ranks", "4"
    )
    assert out["ranks"] == 4 and out["time_s"] > 0


def test_run_analytic_matches_des(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """On an uncontended ring, --engine analytic gives the DES time."""
    des = run_json(capsys, "broadcast", "-t", ring8, "-s", "16MiB", "-a", "ring", "--chunks", "4")
    ana = run_json(
        capsys,
        "broadcast",
        "-t",
        ring8,
        "-s",
        "16MiB",
        "-a",
        "ring",
        "--chunks",
        "4",
        "--engine",
        "analytic",
    )
    assert ana["time_s"] == pytest.approx(des["time_s"], rel=1e-9)


def test_one_rank_is_valid_and_free(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """A collective on one rank moves nothing: it runs and takes zero time."""
    out = run_json(capsys, "all_reduce", "-t", ring8, "-s", "1MiB", "--ranks", "1")
    assert out["ranks"] == 1 and out["time_s"] == 0.0
    assert out["algbw_GBps"] == 0.0 and out["busbw_GBps"] == 0.0


def test_zero_size_is_valid(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """A zero-byte collective runs and takes zero time."""
    out = run_json(capsys, "all_gather", "-t", ring8, "-s", "0", "-a", "ring")
    assert out["nbytes"] == 0 and out["time_s"] == 0.0


# -- run: files ----------------------------------------------------------------------------
def test_transfers_csv(capsys: pytest.CaptureFixture[str], ring8: str, tmp_path: Path) -> None:
    """--transfers writes the contract's columns; the latest end_s is the collective's time."""
    path = tmp_path / "t.csv"
    out = run_json(
        capsys,
        "all_reduce",
        "-t",
        ring8,
        "-s",
        "1MiB",
        "-a",
        "ring",
        "--chunks",
        "1",
        "--transfers",
        str(path),
    )
    text = path.read_text()
    assert text.splitlines()[0] == "src,dst,start_s,end_s,nbytes,offset,op"
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 7 * 8  # ring all-reduce: 2(p-1) steps, p transfers each
    assert max(float(r["end_s"]) for r in rows) == out["time_s"]
    assert {r["op"] for r in rows} == {"copy", "reduce"}
    assert all(0 <= int(r["src"]) < 8 and 0 <= int(r["dst"]) < 8 for r in rows)


def _x_events(path: Path) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]


def test_trace_json(capsys: pytest.CaptureFixture[str], ring8: str, tmp_path: Path) -> None:
    """--trace writes trace-event JSON whose X slices are complete and never overlap per tid."""
    path = tmp_path / "t.json"
    assert (
        main(
            [
                "run",
                "all_gather",
                "-t",
                ring8,
                "-s",
                "8MiB",
                "-a",
                "ring",
                "--chunks",
                "4",
                "--trace",
                str(path),
            ]
        )
        == 0
    )
    capsys.readouterr()
    events = _x_events(path)
    assert events
    spans: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        assert all(k in e for k in ("ts", "dur", "pid", "tid"))
        spans[(e["pid"], e["tid"])].append((e["ts"], e["dur"]))
    for track in spans.values():
        track.sort()
        for (ts0, dur0), (ts1, _) in zip(track, track[1:], strict=False):
            assert round((ts0 + dur0) * 1000) <= round(ts1 * 1000)
    link_events = [e for e in events if e["cat"] == "link"]
    assert link_events and link_events[0]["name"].startswith("r")


def test_trace_byte_identical(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two runs of the same command write byte-identical trace and CSV files."""
    outputs = []
    for name in ("a", "b"):
        trace, table = tmp_path / f"{name}.json", tmp_path / f"{name}.csv"
        assert (
            main(
                [
                    "run",
                    "all_reduce",
                    "-t",
                    "dgx-h100x2",
                    "-s",
                    "4MiB",
                    "--algorithm",
                    "ring",
                    "--trace",
                    str(trace),
                    "--transfers",
                    str(table),
                ]
            )
            == 0
        )
        outputs.append((trace.read_bytes(), table.read_bytes()))
    capsys.readouterr()
    assert outputs[0] == outputs[1]


def test_files_per_size_for_a_range(
    capsys: pytest.CaptureFixture[str], ring8: str, tmp_path: Path
) -> None:
    """With a range, --transfers/--trace write one file per size, the size in the name."""
    assert (
        main(
            [
                "run",
                "all_reduce",
                "-t",
                ring8,
                "-s",
                "1KiB:4KiB",
                "--json",
                "--transfers",
                str(tmp_path / "t.csv"),
                "--trace",
                str(tmp_path / "t.json"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("t"))
    assert names == [
        "t-1KiB.csv",
        "t-1KiB.json",
        "t-2KiB.csv",
        "t-2KiB.json",
        "t-4KiB.csv",
        "t-4KiB.json",
    ]


def test_analytic_records_match_the_closed_form(
    capsys: pytest.CaptureFixture[str], ring8: str, tmp_path: Path
) -> None:
    """--transfers with --engine analytic writes the records of a simulation that gives the
    closed form's time: the latest end_s is the printed time, and the table is unchanged."""
    argv = ["run", "all_reduce", "-t", ring8, "-s", "1MiB", "--engine", "analytic", "--json"]
    assert main(argv) == 0
    plain = capsys.readouterr().out
    path = tmp_path / "out.csv"
    assert main([*argv, "--transfers", str(path)]) == 0
    assert capsys.readouterr().out == plain
    latest = max(float(line.split(",")[3]) for line in path.read_text().splitlines()[1:])
    assert latest == pytest.approx(json.loads(plain)["time_s"], rel=1e-9)


@pytest.mark.parametrize("flag", ["--transfers", "--trace"])
def test_composed_estimates_have_no_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str
) -> None:
    """Under the closed form NCCL's pipelined trees across hosts are timed by their composed
    estimate, which has no transfers: asking for their records is a one-line error saying
    why, and no file appears (the choice of algorithm is unchanged)."""
    path = tmp_path / "out.x"
    assert_one_line_error(
        capsys,
        ["run", "all_reduce", "-t", "dgx-h100x4", "-s", "1MiB", "--engine", "analytic", flag,
         str(path)],
        "hierarchical_pipelined/LL",
        "composed",
    )
    assert not path.exists()


def test_unwritable_output(capsys: pytest.CaptureFixture[str], ring8: str, tmp_path: Path) -> None:
    """A file that cannot be written is a one-line error naming it."""
    bad = tmp_path / "missing-dir" / "t.csv"
    assert_one_line_error(
        capsys, ["run", "all_reduce", "-t", ring8, "-s", "1KiB", "--transfers", str(bad)], str(bad)
    )


# -- topologies ----------------------------------------------------------------------------
def test_topologies_table(capsys: pytest.CaptureFixture[str]) -> None:
    """`commsim topologies` lists the contract's presets with kind and rank count."""
    assert main(["topologies"]) == 0
    out = capsys.readouterr().out
    for name in (
        "dgx2-v100",
        "dgx-a100",
        "dgx-h100",
        "hgx-h800",
        "pcie-gen4-8gpu",
        "tpu-v5e-256",
        "tpu-v4-64",
    ):
        assert name in out
    assert out.splitlines()[0].split()[:3] == ["name", "kind", "ranks"]


def test_topologies_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`commsim topologies --json` is a list of {name, kind, ranks, description}."""
    assert main(["topologies", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_name = {row["name"]: row for row in rows}
    assert by_name["dgx-h100"]["ranks"] == 8
    assert by_name["tpu-v5e-256"]["ranks"] == 256
    assert by_name["tpu-v4-64"]["ranks"] == 64
    assert all({"name", "kind", "ranks", "description"} <= row.keys() for row in rows)


# -- errors: one line, exit 2, never a traceback -------------------------------------------
def test_unknown_collective(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """An unknown collective names the value."""
    assert_one_line_error(capsys, ["run", "all_to_some", "-t", ring8, "-s", "1MiB"], "all_to_some")


def test_unknown_algorithm(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """An unknown algorithm names the value."""
    assert_one_line_error(
        capsys, ["run", "all_reduce", "-t", ring8, "-s", "1MiB", "-a", "telepathy"], "telepathy"
    )


def test_unknown_topology(capsys: pytest.CaptureFixture[str]) -> None:
    """A topology that is neither a file nor a preset names the value."""
    assert_one_line_error(
        capsys, ["run", "all_reduce", "-t", "dgx-z9000", "-s", "1MiB"], "dgx-z9000"
    )


@pytest.mark.parametrize("size", ["12 parsecs", "-5", "5XB", "1KiB:oops", "4KiB:1KiB"])
def test_bad_size(capsys: pytest.CaptureFixture[str], ring8: str, size: str) -> None:
    """Malformed, negative, unknown-unit and reversed sizes are one line naming the value."""
    assert_one_line_error(
        capsys,
        ["run", "all_reduce", "-t", ring8, "--size", size],
        size.split(":")[-1] if size.startswith("1KiB:") else size,
    )


def test_root_out_of_range(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """--root outside 0..ranks-1 names the root."""
    assert_one_line_error(
        capsys, ["run", "broadcast", "-t", ring8, "-s", "1MiB", "--root", "8"], "--root", "8"
    )


def test_ranks_too_many(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """--ranks above the topology's rank count names the value."""
    assert_one_line_error(
        capsys, ["run", "all_reduce", "-t", ring8, "-s", "1MiB", "--ranks", "9"], "--ranks", "9"
    )


def test_chunks_zero(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """--chunks 0 is an error naming the flag."""
    assert_one_line_error(
        capsys, ["run", "broadcast", "-t", ring8, "-s", "1MiB", "--chunks", "0"], "--chunks"
    )


def test_non_integer_flag(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """An argparse usage error (--chunks two) is one line too."""
    assert_one_line_error(
        capsys,
        ["run", "broadcast", "-t", ring8, "-s", "1MiB", "--chunks", "two"],
        "--chunks",
        "two",
    )


def test_power_of_two_needed(
    capsys: pytest.CaptureFixture[str], ring6: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An algorithm that needs a power-of-two rank count, on 6 ranks: a clear one-line error.

    Every shipped algorithm folds non-powers of two in, so the test registers a
    power-of-two-only variant of ring.
    """
    import dataclasses

    from commsim.algorithms import ALGORITHMS

    pow2 = dataclasses.replace(ALGORITHMS["ring"], name="pow2_ring", power_of_two_only=True)
    monkeypatch.setitem(ALGORITHMS, "pow2_ring", pow2)
    assert_one_line_error(
        capsys,
        ["run", "all_reduce", "-t", ring6, "-s", "1MiB", "-a", "pow2_ring"],
        "pow2_ring",
        "power-of-two",
        "6",
    )


def test_recursive_doubling_on_six_ranks(capsys: pytest.CaptureFixture[str], ring6: str) -> None:
    """recursive_doubling folds the two extra ranks in: it runs on 6 ranks."""
    out = run_json(capsys, "all_reduce", "-t", ring6, "-s", "1MiB", "-a", "recursive_doubling")
    assert out["algorithm"] == "recursive_doubling" and out["ranks"] == 6


def test_hierarchical_needs_hosts(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """The hierarchical algorithm on a flat ring (no hosts) is a one-line error."""
    assert_one_line_error(
        capsys,
        ["run", "all_reduce", "-t", ring8, "-s", "1MiB", "-a", "hierarchical"],
        "hierarchical",
    )


def test_algorithm_cannot_run_collective(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """rabenseifner is an all-reduce (and reduce) algorithm: broadcast with it is an error."""
    assert_one_line_error(
        capsys,
        ["run", "broadcast", "-t", ring8, "-s", "1MiB", "-a", "rabenseifner"],
        "rabenseifner",
        "broadcast",
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("kind: ring\nranks: [8\n", ""),
        ("kind: ring\nranks: 8\nlink: {latency: 1us, bandwidth: -100GB/s}\n", "-100GB/s"),
        ("kind: hypercube\nranks: 8\n", "hypercube"),
    ],
    ids=["malformed-yaml", "negative-bandwidth", "unknown-kind"],
)
def test_bad_topology_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, needle: str
) -> None:
    """Broken topology files are one-line errors naming the file or the bad value."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    line = assert_one_line_error(
        capsys, ["run", "all_reduce", "-t", str(path), "-s", "1MiB"], needle
    )
    if not needle:
        assert "bad.yaml" in line


def test_no_command(capsys: pytest.CaptureFixture[str]) -> None:
    """`commsim` with no command is a one-line usage error."""
    assert_one_line_error(capsys, [], "required")


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """`commsim run --help` prints the flags of the contract and exits 0."""
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in (
        "--topology",
        "--size",
        "--algorithm",
        "--root",
        "--ranks",
        "--chunks",
        "--engine",
        "--json",
        "--transfers",
        "--trace",
    ):
        assert flag in out


def test_python_dash_m(tmp_path: Path) -> None:
    """`python -m commsim` is the same command, in a fresh process, with exit status 2 on error."""
    proc = subprocess.run(
        [sys.executable, "-m", "commsim", "run", "all_reduce", "-t", "dgx-h100", "-s", "5XB"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "5XB" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_package_doctest() -> None:
    """The example in the package docstring (the public API) runs and prints what it shows."""
    import doctest

    import commsim

    assert doctest.testmod(commsim).failed == 0


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """`commsim --version` prints the installed version and exits 0."""
    import commsim

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"commsim {commsim.__version__}"


def test_public_api_names() -> None:
    """`commsim` exports its documented names; importing a submodule pulls in neither SimPy
    nor pandas (the package's names load on first use)."""
    import commsim

    for name in commsim.__all__:
        assert getattr(commsim, name) is not None, name
    code = (
        "import sys, commsim.units, commsim.engine.analytic; "
        "assert not {'simpy', 'pandas'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, stdin=subprocess.DEVNULL)


def test_one_size_range_is_a_list(capsys: pytest.CaptureFixture[str], ring8: str) -> None:
    """A range that yields a single size still prints a JSON list (scripts can rely on it)."""
    out = run_json(capsys, "all_reduce", "-t", ring8, "-s", "1KiB:1KiB")
    assert isinstance(out, list) and [row["nbytes"] for row in out] == [1024]
