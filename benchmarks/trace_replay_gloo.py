"""Captured-trace replay vs reality: the spread behind the bounds of docs/traces.md.

Run: ``.venv/bin/python benchmarks/trace_replay_gloo.py [--captures 12] [--out DIR] [--quick]``

Captures the step of ``tests/traces/test_trace_gloo_capture.py`` (a 2-process gloo DDP run,
6 profiled steps: :data:`_gloo_ddp_capture.STEP`, which that test captures too) ``--captures``
times, one after another, and prints for each the error of the replayed six steps against the
measured ones on the two topologies that test uses (fitted to standalone all-reduces, and to
the step's own collectives), then min, max and median. Takes 5-15 s per capture; needs torch.
Leave the machine otherwise idle: the figures are timings. ``--quick``: one capture of 2
profiled steps after 1 warm-up step, 5 standalone all-reduces per size (:data:`QUICK_STEP`).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import parse_args
from _gloo_ddp_capture import (
    STEP,
    calibrated_topology,
    capture,
    replay_ratio,
    standalone_rows,
    trace_rows,
)

#: The --quick mode's step: the same model and buckets, fewer steps and repeats.
QUICK_STEP = {**STEP, "warmup_steps": 1, "steps": 2, "reps": 5}


def main() -> None:
    from commsim.traces import read_traces

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--captures", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None, help="keep the traces here")
    args = parse_args(parser, {"captures": 1}, "one capture of 2 steps")
    step = QUICK_STEP if args.quick else STEP
    root = args.out or Path(tempfile.mkdtemp(prefix="commsim-traces-"))
    errors: dict[str, list[float]] = {"calibrated": [], "trace-calibrated": []}
    print("capture  seconds  calibrated  trace-calibrated")
    for i in range(args.captures):
        out = root / f"capture{i}"
        start = time.perf_counter()
        capture(out / "traces", out / "timings.json", step, timeout_s=180)
        seconds = time.perf_counter() - start
        model = read_traces(out / "traces")
        standalone = calibrated_topology(standalone_rows(out))
        own = calibrated_topology(trace_rows(model))
        # the replayed / measured time of the profiled steps, as an error in percent
        errors["calibrated"].append((replay_ratio(model, standalone) - 1) * 100)
        errors["trace-calibrated"].append((replay_ratio(model, own) - 1) * 100)
        print(
            f"{i:7d}  {seconds:7.1f}  {errors['calibrated'][-1]:+9.1f}%  "
            f"{errors['trace-calibrated'][-1]:+15.1f}%",
            flush=True,
        )
    for name, values in errors.items():
        print(
            f"# {name}: min {min(values):+.1f}%  max {max(values):+.1f}%  "
            f"median {statistics.median(values):+.1f}%  "
            f"median |error| {statistics.median(abs(v) for v in values):.1f}%"
        )
    if args.quick and args.out is None:
        shutil.rmtree(root)
        print("# traces removed (--quick)")
    else:
        print(f"# traces kept in {root}")


if __name__ == "__main__":
    main()
