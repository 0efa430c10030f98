"""The DES path's exact fast evaluator: whole `commsim run` commands vs the forced event loop
vs a naive SimPy model, all in one run.

Run: ``.venv/bin/python benchmarks/fast_path.py [--ranks 512,1024] [--repeat 3] [--naive-max 1024]
[--quick]``

For each rank count, a ``kind: ring`` topology (1 us, 100 GB/s links) and the ring all-reduce
of 1 MiB (one piece per step: ``2p(p-1)`` transfers):

* **symmetric**: ``commsim run all_reduce --size 1MiB --topology ringP.yaml --engine des
  --algorithm ring`` in a fresh process, as a user runs it: the ring's hops are alike and share
  no link, so one representative rank is evaluated (``commsim.engine.symmetry``, exact);
* **exact**: the same whole command with symmetry switched off (``SYMMETRY_MIN_TRANSFERS``
  raised in the fresh process): start-up, imports, building the columnar schedule, proving it
  uncontended on its timing and timing it level by level (the DES path, contention checked),
  best of ``--repeat``;
* **forced DES**: the same command with ``COMMSIM_FULL_DES=1`` (every transfer through the
  discrete-event loop, contention checked by max-min sharing);
* **naive SimPy**: ``naive_simpy.py`` (a process per rank, a Resource per link) in this
  process, once (skipped above ``--naive-max`` ranks).

Transfers/s is the schedule's transfers over the whole command's time; the ratios divide the
command's time by the naive model's, measured in this same run. Each row is given in wall
seconds and in CPU seconds (user + system: what a loaded machine does not inflate). All four
must report the same simulated time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, parse_args, table
from naive_simpy import ring_all_reduce_time

LATENCY_S, BANDWIDTH_BPS, NBYTES = 1e-6, 100e9, 2**20


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: The command with symmetry off: the DES path (exact evaluator, or the event loop) always.
NO_SYMMETRY = ("import sys, commsim.engine.evaluate as e; e.SYMMETRY_MIN_TRANSFERS = 1 << 62; "
               "from commsim.cli import main; sys.exit(main(sys.argv[1:]))")


def _command(topology: Path, mode: str) -> tuple[float, float, float]:
    """Wall and CPU seconds of one fresh ``commsim run`` (``mode``: symmetric, exact or
    forced) and the time it printed."""
    env = dict(os.environ)
    env.pop("COMMSIM_FULL_DES", None)
    if mode == "forced":
        env["COMMSIM_FULL_DES"] = "1"
    head = [sys.executable, "-m", "commsim"] if mode == "symmetric" else [
        sys.executable, "-c", NO_SYMMETRY]
    argv = [*head, "run", "all_reduce", "--size", "1MiB", "--topology", str(topology),
            "--engine", "des", "--algorithm", "ring", "--json"]
    cpu0, t0 = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu_s() - cpu0
    return wall, cpu, float(json.loads(done.stdout)["time_s"])


def _best(repeat: int, topology: Path, mode: str) -> tuple[float, float, float]:
    runs = [_command(topology, mode) for _ in range(max(1, repeat))]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="512,1024")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--naive-max", type=int, default=1024,
                        help="run the naive SimPy model up to this many ranks")
    args = parse_args(parser, {"ranks": "8", "repeat": 1}, "8 ranks, once")
    rows = []
    disagree = []
    with tempfile.TemporaryDirectory() as tmp:
        for p in (int(r) for r in args.ranks.split(",")):
            topology = Path(tmp) / f"ring{p}.yaml"
            topology.write_text(f"kind: ring\nranks: {p}\n"
                                "link: {latency: 1us, bandwidth: 100GB/s}\n")
            transfers = 2 * p * (p - 1)
            sym_s, sym_cpu, sym_t = _best(args.repeat, topology, "symmetric")
            fast_s, fast_cpu, fast_t = _best(args.repeat, topology, "exact")
            des_s, des_cpu, des_t = _best(1, topology, "forced")
            naive_s = naive_cpu = naive_t = float("nan")
            if p <= args.naive_max:
                cpu0, t0 = time.process_time(), time.perf_counter()
                naive_t = ring_all_reduce_time(p, NBYTES, LATENCY_S, BANDWIDTH_BPS)
                naive_s, naive_cpu = time.perf_counter() - t0, time.process_time() - cpu0
            rows.append([p, transfers, "wall", sym_s, fast_s, round(transfers / fast_s), des_s,
                         round(transfers / des_s), naive_s, fast_s / naive_s, des_s / naive_s])
            rows.append(["", "", "cpu", sym_cpu, fast_cpu, round(transfers / fast_cpu), des_cpu,
                         round(transfers / des_cpu), naive_cpu, fast_cpu / naive_cpu,
                         des_cpu / naive_cpu])
            for name, t in (("symmetric", sym_t), ("forced DES", des_t), ("naive SimPy", naive_t)):
                if t == t and abs(t - fast_t) > 1e-9 * fast_t:
                    disagree.append(f"{p} ranks: {name} {t!r} s vs exact {fast_t!r} s")
    print(f"ring all_reduce, 1 MiB, kind: ring (1us, 100GB/s); whole command s "
          f"(fresh process, symmetric and exact: best of {args.repeat}); naive SimPy in-process")
    print(table(["ranks", "transfers", "<clock", "symmetric s", "exact s", "exact tr/s",
                 "forced DES s", "DES tr/s", "naive s", "exact/naive", "DES/naive"], rows))
    print("targets: exact <= 0.7 s at 512 and <= 2.5 s at 1024 ranks; forced DES >= 250k "
          "transfers/s; exact/naive <= 0.1")
    for line in disagree:
        print(f"WARNING: simulated times differ: {line}")


if __name__ == "__main__":
    main()
