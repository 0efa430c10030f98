"""Recursive doubling and Rabenseifner: fold, exchanges, block layout and alpha-beta times."""

from __future__ import annotations

import pytest

from commsim.algorithms import Call, build_schedule
from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.schedule import OpKind

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER


def _build(name: str, coll: Collective, p: int, n: int, chunks: int | None = None):
    return build_schedule(Call(collective=coll, ranks=p, nbytes=n, chunks=chunks), name)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_rabenseifner_all_reduce_time(p: int, timer) -> None:
    """Power of two: 2 log2(p) alpha + 2 (p-1)/p n/beta."""
    n, log = 64 * p, p.bit_length() - 1
    got = timer(_build("rabenseifner", AR, p, n), 3.0, 2.0)
    assert got == pytest.approx(2 * log * 3.0 + 2 * (p - 1) / p * n / 2.0)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_rabenseifner_reduce_scatter(p: int, timer) -> None:
    """Recursive halving ends with rank r holding segment r (the partner at distance p/2
    first), in log2(p) alpha + (p-1)/p n/beta."""
    n, log = 64 * p, p.bit_length() - 1
    schedule = _build("rabenseifner", RS, p, n)
    assert timer(schedule, 3.0, 2.0) == pytest.approx(log * 3.0 + (p - 1) / p * n / 2.0)
    first = schedule.transfers[0]
    assert (first.src, first.dst, first.offset, first.nbytes) == (0, p // 2, n // 2, n // 2)
    last_into = {t.dst: t for t in schedule.transfers}
    for r, t in last_into.items():
        assert (t.offset, t.offset + t.nbytes) == segment(r, p, n)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_recursive_doubling_times(p: int, timer) -> None:
    """All-reduce: log2(p) (alpha + n/beta); all-gather: log2(p) alpha + (p-1)/p n/beta."""
    n, log = 64 * p, p.bit_length() - 1
    assert timer(_build("recursive_doubling", AR, p, n), 3.0, 2.0) == pytest.approx(
        log * (3.0 + n / 2.0)
    )
    assert timer(_build("recursive_doubling", AG, p, n), 3.0, 2.0) == pytest.approx(
        log * 3.0 + (p - 1) / p * n / 2.0
    )


def test_fold_numbering() -> None:
    """Non-power of two: even ranks 2i < 2 rem fold into 2i+1 first and get the result back
    last; the core (1, 3, 5, 6 of 7) exchanges at distances 1, 2 in MPICH's numbering."""
    call = Call(collective=Collective.ALL_REDUCE, ranks=7, nbytes=70, chunks=1)
    moves = [(t.src, t.dst, t.op) for t in build_schedule(call, "recursive_doubling").transfers]
    assert moves[:3] == [(0, 1, OpKind.REDUCE), (2, 3, OpKind.REDUCE), (4, 5, OpKind.REDUCE)]
    assert moves[-3:] == [(1, 0, OpKind.COPY), (3, 2, OpKind.COPY), (5, 4, OpKind.COPY)]
    assert [m[:2] for m in moves[3:7]] == [(1, 3), (3, 1), (5, 6), (6, 5)]
    assert [m[:2] for m in moves[7:11]] == [(1, 5), (5, 1), (3, 6), (6, 3)]
    assert len(build_schedule(Call(collective=Collective.ALL_REDUCE, ranks=1, nbytes=8),
                              "recursive_doubling")) == 0


def test_non_power_of_two_all_reduce_folds(timer) -> None:
    """p = 6: 0 and 2 reduce their buffers into 1 and 3, the four core ranks exchange for two
    steps, then 1 and 3 copy the result back: 4 (alpha + n/beta)."""
    n = 60
    schedule = _build("recursive_doubling", AR, 6, n)
    head, tail = schedule.transfers[:2], schedule.transfers[-2:]
    assert [(t.src, t.dst, t.op) for t in head] == [(0, 1, OpKind.REDUCE), (2, 3, OpKind.REDUCE)]
    assert [(t.src, t.dst, t.op) for t in tail] == [(1, 0, OpKind.COPY), (3, 2, OpKind.COPY)]
    assert timer(schedule, 1.0, 1.0) == pytest.approx(4 * (1.0 + n))


def test_exchange_is_a_rendezvous() -> None:
    """Both directions of a recursive-doubling exchange wait for the same transfers: the
    data of both ranks and both links' previous pieces (an MPI_Sendrecv)."""
    schedule = _build("recursive_doubling", AR, 8, 800, 2)
    by_pair: dict[tuple[int, int], list] = {}
    for t in schedule.transfers:
        by_pair.setdefault((t.src, t.dst), []).append(t)
    for (a, b), ts in by_pair.items():
        for mine, theirs in zip(ts, by_pair[(b, a)], strict=True):
            assert mine.deps == theirs.deps and mine.offset == theirs.offset


def test_all_gather_folded_partner_sends_non_contiguous_parts() -> None:
    """p = 6: rank 3 returns everything but segment 2 to rank 2, as two concurrent parts of
    one message with the same dependencies."""
    n = 60
    schedule = _build("recursive_doubling", AG, 6, n)
    back = [t for t in schedule.transfers if (t.src, t.dst) == (3, 2)]
    assert [(t.offset, t.offset + t.nbytes) for t in back] == [(0, 20), (30, 60)]
    assert back[0].deps == back[1].deps


@pytest.mark.parametrize(
    ("name", "coll"),
    [
        ("recursive_doubling", RS),
        ("rabenseifner", AG),
        ("recursive_doubling", Collective.BROADCAST),
    ],
)
def test_unsupported_collectives(name: str, coll: Collective) -> None:
    """Asking for a collective the algorithm does not implement is a ScheduleError."""
    with pytest.raises(ScheduleError, match=f"{name}.*cannot run {coll.value}"):
        _build(name, coll, 4, 100)
