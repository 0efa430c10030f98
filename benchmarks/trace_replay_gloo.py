"""Captured-trace replay vs reality: the spread behind the bounds of docs/traces.md.

Run: ``.venv/bin/python benchmarks/trace_replay_gloo.py [--captures 12] [--out DIR]``
(``--captures 1`` is the quick mode the test suite runs, tests/test_benchmarks_quick.py, so
that the test's functions it calls cannot go missing again unnoticed).

Captures the step of ``tests/traces/test_trace_gloo_capture.py`` (a 2-process gloo DDP run,
6 profiled steps) ``--captures`` times, one after another, and prints for each the error of the
replayed six steps against the measured ones on the two topologies that test uses (fitted to
standalone all-reduces, and to the step's own collectives), then min, max and median. Takes
5-15 s per capture; needs torch. Leave the machine otherwise idle: the figures are timings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "traces"))


def main() -> None:
    import test_trace_gloo_capture as case
    from _gloo_ddp_capture import capture

    from commsim.traces import read_traces

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--captures", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None, help="keep the traces here")
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="commsim-traces-"))
    errors: dict[str, list[float]] = {"calibrated": [], "trace-calibrated": []}
    print("capture  seconds  calibrated  trace-calibrated")
    for i in range(args.captures):
        out = root / f"capture{i}"
        start = time.perf_counter()
        capture(out / "traces", out / "timings.json", case.CONFIG, timeout_s=180)
        seconds = time.perf_counter() - start
        model = read_traces(out / "traces")
        standalone = case.calibrated_topology(case.standalone_rows(out))
        own = case.calibrated_topology(case.trace_rows(model))
        # the test's replayed / measured ratio of the profiled steps, as an error in percent
        errors["calibrated"].append((case.replay_ratio(model, standalone) - 1) * 100)
        errors["trace-calibrated"].append((case.replay_ratio(model, own) - 1) * 100)
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
    print(f"# traces kept in {root}")


if __name__ == "__main__":
    main()
