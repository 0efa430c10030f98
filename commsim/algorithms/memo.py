"""Schedules kept for the next time the same call is lowered the same way.

A schedule is a function of the call (collective, ranks, bytes, root, pieces, hosts) and the
algorithm only, never of the links' latencies or bandwidths. A fit (``commsim calibrate``)
times the same calls on thousands of networks that differ only in those, so it would build
every schedule thousands of times; :func:`memo_schedule` builds each once. The memo holds at
most :data:`MEMO_TRANSFERS` transfers, the least recently used schedules going first, and a
kept schedule's columns are made read-only, so no caller can change what another is given;
a lock keeps it whole when threads (a Dask worker's) lower calls at once.

>>> from commsim.algorithms.base import Call
>>> from commsim.collectives import Collective
>>> call = Call(collective=Collective.ALL_REDUCE, ranks=4, nbytes=1 << 20)
>>> memo_schedule(call, "ring") is memo_schedule(call, "ring")
True
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from commsim.algorithms import build_schedule
from commsim.algorithms.base import Call
from commsim.schedule import Schedule, TransferView

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
    _freeze(schedule)
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


def _freeze(schedule: Schedule) -> None:
    """Make a schedule's column arrays read-only (its transfer objects are already)."""
    if not isinstance(schedule.transfers, TransferView):
        return
    cols = schedule.columns
    for array in (cols.src, cols.dst, cols.offset, cols.nbytes, cols.reduce, cols.dep_ptr,
                  cols.dep_idx, cols.level):
        if array is not None:
            array.flags.writeable = False
