"""Schedules kept for the next time the same call is lowered the same way.

A schedule is a function of the call (collective, ranks, bytes, root, pieces, hosts) and the
algorithm only, never of the links' latencies or bandwidths. A fit (``commsim calibrate``)
times the same calls on thousands of networks that differ only in those, so it would build
every schedule thousands of times; :func:`memo_schedule` builds each once. The memo holds at
most :data:`MEMO_TRANSFERS` transfers, the least recently used schedules going first. A kept
schedule is kept as columns with each transfer's level (its DAG depth, where the builder gave
none), made read-only, so no caller can change what another is given; a lock keeps the memo
whole when threads (a Dask worker's) lower calls at once.

>>> from commsim.algorithms.base import Call
>>> from commsim.collectives import Collective
>>> call = Call(collective=Collective.ALL_REDUCE, ranks=4, nbytes=1 << 20)
>>> memo_schedule(call, "ring") is memo_schedule(call, "ring")
True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import replace

from commsim.algorithms import build_schedule
from commsim.algorithms.base import Call
from commsim.schedule import Schedule

#: The most transfers the memo keeps, all schedules together (tens of bytes each as columns).
MEMO_TRANSFERS = 500_000
#: A schedule larger than this is built every time rather than kept: it would push out many.
MEMO_LARGEST = MEMO_TRANSFERS // 4

_kept: OrderedDict[tuple[Call, str], Schedule] = OrderedDict()
_held = [0]  # transfers kept now
_lock = threading.Lock()


def memo_schedule(call: Call, algorithm: str) -> Schedule:
    """:func:`~commsim.algorithms.build_schedule` of ``call`` by ``algorithm``, built once
    while it stays among the recently used."""
    key = (call, algorithm)
    with _lock:
        schedule = _kept.get(key)
        if schedule is not None:
            _kept.move_to_end(key)
            return schedule
    schedule = build_schedule(call, algorithm)
    size = len(schedule)
    if size > MEMO_LARGEST:
        return schedule
    schedule = _kept_form(schedule)
    with _lock:
        if key not in _kept:
            _kept[key] = schedule
            _held[0] += size
        while _held[0] > MEMO_TRANSFERS:
            _, dropped = _kept.popitem(last=False)
            _held[0] -= len(dropped)
    return schedule


def forget() -> None:
    """Empty the memo."""
    with _lock:
        _kept.clear()
        _held[0] = 0


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
