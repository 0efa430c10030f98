"""A memo that keeps the most recently used values up to a total size, whole under a lock.

Both of commsim's process-wide memos hold schedules or their timings, whose cost is their
number of transfers: :mod:`commsim.algorithms.memo` (schedules, per call) and
:mod:`commsim.engine.reuse` (simulated timings, per scope). Each keeps at most a total
``limit`` of sizes, the least recently used going first; a lock keeps it whole when threads
(a Dask worker's) use it at once.

>>> memo = SizedLRU(limit=3)
>>> memo.put("a", "A", size=2); memo.put("b", "B", size=2)
>>> memo.get("a") is None, memo.get("b")
(True, 'B')
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class SizedLRU(Generic[K, V]):
    """Values by key, at most ``limit`` of their sizes in all, least recently used out first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept under ``key`` (now the most recently used), or None."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                return None
            self._kept.move_to_end(key)
            return kept[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Keep ``value`` under ``key`` (a key already kept keeps its first value), then drop
        the least recently used while the sizes exceed the limit."""
        with self._lock:
            if key not in self._kept:
                self._kept[key] = (value, size)
                self._held += size
            while self._held > self.limit:
                _, (_dropped, dropped_size) = self._kept.popitem(last=False)
                self._held -= dropped_size

    @property
    def held(self) -> int:
        """The sizes of what is kept, in all."""
        return self._held

    def sizes(self) -> list[int]:
        """The size of each value kept, least recently used first."""
        with self._lock:
            return [size for _value, size in self._kept.values()]

    def clear(self) -> None:
        """Empty the memo."""
        with self._lock:
            self._kept.clear()
            self._held = 0
