"""The symbolic checker accepts correct schedules and rejects each kind of wrong one with a
message naming the transfer, ranks and bytes."""

from __future__ import annotations

import dataclasses

import pytest

from commsim.algorithms import Call, build_schedule
from commsim.checker import check
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import OpKind, Schedule, Transfer

C, R = OpKind.COPY, OpKind.REDUCE


def _schedule(
    coll: Collective, ranks: int, nbytes: int, *transfers: Transfer, root: int = 0
) -> Schedule:
    return Schedule(coll, "hand", ranks, nbytes, root, 1, tuple(transfers))


def _drop(schedule: Schedule, index: int) -> Schedule:
    """``schedule`` without transfer ``index`` (dependencies on it and renumbering fixed)."""
    kept = []
    for i, t in enumerate(schedule.transfers):
        if i == index:
            continue
        deps = tuple(d - (d > index) for d in t.deps if d != index)
        kept.append(dataclasses.replace(t, deps=deps))
    return dataclasses.replace(schedule, transfers=tuple(kept))


def test_accepts_a_hand_made_broadcast() -> None:
    """A two-hop chain with its dependency is a correct broadcast."""
    check(
        _schedule(
            Collective.BROADCAST, 3, 10, Transfer(0, 1, 0, 10, C), Transfer(1, 2, 0, 10, C, (0,))
        )
    )


def test_rejects_missing_transfer() -> None:
    """Dropping the last all-gather transfer leaves a rank without a segment."""
    good = build_schedule(Call(collective=Collective.ALL_GATHER, ranks=4, nbytes=40), "ring")
    check(good)
    with pytest.raises(
        ScheduleError,
        match=r"all_gather: rank 0 holds nothing on bytes "
        r"\[10, 20\) instead of \{1\}",
    ):
        check(_drop(good, len(good) - 1))


def test_rejects_missing_contribution() -> None:
    """A ring all-reduce missing one reduce ends without that rank's contribution."""
    good = build_schedule(Call(collective=Collective.ALL_REDUCE, ranks=3, nbytes=30), "ring")
    with pytest.raises(
        ScheduleError,
        match=r"all_reduce: rank \d holds .* instead of "
        r"\{0, 1, 2\}; missing",
    ):
        check(_drop(good, 0))


def test_rejects_double_reduce() -> None:
    """Reducing the same partial into the root twice counts it twice."""
    bad = _schedule(Collective.REDUCE, 2, 8, Transfer(1, 0, 0, 8, R), Transfer(1, 0, 0, 8, R, (0,)))
    with pytest.raises(
        ScheduleError,
        match=r"double counting: transfer #1 \(1->0\) adds "
        r"contributions \{1\} to rank 0 bytes \[0, 8\)",
    ):
        check(bad)


def test_rejects_read_before_arrival() -> None:
    """Forwarding without depending on the transfer that delivers the data reads nothing."""
    bad = _schedule(Collective.BROADCAST, 3, 10, Transfer(0, 1, 0, 10, C), Transfer(1, 2, 0, 10, C))
    with pytest.raises(
        ScheduleError,
        match=r"transfer #1 \(1->2\) reads rank 1 bytes "
        r"\[0, 10\), which it does not hold yet",
    ):
        check(bad)


def test_rejects_read_race() -> None:
    """A read of bytes another transfer writes, unordered with it, is a race: the reader
    waits on something unrelated, so it may start before or after the write lands."""
    bad = _schedule(
        Collective.ALL_REDUCE,
        4,
        8,
        Transfer(2, 3, 0, 8, R),  # unrelated
        Transfer(0, 1, 0, 8, R),  # writes rank 1
        Transfer(1, 2, 0, 8, R, (0,)),  # reads rank 1, ordered only after #0
    )
    with pytest.raises(
        ScheduleError,
        match=r"race: transfer #2 \(1->2\) reads rank 1 bytes "
        r"\[0, 8\) while transfer #1 \(0->1\) writes them",
    ):
        check(bad)


def test_rejects_write_race() -> None:
    """Two unordered copies into the same bytes race."""
    bad = _schedule(
        Collective.BROADCAST,
        3,
        10,
        Transfer(0, 1, 0, 10, C),
        Transfer(0, 2, 0, 10, C),
        Transfer(1, 2, 0, 10, C, (0,)),
    )
    with pytest.raises(ScheduleError, match=r"race: transfers #1 .* and #2 .* both write rank 2"):
        check(bad)


