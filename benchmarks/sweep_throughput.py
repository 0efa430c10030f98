"""Sweeps: analytic predictions per second through ``commsim.simulate(..., engine="analytic")``.

Run: ``.venv/bin/python benchmarks/sweep_throughput.py [--repeat 3]``

A notebook-style scan, all-reduce at 11 sizes (1 KiB to 1 GiB, x4) x every algorithm that can
run it plus ``auto`` x five topologies (8 to 1024 ranks: GPU servers and TPU tori). Each
``simulate`` call counts as one prediction (``auto`` evaluates every candidate's closed form,
so it is the costliest). Two ways of naming the topology: a preset name on every call (the
preset's network is built once and kept, see ``commsim.topology.presets``), and a
:class:`~commsim.network.Network` loaded once and passed in. One warm-up call (imports) is not
timed; the rest is best of ``--repeat`` per topology. Target: >= 1,000 predictions/s.
"""

from __future__ import annotations

import argparse

from _common import best_of, table

from commsim import simulate
from commsim.algorithms import ALGORITHMS
from commsim.errors import CommsimError
from commsim.topology import load_topology

TOPOLOGIES = ["dgx-h100x4", "dgx-a100x16", "tpu-v4-64", "tpu-v5e-256", "dgx-h100x128"]
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
    args = parser.parse_args()
    simulate("all_reduce", "dgx-h100", "1MiB", engine="analytic")  # warm-up: imports
    rows = []
    totals = {"preset": [0, 0.0], "network": [0, 0.0]}
    for name in TOPOLOGIES:
        network = load_topology(name)
        by_name_s, count = best_of(args.repeat, lambda name=name: _scan(name))
        by_net_s, _ = best_of(args.repeat, lambda network=network: _scan(network))
        rows.append([name, network.ranks, count, round(count / by_name_s), round(count / by_net_s)])
        totals["preset"][0] += count
        totals["preset"][1] += by_name_s
        totals["network"][0] += count
        totals["network"][1] += by_net_s
    rows.append(
        [
            "all",
            "",
            totals["preset"][0],
            round(totals["preset"][0] / totals["preset"][1]),
            round(totals["network"][0] / totals["network"][1]),
        ]
    )
    print("all_reduce, 11 sizes x (auto + each algorithm), engine analytic")
    print(
        table(["<topology", "ranks", "predictions", "per s (preset name)", "per s (Network)"], rows)
    )
    print("target: >= 1,000 predictions/s")


if __name__ == "__main__":
    main()
