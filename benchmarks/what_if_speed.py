"""What ``--what-if`` adds to ``commsim run``'s time on a large preset.

Run: ``.venv/bin/python benchmarks/what_if_speed.py [--quick] [--repeat N]``

``run --what-if`` applies the file, times the call on the degraded machine and then on the
healthy one, which reuses the degraded call's simulated phases where their links are alike
(:mod:`commsim.engine.reuse`), and prints both. This prints, per what-if and size, the wall
time of the healthy call alone (what ``run`` without the flag spends beyond start-up), of
applying the what-if, of the degraded call and of the healthy call after it, each the best of
``--repeat`` runs on a fresh network (a new scope and caches, as a new process has), and what
the flag adds: the last three over the first (the bests). The issue's target: that
within 1 s, so that ``run --what-if`` answers within ``run``'s time plus 1 s. ``added CPU
s`` is the same sum in this process's CPU time (``time.process_time``): on an idle machine
the wall time, and on a shared one what the wall time would be without the other jobs.
``--quick`` runs 4 DGX H100 nodes (32 ranks) instead of 512 (4,096 ranks), once, for the
test suite.
"""

from __future__ import annotations

import argparse
import time

from _common import parse_args, table

import commsim
from commsim.engine.reuse import in_scope
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


def _now() -> tuple[float, float]:
    """(wall, this process's CPU) seconds."""
    return time.perf_counter(), time.process_time()


def _once(preset: str, what_if: dict, size: str) -> tuple[list[float], list[float],
                                                       commsim.Result, commsim.Result]:
    """(healthy call alone s, apply s, degraded call s, healthy call after it s), each on a
    fresh network, in wall and in CPU seconds, and the healthy and degraded results.
    ``run --what-if`` does the last three: the file applied to the machine in a reuse scope
    (commsim.engine.reuse), the call on the degraded machine, then on the healthy one,
    which reuses the phases alike."""
    alone = load_topology(preset).rebuilt()  # fresh caches, as a new process has
    clocks = [_now()]
    healthy = commsim.simulate("all_reduce", alone, size)
    clocks.append(_now())
    net = in_scope(load_topology(preset).rebuilt())
    degraded_net, _ = apply_what_if(net, what_if)
    clocks.append(_now())
    degraded = commsim.simulate("all_reduce", degraded_net, size)
    clocks.append(_now())
    again = commsim.simulate("all_reduce", net, size)
    clocks.append(_now())
    if again.time_s != healthy.time_s:
        raise AssertionError(f"the healthy call after the degraded one gave {again.time_s}, "
                             f"alone {healthy.time_s}")
    steps = list(zip(clocks[:-1], clocks[1:], strict=True))
    wall, cpu = ([b[k] - a[k] for a, b in steps] for k in (0, 1))
    return wall, cpu, healthy, degraded


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    args = parse_args(parser, {"repeat": 1}, "32 ranks, once", argv)
    preset = "dgx-h100x4" if args.quick else "dgx-h100x512"
    rows = []
    for name, what_if in WHAT_IFS.items():
        for size in ("1MiB", "1GiB"):
            runs = [_once(preset, what_if, size) for _ in range(max(1, args.repeat))]
            best, cpu = ([min(run[clock][k] for run in runs) for k in range(4)]
                         for clock in (0, 1))
            healthy, degraded = runs[-1][2], runs[-1][3]
            rows.append((name, size, healthy.label, degraded.label, *best,
                         sum(best[1:]) - best[0], sum(cpu[1:]) - cpu[0],
                         degraded.time_s / healthy.time_s))
    print(f"# {preset}: {load_topology(preset).ranks} ranks, all_reduce, best of {args.repeat}")
    print(table(["<what-if", "size", "<healthy algorithm", "<degraded algorithm", "healthy s",
                 "apply s", "degraded s", "healthy after s", "added s", "added CPU s",
                 "slowdown"], rows))


if __name__ == "__main__":
    main()
