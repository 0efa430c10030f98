"""How well the CPU-host model predicts real gloo collectives on this machine.

Run: ``.venv/bin/python benchmarks/gloo_accuracy.py [--world-sizes 2,4] [--csv FILE] [--quick]``

Measures all five collectives with real torch.distributed over gloo (``commsim measure``'s
launcher: 2 and then 4 processes on 127.0.0.1, 9 sizes from 64 KiB to 16 MiB by factors of 2,
12 iterations of 4 calls in 6 rounds), fits the CPU-host model
(:func:`commsim.measure.calibrate.calibrate_cpu`) on the even-indexed sizes, predicts the
odd-indexed ones, and prints one line per checked row, each (collective, world size) group's
median |error|, and the overall median |error| of the checking half. docs/measure.md quotes
the latest run. Takes about a minute; needs torch. The figure is a timing of a shared machine:
run it on an otherwise idle one, and expect it to move by several points from run to run.
``--csv FILE`` re-uses a measurement instead of measuring (the shipped
``tests/data/measure/gloo-vm-2cpu.csv`` gives a reproducible figure). ``--quick``: 2 processes,
the first 4 sizes (fitted on 2, checked on 2), 2 iterations in 1 round: the same path, for the
test suite.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from _common import parse_args, table

from commsim.collectives import Collective
from commsim.units import format_size

SIZES = tuple(2**k for k in range(16, 25))  # 64 KiB .. 16 MiB
FIT = SIZES[0::2]
CHECK = SIZES[1::2]
COLLECTIVES = ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce")


def measure_csv(world_sizes: tuple[int, ...], out: Path, quick: bool = False) -> Path:
    """Measure every collective at every size on real gloo processes; the CSV's path
    (``quick``: the first 4 sizes, 2 iterations in 1 round, the same path for the test
    suite)."""
    from commsim.measure import MeasureSpec, measure, write_csv

    spec = MeasureSpec(
        backend="gloo",
        world_sizes=world_sizes,
        sizes=SIZES[:4] if quick else SIZES,
        iterations=2 if quick else 12,
        warmups=1 if quick else 2,
        rounds=1 if quick else 6,
        batch=1 if quick else 4,
        init_timeout_s=120,
        timeout_s=240,
    )
    write_csv(measure(spec), out)
    return out


def main(argv: list[str] | None = None) -> None:
    from commsim.measure import read_csv
    from commsim.measure.calibrate import calibrate_cpu
    from commsim.validation import Measurement, validate

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-sizes", default="2,4")
    parser.add_argument("--csv", type=Path, default=None, help="use this measurement")
    args = parse_args(parser, {"world_sizes": "2"},
                      "2 processes, 4 sizes, 2 iterations in 1 round (figures meaningless)", argv)
    fit, check_sizes = (SIZES[0:4:2], SIZES[1:4:2]) if args.quick else (FIT, CHECK)
    if args.csv is None:
        world_sizes = tuple(int(p) for p in args.world_sizes.split(","))
        path = measure_csv(world_sizes, Path(tempfile.mkdtemp(prefix="commsim-gloo-")) / "m.csv",
                           args.quick)
        source = f"measured now, world sizes {args.world_sizes}"
    else:
        path, source = args.csv, str(args.csv)
    rows = read_csv(path)
    calibration = calibrate_cpu(path, sizes=[(n, n) for n in fit])
    check = [
        Measurement(
            collective=Collective(r.collective), ranks=r.ranks, nbytes=r.nbytes, time_s=r.time_s
        )
        for r in rows
        if r.nbytes in check_sizes and r.collective in COLLECTIVES
    ]
    report = validate(check, calibration.spec, engine="des")
    print(f"gloo accuracy: {source}; fitted on {', '.join(format_size(n) for n in fit)}")
    print(
        table(
            ["<collective", "ranks", "size", "measured us", "predicted us", "error %"],
            [
                (r.collective.value, r.ranks, format_size(r.nbytes), r.measured_time_s * 1e6,
                 r.predicted_time_s * 1e6, r.error_pct)
                for r in report.rows
            ],
        )
    )
    groups: dict[tuple[str, int], list[float]] = {}
    for r in report.rows:
        groups.setdefault((r.collective.value, r.ranks), []).append(abs(r.error_pct))
    print()
    print(
        table(
            ["<collective", "ranks", "median |error| %"],
            [(c, p, statistics.median(e)) for (c, p), e in sorted(groups.items())],
        )
    )
    print(
        f"\nfit median |error| {calibration.report.median_abs_error_pct:.1f}% on the fitted half; "
        f"median |error| {report.median_abs_error_pct:.1f}% over {len(report.rows)} held-out rows"
    )


if __name__ == "__main__":
    main()
