"""Launch the measuring processes: one spawn per world size, on 127.0.0.1, never left hanging.

For each world size, :func:`measure` starts ``world_size`` fresh Python processes
(``python -m commsim.measure.worker``: each imports torch itself, nothing of the caller's
``__main__`` is re-imported, so a script or notebook needs no ``if __name__ == "__main__"``
guard). They rendezvous over TCP on a free loopback port (``tcp://127.0.0.1:PORT``; the port is
found by binding ``127.0.0.1:0``) with ``GLOO_SOCKET_IFNAME=lo`` and ``OMP_NUM_THREADS=1`` in
their environment. Each writes JSON lines to a pipe of its own: rank 0 its progress and finally
its rows, any rank its error.

Failure handling: a rank that raises reports its error before exiting; a rank that dies
silently is noticed by its exit status; a world that outlives ``timeout_s`` is stopped. In every
case all of that world's processes are terminated (then killed) and joined before
:class:`~commsim.errors.CommsimError` is raised with one line naming the world size, the rank and
the cause, so no process outlives the call.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commsim.errors import CommsimError, SpecError
from commsim.measurements import Measurement

#: Collectives ``measure`` times (``sendrecv`` is a ping-pong between ranks 0 and 1).
COLLECTIVES = ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce", "sendrecv")
BACKENDS = ("gloo", "nccl")
#: What one worker process holds besides its buffers: the interpreter with torch imported
#: (220 MB resident on this project's machine, torch 2.13 CPU).
WORKER_BYTES = 250 * 2**20
#: A gloo rank's host memory per byte of a collective's size: the full buffer, its shard and
#: the backend's scratch.
BUFFER_FACTOR = 3

#: ``progress(world_size, done, total, label)``: rank 0 finished ``done`` of ``total`` rows.
Progress = Callable[[int, int, int, str], None]

#: How long to wait for the other ranks' error messages once one rank has died.
_GRACE_S = 2.0
_POLL_S = 0.1


def _positive(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{name}: must be a positive integer, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureSpec:
    """What to measure and how.

    Parameters
    ----------
    sizes : tuple of int
        Bytes of the full buffer, as nccl-tests counts them (all_gather: the gathered output;
        reduce_scatter: the unreduced input). Rounded down to a multiple of ``4 * world_size``
        (float32 elements split evenly); the rows report the bytes actually used.
    backend : str
        ``gloo`` (CPU) or ``nccl`` (one GPU per rank; needs ``torch.cuda.is_available()``).
    world_sizes : tuple of int
        Process counts, one spawn each, run one after another.
    collectives : tuple of str
        Among :data:`COLLECTIVES`.
    iterations : int
        Timed calls per row (the row's time is their median).
    warmups : int
        Untimed calls before them.
    rounds : int
        Within one launch, run the whole plan this many times, ``iterations / rounds`` timed
        calls per row each time, so that a slow spell of the machine spreads over all rows.
    batch : int
        Calls per timed iteration, back to back after the barrier; the iteration's time is
        their mean (nccl-tests' way; it averages a busy host's wake-up delays).
    passes : int
        Launch every world size this many times, in turn (2, 4, 2, 4, ...), each launch taking
        its share of ``iterations``; the rows pool all samples. Spreads a slow spell of the
        machine over the world sizes too.
    port : int or None
        Rendezvous port on 127.0.0.1 (None: a free one per world size).
    init_timeout_s : float
        ``init_process_group`` timeout; also bounds every collective.
    timeout_s : float
        Wall-clock limit of one world size, start-up included.
    """

    sizes: tuple[int, ...]
    backend: str = "gloo"
    world_sizes: tuple[int, ...] = (2,)
    collectives: tuple[str, ...] = COLLECTIVES
    iterations: int = 20
    warmups: int = 3
    rounds: int = 1
    batch: int = 1
    passes: int = 1
    port: int | None = None
    init_timeout_s: float = 60.0
    timeout_s: float = 600.0
    #: Tests only: this rank exits abruptly after start-up (a crashed worker).
    crash_rank: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SpecError(
                f"--backend: unknown backend {self.backend!r} (known: {', '.join(BACKENDS)})"
            )
        if not self.world_sizes:
            raise SpecError("--world-size: give at least one world size")
        for world in self.world_sizes:
            _positive(world, "--world-size")
        if not self.sizes:
            raise SpecError("--sizes: give at least one size")
        for nbytes in self.sizes:
            if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
                raise SpecError(f"--sizes: must be sizes >= 0, got {nbytes!r}")
        for nbytes in self.sizes:
            least = 4 * max(self.world_sizes)
            if nbytes < least:
                raise SpecError(
                    f"--sizes: {nbytes} B is less than one float32 element per rank "
                    f"({least} B at world size {max(self.world_sizes)})"
                )
        if not self.collectives:
            raise SpecError("--collectives: give at least one collective")
        for name in self.collectives:
            if name not in COLLECTIVES:
                raise SpecError(
                    f"--collectives: unknown collective {name!r} (known: {', '.join(COLLECTIVES)})"
                )
        _positive(self.iterations, "--iterations")
        if isinstance(self.warmups, bool) or not isinstance(self.warmups, int) or self.warmups < 0:
            raise SpecError(f"--warmups: must be an integer >= 0, got {self.warmups!r}")
        _positive(self.rounds, "--rounds")
        _positive(self.batch, "--batch")
        _positive(self.passes, "--passes")
        if self.port is not None and (
            isinstance(self.port, bool)
            or not isinstance(self.port, int)
            or not 0 < self.port < 65536
        ):
            raise SpecError(f"--port: must be an integer in 1..65535, got {self.port!r}")
        for name, value in (("--init-timeout", self.init_timeout_s), ("--timeout", self.timeout_s)):
            if not (isinstance(value, int | float) and value > 0):
                raise SpecError(f"{name}: must be > 0 seconds, got {value!r}")
        self._check_memory()

    def _check_memory(self) -> None:
        """SpecError, in one line, when the largest launch would not fit half the memory
        available: every rank a process with torch imported, and under gloo its buffers."""
        from commsim.budget import memory_budget

        world, top = max(self.world_sizes), max(self.sizes)
        buffers = BUFFER_FACTOR * top if self.backend == "gloo" else 0  # nccl: on the GPU
        need, budget = world * (WORKER_BYTES + buffers), memory_budget()
        if need > budget:
            raise SpecError(
                f"--world-size {world} with --sizes up to {top} B: its processes would hold "
                f"about {need / 1e6:.0f} MB, more than the {budget / 1e6:.0f} MB that half the "
                "memory available allows: fewer ranks or smaller sizes"
            )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_port(port: int) -> None:
    """Raise CommsimError if 127.0.0.1:``port`` cannot be bound (taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise CommsimError(
                f"--port {port}: 127.0.0.1:{port} is taken ({exc.strerror or exc}); "
                "choose another port or leave --port out for a free one"
            ) from None


def check_backend(spec: MeasureSpec) -> str:
    """Import torch and check that ``spec.backend`` can run ``spec.world_sizes``.

    Returns the torch version. Raises CommsimError when torch is missing, the backend is not
    built in, or nccl has no (or too few) GPUs.
    """
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise CommsimError(
            "measure needs PyTorch: pip install 'commsim[torch]' (or torch itself)"
        ) from None
    if not dist.is_available():
        raise CommsimError(f"torch {torch.__version__} was built without torch.distributed")
    if spec.backend == "gloo" and not dist.is_gloo_available():
        raise CommsimError(f"--backend gloo: torch {torch.__version__} has no gloo backend")
    if spec.backend == "nccl":
        if not torch.cuda.is_available():
            raise CommsimError(
                "--backend nccl: needs CUDA GPUs, but torch.cuda.is_available() is False "
                "(use --backend gloo on CPUs)"
            )
        if not dist.is_nccl_available():
            raise CommsimError(f"--backend nccl: torch {torch.__version__} has no nccl backend")
        gpus = torch.cuda.device_count()
        if max(spec.world_sizes) > gpus:
            raise CommsimError(
                f"--world-size {max(spec.world_sizes)}: nccl needs one GPU per rank, "
                f"this machine has {gpus}"
            )
    return str(torch.__version__)


def measure(spec: MeasureSpec, progress: Progress | None = None) -> list[Measurement]:
    """Run every world size of ``spec`` and return its rows (world sizes in the given order).

    Raises
    ------
    CommsimError
        torch or the backend is missing, the port is taken, a rank fails or dies, or a world
        size outlives ``spec.timeout_s``. No spawned process is left running.
    """
    check_backend(spec)
    if spec.port is not None:
        check_port(spec.port)
    raw: dict[tuple[int, str, int], dict[str, Any]] = {}
    for index in range(spec.passes):
        for world in spec.world_sizes:
            share = spec.iterations // spec.passes + (index < spec.iterations % spec.passes)
            if share == 0:
                continue
            for row in _run_world(spec, world, share, progress):
                key = (world, str(row["collective"]), int(row["nbytes"]))
                if key in raw:
                    raw[key]["samples"].extend(row["samples"])
                else:
                    raw[key] = row
    return [summarize(row) for row in raw.values()]


def summarize(raw: dict[str, Any]) -> Measurement:
    """A worker's raw row (with its ``samples``) as a :class:`Measurement`: the median of the
    samples as ``time_s``, their 10th/90th percentiles, minimum and maximum."""
    samples = [float(t) for t in raw["samples"]]
    fields = {k: v for k, v in raw.items() if k != "samples"}
    return Measurement.from_dict(
        fields
        | {
            "time_s": statistics.median(samples),
            "time_p10_s": percentile(samples, 10),
            "time_p90_s": percentile(samples, 90),
            "time_min_s": min(samples),
            "time_max_s": max(samples),
            "iterations": len(samples),
        }
    )


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of a non-empty sequence.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 10)
    1.3
    """
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _run_world(
    spec: MeasureSpec, world: int, iterations: int, progress: Progress | None
) -> list[dict[str, Any]]:
    from commsim.measure.worker import WorkerArgs

    port = spec.port if spec.port is not None else free_port()
    args = WorkerArgs(
        backend=spec.backend,
        world_size=world,
        port=port,
        collectives=spec.collectives,
        sizes=spec.sizes,
        iterations=iterations,
        warmups=spec.warmups,
        rounds=spec.rounds,
        batch=spec.batch,
        init_timeout_s=float(spec.init_timeout_s),
        crash_rank=spec.crash_rank,
    ).to_json()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONWARNINGS"] = "ignore::FutureWarning"
    # the workers import this very commsim, installed or not
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    ranks: list[_Rank] = []
    try:
        for rank in range(world):
            ranks.append(_Rank.start(rank, args, env))
        raw = _collect(spec, world, port, ranks, progress)
    finally:
        for r in ranks:
            r.stop()
    return raw


class _Rank:
    """One worker process: its pipe of JSON lines and a file holding its stderr."""

    def __init__(self, rank: int, proc: subprocess.Popen[bytes], pipe: int, log: Any) -> None:
        self.rank = rank
        self.proc = proc
        self.pipe = pipe
        self.log = log
        self.buffer = b""
        self.open = True

    @classmethod
    def start(cls, rank: int, args: str, env: dict[str, str]) -> _Rank:
        read_fd, write_fd = os.pipe()
        log = tempfile.TemporaryFile()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "commsim.measure.worker", str(rank), str(write_fd), args],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
            )
        except BaseException:
            os.close(read_fd)
            log.close()
            raise
        finally:
            os.close(write_fd)
        os.set_blocking(read_fd, False)
        return cls(rank, proc, read_fd, log)

    def read(self) -> list[dict[str, Any]]:
        """The complete messages available now (non-blocking)."""
        if not self.open:
            return []
        try:
            chunk = os.read(self.pipe, 1 << 16)
        except BlockingIOError:
            return []
        if not chunk:
            self.open = False
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def tail(self, limit: int = 400) -> str:
        """The last characters the process wrote to stdout/stderr, on one line."""
        try:
            self.log.seek(0)
            text = self.log.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        return _one_line(text[-4 * limit :], limit)

    def stop(self) -> None:
        """Terminate, then kill, then reap the process; close the pipe and the log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.pipe)
        self.log.close()


