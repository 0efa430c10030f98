"""A seeded fuzz test of the CLI: random commands, flags, presets, malformed YAML and logs.

Every case runs in-process through ``commsim.cli.main`` and must end one of two ways: exit 0
with output that parses (JSON when ``--json`` was given) and no traceback, or exit 2 with
exactly one line on stderr. Exit 1 (an internal error) or anything else is a bug. Sizes and
rank counts are small, so that no accepted case runs long; an alarm turns a hang into a
failure. The cases come from one ``random.Random`` seed, so a failure replays exactly.
"""

from __future__ import annotations

import json
import math
import random
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from commsim.cli import main

DATA = Path(__file__).resolve().parent / "data" / "nccl-tests"
LOG = DATA / "rtx4090-pcie_2gpu_1node_allreduce_kalavai-k8s.txt"
SEED = 20240613
CASES = 300
#: Seconds one case may take before it counts as a hang.
HANG_S = 60


Pool = tuple[list[str], list[str]]


def _files(tmp: Path) -> dict[str, Pool]:
    """(good, malformed) topology, workload, grid, log and output files, by role."""
    text = LOG.read_text(encoding="utf-8")
    footer = text.index("# Out of bounds")
    files = {
        "ring.yaml": "kind: ring\nranks: 4\nlink: {latency: 1us, bandwidth: 100GB/s}\n",
        "torus.yaml": "kind: torus\ndims: [2, 2]\nlink: {latency: 1us, bandwidth: 45GB/s}\n",
        "unitless.yaml": "kind: ring\nranks: 4\nlink: {latency: 2, bandwidth: 100GB/s}\n",
        "broken.yaml": "kind: ring\nranks: [4\n",
        "huge.yaml": "kind: fully_connected\nranks: 5000\nlink: {latency: 1us, bandwidth: 1GB/s}\n",
        "mesh.yaml": "kind: mesh\nranks: 4\n",
        "empty.yaml": "",
        "pipe.yaml": "kind: pipeline\nschedule: 1f1b\nstages: 2\nmicrobatches: 2\n"
        "forward_time: 1ms\nbackward_time: 2ms\nactivation_bytes: 1MiB\n",
        "ddp.yaml": "kind: ddp\nlayers: 2\nforward_time: 1ms\nbackward_time: 2ms\n"
        "grad_bytes: 1MiB\nbucket_bytes: 1MiB\n",
        "ddp-unitless.yaml": "kind: ddp\nlayers: 2\nforward_time: 1\nbackward_time: 2ms\n"
        "grad_bytes: 1MiB\n",
        "grid.yaml": "topologies: [ring.yaml]\ncollectives: [all_reduce]\nsizes: [1KiB, 4KiB]\n",
        "grid-bad.yaml": "topologies: [ring.yaml]\ncollectives: [all_reduce]\nsizes: [1024]\n",
        "log.txt": text,
        "cut.txt": text[: footer - 200],
        "garbage.txt": text.replace("sum      -1", "sum      -1 ?", 3),
        "noise.txt": "Segmentation fault (core dumped)\n",
        "blob.bin": "\x00\x01\x02" * 50,
        "slow.yaml": "ranks:\n  1: {compute: 1.5}\n",
        "jitter.yaml": "jitter: {distribution: normal, sigma: 0.1, seed: 3}\n",
        "later.yaml": "links:\n  '*': {latency: 1us}\nranks:\n  0: {compute: 2}\n",
        "far.yaml": "ranks:\n  999: {compute: 1.5}\n",
        "zero.yaml": "ranks:\n  1: {compute: 0}\n",
        "dist.yaml": "jitter: {distribution: cauchy, sigma: 0.1}\n",
        "cut-all.yaml": "links:\n  '*': {failed: true}\n",
        "typo.yaml": "links:\n  'gpu0->nowhere': {bandwidth: 0.5}\n",
        "nothing.yaml": "name: nothing\n",
        "nic.yaml": "links:\n  'gpu1->*': {bandwidth: 0.5}\n  '*->gpu1': {latency: 2us}\n",
    }
    for name, body in files.items():
        (tmp / name).write_text(body, encoding="utf-8")
    def paths(*names: str) -> list[str]:
        return [str(tmp / n) for n in names]

    return {
        "topology": (
            ["dgx-h100", "dgx-a100", "pcie-gen4-8gpu", "dgx-h100x2",
             *paths("ring.yaml", "torus.yaml")],
            ["dgx-h100x0", "nope", "tpu-v4-64+sharp", *paths("unitless.yaml", "broken.yaml",
             "huge.yaml", "mesh.yaml", "empty.yaml", "missing.yaml")],
        ),
        "workload": (paths("pipe.yaml", "ddp.yaml"),
                     paths("ddp-unitless.yaml", "broken.yaml", "missing.yaml", "ring.yaml")),
        "grid": (paths("grid.yaml"), paths("grid-bad.yaml", "broken.yaml")),
        "log": (paths("log.txt"), paths("cut.txt", "garbage.txt", "noise.txt", "blob.bin",
                                        "missing.txt", "empty.yaml")),
        "out": (paths("o.json"), [str(tmp / "no" / "dir" / "o.json"), str(tmp)]),
        "what_if": (paths("slow.yaml", "jitter.yaml", "later.yaml", "nic.yaml"),
                    paths("far.yaml", "zero.yaml", "dist.yaml", "cut-all.yaml", "typo.yaml",
                          "nothing.yaml", "broken.yaml", "empty.yaml", "missing.yaml")),
    }  # fmt: skip


