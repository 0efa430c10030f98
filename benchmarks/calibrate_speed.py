"""``commsim calibrate`` on real nccl-tests logs: how long a fit takes, with and without the
schedule memo (:mod:`commsim.algorithms.memo`), in one process.

Run: ``.venv/bin/python benchmarks/calibrate_speed.py [--only TEXT] [--quick]``

A fit times the same calls on thousands of networks that differ only in their latencies and
bandwidths; the memo builds each call's schedule once. For each case the fit runs twice, the
baseline first (nothing kept: every schedule built again) and then with the memo, from an
empty memo; the table gives the wall seconds of both, their ratio, and whether the two fitted
topologies are the same byte for byte (the memo must change no number). The cases are the
all_reduce rows of logs in ``tests/data/nccl-tests``, calibrated as the presets benchmark
does (``validate_presets.py``): one node of 8 A100 and two HGX B200 nodes (16 ranks, NCCL's
trees across hosts: most of their time is the contended tree phases' DES, which the memo does
not touch). ``--quick``: the A100 log's sizes from 1 MiB to 8 MiB.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from pathlib import Path

from _common import ROOT, parse_args, table

from commsim.algorithms import memo
from commsim.cli import main as commsim

DATA = ROOT / "tests" / "data" / "nccl-tests"
#: (log, template), fitted on the log's all_reduce rows.
CASES = [
    ("a100-sxm4-40gb_8gpu_1node_nvswitch_5collectives_superbench-fixture.txt", "dgx-a100"),
    ("b200_16gpu_2node_hgx-ib-ndr_3collectives_unresolved-vultr-poc.txt", "hgx-b200x2"),
]


def _fit(log: str, template: str, sizes: list[str]) -> tuple[float, str]:
    """Wall seconds of ``commsim calibrate LOG --topology TEMPLATE --collectives all_reduce``
    (in this process; ``sizes``: its ``--sizes``, if any) and the file it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fitted.yaml"
        argv = ["calibrate", str(DATA / log), "--topology", template,
                "--collectives", "all_reduce", "--out", str(out), *sizes]
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            status = commsim(argv)
        seconds = time.perf_counter() - t0
        if status != 0:
            raise SystemExit(f"commsim {' '.join(argv)} exited {status}")
        return seconds, out.read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[],
                        help="only the logs whose name contains TEXT (repeatable)")
    args = parse_args(parser, {}, "the A100 log from 1 MiB to 8 MiB")
    sizes = ["--sizes", "1MiB:8MiB"] if args.quick else []
    if args.quick and not args.only:
        args.only = ["a100"]
    rows = []
    largest = memo.MEMO_LARGEST
    for log, template in CASES:
        if args.only and not any(text in log for text in args.only):
            continue
        memo.forget()
        memo.MEMO_LARGEST = -1  # the baseline: nothing kept
        base_s, base_yaml = _fit(log, template, sizes)
        memo.MEMO_LARGEST = largest
        memo.forget()
        memo_s, memo_yaml = _fit(log, template, sizes)
        rows.append((log.split("_")[0], template, base_s, memo_s, base_s / memo_s,
                     "yes" if memo_yaml == base_yaml else "NO"))
    print(table(["<log", "<template", "baseline s", "memo s", "baseline / memo",
                 "<same file"], rows))


if __name__ == "__main__":
    main()
