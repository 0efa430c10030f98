"""Sweeps: ``commsim.sweep.run_sweep`` on one process, two local processes, and a Dask cluster.

Run: ``.venv/bin/python benchmarks/sweep_parallel.py [--repeat 3] [--workers 2] [--quick]``

One grid of 192 points, half analytic and half DES: all_reduce, all_gather and reduce_scatter x
ring, recursive_doubling, rabenseifner and auto x 4 sizes (16 KiB to 512 MiB, x32) x two
topologies (4 DGX H100 = 32 GPUs, a 64-chip TPU v4 torus) x both engines (points an algorithm
cannot run are rows with an error, as in any sweep). Timed end to end through ``run_sweep``
(tasks shipped, rows gathered, the DataFrame built): ``jobs=1`` in this process, ``jobs=N``
local processes (``concurrent.futures``; the pool's start-up counts), and a Dask
``LocalCluster`` of N single-threaded worker processes started before timing (its start-up is
shown apart, as a user's long-running cluster pays it once). Each executor's frame is checked
equal to ``jobs=1``'s. Best of ``--repeat``; the ratio is time / time at ``jobs=1``.
``--quick``: one size (48 points), once.
"""

from __future__ import annotations

import argparse
import os
import time

from _common import best_of, parse_args, table

GRID: dict[str, object] = {
    "topologies": ["dgx-h100x4", "tpu-v4-64"],
    "engine": ["analytic", "des"],
    "collectives": ["all_reduce", "all_gather", "reduce_scatter"],
    "algorithms": ["ring", "recursive_doubling", "rabenseifner", "auto"],
    "sizes": ["16KiB:1GiB:32"],
}


def main() -> None:
    import pandas as pd

    from commsim.sweep import load_grid, run_sweep

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="processes / Dask workers")
    args = parse_args(parser, {"repeat": 1}, "one size (48 points), once")
    grid = load_grid({**GRID, "sizes": ["16KiB"]} if args.quick else GRID)
    points, workers = len(grid), args.workers
    run_sweep(load_grid({**GRID, "sizes": ["1KiB"]}), jobs=1)  # warm-up: imports, presets

    rows: list[list[object]] = []
    one_s, reference = best_of(args.repeat, lambda: run_sweep(grid, jobs=1))
    rows.append(["jobs=1 (in process)", one_s, points / one_s, 1.0])
    many_s, frame = best_of(args.repeat, lambda: run_sweep(grid, jobs=workers))
    pd.testing.assert_frame_equal(frame, reference, check_exact=True)
    rows.append([f"jobs={workers} (processes)", many_s, points / many_s, many_s / one_s])

    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        startup_s = time.perf_counter() - t0
        run_sweep(load_grid({**GRID, "sizes": ["1KiB"]}), scheduler=client)  # warm workers
        dask_s, frame = best_of(args.repeat, lambda: run_sweep(grid, scheduler=client))
    pd.testing.assert_frame_equal(frame, reference, check_exact=True)
    rows.append([f"Dask LocalCluster, {workers} workers", dask_s, points / dask_s, dask_s / one_s])

    failed = int(reference["error"].notna().sum())
    print(
        f"{points} points ({failed} that cannot run), analytic + DES; "
        f"{os.cpu_count()} CPUs, best of {args.repeat}"
    )
    print(table(["<executor", "time (s)", "points/s", "ratio to jobs=1"], rows))
    print(f"Dask LocalCluster start-up (not in its time): {startup_s:.2f} s")


if __name__ == "__main__":
    main()