#: (good values, bad values) of each kind of argument; a bad one is drawn 15% of the time.
SIZES = (["1KiB", "64KiB", "1MiB", "0", "1KiB:16KiB", "8B:1MiB:4", "64MiB", "1024"],
         ["-1GiB", "1e30", "2PiB", "abc", "1:0", "1KiB:1MiB:1.0000001", "12parsecs", "1.5"])
COLLECTIVES = (["all_reduce", "all-gather", "reducescatter", "broadcast", "reduce", "allreduce"],
               ["gather", "", "ALL_REDUCE!"])
ALGORITHMS = (["auto", "ring", "binomial_tree", "recursive_doubling", "rabenseifner",
               "double_binary_tree"], ["torus", "nvls", "nope"])
INTS = (["1", "2", "4"], ["0", "-1", "999", "x", "2.5"])
BAD = 0.15


def _pick(rng: random.Random, values: tuple[list[str], list[str]], bad_p: float = BAD) -> str:
    good, bad = values
    return rng.choice(bad if rng.random() < bad_p else good)


def _maybe(rng: random.Random, flag: str, values: object, p: float = 0.3) -> list[str]:
    """``[flag, value]`` with probability ``p``; ``values`` is a list or a (good, bad) pair."""
    if rng.random() >= p:
        return []
    if isinstance(values, tuple):
        return [flag, _pick(rng, values)]
    return [flag, rng.choice(values)]  # type: ignore[arg-type]


