"""The schedule memo (commsim.algorithms.memo): the same call lowered the same way is built
once, what it keeps cannot be changed, and it holds no more than its bound."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from commsim.algorithms import build_schedule, memo
from commsim.algorithms.base import Call
from commsim.collectives import Collective


@pytest.fixture(autouse=True)
def _empty_memo() -> Iterator[None]:
    memo.forget()
    yield
    memo.forget()


def _call(ranks: int, nbytes: int = 1 << 20) -> Call:
    return Call(collective=Collective.ALL_REDUCE, ranks=ranks, nbytes=nbytes)


def test_the_same_call_and_algorithm_is_built_once() -> None:
    first = memo.memo_schedule(_call(8), "ring")
    assert memo.memo_schedule(_call(8), "ring") is first
    assert memo.memo_schedule(_call(8), "recursive_doubling") is not first
    assert memo.memo_schedule(_call(8, 1 << 21), "ring") is not first


def test_a_kept_schedule_is_the_built_one_and_read_only() -> None:
    kept = memo.memo_schedule(_call(8), "ring")
    built = build_schedule(_call(8), "ring")
    assert kept.transfers[:] == built.transfers[:]
    with pytest.raises(ValueError, match="read-only"):
        kept.columns.nbytes[0] = 0
    assert isinstance(built.columns.nbytes, np.ndarray) and built.columns.nbytes.flags.writeable


def test_the_memo_holds_at_most_its_bound_least_recently_used_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    size = len(build_schedule(_call(8), "ring"))
    monkeypatch.setattr(memo._kept, "limit", 2 * size)
    a = memo.memo_schedule(_call(8, 1 << 20), "ring")
    b = memo.memo_schedule(_call(8, 1 << 21), "ring")
    assert memo.memo_schedule(_call(8, 1 << 20), "ring") is a  # a is now the most recent
    memo.memo_schedule(_call(8, 1 << 22), "ring")               # pushes out b
    assert memo.memo_schedule(_call(8, 1 << 20), "ring") is a
    assert memo.memo_schedule(_call(8, 1 << 21), "ring") is not b


def test_a_schedule_beyond_the_largest_kept_is_built_each_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo, "MEMO_LARGEST", 1)
    first = memo.memo_schedule(_call(8), "ring")
    assert memo.memo_schedule(_call(8), "ring") is not first
    assert first.columns.nbytes.flags.writeable


def test_threads_lowering_at_once_keep_the_memo_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many threads asking for calls that push each other out: every answer is the call's
    schedule, and the memo's count of what it holds stays true and within its bound."""
    size = len(build_schedule(_call(4), "ring"))
    monkeypatch.setattr(memo._kept, "limit", 3 * size)
    sizes = [1 << k for k in range(10, 16)]

    def work(offset: int) -> list[bool]:
        return [memo.memo_schedule(_call(4, sizes[(offset + i) % 6]), "ring").nbytes
                == sizes[(offset + i) % 6] for i in range(60)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = [ok for oks in pool.map(work, range(4)) for ok in oks]
    assert all(answers) and len(answers) == 240
    assert memo._kept.held == sum(memo._kept.sizes()) <= 3 * size


def test_a_kept_schedule_carries_its_dag_levels() -> None:
    """A builder that gives no levels (the double binary tree) has them computed once, when
    kept: each transfer's depth in its dependency DAG."""
    built = build_schedule(_call(8), "double_binary_tree")
    kept = memo.memo_schedule(_call(8), "double_binary_tree")
    assert built.columns.level is None and kept.columns.level is not None
    assert kept.columns.level.tolist() == built.columns.depths().tolist()
