"""gloo's algorithms as PyTorch's ProcessGroupGloo runs them: message counts and sizes, the
local copies, ``--chunks``, and how ``auto`` and the closed forms treat them."""

from __future__ import annotations

from collections import Counter

import pytest

from commsim.algorithms import Call, build_schedule, candidates
from commsim.algorithms.gloo import reduce_segments, ring_segments
from commsim.api import simulate
from commsim.collectives import Collective
from commsim.engine.analytic import predict
from commsim.errors import SpecError
from commsim.topology import fully_connected, shared

MiB = 1 << 20


def _schedule(coll: Collective, p: int, n: int, chunks: int | None = None):  # type: ignore[no-untyped-def]
    return build_schedule(Call(collective=coll, ranks=p, nbytes=n, chunks=chunks), "gloo")


def _sent(schedule) -> Counter[int]:  # type: ignore[no-untyped-def]
    """Bytes each rank sends to other ranks."""
    out: Counter[int] = Counter()
    for t in schedule.transfers:
        if t.src != t.dst:
            out[t.src] += t.nbytes
    return out


def _local(schedule) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    return [(t.src, t.nbytes) for t in schedule.transfers if t.src == t.dst]


@pytest.mark.parametrize(("p", "n"), [(2, 64 << 10), (4, 16 * MiB), (3, 5 * MiB + 7), (8, 2 * MiB)])
def test_all_reduce_is_gloos_segmented_ring(p: int, n: int) -> None:
    """2 (p-1) S segment messages per rank, each rank sending 2 (p-1)/p of the buffer to
    rank - 1, in segments of at most 1 MiB; no local copies (PyTorch reduces in place)."""
    seg, per_rank = ring_segments(n, p)
    schedule = _schedule(Collective.ALL_REDUCE, p, n)
    assert per_rank >= 2 and seg <= MiB
    assert len(schedule) == 2 * (p - 1) * per_rank * p
    assert {(t.src - t.dst) % p for t in schedule.transfers} == {1}
    assert max(t.nbytes for t in schedule.transfers) == seg
    assert sum(_sent(schedule).values()) == pytest.approx(2 * (p - 1) * n, rel=0.01)
    assert not _local(schedule)


def test_reduce_scatter_is_a_clone_an_all_reduce_and_a_copy_out() -> None:
    """PyTorch's reduce_scatter_tensor on gloo: clone n, all-reduce n, copy out n/p."""
    p, n = 4, 4 * MiB
    rs, ar = _schedule(Collective.REDUCE_SCATTER, p, n), _schedule(Collective.ALL_REDUCE, p, n)
    assert _sent(rs) == _sent(ar)
    assert sorted(_local(rs)) == sorted(
        [(r, n) for r in range(p)] + [(r, n // p) for r in range(p)]
    )


def test_all_gather_copies_around_gloos_ring() -> None:
    """Input copied into a flat output (n/p), ring to rank + 1 in halves (2(p-1) messages per
    rank), flat output copied into the output tensor (n)."""
    p, n = 4, 8 * MiB
    schedule = _schedule(Collective.ALL_GATHER, p, n)
    ring = [t for t in schedule.transfers if t.src != t.dst]
    assert len(ring) == 2 * (p - 1) * p
    assert {(t.dst - t.src) % p for t in ring} == {1}
    assert {t.nbytes for t in ring} == {n // p // 2}
    assert sorted(_local(schedule)) == sorted(
        [(r, n // p) for r in range(p)] + [(r, n) for r in range(p)]
    )


def test_reduce_keeps_the_older_loop_and_gathers_to_the_root() -> None:
    """reduce.cc runs p S - 2 iterations (S - 2 redundant sends per rank when S > 2), then each
    rank sends its chunk to the root."""
    p, n, root = 2, 16 * MiB, 1
    seg, per_rank = reduce_segments(n, p)
    assert (seg, per_rank) == (MiB, 8)
    schedule = build_schedule(
        Call(collective=Collective.REDUCE, ranks=p, nbytes=n, root=root), "gloo"
    )
    ring = [t for t in schedule.transfers if (t.src - t.dst) % p == 1 and t.nbytes == seg]
    gather = [t for t in schedule.transfers if t.dst == root and t.nbytes == per_rank * seg]
    assert len(ring) >= p * (p * per_rank - 2)
    assert [t.src for t in gather] == [0]


def test_broadcast_is_gloos_binomial_tree() -> None:
    """Round k: virtual rank v < 2^k sends the buffer to v + 2^k (relative to the root)."""
    schedule = build_schedule(
        Call(collective=Collective.BROADCAST, ranks=6, nbytes=1000, root=2), "gloo"
    )
    pairs = [((t.src - 2) % 6, (t.dst - 2) % 6) for t in schedule.transfers]
    assert pairs == [(0, 1), (0, 2), (1, 3), (0, 4), (1, 5)]


def test_chunks_override_gloos_pieces() -> None:
    """--chunks sets the ring's segments per rank and the all_gather pieces per block."""
    ar = _schedule(Collective.ALL_REDUCE, 4, 4 * MiB, chunks=3)
    assert ar.chunks == 3 and len(ar) == 2 * 3 * 3 * 4
    ag = _schedule(Collective.ALL_GATHER, 4, 4 * MiB, chunks=5)
    assert len([t for t in ag.transfers if t.src != t.dst]) == 5 * 3 * 4


def test_gloo_is_not_automatic_and_has_no_closed_form() -> None:
    """auto never picks gloo by itself; the analytic engine refuses it with a clear error;
    a topology that maps a collective to gloo gets it from auto."""
    call = Call(collective=Collective.ALL_REDUCE, ranks=4, nbytes=MiB)
    assert "gloo" not in candidates(call)
    with pytest.raises(SpecError, match="no closed form.*--engine des"):
        predict(call, fully_connected(4, latency="1us", bandwidth="1GB/s"), "gloo")
    host = shared(4, latency="100us", bandwidth="2GB/s", algorithms={"all_reduce": "gloo"})
    assert simulate("all_reduce", host, MiB).algorithm == "gloo"
    assert simulate("all_gather", host, MiB).algorithm != "gloo"


def test_local_copies_cost_only_on_a_shared_host() -> None:
    """On a network topology reduce_scatter (all-reduce plus local copies) takes exactly the
    all-reduce's time; on a shared host its copies cost medium time."""
    net = fully_connected(4, latency="5us", bandwidth="10GB/s")
    host = shared(4, latency="5us", bandwidth="10GB/s")
    rs = simulate("reduce_scatter", net, 4 * MiB, algorithm="gloo").time_s
    ar = simulate("all_reduce", net, 4 * MiB, algorithm="gloo").time_s
    assert rs == pytest.approx(ar)
    rs = simulate("reduce_scatter", host, 4 * MiB, algorithm="gloo").time_s
    ar = simulate("all_reduce", host, 4 * MiB, algorithm="gloo").time_s
    assert rs > ar * 1.2
