"""Run a grid's points: in this process, on local processes, or on a Dask cluster.

Points are cut into interleaved batches (a batch is one task: a few points amortise the cost
of shipping a task); each batch returns its rows, and rows are put back in grid order whatever
order the batches finish in. Simulation is deterministic, so the rows (and the files written
from them) are the same for every executor and job count.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commsim.errors import CommsimError, SpecError
from commsim.sweep.grid import CollectivePoint, Grid, Point, WorkloadPoint, load_grid

if TYPE_CHECKING:
    import pandas as pd

Row = dict[str, object]
Progress = Callable[[int, int], None]

#: Batches per worker: enough that a slow batch does not leave the other workers idle long.
BATCHES_PER_WORKER = 4
#: At most this many points in one batch.
MAX_BATCH = 16


# -- one point -----------------------------------------------------------------------------
_NETWORKS: dict[Any, Any] = {}
_MAX_NETWORKS = 8


def _network(ref: Any) -> Any:
    """The network of a topology reference, built once per process (presets are cached by
    :func:`commsim.topology.load_topology` itself; specs here, the last few)."""
    from commsim.topology import load_topology

    if isinstance(ref, str):
        return load_topology(ref)
    try:
        return _NETWORKS[ref]
    except (KeyError, TypeError):
        pass
    network = load_topology(ref)
    try:
        if len(_NETWORKS) >= _MAX_NETWORKS:
            _NETWORKS.pop(next(iter(_NETWORKS)))
        _NETWORKS[ref] = network
    except TypeError:  # an unhashable spec: not cached
        pass
    return network


def _scalars(values: Mapping[str, object]) -> Row:
    """The values that fit a table cell: nested extras (a DDP step's ``buckets``, ...) are
    left out (``commsim replay --json`` has them)."""
    return {k: v for k, v in values.items() if v is None or isinstance(v, str | int | float)}


def _collective_row(point: CollectivePoint) -> Row:
    from commsim.api import simulate

    nan = math.nan
    row: Row = {
        "kind": "collective",
        "collective": point.collective,
        "requested_algorithm": point.algorithm,
        "algorithm": None if point.algorithm == "auto" else point.algorithm,
        "topology": point.topology.label,
        "ranks": point.ranks if point.ranks is not None else point.topology.ranks,
        "nbytes": point.nbytes,
        "engine": point.engine,
        "requested_protocol": point.protocol,
        "chunks": point.chunks,
        "time_s": nan,
        "algbw_GBps": nan,
        "busbw_GBps": nan,
    }
    try:
        network = _network(point.topology.ref)
        if point.ranks is not None:
            network = network.with_ranks(point.ranks)
        result = simulate(
            point.collective,
            network,
            point.nbytes,
            algorithm=point.algorithm,
            chunks=point.chunks,
            engine=point.engine,
            protocol=point.protocol,
        )
    except CommsimError as exc:
        row["error"] = " ".join(str(exc).split())
        return row
    values = result.to_dict()
    values.pop("topology", None)  # the grid's label (the same name) stays
    row.update(_scalars(values))
    row["error"] = None
    return row


def _workload_row(point: WorkloadPoint) -> Row:
    from commsim.replay.metrics import METRIC_KEYS
    from commsim.replay.step import replay

    row: Row = {
        "kind": "workload",
        "workload": point.workload.label,
        "workload_kind": point.workload.spec.kind,
        "topology": point.topology.label,
        "ranks": point.topology.ranks,
    }
    row.update(dict.fromkeys(METRIC_KEYS, math.nan))
    try:
        result = replay(point.workload.spec, _network(point.topology.ref))
    except CommsimError as exc:
        row["error"] = " ".join(str(exc).split())
        return row
    values = result.to_dict()
    values.pop("per_rank", None)
    values.pop("topology", None)
    values["workload_kind"] = values.pop("workload")
    row.update(_scalars(values))
    row["error"] = None
    return row


def run_point(point: Point) -> Row:
    """One point's row (``error`` holds the one-line reason when the point cannot run)."""
    if isinstance(point, CollectivePoint):
        return _collective_row(point)
    return _workload_row(point)


def run_batch(points: Sequence[Point]) -> list[Row]:
    """The rows of a batch of points, in order (what a worker runs)."""
    return [run_point(p) for p in points]


# -- batches and executors -----------------------------------------------------------------
def batches(count: int, workers: int) -> list[range]:
    """Point indices cut into batches, about :data:`BATCHES_PER_WORKER` per worker and at most
    :data:`MAX_BATCH` points each. A batch takes every n-th point (``range(b, count, n)``),
    not a contiguous run: a grid's costly points cluster (one topology, the DES engine), and
    interleaving spreads them over the batches so that workers finish together."""
    if count == 0:
        return []
    size = max(1, min(MAX_BATCH, math.ceil(count / (workers * BATCHES_PER_WORKER))))
    number = math.ceil(count / size)
    return [range(b, count, number) for b in range(number)]


def _run_local(work: list[list[Point]], jobs: int, tick: Progress) -> list[list[Row]]:
    out: list[list[Row]] = [[] for _ in work]
    if jobs == 1 or len(work) <= 1:
        for index, batch in enumerate(work):
            out[index] = run_batch(batch)
            tick(index, len(batch))
        return out
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    with ProcessPoolExecutor(max_workers=min(jobs, len(work))) as pool:
        futures = {pool.submit(run_batch, batch): i for i, batch in enumerate(work)}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=futures.__getitem__):
                    index = futures[future]
                    out[index] = future.result()
                    tick(index, len(work[index]))
        except BaseException:
            for future in pending:
                future.cancel()
            raise
    return out


