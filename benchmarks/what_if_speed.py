"""What ``--what-if`` adds to ``commsim run``'s time on a large preset.

Run: ``.venv/bin/python benchmarks/what_if_speed.py [--quick] [--repeat N]``

``run --what-if`` times the call twice, on the healthy machine and on the degraded one, and
prints both. This prints, per what-if and size, the wall time of the healthy call alone (what
``run`` without the flag spends beyond start-up), of applying the what-if to the network, and
of the degraded call, each the best of ``--repeat`` runs in a fresh memo (a new network each
time, as a new process has). The issue's target: the degraded part (apply + degraded call)
within 1 s, so that ``run --what-if`` answers within ``run``'s time plus 1 s. ``--quick`` runs
4 DGX H100 nodes (32 ranks) instead of 512 (4,096 ranks), once, for the test suite.
"""

from __future__ import annotations

import argparse
import time

from _common import parse_args, table

import commsim
from commsim.topology import load_topology
from commsim.topology.degrade import apply_what_if

#: The what-ifs timed: one NIC failed (PXN), one NIC at half speed, every NIC of host 1 slower.
WHAT_IFS = {
    "nic3 failed": {"links": {"gpu3->fabric": {"failed": True}, "fabric->gpu3": {"failed": True}}},
    "nic3 half": {"links": {"gpu3->fabric": {"bandwidth": 0.5},
                            "fabric->gpu3": {"bandwidth": 0.5}}},
    "host1 NICs 200Gbps": {"links": {"gpu[89]->fabric": {"bandwidth": "25GB/s"},
                                     "gpu1[0-5]->fabric": {"bandwidth": "25GB/s"}}},
}


def _once(preset: str, what_if: dict, size: str) -> tuple[tuple[float, float, float],
                                                       commsim.Result, commsim.Result]:
    """(healthy call s, apply s, degraded call s) on a fresh network, and both results."""
    net = load_topology(preset).rebuilt()  # fresh caches, as a new process has
    t0 = time.perf_counter()
    healthy = commsim.simulate("all_reduce", net, size)
    t1 = time.perf_counter()
    degraded_net, _ = apply_what_if(net, what_if)
    t2 = time.perf_counter()
    degraded = commsim.simulate("all_reduce", degraded_net, size)
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2), healthy, degraded


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    args = parse_args(parser, {"repeat": 1}, "32 ranks, once", argv)
    preset = "dgx-h100x4" if args.quick else "dgx-h100x512"
    rows = []
    for name, what_if in WHAT_IFS.items():
        for size in ("1MiB", "1GiB"):
            runs = [_once(preset, what_if, size) for _ in range(max(1, args.repeat))]
            best = [min(run[0][k] for run in runs) for k in range(3)]
            healthy, degraded = runs[-1][1], runs[-1][2]
            rows.append((name, size, healthy.label, degraded.label, *best, best[1] + best[2],
                         degraded.time_s / healthy.time_s))
    print(f"# {preset}: {load_topology(preset).ranks} ranks, all_reduce, best of {args.repeat}")
    print(table(["<what-if", "size", "<healthy algorithm", "<degraded algorithm", "healthy s",
                 "apply s", "degraded s", "added s", "slowdown"], rows))


if __name__ == "__main__":
    main()
