"""Ring algorithms: step structure, root handling, link order and alpha-beta times."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsim.algorithms import Call, build_schedule
from commsim.algorithms.ring import default_chunks
from commsim.checker import check
from commsim.collectives import Collective, segment
from commsim.schedule import OpKind

#: Example budgets scale with the hypothesis profile (tests/conftest.py): x1, or x20 under fuzz.
EXAMPLE_SCALE = settings.default.max_examples // 100

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
BC, RED = Collective.BROADCAST, Collective.REDUCE


def _ring(coll: Collective, p: int, n: int, chunks: int | None = None, root: int = 0):
    return build_schedule(
        Call(collective=coll, ranks=p, nbytes=n, chunks=chunks, root=root), "ring"
    )


@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_all_reduce_is_reduce_scatter_then_all_gather(p: int) -> None:
    """With one chunk, ring all-reduce is 2(p-1) steps; at step s rank i sends one segment to
    i+1: segment (i-s-1) mod p reduced during the first p-1 steps, then segment (i-s') mod p
    copied during the next p-1 (s' = s-p+1)."""
    n = 10 * p + 3
    transfers = _ring(AR, p, n, 1).transfers
    assert len(transfers) == 2 * (p - 1) * p
    for k, t in enumerate(transfers):
        step, i = divmod(k, p)
        assert (t.src, t.dst) == (i, (i + 1) % p)
        if step < p - 1:
            want, op = (i - step - 1) % p, OpKind.REDUCE
        else:
            want, op = (i - (step - p + 1)) % p, OpKind.COPY
        lo, hi = segment(want, p, n)
        assert (t.offset, t.nbytes, t.op) == (lo, hi - lo, op)


@pytest.mark.parametrize("p", [2, 3, 4, 7, 16])
def test_all_reduce_time(p: int, timer) -> None:
    """Uncontended ring all-reduce of n bytes takes 2(p-1)(alpha + n/(p beta))."""
    n = 1000 * p
    assert timer(_ring(AR, p, n), 2.0, 10.0) == pytest.approx(2 * (p - 1) * (2.0 + n / p / 10.0))


@pytest.mark.parametrize(("p", "c"), [(2, 1), (4, 3), (8, 8), (5, 16)])
def test_broadcast_pipeline_time(p: int, c: int, timer) -> None:
    """Ring broadcast of n bytes in c pieces takes (p-2+c)(alpha + n/(c beta)) (CONTRACT.md)."""
    n = 480 * c
    got = timer(_ring(BC, p, n, c), 3.0, 7.0)
    assert got == pytest.approx((p - 2 + c) * (3.0 + n / c / 7.0))
    assert timer(_ring(RED, p, n, c), 3.0, 7.0) == pytest.approx(got)


@pytest.mark.parametrize("root", [0, 2, 4])
def test_rooted_chains_honour_root(root: int) -> None:
    """Broadcast is a chain root -> root+1 -> ...; reduce is a chain root+1 -> ... -> root."""
    p = 5
    bc = _ring(BC, p, 100, 1, root).transfers
    assert [(t.src, t.dst) for t in bc] == [((root + k) % p, (root + k + 1) % p) for k in range(4)]
    red = _ring(RED, p, 100, 1, root).transfers
    assert [(t.src, t.dst) for t in red] == [
        ((root + 1 + k) % p, (root + 2 + k) % p) for k in range(4)
    ]
    assert all(t.op is OpKind.REDUCE for t in red) and red[-1].dst == root


def test_broadcast_pieces_on_a_link_are_serialized() -> None:
    """Each piece a rank forwards waits for the previous piece on the same link to arrive and
    for its own arrival from upstream: exactly those two dependencies."""
    schedule = _ring(BC, 4, 1000, 5)
    previous: dict[tuple[int, int], int] = {}
    arrived: dict[tuple[int, int], int] = {}  # (rank, offset) -> transfer delivering it
    for k, t in enumerate(schedule.transfers):
        want = {previous[(t.src, t.dst)]} if (t.src, t.dst) in previous else set()
        if (t.src, t.offset) in arrived:
            want.add(arrived[(t.src, t.offset)])
        assert set(t.deps) == want
        previous[(t.src, t.dst)] = k
        arrived[(t.dst, t.offset)] = k


def test_all_gather_chunks_split_each_segment(timer) -> None:
    """With --chunks c every step sends its segment as c pieces, one at a time per link:
    (p-1) c (alpha + n/(p c beta))."""
    p, c, n = 4, 3, 1200
    schedule = _ring(AG, p, n, c)
    assert len(schedule) == (p - 1) * p * c
    assert {t.nbytes for t in schedule.transfers} == {n // p // c}
    assert timer(schedule, 2.0, 1.0) == pytest.approx((p - 1) * c * (2.0 + n / p / c))


def test_default_chunks() -> None:
    """One segment per step by default; the chains use ceil(n / 512 KiB) pieces, 1..64."""
    for coll in (AR, AG, RS):
        assert default_chunks(Call(collective=coll, ranks=8, nbytes=2**30)) == 1
    sizes = {1000: 1, 512 * 1024: 1, 512 * 1024 + 1: 2, 8 * 2**20: 16, 2**30: 64}
    for n, want in sizes.items():
        for coll in (BC, RED):
            assert default_chunks(Call(collective=coll, ranks=8, nbytes=n)) == want


@settings(max_examples=60 * EXAMPLE_SCALE)
@given(p=st.integers(1, 24), n=st.integers(0, 5000), chunks=st.integers(1, 5))
def test_all_reduce_property(p: int, n: int, chunks: int) -> None:
    """For any (p, n, chunks) ring all-reduce passes the checker, only uses links i -> i+1,
    moves 2(p-1)n bytes in all and at most 2(p-1) p chunks transfers."""
    schedule = _ring(AR, p, n, chunks)
    check(schedule)
    assert all(t.dst == (t.src + 1) % p for t in schedule.transfers)
    assert sum(t.nbytes for t in schedule.transfers) == 2 * (p - 1) * n
    assert len(schedule) <= 2 * (p - 1) * p * chunks
