"""Double binary tree: NCCL's two trees, one half of the buffer each, pipelined."""

from __future__ import annotations

import pytest

from commsim.algorithms import Call, build_schedule
from commsim.algorithms.double_binary_tree import btree_parents, dbt_parents, default_chunks
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import OpKind

AR = Collective.ALL_REDUCE


def _dbt(p: int, n: int, chunks: int | None = None):
    return build_schedule(
        Call(collective=AR, ranks=p, nbytes=n, chunks=chunks), "double_binary_tree"
    )


def test_tree_zero_matches_nccl_picture() -> None:
    """The 14-rank tree drawn in NCCL's trees.cc: 0-8, 8-{4,12}, 4-{2,6}, 12-{10,13}, ..."""
    parents = btree_parents(14)
    kids = {r: sorted(c for c, u in enumerate(parents) if u == r) for r in range(14)}
    assert kids[0] == [8] and kids[8] == [4, 12] and kids[12] == [10, 13]
    assert kids[4] == [2, 6] and kids[2] == [1, 3] and kids[10] == [9, 11]
    assert all(not kids[r] for r in range(1, 14, 2))


@pytest.mark.parametrize("p", range(2, 18))
def test_trees_are_complementary(p: int) -> None:
    """Both trees span all ranks with at most two children each; tree 1's root is p-1 (p even,
    mirror) or 1 (p odd, shift); a rank is interior in at most one tree, except rank 0 for odd p
    (the root of tree 0, with one child), as NCCL's construction gives."""
    trees = dbt_parents(p)
    for parents in trees:
        assert parents.count(-1) == 1
        assert max(parents.count(r) for r in range(p)) <= 2
        for r in range(p):  # every rank reaches the root
            seen = 0
            while parents[r] >= 0 and seen <= p:
                r, seen = parents[r], seen + 1
            assert seen <= p
    assert trees[1].index(-1) == (1 if p % 2 else p - 1)
    interior = [{u for u in parents if u >= 0} for parents in trees]
    assert interior[0] & interior[1] <= ({0} if p % 2 else set())


@pytest.mark.parametrize("p", [2, 5, 8, 13])
def test_each_tree_all_reduces_one_half(p: int) -> None:
    """Tree 0 moves only the first half of the buffer along its edges, tree 1 only the second:
    reduces go child -> parent, copies parent -> child."""
    n = 1000
    trees = dbt_parents(p)
    for t in _dbt(p, n, 3).transfers:
        tree = 0 if t.offset + t.nbytes <= n // 2 else 1
        assert tree == 1 or t.offset < n // 2
        child, up = (t.src, t.dst) if t.op is OpKind.REDUCE else (t.dst, t.src)
        assert trees[tree][child] == up


def test_two_ranks_time(timer) -> None:
    """p = 2: the trees run side by side, each reducing then copying back its half: with one
    piece 2 (alpha + n/(2 beta))."""
    assert timer(_dbt(2, 1000, 1), 1.0, 1.0) == pytest.approx(2 * (1.0 + 500))


def test_default_chunks() -> None:
    """Pieces per tree: ceil((n/2) / 512 KiB), between 1 and 8."""
    want = {0: 1, 1000: 1, 2**20: 1, 2**20 + 2: 2, 4 * 2**20: 4, 2**30: 8}
    for n, chunks in want.items():
        assert default_chunks(Call(collective=AR, ranks=8, nbytes=n)) == chunks


def test_only_all_reduce() -> None:
    """The double binary tree is an all-reduce only."""
    with pytest.raises(ScheduleError, match="cannot run broadcast"):
        build_schedule(
            Call(collective=Collective.BROADCAST, ranks=4, nbytes=8), "double_binary_tree"
        )
