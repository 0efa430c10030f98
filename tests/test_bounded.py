"""Huge inputs end with an answer or a one-line refusal, never minutes of silent work: each
runs in a fresh process under a 4 GiB address-space limit, with a generous hang guard (the
guard catches a hang; it is not a speed assertion)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from commsim.progress import Progress

LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from commsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


class Forced(Progress):
    """The progress bar, drawn although stderr is no terminal under pytest (where it is
    enabled at all)."""

    def __init__(self, desc: str, unit: str, enabled: bool = True) -> None:
        super().__init__(desc, unit, enabled=enabled, force=True)


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LIMIT, *argv], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize(
    ("topology", "needle"),
    [
        ("dgx-h100x12500", "at most 65536 ranks"),
        ("dgx-h100x1000000", "at most 65536 ranks"),
        ("torus4d", "discrete-event engine"),
    ],
)
def test_huge_inputs_are_refused_in_one_line(tmp_path: Path, topology: str, needle: str) -> None:
    """100k and 8M ranks exceed what the topology kind builds; a 16x16x16x16 torus is built,
    but simulating its all-reduce transfer by transfer would take minutes: one line, exit 2."""
    if topology == "torus4d":
        path = tmp_path / "torus4d.yaml"
        path.write_text("kind: torus\ndims: [16, 16, 16, 16]\n"
                        "link: {latency: 1us, bandwidth: 45GB/s}\n")
        topology = str(path)
    done = _run(["run", "all_reduce", "-t", topology, "-s", "1GiB"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and needle in done.stderr and not done.stdout


def test_65536_ranks_analytic_without_nccl_answers(tmp_path: Path) -> None:
    """dgx-h100x8192 --engine analytic --protocol none (once killed at 17.8 GB): one table row
    under the 4 GiB limit."""
    done = _run(["run", "all_reduce", "-t", "dgx-h100x8192", "-s", "1GiB", "--engine",
                 "analytic", "--protocol", "none", "--json"])
    assert done.returncode == 0, done.stderr
    assert '"ranks": 65536' in done.stdout and not done.stderr


def test_4096_ranks_default_is_had_by_symmetry() -> None:
    """dgx-h100x512 with NCCL's choice under the DES: its composed phases are symmetric rings,
    timed from one representative each, and the output says so."""
    done = _run(["run", "all_reduce", "-t", "dgx-h100x512", "-s", "1GiB"])
    assert done.returncode == 0, done.stderr
    assert "# note: symmetric phases" in done.stdout


def test_a_simulation_over_the_memory_budget_is_refused_in_one_line() -> None:
    """--max-memory below what the DES of a contended ring needs: one line naming the
    estimate and the options, exit 2, nothing on stdout."""
    done = _run(["run", "all_reduce", "-t", "dgx-h100x2", "-s", "1GiB", "-a", "ring",
                 "--protocol", "none", "--max-memory", "64KiB"])
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.count("\n") == 1
    for needle in ("transfers", "of memory", "--max-memory", "--engine analytic"):
        assert needle in done.stderr


def test_long_ranking_shows_a_progress_bar(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Ranking NCCL's candidates on many ranks takes seconds: a bar counts them (forced here,
    as stderr is no terminal under pytest), and stdout is the table alone."""
    from commsim import timing
    from commsim.cli import main

    monkeypatch.setattr(timing, "PROGRESS_MIN_RANKS", 16)
    monkeypatch.setattr(timing, "Progress", Forced)
    assert main(["run", "all_reduce", "-t", "dgx-h100x2", "-s", "1MiB", "--engine",
                 "analytic"]) == 0
    out, err = capsys.readouterr()
    assert "ranking" in err and "candidate" in err and "ranking" not in out


