"""Replica folding: a ``hybrid`` replay simulated from one block of data-parallel replicas
(``commsim.replay.replicas``) against the full replay, wall time and peak memory.

Each replay runs in a fresh process (its peak resident memory is its own). The mid-size case
runs both ways and checks that they give the same step; the full-size case is ``commsim
plan``'s first configuration of Llama 3 70B on 64 DGX H100 (512 GPUs, global batch 1024: tp2
cp4 pp4 dp16, interleaved, FSDP), written by ``commsim plan --write-workload 1``, whose full
replay is refused (more than a million tasks), replayed folded. The machine's load average is
printed with the table: wall times depend on it, CPU times (user + system of the replaying
process) much less. ``--quick`` runs a small case both ways.

    python benchmarks/replay_fold.py [--quick] [--no-full-size]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, max_rss_mib, parse_args, table

#: name -> (workload of the planner's description, topology)
MID = {
    "llama3-70b tp2 cp4 pp4 dp4, 8 mb": (
        {"kind": "hybrid",
         "model": {"name": "llama3-70b", "layers": 80, "hidden": 8192, "heads": 64,
                   "kv_heads": 8, "ffn_hidden": 28672, "vocab": 128256, "seq": 8192,
                   "mlp": "swiglu", "tied_embeddings": False},
         "parallel": {"tp": 2, "cp": 4, "pp": 4, "dp": 4},
         "micro_batch": 1, "global_batch": 32,
         "pipeline": {"schedule": "interleaved", "chunks_per_stage": 5},
         "data_parallel": "fsdp", "recompute": "none", "stack": "current"},
        "dgx-h100x16"),
}
QUICK = {
    "small tp8 dp4": (
        {"kind": "hybrid",
         "model": {"name": "small", "layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 8,
                   "ffn_hidden": 4096, "vocab": 32000, "seq": 2048, "mlp": "swiglu",
                   "tied_embeddings": False},
         "parallel": {"tp": 8, "dp": 4}, "micro_batch": 1, "global_batch": 8,
         "data_parallel": "fsdp", "recompute": "none", "stack": "current"},
        "dgx-h100x4"),
}
PLAN = ["plan", "llama3-70b", "-t", "dgx-h100x64", "--global-batch", "1024"]


def cpu_s() -> float:
    """This process's CPU time so far (user + system), seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one(workload: str, topology: str, fold: bool) -> dict[str, object]:
    """Replay in this process: wall and CPU time, peak RSS, the step and its fold."""
    from commsim.errors import SpecError
    from commsim.plan import replay_workload
    from commsim.replay import replay

    start, cpu = time.perf_counter(), cpu_s()
    try:
        result = replay(replay_workload(workload, topology), topology, fold=fold)
    except SpecError as exc:
        return {"wall_s": time.perf_counter() - start, "cpu_s": cpu_s() - cpu,
                "rss_mib": max_rss_mib(), "error": str(exc)}
    return {"wall_s": time.perf_counter() - start, "cpu_s": cpu_s() - cpu,
            "rss_mib": max_rss_mib(),
            "step_s": result.step_time_s, "tasks": len(result.graph.tasks),
            "fold": result.fold.describe() if result.fold else "-"}


def child(workload: str, topology: str, fold: bool) -> dict[str, object]:
    """:func:`one` in a fresh process."""
    out = subprocess.run(
        [sys.executable, __file__, "--one", workload, topology, "fold" if fold else "full"],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def row(name: str, topology: str, mode: str, run: dict[str, object]) -> tuple[object, ...]:
    """A table row of one replay (a refusal's message, cut, in the fold's column)."""
    step = run.get("step_s")
    return (name, topology, mode, str(run.get("fold", run.get("error", "")))[:60],
            run.get("tasks", "-"), run["wall_s"], run["cpu_s"], run["rss_mib"],
            step * 1e3 if isinstance(step, float) else "-")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-full-size", dest="full_size", action="store_false",
                        help="skip the 512-GPU case")
    parser.add_argument("--one", nargs=3, metavar=("WORKLOAD", "TOPOLOGY", "MODE"),
                        help=argparse.SUPPRESS)
    args = parse_args(parser, {"full_size": False}, "one small case both ways")
    if args.one:
        workload, topology, mode = args.one
        print(json.dumps(one(workload, topology, mode == "fold")))
        return 0
    cases = QUICK if args.quick else MID
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (data, topology) in cases.items():
            path = Path(tmp) / "mid.json"
            path.write_text(json.dumps(data), encoding="utf-8")
            runs = {mode: child(str(path), topology, mode == "folded")
                    for mode in ("folded", "full")}
            steps = {run.get("step_s") for run in runs.values()}
            rows.extend(row(name, topology, mode, run) for mode, run in runs.items())
            if len(steps) != 1:
                print(f"folded and full steps differ: {steps}", file=sys.stderr)
                return 1
        if args.full_size:
            path = Path(tmp) / "w1.yaml"
            subprocess.run([sys.executable, "-m", "commsim", *PLAN, "--write-workload", "1",
                            str(path)], check=True, capture_output=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
            for mode in ("folded", "full"):
                run = child(str(path), "dgx-h100x64", mode == "folded")
                rows.append(row("plan llama3-70b #1 (tp2 cp4 pp4 dp16)", "dgx-h100x64", mode,
                                run))
    load = os.getloadavg()
    print(f"# load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print(table(["<case", "<topology", "<replay", "<replicas folded", "tasks", "wall (s)",
                 "CPU (s)", "peak RSS (MiB)", "step (ms)"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
