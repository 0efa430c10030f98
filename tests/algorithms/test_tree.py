"""Binomial-tree algorithms: tree shape, root handling, pipelining and alpha-beta times."""

from __future__ import annotations

import pytest

from commsim.algorithms import Call, build_schedule
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import OpKind


def _tree(coll: Collective, p: int, n: int, chunks: int | None = None, root: int = 0):
    return build_schedule(
        Call(collective=coll, ranks=p, nbytes=n, chunks=chunks, root=root), "binomial_tree"
    )


@pytest.mark.parametrize("p", range(1, 18))
def test_binomial_tree_shape(p: int) -> None:
    """Broadcast from root 3: every relative rank ``v > 0`` receives once, from ``v`` with its
    lowest set bit cleared; a parent serves its largest subtree first."""
    root = 3 % p
    moves = [((t.src - root) % p, (t.dst - root) % p) for t in _tree(Collective.BROADCAST, p,
                                                                     100, root=root).transfers]
    assert sorted(v for _, v in moves) == list(range(1, p))
    assert all(u == v & (v - 1) for u, v in moves)
    assert moves == sorted(moves, key=lambda m: (m[0], -m[1]))


def test_broadcast_sixteen_ranks_takes_four_steps(timer) -> None:
    """Binomial broadcast on 16 ranks with dedicated links: 4 (alpha + n/beta)."""
    schedule = _tree(Collective.BROADCAST, 16, 1000)
    assert len(schedule) == 15
    assert timer(schedule, 5.0, 2.0) == pytest.approx(4 * (5.0 + 1000 / 2.0))


@pytest.mark.parametrize("p", [2, 5, 13, 16])
def test_reduce_and_all_reduce_times(p: int, timer) -> None:
    """With dedicated links a rank sends to all its children at once, so reduce takes
    floor(log2 p) (alpha + n/beta), the most set bits of a relative rank below p; all-reduce
    (reduce, then broadcast) takes twice that."""
    depth = p.bit_length() - 1
    red = _tree(Collective.REDUCE, p, 64)
    assert all(t.op is OpKind.REDUCE for t in red.transfers)
    assert timer(red, 1.0, 1.0) == pytest.approx(depth * 65)
    assert timer(_tree(Collective.ALL_REDUCE, p, 64), 1.0, 1.0) == pytest.approx(2 * depth * 65)


@pytest.mark.parametrize("root", [0, 3, 6])
def test_root_is_honoured(root: int) -> None:
    """Broadcast leaves only the root first; reduce ends at the root."""
    p = 7
    bc = _tree(Collective.BROADCAST, p, 10, root=root).transfers
    assert {t.src for t in bc if not t.deps} == {root}
    assert root not in {t.dst for t in bc}
    red = _tree(Collective.REDUCE, p, 10, root=root).transfers
    assert root not in {t.src for t in red}


def test_pipelined_pieces_serialized_per_link(timer) -> None:
    """With c pieces a piece leaves a rank after it arrived there and after the previous piece
    on the same link arrived, so a depth-2 tree in c pieces takes (2 - 1 + c) piece times."""
    p, c, n = 4, 4, 400  # relative tree: 0->2, 0->1, 2->3
    schedule = _tree(Collective.BROADCAST, p, n, c)
    pairs: dict[tuple[int, int], int] = {}
    for k, t in enumerate(schedule.transfers):
        if (t.src, t.dst) in pairs:
            assert pairs[(t.src, t.dst)] in t.deps
        pairs[(t.src, t.dst)] = k
    assert timer(schedule, 1.0, 1.0) == pytest.approx((2 - 1 + c) * (1.0 + n / c))


def test_unsupported_collective() -> None:
    """The binomial tree runs no all-gather: a ScheduleError names it and what it runs."""
    with pytest.raises(ScheduleError, match="cannot run all_gather"):
        _tree(Collective.ALL_GATHER, 4, 10)
