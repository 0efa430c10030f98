"""Capacity-planning sweeps: a grid of collectives x sizes x algorithms x topologies (and
workloads x topologies), every point simulated, one tidy table back (see ``docs/sweep.md``).

>>> from commsim.sweep import run_sweep
>>> df = run_sweep({"collectives": "all_reduce", "sizes": "1MiB", "engine": "analytic",
...                 "algorithms": ["ring", "rabenseifner"], "topologies": "dgx-h100"}, jobs=1)
>>> list(df["algorithm"]), bool(df["error"].isna().all())
(['ring', 'rabenseifner'], True)
"""

from commsim.sweep.execute import run_point, run_rows, run_sweep
from commsim.sweep.grid import CollectivePoint, Grid, WorkloadPoint, load_grid
from commsim.sweep.output import format_sweep, to_frame, write_table

__all__ = [
    "CollectivePoint",
    "Grid",
    "WorkloadPoint",
    "format_sweep",
    "load_grid",
    "run_point",
    "run_rows",
    "run_sweep",
    "to_frame",
    "write_table",
]
