"""Time and memory vs ranks: a hierarchical all-reduce on 1 to 512 DGX H100 nodes (8..4096 ranks).

Run: ``.venv/bin/python benchmarks/scaling.py [--max-nodes 512] [--algorithm NAME] [--quick]``

Each rank count runs in a fresh process: build the 1 GiB all-reduce schedule and simulate it
with the DES (wall times, best of ``--repeat``), then once more under ``tracemalloc`` for the
peak of Python memory allocated by building and simulating (the topology, loaded before, not
counted), and the process's peak RSS. The last columns divide by the number of transfers:
flat columns mean time and memory grow no faster than the transfers do. The default algorithm
(``hierarchical_rabenseifner``) is the one ``auto`` picks for this case from 2 nodes up;
``--algorithm auto`` shows ``auto``
itself (which below 65 ranks simulates every candidate, so it costs more there).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from _common import best_of, max_rss_mib, parse_args, table

from commsim.algorithms import build_schedule
from commsim.api import make_call, simulate
from commsim.engine.des import simulate_des
from commsim.topology import load_topology


def one(nodes: int, algorithm: str, repeat: int) -> dict[str, object]:
    """Measure one rank count in this process."""
    network = load_topology(f"dgx-h100x{nodes}")
    call = make_call("all_reduce", network, "1GiB")
    t0 = time.perf_counter()
    if algorithm == "auto":  # commsim's own choice (NCCL off), ranked by the closed forms
        algorithm = simulate("all_reduce", network, "1GiB", protocol="none",
                             engine="analytic").algorithm
    name = algorithm
    choose_s = time.perf_counter() - t0
    build_s, schedule = best_of(repeat, lambda: build_schedule(call, name))
    des_s, timing = best_of(repeat, lambda s=schedule: simulate_des(s, network))
    transfers = len(schedule)
    schedule = None  # free it before measuring memory
    tracemalloc.start()
    simulate_des(build_schedule(call, name), network)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "ranks": network.ranks,
        "algorithm": name,
        "transfers": transfers,
        "choose_s": choose_s,
        "build_s": build_s,
        "des_s": des_s,
        "peak_B": peak,
        "rss_MiB": max_rss_mib(),
        "time_us": timing.time_s * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-nodes", type=int, default=512)
    parser.add_argument("--algorithm", default="hierarchical_rabenseifner")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parse_args(parser, {"max_nodes": 2, "repeat": 1}, "1 and 2 nodes, once")
    if args.one is not None:
        print(json.dumps(one(args.one, args.algorithm, args.repeat)))
        return
    rows = []
    nodes = 1
    while nodes <= args.max_nodes:
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--one",
            str(nodes),
            "--algorithm",
            args.algorithm,
            "--repeat",
            str(args.repeat),
        ]
        out = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        n = int(out["transfers"])  # type: ignore[arg-type]
        wall = float(out["build_s"]) + float(out["des_s"])  # type: ignore[arg-type]
        peak = int(out["peak_B"])  # type: ignore[arg-type]
        rows.append(
            [
                out["ranks"],
                out["algorithm"],
                n,
                float(out["build_s"]),  # type: ignore[arg-type]
                float(out["des_s"]),  # type: ignore[arg-type]
                peak / 2**20,
                float(out["rss_MiB"]),  # type: ignore[arg-type]
                wall / n * 1e6,
                peak / n,
            ]
        )
        nodes *= 2
    print("all_reduce 1 GiB on dgx-h100xN (N = ranks / 8), schedule built and simulated by the DES")
    headers = [
        "ranks",
        "<algorithm",
        "transfers",
        "build s",
        "DES s",
        "peak MiB",
        "RSS MiB",
        "us/transfer",
        "B/transfer",
    ]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
