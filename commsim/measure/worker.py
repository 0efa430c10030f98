"""What each measuring process runs: time real torch.distributed collectives, report to rank 0.

This module imports ``torch``; only the processes :mod:`commsim.measure.launcher` starts import
it (torch is an optional extra of commsim). Each is ``python -m commsim.measure.worker RANK FD
ARGS_JSON``: it writes one JSON object per line to the pipe ``FD``. Rank 0 writes
``{"kind": "progress", "done", "total", "label"}`` while it works, then ``{"kind": "rows",
"rows": [...]}``; a rank that fails writes ``{"kind": "error", "rank", "message"}`` and exits
with status 3.

Timing, for every (collective, size) of a plan, in the plan's order:

* ``warmups`` untimed calls (allocations, connection set-up, caches), one per later round;
* ``iterations`` timed iterations, each after a barrier so that every rank starts together:
  ``batch`` calls back to back (as nccl-tests times its iterations), timed with
  ``perf_counter`` (after ``torch.cuda.synchronize`` on nccl); a rank's time for the iteration
  is their mean, which on a busy CPU host averages the bimodal wake-up delays of single calls;
* the iteration's time is the maximum over ranks (the slowest rank finishes the collective);
  rank 0 reports every iteration's, and the launcher summarizes them (median, percentiles).

Iterations may be spread over ``rounds``: the whole plan is run ``rounds`` times, each time
with ``iterations / rounds`` timed calls per row, so that a slow spell of a noisy machine hits
every row a little instead of one row entirely.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TextIO

import torch
import torch.distributed as dist

ELEMENT_BYTES = 4  # float32


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerArgs:
    """Everything a rank needs; crosses the process boundary as JSON on the command line."""

    backend: str
    world_size: int
    port: int
    collectives: tuple[str, ...]
    sizes: tuple[int, ...]
    iterations: int
    warmups: int
    rounds: int
    batch: int
    init_timeout_s: float
    #: Tests only: this rank exits abruptly once set up (a crashed worker).
    crash_rank: int | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerArgs:
        data = json.loads(text)
        data["collectives"] = tuple(data["collectives"])
        data["sizes"] = tuple(data["sizes"])
        return cls(**data)


#: ``emit(kind, **fields)``: one message to the launcher.
Emit = Callable[..., None]


def pipe_emitter(stream: TextIO) -> Emit:
    """An :data:`Emit` writing JSON lines to ``stream`` (flushed at once)."""

    def emit(kind: str, **fields: Any) -> None:
        stream.write(json.dumps({"kind": kind, **fields}) + "\n")
        stream.flush()

    return emit


def elements(nbytes: int, world_size: int) -> int:
    """float32 elements of the full buffer: ``nbytes`` rounded down to a multiple of
    ``4 * world_size`` bytes, so that all_gather and reduce_scatter split it evenly."""
    return (nbytes // (ELEMENT_BYTES * world_size)) * world_size


def _make_op(
    name: str, numel: int, rank: int, world: int, device: torch.device
) -> Callable[[], None]:
    """A zero-argument callable running one ``name`` collective on fresh float32 buffers."""
    full = torch.zeros(numel, dtype=torch.float32, device=device)
    shard = torch.zeros(numel // world, dtype=torch.float32, device=device)
    if name == "all_reduce":
        return lambda: dist.all_reduce(full)
    if name == "broadcast":
        return lambda: dist.broadcast(full, 0)
    if name == "reduce":
        return lambda: dist.reduce(full, 0)
    if name == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(full, shard)
    if name == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(shard, full)
    if name == "sendrecv":

        def ping_pong() -> None:
            if rank == 0:
                dist.send(full, 1)
                dist.recv(full, 1)
            elif rank == 1:
                dist.recv(full, 0)
                dist.send(full, 0)

        return ping_pong
    raise ValueError(f"unknown collective {name!r}")


def _plan(args: WorkerArgs) -> list[tuple[str, int]]:
    plan: list[tuple[str, int]] = []
    for name in args.collectives:
        if name == "sendrecv" and args.world_size < 2:
            continue
        plan.extend((name, nbytes) for nbytes in args.sizes)
    return plan


def main(argv: Sequence[str]) -> None:
    """``python -m commsim.measure.worker RANK FD ARGS_JSON``: run one rank, report on ``FD``."""
    rank, fd, args = int(argv[0]), int(argv[1]), WorkerArgs.from_json(argv[2])
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        emit = pipe_emitter(stream)
        try:
            run(rank, args, emit)
        except BaseException as exc:  # report, then die: the launcher makes it one line
            detail = f"{type(exc).__name__}: {exc}".strip()
            if os.environ.get("COMMSIM_DEBUG"):
                detail += "\n" + traceback.format_exc()
            try:
                emit("error", rank=rank, message=detail)
            finally:
                os._exit(3)


def run(rank: int, args: WorkerArgs, emit: Emit) -> None:
    """Initialize the process group, measure the plan, report (rank 0), tear down."""
    torch.set_num_threads(1)
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    dist.init_process_group(
        args.backend,
        init_method=f"tcp://127.0.0.1:{args.port}",
        rank=rank,
        world_size=args.world_size,
        timeout=timedelta(seconds=args.init_timeout_s),
    )
    try:
        if args.crash_rank is not None:  # tests: every rank set up, then one dies
            dist.barrier()
            if args.crash_rank == rank:
                os._exit(4)
        rows = _measure(rank, args, device, emit)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        emit("rows", rows=rows)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _measure(
    rank: int, args: WorkerArgs, device: torch.device, emit: Emit
) -> list[dict[str, object]]:
    world = args.world_size
    plan = _plan(args)
    ops = {key: _make_op(key[0], elements(key[1], world), rank, world, device) for key in plan}
    times: dict[tuple[str, int], list[float]] = {key: [] for key in plan}
    rounds = max(1, min(args.rounds, args.iterations))
    per_round = [args.iterations // rounds + (r < args.iterations % rounds) for r in range(rounds)]
    total, done = len(plan) * rounds, 0
    for round_index, count in enumerate(per_round):
        warmups = args.warmups if round_index == 0 else min(args.warmups, 1)
        for key in plan:
            op = ops[key]
            for _ in range(warmups):
                op()
            _sync(device)
            mine = []
            for _ in range(count):
                dist.barrier()
                _sync(device)
                start = time.perf_counter()
                for _ in range(args.batch):
                    op()
                _sync(device)
                mine.append((time.perf_counter() - start) / args.batch)
            slowest = torch.tensor(mine, dtype=torch.float64, device=device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            times[key].extend(slowest.cpu().tolist())
            done += 1
            if rank == 0:
                emit("progress", done=done, total=total, label=f"{key[0]} {key[1]} B")
    if rank != 0:
        return []
    return [_row(name, nbytes, times[(name, nbytes)], args, device) for name, nbytes in plan]


def _row(
    name: str, nbytes: int, samples: list[float], args: WorkerArgs, device: torch.device
) -> dict[str, object]:
    """The raw row: what ran and every iteration's time (the launcher summarizes them)."""
    if name == "sendrecv":  # ping-pong: report one way, half the round trip
        samples = [t / 2 for t in samples]
    return {
        "collective": name,
        "ranks": args.world_size,
        "nbytes": elements(nbytes, args.world_size) * ELEMENT_BYTES,
        "samples": samples,
        "warmups": args.warmups,
        "backend": args.backend,
        "world_size": args.world_size,
        "torch_version": torch.__version__,
        "host": socket.gethostname(),
        "cpus": os.cpu_count() or 0,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
    }


if __name__ == "__main__":
    main(sys.argv[1:])
