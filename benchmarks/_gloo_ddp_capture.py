"""Capture real per-rank Kineto traces of a tiny DDP model trained with gloo on 2 processes,
and replay them on a fitted topology.

Used by ``benchmarks/trace_replay_gloo.py`` and ``tests/traces/test_trace_gloo_capture.py``
(which adds this folder to ``sys.path``), so that the two capture and judge the same step.
:func:`capture` spawns ``world_size`` processes on 127.0.0.1 (a free port,
``GLOO_SOCKET_IFNAME=lo``, ``OMP_NUM_THREADS=1``, one torch thread each, a 60 s collective
timeout), trains a small MLP under ``torch.profiler`` with ``record_shapes=True`` and writes
``rank<r>.json`` per rank. In the same processes it then times standalone ``all_reduce`` calls
of the DDP buckets' sizes (read from the trace just written) and of ``config["sizes"]``, so that
a topology can be calibrated on the machine as it was during the capture. Every process is
joined, or terminated and killed, before :func:`capture` returns or raises.

:data:`STEP` is the step both capture; :func:`calibrated_topology` fits a 2-rank switch to
all-reduce times (:func:`standalone_rows` of the capture, or :func:`trace_rows` of the step's
own collectives) and :func:`replay_ratio` replays the profiled steps on it.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import socket
import statistics
import time
from pathlib import Path
from typing import Any

#: The step captured: a 256-2048-2048-256 MLP, batch 4, two DDP buckets; 6 profiled steps after
#: 3 warm-up ones, then 30 standalone all-reduces per size (the buckets' and 64 KiB).
STEP: dict[str, Any] = {
    "widths": [256, 2048, 2048, 256],
    "batch": 4,
    "bucket_cap_mb": 4,
    "warmup_steps": 3,
    "steps": 6,
    "sizes": [65536],  # plus the buckets' sizes, read from the trace
    "reps": 30,
}
#: The topology fitted: 2 ranks behind a switch running gloo's ring all-reduce.
TEMPLATE: dict[str, Any] = {
    "kind": "switch",
    "ranks": 2,
    "link": {"latency": "100us", "bandwidth": "1GB/s"},
    "algorithms": {"all_reduce": "ring"},
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bucket_bytes(trace: Path) -> list[int]:
    """The sizes of the gradient buckets' all-reduces in a gloo trace (float32 gradients)."""
    events = json.loads(trace.read_text())["traceEvents"]
    return sorted(
        {
            4 * math.prod(e["args"]["Input Dims"][0])
            for e in events
            if e.get("name") == "gloo:all_reduce"
        }
    )


def _worker(
    rank: int, world_size: int, port: int, out: str, timings: str, config: dict[str, Any]
) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=60),
    )
    torch.manual_seed(0)
    widths = config["widths"]
    layers: list[torch.nn.Module] = []
    for i in range(len(widths) - 1):
        layers += [torch.nn.Linear(widths[i], widths[i + 1]), torch.nn.ReLU()]
    model = DistributedDataParallel(
        torch.nn.Sequential(*layers[:-1]), bucket_cap_mb=config["bucket_cap_mb"]
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(config["batch"], widths[0])
    y = torch.randn(config["batch"], widths[-1])

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    for _ in range(config["warmup_steps"]):
        step()
    steps = config["steps"]
    trace = Path(out) / f"rank{rank}.json"
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        record_shapes=True,
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(trace)),
    ) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()
    sizes = [config["sizes"] + _bucket_bytes(trace) if rank == 0 else None]
    dist.broadcast_object_list(sizes, src=0)
    buffers = {nbytes: torch.ones(nbytes // 4) for nbytes in sorted(set(sizes[0]))}
    samples: dict[int, list[float]] = {nbytes: [] for nbytes in buffers}
    for rep in range(config["reps"] + 2):  # round-robin over sizes; two untimed rounds
        for nbytes, buffer in buffers.items():
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(buffer)
            if rep >= 2:
                samples[nbytes].append(time.perf_counter() - start)
    samples_by_size = {str(n): statistics.median(s) for n, s in samples.items()}
    if rank == 0:
        Path(timings).write_text(json.dumps(samples_by_size))
    dist.barrier()
    dist.destroy_process_group()
    # NOTE: leave without running C++ static destructors: about one exit in five otherwise
    # aborts ("terminate called without an active exception") after all output is written.
    os._exit(0)


def capture(
    out: Path,
    timings: Path,
    config: dict[str, Any],
    *,
    world_size: int = 2,
    timeout_s: float = 60.0,
) -> None:
    """Write ``out/rank<r>.json`` per rank and the median standalone all_reduce time per size
    (``{"nbytes": seconds}``) to ``timings``; RuntimeError if a rank fails or it all takes
    longer than ``timeout_s``."""
    import torch.multiprocessing as mp

    out.mkdir(parents=True, exist_ok=True)
    env = {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        context = mp.start_processes(
            _worker,
            args=(world_size, _free_port(), str(out), str(timings), config),
            nprocs=world_size,
            join=False,
            start_method="spawn",
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    deadline = time.monotonic() + timeout_s
    try:
        while not context.join(timeout=0.5):
            if time.monotonic() > deadline:
                raise RuntimeError(f"trace capture did not finish within {timeout_s} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.terminate()
        for process in context.processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()


def calibrated_topology(rows: list[tuple[int, float]]) -> dict[str, Any]:
    """:data:`TEMPLATE` fitted to all-reduce times ``(nbytes, seconds)``."""
    import yaml

    from commsim.collectives import Collective
    from commsim.validation.calibrate import calibrate
    from commsim.validation.measurements import Measurement

    measurements = [
        Measurement(collective=Collective.ALL_REDUCE, ranks=2, nbytes=n, time_s=t) for n, t in rows
    ]
    return yaml.safe_load(calibrate(measurements, TEMPLATE).to_yaml())


def standalone_rows(captured: Path) -> list[tuple[int, float]]:
    """The standalone all-reduce times :func:`capture` wrote (``captured/timings.json``)."""
    timings = json.loads((captured / "timings.json").read_text())
    return [(int(n), float(t)) for n, t in timings.items()]


def trace_rows(model: Any) -> list[tuple[int, float]]:
    """The times of the step's own collectives in a read capture (a ``TraceModel``)."""
    from commsim.traces import collective_times

    frame = collective_times(model, "all")
    return [(int(n), float(t)) for n, t in zip(frame["nbytes"], frame["time_s"], strict=True)]


def replay_ratio(model: Any, topology: dict[str, Any]) -> float:
    """Replayed / measured time of the profiled steps of a read capture on ``topology``."""
    from commsim.replay import replay
    from commsim.traces import load_trace_workload

    result = replay(load_trace_workload(model, "all"), topology)
    return 1 + float(result.extra["step_time_error_pct"]) / 100
