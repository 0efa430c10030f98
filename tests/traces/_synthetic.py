"""Small hand-made Kineto traces in the shapes real NCCL and gloo captures have.

Times are microseconds. Each builder returns one rank's trace object (a dict, as the profiler
writes it); :func:`write` puts it on disk as ``.json`` or ``.json.gz``. The events follow the
excerpts in docs/traces.md and 1.5 (field names, categories, args).

The NCCL step of :func:`nccl_rank` (both ranks alike)::

    CPU  ProfilerStep#5 [0, 1000]; record_param_comms [290, 312] launching the all_reduce
    GPU  stream 7:  k1 [100, 300]  k2 [300, 500]                       k3 [800, 900]
         stream 20:                         nccl all_reduce [500, 780]

k3 was launched at 320 (before the all_reduce ended) and starts 20 us after it: it waited.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

NEW_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
OLD_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
NELEMS = 1 << 20  # float32: 4 MiB


def _x(cat: str, name: str, pid: object, tid: object, ts: float, dur: float, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def comm_args(collective: str = "allreduce", n_in: int = NELEMS, n_out: int = NELEMS,
              ranks: object = "[0, 1]", pg: str = "0") -> dict[str, Any]:  # fmt: skip
    """``record_param_comms``' args, as in HTA's ``nccl_data.json.gz``."""
    return {
        "Collective name": collective,
        "In msg nelems": n_in,
        "Out msg nelems": n_out,
        "Group size": 2,
        "dtype": "Float",
        "In split size": "[]",
        "Out split size": "[]",
        "Global rank start": 0,
        "Global rank stride": 1,
        "Process Group Name": pg,
        "Process Group Description": "default_pg",
        "Process Group Ranks": ranks,
    }


def nccl_rank(
    rank: int,
    *,
    kernel: str = NEW_KERNEL,
    args_on_kernel: bool = True,
    params: dict[str, Any] | None = None,
    header: str = "full",
    base_ns: int = 1_711_964_646_000_000_000,
    t0: float = 4_458_676_524_000.0,
) -> dict[str, Any]:
    """One rank of the NCCL step above.

    ``header``: ``full`` (pg_config with list ranks, deviceProperties), ``quoted`` (ranks as
    the string ``"{}"``, no deviceProperties), ``old`` (distributedInfo with only backend,
    rank and world_size). ``params``: ``record_param_comms``' args (default
    :func:`comm_args`; ``{}`` for old traces whose op has none).
    """
    pid, tid = 1000 + rank, 1000 + rank
    params = comm_args() if params is None else params
    kernel_args: dict[str, Any] = {"External id": 99, "device": 0, "stream": 20, "correlation": 42}
    if args_on_kernel:
        kernel_args.update(params)
    events = [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        _x("user_annotation", "ProfilerStep#5", pid, tid, t0, 1000.0),
        _x("gpu_user_annotation", "ProfilerStep#5", 0, 7, t0 + 100, 1200.0),
        _x("gpu_user_annotation", "nccl:all_reduce", 0, 20, t0 + 490, 300.0,
           **{"External id": 13}),
        _x("cpu_op", "c10d::allreduce_", pid, tid, t0 + 285, 30.0, **{"External id": 10}),
        _x("cpu_op", "record_param_comms", pid, tid, t0 + 290, 22.0,
           **{"External id": 11, **params}),
        _x("user_annotation", "nccl:all_reduce", pid, tid, t0 + 292, 10.0,
           **{"External id": 12, "Input Dims": [[NELEMS]], "Input type": ["float"]}),
        _x("cuda_runtime", "cudaLaunchKernel", pid, tid, t0 + 295, 5.0, correlation=42),
        _x("cuda_runtime", "cudaLaunchKernel", pid, tid, t0 + 90, 5.0, correlation=1),
        _x("cuda_runtime", "cudaLaunchKernel", pid, tid, t0 + 200, 5.0, correlation=2),
        _x("cuda_runtime", "cudaLaunchKernel", pid, tid, t0 + 320, 5.0, correlation=3),
        _x("kernel", "sm80_xmma_gemm_k1", 0, 7, t0 + 100, 200.0, device=0, stream=7,
           correlation=1),
        _x("kernel", "sm80_xmma_gemm_k2", 0, 7, t0 + 300, 200.0, device=0, stream=7,
           correlation=2),
        _x("kernel", kernel, 0, 20, t0 + 500, 280.0, **kernel_args),
        _x("kernel", "elementwise_k3", 0, 7, t0 + 800, 100.0, device=0, stream=7,
           correlation=3),
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
         "tid": "PyTorch Profiler", "ts": t0, "dur": 1000.0},
    ]  # fmt: skip
    info: dict[str, Any] = {"backend": "nccl", "rank": rank, "world_size": 2}
    trace: dict[str, Any] = {"schemaVersion": 1}
    if header == "full":
        trace["deviceProperties"] = [{"id": 0, "name": "NVIDIA A100-PG509-200"}]
        info.update(pg_count=1, nccl_version="2.17.1", pg_config=[
            {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
             "pg_size": 2, "ranks": [0, 1]}])  # fmt: skip
    elif header == "quoted":
        info.update(pg_count=1, pg_config=[{"pg_name": "0", "uid": "0", "ranks": "{}"}])
    trace.update(distributedInfo=info, displayTimeUnit="ms", baseTimeNanoseconds=base_ns,
                 traceEvents=events, traceName=f"rank{rank}.json")  # fmt: skip
    return trace


def gloo_rank(rank: int, *, t0: float = 4_463_510_317_000.0) -> dict[str, Any]:
    """One rank of a gloo step (docs/traces.md): main-thread ops, one bucket all_reduce.

    Main thread (tid = pid)::

        ProfilerStep#2 [0, 2000]
        aten::linear [50, 250]  (nested aten::addmm [60, 240]: not counted again)
        AccumulateGrad [300, 700] launching c10d::allreduce_ [400, 450] (2 MiB float32)
        -- idle: waiting --
        copy_bucket_to_grad [1510, 1600]      aten::add_ [1700, 1900]

    gloo runloop thread: gloo:all_reduce [460, 1500].
    """
    pid, main, loop = 2000 + rank, 2000 + rank, 3000 + rank
    dims = [[[524288]], [], [], [], [], []]
    types = ["TensorList", "", "", "", "Scalar", "Scalar"]
    events = [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": main,
         "args": {"name": f"thread {main} (python)"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": loop,
         "args": {"name": f"thread {loop} (pt_gloo_runloop)"}},
        _x("user_annotation", "ProfilerStep#2", pid, main, t0, 2000.0),
        _x("user_annotation", "DistributedDataParallel.forward", pid, main, t0 + 40, 230.0),
        _x("cpu_op", "aten::linear", pid, main, t0 + 50, 200.0),
        _x("cpu_op", "aten::addmm", pid, main, t0 + 60, 180.0),
        _x("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
           pid, main, t0 + 300, 400.0),
        _x("cpu_op", "c10d::allreduce_", pid, main, t0 + 400, 50.0,
           **{"Input Dims": dims, "Input type": types,
              "Concrete Inputs": ["", "", "", "", "False", "-1"]}),
        _x("user_annotation", "gloo:all_reduce", pid, loop, t0 + 460, 1040.0,
           **{"Input type": ["float"], "Input Dims": [[524288]]}),
        _x("cpu_op", "torch.distributed.ddp.reducer::copy_bucket_to_grad", pid, main,
           t0 + 1510, 90.0),
        _x("user_annotation", "Optimizer.step#SGD.step", pid, main, t0 + 1690, 220.0),
        _x("cpu_op", "aten::add_", pid, main, t0 + 1700, 200.0),
    ]  # fmt: skip
    return {
        "schemaVersion": 1,
        "deviceProperties": [],
        "record_shapes": 1,
        "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2, "pg_count": 1,
                            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                           "backend_config": "cpu:gloo,cuda:gloo",
                                           "pg_size": 2, "ranks": [0, 1]}]},
        "host_name": "vm",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1_790_857_026_000_000_000,
        "traceEvents": events,
    }  # fmt: skip


def write(trace: dict[str, Any], path: Path) -> Path:
    """Write a trace as JSON, gzipped when ``path`` ends in ``.gz``."""
    text = json.dumps(trace)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def write_ranks(directory: Path, traces: list[dict[str, Any]], suffix: str = ".json") -> Path:
    """Write ``rank<r><suffix>`` per trace into ``directory``; return it."""
    directory.mkdir(parents=True, exist_ok=True)
    for rank, trace in enumerate(traces):
        write(trace, directory / f"rank{rank}{suffix}")
    return directory