def test_local_copies_are_checked_like_transfers() -> None:
    """A local copy (src == dst, copy) leaves the data as it is and is accepted when ordered;
    unordered with a transfer writing the same bytes it is a race."""
    check(_schedule(Collective.BROADCAST, 2, 4, Transfer(0, 0, 0, 4, C),
                    Transfer(0, 1, 0, 4, C, (0,)), Transfer(1, 1, 0, 4, C, (1,))))
    with pytest.raises(ScheduleError, match="race"):
        check(_schedule(Collective.BROADCAST, 2, 4, Transfer(0, 1, 0, 4, C),
                        Transfer(1, 1, 0, 4, C)))


def test_accepts_concurrent_reduces_and_sendrecv() -> None:
    """Concurrent reduces into one rank commute; a symmetric exchange whose two directions
    wait for the same transfers reads both buffers before either arrives (MPI_Sendrecv)."""
    check(_schedule(Collective.REDUCE, 3, 4, Transfer(1, 0, 0, 4, R), Transfer(2, 0, 0, 4, R)))
    check(_schedule(Collective.ALL_REDUCE, 2, 4, Transfer(0, 1, 0, 4, R), Transfer(1, 0, 0, 4, R)))


@pytest.mark.parametrize(
    ("transfer", "message"),
    [
        (Transfer(1, 1, 0, 4, R), "reduces into itself"),
        (Transfer(0, 5, 0, 4, C), "rank out of range"),
        (Transfer(0, 1, 2, 4, C), r"bytes \[2, 6\) outside the 4-byte buffer"),
        (Transfer(0, 1, 0, 0, C), "must move at least 1"),
        (Transfer(0, 1, 0, 4, C, (0,)), "not an earlier transfer"),
    ],
)
def test_rejects_malformed_transfers(transfer: Transfer, message: str) -> None:
    """Self-sends, ranks and bytes out of range, empty transfers and dependencies that do not
    point backwards (cycles) are rejected before any replay."""
    with pytest.raises(ScheduleError, match=message):
        check(_schedule(Collective.BROADCAST, 2, 4, transfer))


def test_root_is_part_of_the_collective() -> None:
    """A broadcast from rank 0 is not a broadcast from rank 2: rank 0 holds nothing to send."""
    good = build_schedule(Call(collective=Collective.BROADCAST, ranks=3, nbytes=9), "ring")
    check(good)
    with pytest.raises(ScheduleError, match=r"transfer #0 \(0->1\) reads rank 0 bytes \[0, 9\)"):
        check(dataclasses.replace(good, root=2))


def test_reduce_scatter_postcondition() -> None:
    """Reduce-scatter only constrains rank r's own segment: dropping one hop of the ring
    leaves a segment short of a contribution."""
    good = build_schedule(Call(collective=Collective.REDUCE_SCATTER, ranks=3, nbytes=30), "ring")
    check(good)
    with pytest.raises(
        ScheduleError,
        match=r"reduce_scatter: rank \d holds \{.*\} on bytes "
        r"\[\d+, \d+\) instead of \{0, 1, 2\}; missing",
    ):
        check(_drop(good, len(good) - 1))


@pytest.mark.parametrize("clock_bytes", [8, 1 << 28])
def test_ancestor_queries_match_the_transitive_closure(monkeypatch, clock_bytes: int) -> None:
    """Batched ancestor queries (direct dependency, same chain, chain clocks: one chain per
    pass or all at once) answer exactly what the transitive closure says, on random DAGs."""
    import random

    import numpy as np

    from commsim.checker import reach
    from commsim.schedule import Columns

    monkeypatch.setattr(reach, "MAX_CLOCK_BYTES", clock_bytes)
    rng = random.Random(3)
    for _ in range(40):
        n = rng.randint(1, 60)
        transfers = []
        for i in range(n):
            deps = tuple(sorted(rng.sample(range(i), k=min(i, rng.choice([0, 1, 1, 2, 3])))))
            transfers.append(Transfer(rng.randrange(4), rng.randrange(4), rng.randrange(4), 1,
                                      C, deps))
        closure: list[set[int]] = []
        for t in transfers:
            closure.append(set().union(*(closure[d] | {d} for d in t.deps)))
        a, b = np.array([(x, y) for x in range(n) for y in range(n)]).T
        got = reach.Reach(Columns.from_transfers(transfers))(a, b)
        pairs = zip(a.tolist(), b.tolist(), strict=True)
        assert got.tolist() == [x in closure[y] for x, y in pairs]


def test_refuses_beyond_the_memory_budget() -> None:
    """A check whose holdings and records would exceed the memory budget is refused in one
    line, before the big arrays are made."""
    from commsim.budget import limited
    from commsim.errors import SpecError

    schedule = build_schedule(Call(collective=Collective.ALL_REDUCE, ranks=64, nbytes=2**20),
                              "ring")
    with limited(1 << 20), pytest.raises(SpecError, match=r"about \d+ MB, more than the 1 MB"):
        check(schedule)
