"""Records and the checker read a schedule's columns: the transfers CSV of a 512-rank ring and
the symbolic checker on ring all-reduces, time and peak memory, with a baseline in the same run.

Run: ``.venv/bin/python benchmarks/records_io.py [--ranks 512] [--check-ranks 128,256,512]
[--repeat 3] [--quick]``

* **command**: ``commsim run all_reduce --topology ringP.yaml --size 1MiB --algorithm ring``
  in a fresh process, without and with ``--transfers out.csv`` (``kind: ring``, 1 us,
  100 GB/s; ``2p(p-1)`` transfers): wall and CPU seconds, best of ``--repeat``, and the
  process's peak RSS. Without a file the ring is timed from one representative rank
  (symmetry); with one, every transfer's record is made (the exact evaluator) and written.
* **writer**: in this process, the same result's CSV written from the columns and the timing
  arrays (``commsim.export.write_transfers_csv``) against a baseline that makes a ``Transfer``
  object per row and writes them with the ``csv`` module (what the writer did before): seconds
  (best of ``--repeat``) and ``tracemalloc`` peak; both files must be byte-identical.
* **checker**: ``commsim.checker.check`` on the ring all-reduce of 1 MiB built as columns:
  seconds (best of ``--repeat``), transfers/s and ``tracemalloc`` peak of the check alone.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from _common import ROOT, best_of, parse_args, table

from commsim.algorithms import Call, build_schedule
from commsim.api import simulate
from commsim.checker import check
from commsim.collectives import Collective
from commsim.export import write_transfers_csv
from commsim.results import TRANSFER_COLUMNS, Result
from commsim.schedule import TransferView

#: A fresh ``commsim`` process that reports its own peak RSS (KiB) on stderr's last line.
WRAPPED = ("import resource, sys; from commsim.cli import main; rc = main(sys.argv[1:]); "
           "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); "
           "sys.exit(rc)")


def _command(argv: list[str], repeat: int) -> tuple[float, float, float]:
    """Best wall and CPU seconds of a fresh ``commsim`` process, and its peak RSS in MiB."""
    best_wall = best_cpu = float("inf")
    rss = 0.0
    env = {k: v for k, v in os.environ.items() if k != "COMMSIM_FULL_DES"}
    for _ in range(max(1, repeat)):
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", WRAPPED, *argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (usage.ru_utime + usage.ru_stime)
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        rss = max(rss, int(done.stderr.strip().splitlines()[-1]) / 1024)
    return best_wall, best_cpu, rss


def _peak_mib(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _csv_through_objects(result: Result, path: Path) -> None:
    """The baseline: a ``Transfer`` per row, then the ``csv`` module (same bytes)."""
    assert result.schedule is not None and result.timing is not None
    transfers = TransferView(result.schedule.columns)  # fresh: makes its objects again
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(TRANSFER_COLUMNS)
        writer.writerows(
            (t.src, t.dst, repr(s), repr(e), t.nbytes, t.offset, t.op.value)
            for t, s, e in zip(transfers, result.timing.start_s.tolist(),
                               result.timing.end_s.tolist(), strict=True))


def _commands(p: int, tmp: Path, repeat: int) -> list[list[object]]:
    topology = tmp / f"ring{p}.yaml"
    topology.write_text(f"kind: ring\nranks: {p}\nlink: {{latency: 1us, bandwidth: 100GB/s}}\n")
    base = ["run", "all_reduce", "--topology", str(topology), "--size", "1MiB",
            "--algorithm", "ring"]
    rows: list[list[object]] = []
    for label, extra in (("without a file", []),
                         ("--transfers out.csv", ["--transfers", str(tmp / "out.csv")])):
        wall, cpu, rss = _command(base + extra, repeat)
        rows.append([p, 2 * p * (p - 1), label, wall, cpu, rss])
    return rows


def _writers(p: int, tmp: Path, repeat: int) -> list[list[object]]:
    topology = {"kind": "ring", "ranks": p, "link": {"latency": "1us", "bandwidth": "100GB/s"}}
    result = simulate("all_reduce", topology, "1MiB", algorithm="ring").with_records()
    new, old = tmp / "columns.csv", tmp / "objects.csv"
    new_s, _ = best_of(repeat, lambda: write_transfers_csv(result, new))
    old_s, _ = best_of(repeat, lambda: _csv_through_objects(result, old))
    if new.read_bytes() != old.read_bytes():
        raise SystemExit("the two writers disagree")
    new_mib = _peak_mib(lambda: write_transfers_csv(result, new))
    old_mib = _peak_mib(lambda: _csv_through_objects(result, old))
    return [[p, len(result.schedule or ()), old_s, new_s, old_s / new_s, old_mib, new_mib,
             old_mib / new_mib]]


def _checker(ranks: list[int], repeat: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for p in ranks:
        call = Call(collective=Collective.ALL_REDUCE, ranks=p, nbytes=2**20)
        schedule = build_schedule(call, "ring")
        seconds, _ = best_of(repeat, lambda s=schedule: check(s))  # type: ignore[misc]
        peak = _peak_mib(lambda s=schedule: check(s))  # type: ignore[misc]
        rows.append([p, len(schedule), seconds, round(len(schedule) / seconds), peak])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=512)
    parser.add_argument("--check-ranks", default="128,256,512")
    parser.add_argument("--repeat", type=int, default=3)
    args = parse_args(parser, {"ranks": 8, "check_ranks": "8", "repeat": 1},
                      "8 ranks, once")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        commands = _commands(args.ranks, tmp, args.repeat)
        writers = _writers(args.ranks, tmp, args.repeat)
    checks = _checker([int(r) for r in args.check_ranks.split(",")], args.repeat)
    print(f"commsim run all_reduce --size 1MiB --algorithm ring, kind: ring (1us, 100GB/s); "
          f"fresh process, best of {args.repeat}")
    print(table(["ranks", "transfers", "<records", "wall s", "cpu s", "RSS MiB"], commands))
    print()
    print("the same result's transfers CSV in this process: Transfer objects + csv module vs "
          "columns (byte-identical files)")
    print(table(["ranks", "transfers", "objects s", "columns s", "ratio", "objects MiB",
                 "columns MiB", "ratio"], writers))
    print()
    print("commsim.checker.check, ring all_reduce of 1 MiB (columns); peak: tracemalloc")
    print(table(["ranks", "transfers", "check s", "transfers/s", "peak MiB"], checks))


if __name__ == "__main__":
    main()
