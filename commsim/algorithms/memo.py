"""Schedules kept for the next time the same call is lowered the same way.

A schedule is a function of the call (collective, ranks, bytes, root, pieces, hosts) and the
algorithm only, never of the links' latencies or bandwidths. A fit (``commsim calibrate``)
times the same calls on thousands of networks that differ only in those, so it would build
every schedule thousands of times; :func:`memo_schedule` builds each once. The memo holds at
most :data:`MEMO_TRANSFERS` transfers, the least recently used schedules going first
(:class:`~commsim.sized_lru.SizedLRU`). A kept schedule is kept as columns with each
transfer's level (its DAG depth, where the builder gave none), made read-only, so no caller can
change what another is given.

>>> from commsim.algorithms.base import Call
>>> from commsim.collectives import Collective
>>> call = Call(collective=Collective.ALL_REDUCE, ranks=4, nbytes=1 << 20)
>>> memo_schedule(call, "ring") is memo_schedule(call, "ring")
True
"""

from __future__ import annotations

from dataclasses import replace

from commsim.algorithms import build_schedule
from commsim.algorithms.base import Call
from commsim.schedule import Schedule
from commsim.sized_lru import SizedLRU

#: The most transfers the memo keeps, all schedules together (tens of bytes each as columns).
MEMO_TRANSFERS = 500_000
#: A schedule larger than this is built every time rather than kept: it would push out many.
MEMO_LARGEST = MEMO_TRANSFERS // 4

_kept: SizedLRU[tuple[Call, str], Schedule] = SizedLRU(MEMO_TRANSFERS)


def memo_schedule(call: Call, algorithm: str) -> Schedule:
    """:func:`~commsim.algorithms.build_schedule` of ``call`` by ``algorithm``, built once
    while it stays among the recently used."""
    key = (call, algorithm)
    schedule = _kept.get(key)
    if schedule is not None:
        return schedule
    schedule = build_schedule(call, algorithm)
    if len(schedule) > MEMO_LARGEST:
        return schedule
    schedule = _kept_form(schedule)
    _kept.put(key, schedule, len(schedule))
    return schedule


def forget() -> None:
    """Empty the memo."""
    _kept.clear()


def _kept_form(schedule: Schedule) -> Schedule:
    """``schedule`` as the memo keeps it: its columns, with each transfer's level (its depth in
    the DAG where the builder gave none, which every exact evaluation would compute again),
    read-only."""
    cols = schedule.columns
    if cols.level is None:
        cols = replace(cols, level=cols.depths())
    for array in (cols.src, cols.dst, cols.offset, cols.nbytes, cols.reduce, cols.dep_ptr,
                  cols.dep_idx, cols.level, cols.origin):
        if array is not None:
            array.flags.writeable = False
    return Schedule.of_columns(schedule.collective, schedule.algorithm, schedule.ranks,
                               schedule.nbytes, schedule.root, schedule.chunks, cols,
                               schedule.endpoints, schedule.counts)
