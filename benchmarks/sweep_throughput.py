"""Sweeps: analytic predictions per second through ``commsim.simulate(..., engine="analytic")``.

Run: ``.venv/bin/python benchmarks/sweep_throughput.py [--repeat 3] [--quick]``

A notebook-style scan, all-reduce at 11 sizes (1 KiB to 1 GiB, x4) x every algorithm that can
run it plus ``auto`` x five topologies (8 to 1024 ranks: GPU servers and TPU tori). Each
``simulate`` call counts as one prediction (``auto`` evaluates every candidate's closed form,
so it is the costliest). Two cases: *cold*, each scan on a fresh copy of the network (nothing
memoised yet: what a new question costs), and *warm*, the scan repeated on one network, whose
timing layer (:class:`commsim.timing.Timer`) memoises every call it answered (what re-running a
notebook cell costs). One warm-up call (imports) is not timed; the rest is best of
``--repeat`` per topology. Target: >= 1,000 predictions/s cold. ``--quick``: one GPU server
and one TPU torus (:data:`QUICK`), once.
"""

from __future__ import annotations

import argparse

from _common import best_of, parse_args, table

from commsim import simulate
from commsim.algorithms import ALGORITHMS
from commsim.errors import CommsimError
from commsim.topology import load_topology

TOPOLOGIES = ["dgx-h100x4", "dgx-a100x16", "tpu-v4-64", "tpu-v5e-256", "dgx-h100x128"]
QUICK = ["dgx-h100x4", "tpu-v4-64"]
SIZES = [4**k for k in range(5, 16)]  # 1 KiB .. 1 GiB


def _scan(topology: object) -> int:
    count = 0
    for algorithm in ["auto", *ALGORITHMS]:
        for size in SIZES:
            try:
                simulate("all_reduce", topology, size, algorithm=algorithm, engine="analytic")  # type: ignore[arg-type]
            except CommsimError:  # e.g. hierarchical on a TPU torus: not a candidate
                break
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parse_args(parser, {"repeat": 1}, "a GPU server and a TPU torus, once")
    simulate("all_reduce", "dgx-h100", "1MiB", engine="analytic")  # warm-up: imports
    rows = []
    totals = {"cold": [0, 0.0], "warm": [0, 0.0]}
    for name in QUICK if args.quick else TOPOLOGIES:
        network = load_topology(name)
        cold_s, count = best_of(args.repeat, lambda network=network: _scan(network.rebuilt()))
        _scan(network)  # fills the memo
        warm_s, _ = best_of(args.repeat, lambda network=network: _scan(network))
        rows.append([name, network.ranks, count, round(count / cold_s), round(count / warm_s)])
        for key, seconds in (("cold", cold_s), ("warm", warm_s)):
            totals[key][0] += count
            totals[key][1] += seconds
    rows.append(
        [
            "all",
            "",
            totals["cold"][0],
            round(totals["cold"][0] / totals["cold"][1]),
            round(totals["warm"][0] / totals["warm"][1]),
        ]
    )
    print("all_reduce, 11 sizes x (auto + each algorithm), engine analytic")
    print(table(["<topology", "ranks", "predictions", "per s (cold)", "per s (warm)"], rows))
    print("target: >= 1,000 predictions/s cold")


if __name__ == "__main__":
    main()