def _run(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    argv = ["run", _pick(rng, COLLECTIVES), "--topology", _pick(rng, f["topology"]),
            "--size", _pick(rng, SIZES)]  # fmt: skip
    argv += _maybe(rng, "--algorithm", ALGORITHMS, 0.5)
    argv += _maybe(rng, "--ranks", INTS) + _maybe(rng, "--chunks", INTS)
    argv += _maybe(rng, "--root", INTS, 0.2)
    argv += _maybe(rng, "--engine", ["des", "analytic", "quantum"])
    argv += _maybe(rng, "--protocol", ["auto", "LL", "LL128", "Simple", "none", "LL64"], 0.2)
    argv += _maybe(rng, "--trace", f["out"], 0.1)
    argv += _maybe(rng, "--trace-ranks", (["0-1", "1,3"], ["x-2", "5-1", "999", ""]), 0.05)
    argv += _maybe(rng, "--trace-links", (["gpu[01]->*", "*"], ["nowhere", "["]), 0.05)
    argv += _maybe(rng, "--trace-max-size", (["1KiB", "1GiB"], ["0", "-1MiB", "big"]), 0.05)
    argv += _maybe(rng, "--ranks", INTS, 0.2) + _what_if(rng, f, 0.2)
    return argv + (["--json"] if rng.random() < 0.6 else [])


def _replay(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    argv = ["replay", _pick(rng, f["workload"]), "--topology", _pick(rng, f["topology"])]
    argv += _maybe(rng, "--plot", f["out"], 0.1) + _maybe(rng, "--step", ["1", "last"], 0.1)
    argv += _what_if(rng, f, 0.4)
    return argv + (["--json"] if rng.random() < 0.6 else [])


def _what_if(rng: random.Random, f: dict[str, Pool], p: float) -> list[str]:
    """``--what-if FILE`` with probability ``p``, a malformed file 40% of the time."""
    return ["--what-if", _pick(rng, f["what_if"], 0.4)] if rng.random() < p else []


def _plan(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    """A small model on one host, a few axes (a plan takes about a second), often a what-if."""
    topology = (["dgx-a100", "dgx-h100"], [f["topology"][0][4], *f["topology"][1][:2]])
    argv = ["plan", _pick(rng, (["gpt3-1.3b"], ["nope", f["workload"][1][1]])),
            "--topology", _pick(rng, topology),
            "--global-batch", _pick(rng, (["16", "32"], ["0", "x", "7"])),
            "--tp", "1,2", "--pp", "1,2", "--cp", "1", "--micro-batch", "1,2"]
    argv += _maybe(rng, "--top", INTS, 0.3) + _what_if(rng, f, 0.6)
    return argv + rng.choice([["--json"], ["--csv"], []])


def _bound(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    values = {"--latency": (["1us", "0"], ["-1us", "fast"]),
              "--bandwidth": (["50GB/s", "400Gbps"], ["0GB/s", "x"]),
              "--flops": (["1500e12", "989TFLOP/s"], ["-1"]), "--batch": INTS, "--seq": INTS,
              "--params-per-layer": (["1e8", "100M"], ["0"]), "--ranks": INTS}  # fmt: skip
    argv = ["bound", "fsdp"]
    for flag, options in values.items():
        if rng.random() < 0.97:
            argv += [flag, _pick(rng, options)]
    return argv + (["--json"] if rng.random() < 0.6 else [])


def _validate(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    argv = ["validate", "nccl-tests", _pick(rng, f["log"])]
    argv += _maybe(rng, "--topology", f["topology"], 0.95)
    argv += _maybe(rng, "--sizes", (["64KiB:1MiB", "1KiB:64KiB"], ["3MiB", "x"]), 0.5)
    argv += _maybe(rng, "--ranks", INTS, 0.2)
    argv += _maybe(rng, "--engine", ["analytic", "des"], 0.5)
    argv += ["--partial"] if rng.random() < 0.3 else []
    return argv + (["--json"] if rng.random() < 0.6 else [])


def _calibrate(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    """Only inputs that are refused before fitting (a fit takes seconds)."""
    bad = [p for p in f["log"][0] + f["log"][1] if not p.endswith("log.txt")]
    argv = ["calibrate", "nccl-tests", rng.choice(bad), "--out", rng.choice(f["out"][0])]
    return argv + _maybe(rng, "--sizes", ["3MiB", "x"])


def _sweep(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    argv = ["sweep", _pick(rng, f["grid"]), "--jobs", rng.choice(["1", "1", "1", "0", "-2"])]
    return argv + (["--json"] if rng.random() < 0.6 else [])


def _goodput(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    """Good and bad counts, times, sizes, bandwidths, rates, intervals and run counts."""
    values = {"--gpus": (["8", "1024", "16384"], ["0", "-8", "x", "1e99"]),
              "--step-time": (["5.5s", "800ms", "2"], ["-1s", "5parsecs", "0"]),
              "--checkpoint-bytes": (["2TB", "140GB", "0"], ["-1TB", "2PiB", "big"])}  # fmt: skip
    argv = ["goodput"]
    for flag, options in values.items():
        if rng.random() < 0.95:
            argv += [flag, _pick(rng, options)]
    argv += _maybe(rng, "--model", (["llama3-8b", "gpt3-1.3b"], ["gpt5", ""]), 0.1)
    argv += _maybe(rng, "--write-bandwidth", (["100GB/s", "400Gbps"], ["-1GB/s", "0", "x"]))
    argv += _maybe(rng, "--failures-per-gpu-hour", (["2e-5", "1e-4", "0"], ["-1", "nan", "2"]))
    argv += _maybe(rng, "--failures-per-node-hour", (["1e-4"], ["-1e-4"]), 0.2)
    argv += _maybe(rng, "--restart-time", (["10min", "1h", "0"], ["-1min", "soon"]))
    argv += _maybe(rng, "--interval", (["auto", "500steps", "30min"], ["0steps", "x", "1us"]))
    argv += _maybe(rng, "--simulate", (["2", "5"], ["0", "1", "10000000", "x"]), 0.3)
    argv += _maybe(rng, "--tokens", (["1T"], ["-1T"]), 0.2)
    argv += _maybe(rng, "--tokens-per-step", (["4M"], ["0"]), 0.2)
    argv += rng.choice([[], [], ["--sharded"], ["--rank0"], ["--sharded", "--rank0"], ["--async"],
                        ["--elastic"], ["--elastic", "--spare-wait", "2h"]])
    return argv + (["--json"] if rng.random() < 0.6 else [])


def _junk(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    tokens = ["run", "replay", "--size", "-s", "--json", "--topology", "-t", "bound", "fsdp",
              "topologies", "--", "-x", "1KiB", "dgx-h100", "--world-size", "0",
              "validate", "sweep", "--help-me", "💥"]  # fmt: skip
    return [rng.choice(tokens) for _ in range(rng.randint(0, 6))]


def _measure(rng: random.Random, f: dict[str, Pool]) -> list[str]:
    """Always refused before any process starts (a bad world size, sizes or collective)."""
    bad = rng.choice([["--world-size", "0"], ["--sizes", "-1KiB"], ["--collectives", "x"],
                      ["--sizes", "1KiB:1KiB:1"], ["--world-size", "two"]])  # fmt: skip
    return ["measure", *bad, *_maybe(rng, "--out", f["out"][0])]


MAKERS = [_run] * 6 + [_replay] * 2 + [_plan, _bound, _validate, _validate, _calibrate, _sweep,
                                        _junk, _measure, lambda r, f: ["topologies", "--json"],
                                        _goodput, _goodput]


@contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    """Fail the case (rather than hang the suite) when it runs past ``seconds``."""

    def hung(*_: object) -> None:
        raise TimeoutError(f"a CLI case ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _check_answer(argv: list[str], out: str) -> None:
    """Exit 0: output that parses, and for ``run --json`` numbers that agree."""
    assert out.strip(), f"exit 0 without output: {argv}"
    if "--json" not in argv:
        return
    data = json.loads(out)
    if argv[0] != "run":
        return
    for row in data if isinstance(data, list) else [data]:
        assert row["nbytes"] >= 0 and math.isfinite(row["time_s"]) and row["time_s"] >= 0
        if row["time_s"] > 0:
            assert row["algbw_GBps"] == pytest.approx(row["nbytes"] / row["time_s"] / 1e9)


def test_random_cli_calls_end_in_a_clean_answer_or_one_line_error(tmp_path, capsys) -> None:
    """300 seeded random calls (run, replay, plan, bound, validate, calibrate, sweep, measure,
    goodput, topologies, junk argv) over good and malformed topologies, workloads, grids, logs
    and what-if files (--what-if on run, replay and plan):
    never a traceback or an internal error, never a hang; exit 2 is exactly one stderr line,
    exit 0 comes with output that parses."""
    files = _files(tmp_path)
    rng = random.Random(SEED)
    # the random calls, then for each command that takes --what-if one call with a good file
    # and one with a bad file, so that both ends are exercised whatever the draws were
    cases = [rng.choice(MAKERS)(rng, files) for _ in range(CASES)]
    good, bad = files["what_if"][0][0], files["what_if"][1][4]  # slow.yaml, typo.yaml
    ddp = files["workload"][0][1]
    for what_if in (good, bad):
        cases += [["run", "all_reduce", "-t", "dgx-h100", "-s", "1MiB", "--what-if", what_if],
                  ["replay", ddp, "-t", "dgx-h100", "--what-if", what_if, "--json"],
                  ["plan", "gpt3-1.3b", "-t", "dgx-h100", "--global-batch", "16", "--tp", "1",
                   "--pp", "1,2", "--cp", "1", "--micro-batch", "1", "--what-if", what_if]]
    statuses = []
    what_ifs = set()  # (command, a good file answered / a bad file refused)
    for case, argv in enumerate(cases):
        with _alarm(HANG_S):
            status = main(argv)
        out, err = capsys.readouterr()
        where = f"case {case}: commsim {' '.join(argv)}"
        assert "Traceback" not in err and "Traceback" not in out, where
        assert status in (0, 2), f"{where}: exit {status}: {err}"
        if status == 2:
            assert err.count("\n") == 1 and err.startswith("commsim"), f"{where}: {err!r}"
        else:
            _check_answer(argv, out)
        statuses.append(status)
        if "--what-if" in argv:
            name = Path(argv[argv.index("--what-if") + 1]).name
            is_good = name in {Path(g).name for g in files["what_if"][0]}
            if status == 0 or name in err:
                what_ifs.add((argv[0], is_good, status))
    assert statuses.count(0) >= 20 and statuses.count(2) >= 40  # both paths are exercised
    assert {(c, True, 0) for c in ("run", "replay", "plan")} <= what_ifs
    assert {(c, False, 2) for c in ("run", "replay", "plan")} <= what_ifs