def _client(scheduler: object) -> tuple[Any, bool]:
    """A ``distributed.Client`` for an address (ours to close), or the caller's Client."""
    if not isinstance(scheduler, str):
        return scheduler, False
    try:
        from distributed import Client
    except ImportError:
        raise SpecError(
            f"--scheduler {scheduler}: needs dask.distributed "
            "(pip install 'commsim[sweep]' or 'dask[distributed]')"
        ) from None
    try:
        return Client(scheduler, timeout="10s", set_as_default=False), True
    except (OSError, TimeoutError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise SpecError(f"--scheduler {scheduler}: cannot connect ({reason})") from None


def _run_dask(work: list[list[Point]], client: Any, tick: Progress) -> list[list[Row]]:
    from distributed import as_completed

    futures = client.map(run_batch, work, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    out: list[list[Row]] = [[] for _ in work]
    for future in as_completed(futures, loop=client.loop):
        i = index[future.key]
        out[i] = future.result()
        tick(i, len(work[i]))
    return out


def _workers(scheduler: object) -> int:
    """How many workers a cluster has (for batching); 1 if it cannot say."""
    info = getattr(scheduler, "scheduler_info", None)
    try:
        return max(1, len(info()["workers"])) if callable(info) else 1
    except Exception:  # noqa: BLE001 - only a batching hint
        return 1


def run_rows(
    grid: Grid,
    *,
    jobs: int | None = None,
    scheduler: object = None,
    progress: Progress | None = None,
) -> list[Row]:
    """Every point's row, in grid order (see :func:`run_sweep`)."""
    if scheduler is not None and jobs is not None:
        raise SpecError("--jobs and --scheduler: give one (a cluster has its own workers)")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise SpecError(f"--jobs: must be a positive integer, got {jobs!r}")
    points = list(grid.points())
    done = 0

    def tick(_index: int, count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(done, len(points))

    if scheduler is not None:
        client, owned = _client(scheduler)
        try:
            plan = batches(len(points), _workers(client) * 2)
            parts = _run_dask([[points[i] for i in b] for b in plan], client, tick)
        finally:
            if owned:
                client.close()
    else:
        workers = jobs if jobs is not None else (os.cpu_count() or 1)
        plan = batches(len(points), workers)
        parts = _run_local([[points[i] for i in b] for b in plan], workers, tick)
    rows: list[Row] = [{} for _ in points]
    for indices, part in zip(plan, parts, strict=True):
        for i, row in zip(indices, part, strict=True):
            rows[i] = row
    return rows


def run_sweep(
    grid: Grid | str | Path | Mapping[str, Any],
    *,
    jobs: int | None = None,
    scheduler: object = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Simulate every point of ``grid``; one row per point, in grid order.

    Parameters
    ----------
    grid
        A grid YAML file, its parsed mapping, or a :class:`~commsim.sweep.grid.Grid`.
    jobs
        Local worker processes (default ``os.cpu_count()``); ``1`` runs in this process.
    scheduler
        A Dask scheduler address (``tcp://host:8786``) or a ``distributed.Client``: run there
        instead (not with ``jobs``).
    progress
        Draw a progress bar on stderr (only when it is a terminal).
    """
    from commsim.sweep.output import to_frame
    from commsim.sweep.progress import ProgressBar

    loaded = load_grid(grid)
    bar = ProgressBar() if progress else None
    try:
        rows = run_rows(loaded, jobs=jobs, scheduler=scheduler, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    return to_frame(rows)
