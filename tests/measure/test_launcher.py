"""The launcher: a small real gloo run, and its error paths: one-line errors, no process left.

Each test that starts workers costs a few seconds (every rank imports torch).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from commsim.errors import CommsimError, SpecError
from commsim.measure import MeasureSpec, measure

torch = pytest.importorskip("torch")


def _children() -> set[int]:
    """Live (not zombie) processes whose parent is this test process."""
    out = set()
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(entry.name))
    return out


@pytest.fixture
def no_leftovers():  # type: ignore[no-untyped-def]
    """Fails the test if it leaves a child process behind."""
    before = _children()
    yield
    assert _children() - before == set()


def test_a_small_run_gives_every_row(no_leftovers: None) -> None:
    """2 ranks, all six operations, two sizes: one row each, with spread and environment."""
    spec = MeasureSpec(sizes=(4096, 65536), world_sizes=(2,), iterations=3, warmups=1, batch=2)
    progress: list[tuple[int, int, int, str]] = []
    rows = measure(spec, lambda *a: progress.append(a))
    assert [(r.collective, r.nbytes) for r in rows] == [
        (c, n)
        for c in ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce", "sendrecv")
        for n in (4096, 65536)
    ]
    for row in rows:
        assert row.ranks == row.world_size == 2 and row.iterations == 3
        assert 0 < row.time_min_s <= row.time_s <= row.time_max_s
        assert row.torch_version == torch.__version__ and row.device == "cpu"
    assert progress[-1][:3] == (2, 12, 12)


def test_passes_pool_their_samples(no_leftovers: None) -> None:
    """Two launches per world size split the iterations and pool their samples."""
    spec = MeasureSpec(
        sizes=(4096,), world_sizes=(2,), collectives=("all_reduce",), iterations=3, passes=2
    )
    (row,) = measure(spec)
    assert row.iterations == 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"backend": "mpi"}, "--backend: unknown backend 'mpi'"),
        ({"world_sizes": (0,)}, "--world-size: must be a positive integer, got 0"),
        ({"world_sizes": ()}, "--world-size: give at least one world size"),
        ({"sizes": (2,)}, "--sizes: 2 B is less than one float32 element per rank"),
        ({"collectives": ("gather",)}, "--collectives: unknown collective 'gather'"),
        ({"iterations": 0}, "--iterations: must be a positive integer"),
        ({"port": 70000}, "--port: must be an integer in 1..65535"),
        ({"timeout_s": 0}, "--timeout: must be > 0 seconds"),
    ],
)
def test_bad_specs_are_refused_before_anything_starts(change: dict, message: str) -> None:
    """Every bad field is a SpecError naming the flag."""
    with pytest.raises(SpecError, match=message):
        MeasureSpec(**({"sizes": (4096,)} | change))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has GPUs")
def test_nccl_without_gpus() -> None:
    """nccl on a machine without CUDA is a clear error (use gloo)."""
    with pytest.raises(CommsimError, match="needs CUDA GPUs"):
        measure(MeasureSpec(sizes=(4096,), backend="nccl"))


def test_a_taken_port(no_leftovers: None) -> None:
    """--port naming a port something listens on is an error naming it; nothing starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(CommsimError, match=f"--port {port}: 127.0.0.1:{port} is taken"):
            measure(MeasureSpec(sizes=(4096,), port=port))


def test_a_crashed_worker_stops_the_world(no_leftovers: None) -> None:
    """A rank dying mid-run (rank 1 exits abruptly) is one line naming the world size and the
    rank; its peers, stuck in a collective, are stopped."""
    spec = MeasureSpec(sizes=(4096,), world_sizes=(3,), crash_rank=1, init_timeout_s=60)
    with pytest.raises(CommsimError) as info:
        measure(spec)
    message = str(info.value)
    assert "\n" not in message
    assert "--world-size 3" in message and "rank 1 died (exit status 4)" in message
    assert message.endswith("all workers stopped")


def test_a_world_that_outlives_its_timeout_is_killed(no_leftovers: None) -> None:
    """--timeout bounds a launch (start-up included): its processes are killed."""
    spec = MeasureSpec(sizes=(1 << 24,), world_sizes=(2,), iterations=50, timeout_s=1.0)
    with pytest.raises(CommsimError, match=r"did not finish within 1 s \(--timeout\)"):
        measure(spec)
