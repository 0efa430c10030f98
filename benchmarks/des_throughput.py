"""DES throughput: commsim's engine vs a naive SimPy model of the same ring all-reduce.

Run: ``.venv/bin/python benchmarks/des_throughput.py [--ranks 256] [--repeat 3]``
Prints a table (best of ``--repeat`` wall times) and the ratio naive / commsim (target >= 2).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from naive_simpy import ring_all_reduce_time  # noqa: E402

from commsim.algorithms import build_schedule  # noqa: E402
from commsim.algorithms.base import Call  # noqa: E402
from commsim.collectives import Collective  # noqa: E402
from commsim.engine.des import simulate_des  # noqa: E402
from commsim.topology import ring  # noqa: E402


def best_of(repeat: int, fn):  # type: ignore[no-untyped-def]
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    p, nbytes, alpha, beta = args.ranks, 2**30, 1e-6, 100e9
    network = ring(p, latency=alpha, bandwidth=beta)
    call = Call(collective=Collective.ALL_REDUCE, ranks=p, nbytes=nbytes, chunks=1)
    schedule = build_schedule(call, "ring")
    commsim_s, timing = best_of(args.repeat, lambda: simulate_des(schedule, network))
    naive_s, naive_time = best_of(args.repeat, lambda: ring_all_reduce_time(p, nbytes, alpha, beta))
    n = len(schedule)
    print(f"ring all_reduce, {p} ranks, 1 GiB, --chunks 1: {n} transfers")
    print(f"{'model':<22}{'wall s':>10}{'transfers/s':>14}{'simulated s':>16}")
    print(f"{'naive SimPy':<22}{naive_s:>10.3f}{n / naive_s:>14,.0f}{naive_time:>16.9f}")
    print(f"{'commsim DES':<22}{commsim_s:>10.3f}{n / commsim_s:>14,.0f}{timing.time_s:>16.9f}")
    print(f"speed-up (naive / commsim): {naive_s / commsim_s:.2f}x   (target >= 2x)")
    if abs(timing.time_s - naive_time) > 1e-9 * naive_time:
        print("WARNING: the two models disagree on the simulated time")


if __name__ == "__main__":
    main()
