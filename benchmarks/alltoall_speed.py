"""All-to-all speed: every pair at once on DGX H100 nodes through the contended DES.

Run: ``.venv/bin/python benchmarks/alltoall_speed.py [--nodes 128] [--size 64MiB]
[--algorithms all_pairs,pxn] [--quick]``

For each algorithm (commsim's schedules, NCCL off): the schedule's transfers, the wall time of
building it and of simulating it (every flow shares its GPU's NVLink port and NIC with the
others: max-min sharing, re-computed once per instant at which flows start or drain), the peak
memory of the process so far, and the DES time next to the closed form's. Target: 1,024 ranks
(128 nodes, ~a million transfers) within 10 s.
"""

from __future__ import annotations

import argparse
import time

from _common import max_rss_mib, parse_args, table

from commsim.algorithms import build_schedule
from commsim.api import make_call
from commsim.engine.analytic import predict
from commsim.engine.des import simulate_des
from commsim.topology import load_topology
from commsim.units import parse_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--algorithms", default="all_pairs,pxn")
    args = parse_args(parser, {"nodes": 4, "size": "1MiB"}, "4 nodes (32 ranks), 1 MiB")
    network = load_topology(f"dgx-h100x{args.nodes}")
    nbytes = parse_size(args.size, "--size")
    call = make_call("all_to_all", network, nbytes)
    rows = []
    for name in args.algorithms.split(","):
        t0 = time.perf_counter()
        schedule = build_schedule(call, name)
        t1 = time.perf_counter()
        timing = simulate_des(schedule, network)
        t2 = time.perf_counter()
        closed = predict(call, network, name)
        rows.append([name, network.ranks, len(schedule), t1 - t0, t2 - t1, max_rss_mib(),
                     timing.time_s * 1e6, closed * 1e6])
        del schedule, timing
    print(table(["<algorithm", "ranks", "transfers", "build s", "DES s", "peak MiB", "DES us",
                 "closed us"], rows))
    print("target: 1,024 ranks, DES <= 10 s")


if __name__ == "__main__":
    main()