def _collect(
    spec: MeasureSpec,
    world: int,
    port: int,
    ranks: Sequence[_Rank],
    progress: Progress | None,
) -> list[dict[str, object]]:
    """Read the pipes until rank 0 delivered its rows and every rank exited cleanly."""
    where = f"measure --backend {spec.backend} --world-size {world}"
    deadline = time.monotonic() + spec.timeout_s
    rows: list[dict[str, object]] | None = None
    errors: dict[int, str] = {}
    failed_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for r in ranks:
            selector.register(r.pipe, selectors.EVENT_READ, r)
        while True:
            for key, _ in selector.select(timeout=_POLL_S):
                r = key.data
                for message in r.read():
                    kind = message.get("kind")
                    if kind == "progress" and progress is not None:
                        progress(
                            world,
                            int(message["done"]),
                            int(message["total"]),
                            str(message["label"]),
                        )
                    elif kind == "rows":
                        rows = list(message["rows"])
                    elif kind == "error":
                        errors.setdefault(r.rank, str(message["message"]))
                        if failed_at is None:
                            failed_at = time.monotonic()
                if not r.open:
                    selector.unregister(r.pipe)
            codes = [r.proc.poll() for r in ranks]
            if failed_at is None and any(code not in (None, 0) for code in codes):
                failed_at = time.monotonic()
            if failed_at is not None and (
                time.monotonic() - failed_at > _GRACE_S or all(c is not None for c in codes)
            ):
                cause = _cause(errors, codes, port, ranks)
                raise CommsimError(f"{where}: {cause}; all workers stopped")
            if rows is not None and all(code == 0 for code in codes):
                return rows
            if all(code == 0 for code in codes) and not selector.get_map():
                raise CommsimError(f"{where}: rank 0 exited without reporting its rows")
            if time.monotonic() > deadline:
                raise CommsimError(
                    f"{where}: did not finish within {spec.timeout_s:g} s (--timeout); "
                    "all workers stopped"
                )


def _cause(
    errors: dict[int, str], codes: list[int | None], port: int, ranks: Sequence[_Rank]
) -> str:
    """The most telling reason for a failed world, as a phrase."""
    for rank, code in enumerate(codes):
        if code not in (None, 0, 3) and rank not in errors:  # died without a word
            how = f"signal {-code}" if code < 0 else f"exit status {code}"
            tail = ranks[rank].tail()
            return f"rank {rank} died ({how})" + (f": {tail}" if tail else "")
    if errors:
        rank = min(errors)
        for r, text in errors.items():  # prefer a root cause to a peer's 'connection closed'
            lowered = text.lower()
            if "address already in use" in lowered or "eaddrinuse" in lowered:
                return f"127.0.0.1:{port} is taken ({_one_line(text)})"
            if "closed" not in lowered and "reset" not in lowered:
                rank = r
                break
        return f"rank {rank} failed: {_one_line(errors[rank])}"
    rank = next(r for r, code in enumerate(codes) if code not in (None, 0))
    return f"rank {rank} exited with status {codes[rank]}"


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
