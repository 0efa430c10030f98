"""Analytic scale: a 65,536-rank all-reduce (8192 DGX H100 nodes) with ``--engine analytic``.

Run: ``.venv/bin/python benchmarks/analytic_scale.py [--nodes 512,2048,8192] [--repeat 3]
[--quick]``

First table, per node count: the wall time of the whole command line
``commsim run all_reduce --topology dgx-h100xN --size 1GiB --engine analytic`` (a fresh
process: interpreter start, imports, building the topology, ``auto`` over every candidate),
best of ``--repeat``, its peak memory, and what ``auto`` picked. Target at 8192 nodes: <= 1 s.
Second table, in this process for the largest count: where the time goes (building the
topology, then each candidate's first closed-form evaluation and a second one: the plain
model's algorithms, ``--protocol none``, then NCCL's algorithm-protocol pairs, which the
command ranks; a second evaluation finds each protocol's network built).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from _common import best_of, parse_args, table

from commsim.algorithms import candidates
from commsim.api import make_call
from commsim.engine.analytic import predict
from commsim.nccl import NcclModel
from commsim.topology import load_topology

_SCRIPT = Path(sys.executable).with_name("commsim")  # the installed console script
COMMSIM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "commsim"]


def _cli(nodes: int) -> tuple[float, float, str]:
    """Wall seconds, peak MiB and the algorithm picked, for one fresh command-line run."""
    command = [
        *COMMSIM,
        "run",
        "all_reduce",
        "--topology",
        f"dgx-h100x{nodes}",
        "--size",
        "1GiB",
        "--engine",
        "analytic",
    ]
    timed = ["/usr/bin/time", "-f", "%M", *command] if Path("/usr/bin/time").exists() else command
    t0 = time.perf_counter()
    done = subprocess.run(timed, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    row = [line for line in done.stdout.splitlines() if not line.startswith("#")][-1]
    peak = float(done.stderr.split()[-1]) / 1024 if timed is not command else float("nan")
    return wall, peak, row.split()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="512,2048,8192")
    parser.add_argument("--repeat", type=int, default=3)
    args = parse_args(parser, {"nodes": "2", "repeat": 1}, "2 nodes (16 ranks), once")
    counts = [int(x) for x in args.nodes.split(",")]
    rows = []
    for nodes in counts:
        runs = [_cli(nodes) for _ in range(max(1, args.repeat))]
        wall = min(r[0] for r in runs)
        rows.append([nodes, nodes * 8, wall, max(r[1] for r in runs), runs[0][2]])
    print("commsim run all_reduce --topology dgx-h100xN --size 1GiB --engine analytic")
    print(table(["nodes", "ranks", "wall s", "peak MiB", "<auto picks"], rows))
    print("target at 8192 nodes (65,536 ranks): wall <= 1 s")

    nodes = counts[-1]
    load_s, network = best_of(1, lambda: load_topology(f"dgx-h100x{nodes}"))
    call = make_call("all_reduce", network, "1GiB")
    parts = [["build the topology", load_s, ""]]
    for name in candidates(call):
        first, value = best_of(1, lambda name=name: predict(call, network, name))
        again, _ = best_of(1, lambda name=name: predict(call, network, name))
        parts.append([f"predict {name}", first, f"{again:.4f}", value * 1e6])
    model = NcclModel.of(network)
    for name, protocol in model.candidates(call):

        def nccl(name: str = name, protocol: str = protocol) -> float:
            return model.evaluate(call, name, protocol, "analytic").time_s

        first, value = best_of(1, nccl)
        again, _ = best_of(1, nccl)
        parts.append([f"nccl {name}/{protocol}", first, f"{again:.4f}", value * 1e6])
    print(f"\nin-process, {network.ranks} ranks, 1 GiB")
    print(
        table(
            ["<step", "first s", "again s", "closed us"], [r + [""] * (4 - len(r)) for r in parts]
        )
    )


if __name__ == "__main__":
    main()
