"""Vectorised builders (commsim.algorithms.columnar): ring and bidirectional-ring schedules
pass the checker, empty pieces are dropped standing for their dependencies, and the pieces of
every builder's byte ranges follow the floor formula. (That every schedule is, transfer for
transfer, the one the object builders made: ``test_schedule_digests.py``.)
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from commsim.algorithms import SCHEDULED, bidirectional, ring
from commsim.algorithms.base import Call
from commsim.algorithms.columnar import drop_empty, pieces
from commsim.checker import check
from commsim.collectives import Collective
from commsim.schedule import Columns, TransferView


@pytest.mark.parametrize("module", [ring, bidirectional], ids=lambda m: m.NAME)
def test_columnar_schedules_pass_the_checker(module: ModuleType) -> None:
    for coll in SCHEDULED:
        call = Call(collective=coll, ranks=6, nbytes=6000, chunks=2, root=3)
        schedule = module.build(call)
        assert isinstance(schedule.transfers, TransferView)
        check(schedule)


def test_empty_pieces_are_dropped_from_the_columns() -> None:
    for coll in (Collective.ALL_REDUCE, Collective.BROADCAST):
        call = Call(collective=coll, ranks=8, nbytes=5, chunks=3)
        schedule = ring.build(call)
        assert isinstance(schedule.transfers, TransferView)
        assert all(t.nbytes > 0 for t in schedule.transfers)
        check(schedule)


def test_drop_empty_passes_dependencies_through() -> None:
    """A zero-byte row stands for its dependencies, transitively; rows are renumbered."""
    cols = Columns(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]), np.zeros(4, dtype=np.int64),
                   np.array([8, 0, 0, 8]), np.zeros(4, dtype=bool), np.array([0, 0, 1, 2, 3]),
                   np.array([0, 1, 2]))
    out = drop_empty(cols)
    assert out.src.tolist() == [0, 3] and out.dep_ptr.tolist() == [0, 0, 1]
    assert out.dep_idx.tolist() == [0]


def test_pieces_are_the_floor_formula() -> None:
    lo, hi = pieces(np.array([0, 10]), np.array([10, 13]), 4)
    assert lo.tolist() == [[0, 2, 5, 7], [10, 10, 11, 12]]
    assert hi.tolist() == [[2, 5, 7, 10], [10, 11, 12, 13]]
