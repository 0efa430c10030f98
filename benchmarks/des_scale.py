"""DES scale: a 4096-rank hierarchical all-reduce (512 DGX H100 nodes x 8 GPUs) through the DES.

Run: ``.venv/bin/python benchmarks/des_scale.py [--nodes 512] [--sizes 1GiB] [--algorithm auto]
[--quick]``

For each size: what ``auto`` picks (ranked by closed forms at this scale) and how long picking
takes, the schedule's transfers, the wall time of building it and of simulating it, the peak
memory of the process so far (``ru_maxrss``), and the DES time next to the closed form's (equal:
the topology is uncontended for the hierarchical algorithms). Targets at 1 GiB: <= 30 s and
<= 2 GiB. ``--sizes 1KiB:1GiB:32`` shows what ``auto`` runs across sizes.
"""

from __future__ import annotations

import argparse
import time

from _common import max_rss_mib, parse_args, table

from commsim.algorithms import build_schedule
from commsim.api import make_call, simulate
from commsim.engine.analytic import predict
from commsim.engine.des import simulate_des
from commsim.topology import load_topology
from commsim.units import format_size, parse_size_range


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--sizes", default="1GiB")
    parser.add_argument("--algorithm", default="auto")
    args = parse_args(parser, {"nodes": 2, "sizes": "1MiB"}, "2 nodes (16 ranks), 1 MiB")
    t0 = time.perf_counter()
    network = load_topology(f"dgx-h100x{args.nodes}")
    load_s = time.perf_counter() - t0
    print(f"{network.name}: {network.ranks} ranks; topology built in {load_s:.3f} s")
    rows = []
    for nbytes in parse_size_range(args.sizes, "--sizes"):
        t0 = time.perf_counter()
        call = make_call("all_reduce", network, nbytes)
        name = args.algorithm
        if name == "auto":
            # commsim's own choice (NCCL off), ranked by the closed forms at this scale
            name = simulate("all_reduce", network, nbytes, protocol="none",
                            engine="analytic").algorithm
        t1 = time.perf_counter()
        schedule = build_schedule(call, name)
        t2 = time.perf_counter()
        timing = simulate_des(schedule, network)
        t3 = time.perf_counter()
        closed = predict(call, network, name)
        rows.append(
            [
                format_size(nbytes),
                name,
                t1 - t0,
                len(schedule),
                t2 - t1,
                t3 - t2,
                t3 - t0 + load_s,
                max_rss_mib(),
                timing.time_s * 1e6,
                closed * 1e6,
            ]
        )
        del schedule, timing
    headers = [
        "size",
        "<algorithm",
        "choose s",
        "transfers",
        "build s",
        "DES s",
        "total s",
        "peak MiB",
        "DES us",
        "closed us",
    ]
    print(table(headers, rows))
    print("targets at 1 GiB, 4096 ranks: total <= 30 s, peak <= 2048 MiB")


if __name__ == "__main__":
    main()