@pytest.mark.parametrize(
    "argv",
    [
        # once a MemoryError (a 95 GiB piece table): exit 1 and a traceback hint
        ["-t", "dgx-h100x16", "--chunks", "100000000"],
        # once minutes: every candidate's closed form stepped through a million pieces
        ["-t", "dgx-h100x16", "--chunks", "1000000"],
        ["-t", "dgx-h100x16", "--chunks", "1000", "-a", "hierarchical"],
        ["-t", "RING", "--chunks", "100000", "-a", "rabenseifner", "--engine", "analytic"],
    ],
)
def test_too_many_pieces_are_refused_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    """A closed form's work grows with --chunks: beyond seconds of it, one line naming the
    estimate and what to change, exit 2 (commsim.engine.form_cost)."""
    ring = tmp_path / "ring.yaml"
    ring.write_text("kind: ring\nranks: 8\nlink: {latency: 1us, bandwidth: 100GB/s}\n")
    argv = [str(ring) if a == "RING" else a for a in argv]
    done = _run(["run", "all_reduce", "-s", "1GiB", *argv])
    assert done.returncode == 2 and not done.stdout, done.stderr
    assert done.stderr.count("\n") == 1
    assert "pieces would take about" in done.stderr and "fewer --chunks" in done.stderr


def test_a_long_simulation_shows_a_progress_bar(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A contended simulation of many transfers draws a bar of the transfers ended (forced,
    its threshold lowered), and times the schedule exactly as without it."""
    from commsim.algorithms import build_schedule
    from commsim.algorithms.base import Call
    from commsim.collectives import Collective
    from commsim.engine import des
    from commsim.topology import ring

    net = ring(8, latency="1us", bandwidth="100GB/s")
    call = Call(collective=Collective.ALL_REDUCE, ranks=8, nbytes=2**20, chunks=64)
    schedule = build_schedule(call, "double_binary_tree")
    plain = des.simulate_des(schedule, net)
    assert not capsys.readouterr().err
    monkeypatch.setattr(des, "PROGRESS_MIN_TRANSFERS", 100)
    monkeypatch.setattr(des, "PROGRESS_EVENTS", 50)
    monkeypatch.setattr(des, "Progress", Forced)
    assert des.simulate_des(schedule, net) == plain
    err, n = capsys.readouterr().err, len(schedule)
    assert f"simulating {n} transfers" in err and f"{n}/{n}" in err


@pytest.mark.parametrize(
    ("workload", "needle"),
    [
        ("kind: pipeline\nschedule: 1f1b\nstages: 4\nmicrobatches: 100000000\n"
         "forward_time: 1ms\nbackward_time: 2ms\n", "stages x microbatches x chunks_per_stage"),
        ("kind: pipeline\nschedule: interleaved\nstages: 64\nmicrobatches: 64\n"
         "chunks_per_stage: 100000\nforward_time: 1ms\nbackward_time: 2ms\n", "64 x 64 x 100000"),
        ("kind: ddp\nlayers: 100000000\nforward_time: 1ms\nbackward_time: 1ms\n"
         "grad_bytes: 1KiB\nbucket_bytes: 1KiB\n", "layers: 100000000"),
        ("kind: fsdp\nunits: 100000000\nparams_per_unit: 1M\nforward_time: 1ms\n"
         "backward_time: 1ms\n", "units: 100000000"),
        ("kind: tensor\nlayers: 1000\nmicrobatches: 100000\nforward_time: 1ms\n"
         "backward_time: 1ms\nallreduce_bytes: 1MiB\n", "layers x microbatches: 1000 x 100000"),
    ],
)
def test_a_huge_workload_is_refused_in_one_line(tmp_path: Path, workload: str,
                                                 needle: str) -> None:
    """Counts that would build a step graph of millions of tasks (once minutes, or the machine's
    memory): one line naming the field, exit 2, before anything of that size is built."""
    path = tmp_path / "w.yaml"
    path.write_text(workload)
    done = _run(["replay", str(path), "-t", "dgx-h100x8"])
    assert done.returncode == 2 and not done.stdout, done.stderr
    assert done.stderr.count("\n") == 1
    assert needle in done.stderr and "a step graph may have" in done.stderr


def test_a_step_over_the_memory_budget_is_refused_in_one_line(tmp_path: Path) -> None:
    """An FSDP step whose collectives' transfers would not fit --max-memory: one line naming
    the estimate and the budget, exit 2."""
    path = tmp_path / "fsdp.yaml"
    path.write_text("kind: fsdp\nunits: 4\nparams_per_unit: 1M\nforward_time: 1ms\n"
                    "backward_time: 1ms\n")
    done = _run(["replay", str(path), "-t", "dgx-h100x2", "--algorithm", "ring",
                 "--protocol", "none", "--max-memory", "1MiB"])
    assert done.returncode == 2 and not done.stdout, done.stderr
    assert done.stderr.count("\n") == 1
    for needle in ("items", "MB budget", "--max-memory"):
        assert needle in done.stderr


def test_a_long_lowering_shows_a_progress_bar(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Lowering a step graph of many tasks draws a bar of the tasks lowered (forced, its
    threshold lowered); the step is the same as without it."""
    from commsim.replay import lower
    from commsim.replay.step import replay

    workload = {"kind": "ddp", "layers": 8, "forward_time": "1ms", "backward_time": "2ms",
                "grad_bytes": "1MiB", "bucket_bytes": "2MiB"}
    plain = replay(workload, "dgx-h100").metrics.step_time_s
    monkeypatch.setattr(lower, "PROGRESS_MIN_TASKS", 10)
    monkeypatch.setattr(lower, "PROGRESS_TASKS", 3)
    monkeypatch.setattr(lower, "Progress", Forced)
    result = replay(workload, "dgx-h100")
    assert result.metrics.step_time_s == plain
    n = len(result.graph.tasks)
    err = capsys.readouterr().err
    assert f"lowering {n} tasks" in err and f"{n}/{n}" in err


def test_long_routes_of_concurrent_messages_are_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A butterfly's exchanges on a ring cross links in proportion to ranks x distance (a
    65,536-rank ring: billions of crossings, minutes); beyond the budget (lowered here) the
    closed form refuses in one line, and an algorithm without such exchanges still answers."""
    from commsim.cli import main
    from commsim.engine import pairs

    monkeypatch.setattr(pairs, "MAX_CROSSINGS", 100_000)
    path = tmp_path / "ring.yaml"
    path.write_text("kind: ring\nranks: 1024\nlink: {latency: 1us, bandwidth: 45GB/s}\n")
    argv = ["run", "all_reduce", "-t", str(path), "-s", "1GiB", "--engine", "analytic"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "concurrent messages over routes of about" in err
    assert main([*argv, "-a", "ring"]) == 0


#: Nesting deeper than the YAML and JSON parsers recurse (about 1,000 levels).
DEEP = 100_000


@pytest.mark.parametrize(
    ("name", "text", "argv"),
    [
        ("t.yaml", "kind: ring\nranks: 2\nlink: " + "{a: " * DEEP + "1" + "}" * DEEP,
         ["run", "all_reduce", "-s", "1MiB", "-t", "FILE"]),
        ("b.yaml", "base: dgx-h100\nintra: " + "[" * DEEP + "]" * DEEP,
         ["run", "all_reduce", "-s", "1MiB", "-t", "FILE"]),
        ("w.yaml", "kind: ddp\nlayers: " + "[" * DEEP + "]" * DEEP,
         ["replay", "FILE", "--topology", "dgx-h100"]),
        ("trace.json", "[" * DEEP + "]" * DEEP, ["replay", "FILE", "--topology", "dgx-h100"]),
        ("log.json", '{"results": ' + "[" * DEEP + "]" * DEEP + "}",
         ["validate", "FILE", "--topology", "dgx-h100"]),
    ],
)
def test_deeply_nested_files_are_refused_in_one_line(tmp_path: Path, name: str, text: str,
                                                    argv: list[str]) -> None:
    """YAML or JSON nested deeper than its parser recurses is bad input: one line naming the
    file, exit 2 (before, the parser's RecursionError was an internal error)."""
    path = tmp_path / name
    path.write_text(text)
    done = _run([str(path) if arg == "FILE" else arg for arg in argv])
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "nested too deeply" in done.stderr
    assert str(path) in done.stderr
