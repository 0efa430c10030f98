"""Fixtures of the sweep tests: the small grid's files, and a Dask LocalCluster started once per
session, only by the tests that ask for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sweep_helpers import write_grid


@pytest.fixture
def grid_file(tmp_path: Path) -> Path:
    """A grid with 2 topologies x 2 ranks x 2 engines x 2 collectives x 4 algorithms x
    3 sizes = 192 collective points (some cannot run), and 2 x 2 workload points."""
    return write_grid(tmp_path)


@pytest.fixture(scope="session")
def dask_scheduler() -> Iterator[str]:
    """The address of a 2-worker Dask LocalCluster (worker processes, no dashboard)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address
