"""DES throughput: commsim's engine vs a naive SimPy model of the same ring all-reduce.

Run: ``.venv/bin/python benchmarks/des_throughput.py [--ranks 256] [--repeat 3] [--quick]``

Both time the ring all-reduce of 1 GiB with one piece per step (``--chunks 1``) on a ring
topology, in this process, best of ``--repeat``: the naive model (``naive_simpy.py``: a process
per rank, a ``simpy.Resource`` per link, an ``AllOf`` per step) and ``simulate_des`` on the
prebuilt schedule. The table adds the schedule's build time (the naive model has none), and the
ratio naive / commsim (the target is >= 2). Both must give the same simulated time.
"""

from __future__ import annotations

import argparse

from _common import best_of, parse_args, table
from naive_simpy import ring_all_reduce_time

from commsim.algorithms import build_schedule
from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.engine.des import simulate_des
from commsim.topology import ring


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parse_args(parser, {"ranks": 8, "repeat": 1}, "8 ranks, once")
    p, nbytes, alpha, beta = args.ranks, 2**30, 1e-6, 100e9
    network = ring(p, latency=alpha, bandwidth=beta)
    call = Call(collective=Collective.ALL_REDUCE, ranks=p, nbytes=nbytes, chunks=1)
    build_s, schedule = best_of(args.repeat, lambda: build_schedule(call, "ring"))
    commsim_s, timing = best_of(args.repeat, lambda: simulate_des(schedule, network))
    naive_s, naive_time = best_of(args.repeat, lambda: ring_all_reduce_time(p, nbytes, alpha, beta))
    n = len(schedule)
    print(f"ring all_reduce, {p} ranks, 1 GiB, --chunks 1: {n:,} transfers, best of {args.repeat}")
    rows = [
        ["naive SimPy", naive_s, round(n / naive_s), f"{naive_time:.9f}"],
        ["commsim DES", commsim_s, round(n / commsim_s), f"{timing.time_s:.9f}"],
        ["commsim build + DES", build_s + commsim_s, round(n / (build_s + commsim_s)), ""],
    ]
    print(table(["<model", "wall s", "transfers/s", "simulated s"], rows))
    print(f"speed-up (naive / commsim DES): {naive_s / commsim_s:.2f}x   (target >= 2x)")
    if abs(timing.time_s - naive_time) > 1e-9 * naive_time:
        print("WARNING: the two models disagree on the simulated time")


if __name__ == "__main__":
    main()
