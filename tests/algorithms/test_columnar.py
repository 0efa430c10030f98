"""Vectorised builders (commsim.algorithms.columnar) give exactly the Plan's transfers.

Ring and bidirectional-ring all-gather, reduce-scatter, all-reduce, broadcast and reduce, built
as columns, equal the same schedule built one object at a time through ``Plan``
(``build_objects``): the same
transfers in the same order with the same sorted dependencies, for rank counts 2..9, sizes that
do and do not divide, 1 to 4 pieces and every root, empty pieces included (dropped, standing
for their dependencies, as ``ScheduleBuilder`` drops them).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from commsim.algorithms import bidirectional, ring
from commsim.algorithms.base import Call
from commsim.checker import check
from commsim.collectives import Collective
from commsim.schedule import TransferView


@pytest.mark.parametrize("module", [ring, bidirectional], ids=lambda m: m.NAME)
@pytest.mark.parametrize("coll", list(Collective), ids=lambda c: c.value)
def test_columns_equal_the_plan(module: ModuleType, coll: Collective) -> None:
    made = 0
    for p in range(2, 10):
        for n in (1, 97, 1000, 4096, 10**5 + 3):
            for chunks in (None, 1, 2, 4):
                for root in {0, p // 2, p - 1}:
                    call = Call(collective=coll, ranks=p, nbytes=n, chunks=chunks, root=root)
                    schedule = module.build(call)
                    objects = module.build_objects(call)
                    assert schedule == objects, (p, n, chunks, root)
                    if isinstance(schedule.transfers, TransferView):
                        made += 1
                        levels = schedule.columns.level
                        assert levels is not None
                        cols = schedule.columns
                        for row in range(len(cols)):
                            deps = cols.dep_idx[cols.dep_ptr[row]:cols.dep_ptr[row + 1]]
                            assert np.all(levels[deps] < levels[row])
    assert made == 5 * 4 * sum(len({0, p // 2, p - 1}) for p in range(2, 10))


@pytest.mark.parametrize("module", [ring, bidirectional], ids=lambda m: m.NAME)
def test_columnar_schedules_pass_the_checker(module: ModuleType) -> None:
    for coll in Collective:
        call = Call(collective=coll, ranks=6, nbytes=6000, chunks=2, root=3)
        schedule = module.build(call)
        assert isinstance(schedule.transfers, TransferView)
        check(schedule)


def test_empty_pieces_are_dropped_from_the_columns() -> None:
    for coll in (Collective.ALL_REDUCE, Collective.BROADCAST):
        call = Call(collective=coll, ranks=8, nbytes=5, chunks=3)
        assert isinstance(ring.build(call).transfers, TransferView)
        assert ring.build(call) == ring.build_objects(call)
        assert all(t.nbytes > 0 for t in ring.build(call).transfers)
