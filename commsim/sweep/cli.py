"""``commsim sweep GRID.yaml``: load the grid, run every point, write or print the table.

dask.distributed is imported only with ``--scheduler``, pyarrow only for ``--out *.parquet``;
either missing is one line on stderr, exit 2, like every bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

_EPILOG = """\
grid:    collectives, sizes (SIZE or MIN:MAX[:FACTOR]), algorithms (or auto), topologies
         (presets, files, inline mappings), ranks, engine, chunks; workloads (files or inline
         mappings) are replayed on every topology. A scalar is a list of one; relative files
         resolve against the grid's directory. See docs/sweep.md.
output:  one row per point, in grid order: kind (collective|workload), the point, its times;
         a point that cannot run keeps its row, with NaN times and the reason in 'error'.

examples:
  commsim sweep grid.yaml
  commsim sweep grid.yaml --out results.parquet --jobs 8
  commsim sweep grid.yaml --out results.csv --scheduler tcp://127.0.0.1:8786
"""


def add_parser(sub: Any) -> None:
    """Add ``sweep`` to ``commsim``'s subparsers ``sub``."""
    sweep = sub.add_parser(
        "sweep",
        help="simulate a grid of collectives/sizes/algorithms/topologies (and workloads)",
        description="Expand a grid YAML into its points (the cartesian product of its lists), "
        "simulate every point on local processes or a Dask cluster, and write one table "
        "row per point (CSV or Parquet), or print it.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("grid", metavar="GRID.yaml", help="the grid file (see docs/sweep.md)")
    sweep.add_argument(
        "--out",
        "-o",
        default=None,
        metavar="FILE.csv|FILE.parquet",
        help="write the table here, format by suffix (default: print a text table)",
    )
    sweep.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=None,
        metavar="N",
        help="local worker processes (default: the CPU count; 1: in this process)",
    )
    sweep.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run on this Dask distributed scheduler, e.g. tcp://127.0.0.1:8786 "
        "(needs dask[distributed])",
    )
    sweep.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    sweep.add_argument(
        "--json", action="store_true", help="print the rows as a JSON list (NaN as null)"
    )
    sweep.set_defaults(handler=run_sweep_command)


def run_sweep_command(args: argparse.Namespace) -> int:
    """``commsim sweep``: check the flags and the grid, run, write/print."""
    from commsim.errors import SpecError
    from commsim.sweep.execute import run_sweep
    from commsim.sweep.grid import load_grid
    from commsim.sweep.output import check_out, format_sweep, records, write_table

    if args.jobs is not None and args.jobs < 1:
        raise SpecError(f"--jobs: must be a positive integer, got {args.jobs}")
    if args.out is not None:
        check_out(args.out)
    grid = load_grid(args.grid)
    frame = run_sweep(grid, jobs=args.jobs, scheduler=args.scheduler, progress=not args.quiet)
    if args.out is not None:
        write_table(frame, args.out)
    if args.json:
        print(json.dumps(records(frame), indent=2))
    elif args.out is None:
        print(format_sweep(frame))
    return 0
