"""Running a grid: rows in grid order, identical on every executor, failed points kept, workload
rows equal to ``replay``, and the table's types."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from sweep_helpers import DDP, RING8

from commsim import simulate
from commsim.errors import SpecError
from commsim.replay.step import replay
from commsim.sweep import load_grid, run_rows, run_sweep
from commsim.sweep.execute import batches


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    from sweep_helpers import write_grid

    return run_sweep(write_grid(tmp_path_factory.mktemp("grid")), jobs=1)


def test_one_row_per_point_in_grid_order(grid_file: Path, reference: pd.DataFrame) -> None:
    grid = load_grid(grid_file)
    assert len(reference) == len(grid)
    coll = reference[reference["kind"] == "collective"]
    expected = [
        (p.topology.label, p.engine, p.collective, p.algorithm, p.nbytes)
        for p in grid.points()
        if hasattr(p, "nbytes")
    ]
    got = list(
        coll[["topology", "engine", "collective", "requested_algorithm", "nbytes"]].itertuples(
            index=False, name=None
        )
    )
    assert got == expected
    assert list(reference["kind"]).index("workload") == len(coll)  # workloads come last
    assert list(reference.columns[:13]) == [
        "kind", "collective", "requested_algorithm", "algorithm", "topology", "ranks",
        "nbytes", "engine", "requested_protocol", "chunks", "time_s", "algbw_GBps", "busbw_GBps",
    ]  # fmt: skip
    assert reference.columns[-1] == "error"


def test_process_pool_gives_the_identical_frame(grid_file: Path, reference: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(run_sweep(grid_file, jobs=2), reference, check_exact=True)


def test_a_row_is_what_simulate_returns(reference: pd.DataFrame) -> None:
    row = reference[
        (reference["topology"] == "dgx-h100x2")
        & (reference["ranks"] == 12)
        & (reference["engine"] == "des")
        & (reference["collective"] == "all_reduce")
        & (reference["requested_algorithm"] == "auto")
        & (reference["nbytes"] == 65536)
    ].iloc[0]
    result = simulate("all_reduce", "dgx-h100x2", 65536, ranks=12, engine="des")
    assert row["algorithm"] == result.algorithm != "auto"
    assert row["time_s"] == result.time_s
    assert row["busbw_GBps"] == result.busbw_Bps / 1e9
    assert row["chunks"] == result.chunks and row["transfers"] == len(result.schedule or ())
    assert pd.isna(row["error"])


def test_points_that_cannot_run_keep_their_row_with_the_reason(reference: pd.DataFrame) -> None:
    failed = reference[reference["error"].notna()]
    assert failed["time_s"].isna().all() and failed["busbw_GBps"].isna().all()
    too_many = failed[(failed["topology"] == "ring8") & (failed["ranks"] == 12)]
    assert len(too_many) == 2 * 2 * 4 * 3  # engines x collectives x algorithms x sizes
    assert too_many["error"].str.contains("12 exceeds the 8 ranks of topology 'ring8'").all()
    cannot = failed[
        (failed["collective"] == "all_gather")
        & (failed["requested_algorithm"] == "double_binary_tree")
        & (failed["topology"] == "dgx-h100x2")
    ]
    assert len(cannot) == 2 * 2 * 3
    assert cannot["error"].str.contains("cannot run all_gather").all()
    assert (cannot["algorithm"] == "double_binary_tree").all()
    ok = reference[reference["error"].isna() & (reference["kind"] == "collective")]
    assert (ok["time_s"] > 0).all() and len(ok) > 0


def test_workload_rows_match_replay(reference: pd.DataFrame) -> None:
    rows = reference[reference["kind"] == "workload"]
    assert list(rows["workload"]) == ["ddp.yaml", "small-ddp"] * 2
    assert list(rows["topology"]) == ["dgx-h100x2"] * 2 + ["ring8"] * 2
    row = rows.iloc[2]
    expected = replay(DDP, RING8).to_dict()
    assert row["workload_kind"] == "ddp" and row["ranks"] == 8
    for key in ("step_time_s", "compute_time_s", "comm_time_s", "exposed_comm_s",
                "overlap_fraction", "idle_fraction"):  # fmt: skip
        assert row[key] == expected[key], key
    assert "buckets" not in rows.columns  # nested extras are left out of the table
    assert rows[["time_s", "nbytes"]].isna().all().all()


def test_dtypes_are_tidy(reference: pd.DataFrame) -> None:
    assert reference["ranks"].dtype == "int64"
    assert reference["nbytes"].dtype == "Int64"  # missing on workload rows
    assert reference["time_s"].dtype == "float64"
    assert reference["step_time_s"].dtype == "float64"


def test_batches_interleave_and_cover_every_point_once() -> None:
    for count in (0, 1, 17, 100, 1000):
        for workers in (1, 2, 7, 200):
            plan = batches(count, workers)
            assert sorted(i for b in plan for i in b) == list(range(count))
            assert all(len(b) <= 16 for b in plan)
    assert [list(b) for b in batches(10, 1)] == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]


def test_progress_callback_counts_every_point() -> None:
    grid = load_grid(
        {"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": "1KiB:1MiB",
         "engine": "analytic"}
    )  # fmt: skip
    seen: list[tuple[int, int]] = []
    run_rows(grid, jobs=1, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (11, 11) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_bad_jobs_and_both_executors_are_errors() -> None:
    grid = {"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": "1B"}
    with pytest.raises(SpecError, match="--jobs"):
        run_sweep(grid, jobs=0)
    with pytest.raises(SpecError, match="give one"):
        run_sweep(grid, jobs=2, scheduler="tcp://127.0.0.1:1")


def test_dask_cluster_gives_the_identical_frame(
    grid_file: Path, reference: pd.DataFrame, dask_scheduler: str
) -> None:
    pd.testing.assert_frame_equal(
        run_sweep(grid_file, scheduler=dask_scheduler), reference, check_exact=True
    )


def test_dask_accepts_a_client(dask_scheduler: str) -> None:
    from distributed import Client

    grid = {"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": "1KiB:4KiB"}
    with Client(dask_scheduler, set_as_default=False) as client:
        frame = run_sweep(grid, scheduler=client)
    local = run_sweep(grid, jobs=1)
    pd.testing.assert_frame_equal(frame, local, check_exact=True)
    assert not math.isnan(frame["time_s"].iloc[0])


def test_protocol_axis_sweeps_nccl_against_plain() -> None:
    """``protocol: [auto, none]`` on an NCCL preset: NCCL's choice (a protocol, launch latency)
    and the plain alpha-beta model (protocol null), as ``commsim run --protocol``."""
    import commsim
    from commsim.sweep import run_sweep

    frame = run_sweep({"topologies": "dgx-h100", "collectives": "all_reduce",
                       "sizes": ["8B", "1GiB"], "protocol": ["auto", "NONE"],
                       "engine": "analytic"}, jobs=1)
    assert list(frame.requested_protocol) == ["auto", "auto", "none", "none"]
    assert list(frame.protocol[:2]) == ["LL", "Simple"] and frame.protocol[2:].isna().all()
    nccl = commsim.simulate("all_reduce", "dgx-h100", "1GiB", engine="analytic")
    assert frame.time_s[1] == nccl.time_s and frame.algorithm[1] == "nvls"
