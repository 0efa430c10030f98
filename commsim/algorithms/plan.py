"""The rules every builder follows, and its byte pieces.

Every builder emits its messages in the algorithm's natural order, as numpy columns
(:mod:`commsim.algorithms.columnar`, :mod:`commsim.algorithms.rows`), and gives each
transfer exactly two kinds of dependency, which is all the engine ever honours:

* **data**: a transfer reading bytes ``[a, b)`` of ``src`` waits for the transfers that last
  wrote any of those bytes into ``src``: the last copy there, plus every reduce into them since
  that copy (concurrent reduces commute, so a rank waits for all of them);
* **link order**: a transfer waits for the previous message piece on the same ordered pair
  ``(src, dst)`` (and channel), so a rank sends its pieces over a link one at a time, each after
  the previous one has arrived.

A message may have several byte ranges (parts of one message, e.g. non-contiguous segments):
its parts share their dependencies and run concurrently, and the next piece on the link waits
for all of them. Zero-byte parts vanish and stand for their dependencies (as
``ScheduleBuilder`` has it; :func:`commsim.algorithms.columnar.drop_empty`), so builders never
special-case uneven or tiny sizes.

(The builders once made one ``Transfer`` at a time through a ``Plan`` object that applied these
rules; ``tests/algorithms/test_schedule_digests.py`` keeps every schedule as that made it.)
"""

from __future__ import annotations

#: Pipelined algorithms (ring broadcast/reduce, double binary tree) aim at pieces of this size by
#: default: NCCL's Simple protocol moves a 4 MiB buffer in 8 steps of 512 KiB.
PIPELINE_PIECE_BYTES = 512 * 1024

Range = tuple[int, int]


def split(start: int, stop: int, chunks: int) -> list[Range]:
    """``[start, stop)`` cut into ``chunks`` pieces by the floor formula (some may be empty).

    >>> split(0, 10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    length = stop - start
    return [
        (start + j * length // chunks, start + (j + 1) * length // chunks) for j in range(chunks)
    ]


def pipeline_chunks(nbytes: int, limit: int) -> int:
    """Default piece count: ``ceil(nbytes / PIPELINE_PIECE_BYTES)``, clamped to ``[1, limit]``.

    >>> pipeline_chunks(1000, 64), pipeline_chunks(8 * 2**20, 64), pipeline_chunks(2**30, 64)
    (1, 16, 64)
    """
    return max(1, min(limit, -(-nbytes // PIPELINE_PIECE_BYTES)))
