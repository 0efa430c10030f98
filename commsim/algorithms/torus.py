"""``torus``: dimension-ordered collectives on a torus, a bidirectional ring along each axis.

Ranks are row-major over the torus dimensions ``(d_0, ..., d_{k-1})``: the last dimension varies
fastest (stride 1), as :func:`commsim.topology.build` numbers the chips. Along axis ``a`` (stride
``s_a = d_{a+1} ... d_{k-1}``) the ranks sharing every other coordinate form a *line* of ``d_a``
ranks, neighbours on the torus, and the line runs a bidirectional ring
(:mod:`commsim.algorithms.bidirectional`: half of each block each way; a size-2 axis is one
2-ring, a size-1 axis is skipped). All lines of an axis run at once.

* **reduce-scatter**: axis 0 first, then 1, ..., ``k - 1``;
* **all-gather**: the reverse, axis ``k - 1`` (consecutive ranks) first, ..., axis 0;
* **all-reduce**: the reduce-scatter, then the all-gather.

In the phase along axis ``a``, the block of the line's rank at coordinate ``x`` is the bytes of
the ranks that share the line's coordinates ``0..a-1`` and have coordinate ``x`` on axis ``a``:
``s_a`` consecutive ranks, so one contiguous byte range ``[lo n / p, hi n / p)``. Each phase's
step is therefore one message per direction per rank; all-gather moves growing contiguous blocks
(``n / p``, then ``d_{k-1} n / p``, ...), reduce-scatter shrinking ones.

TPU pods run collectives this way, a bidirectional ring per torus axis (the JAX scaling book,
"How to Scale Your Model", jax-ml.github.io/scaling-book, parts on TPUs and sharding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import Schedule

NAME = "torus"
COLLECTIVES = frozenset({Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_REDUCE})


def sub_torus(dims: Sequence[int], ranks: int) -> tuple[int, ...] | None:
    """The torus the first ``ranks`` ranks of a ``dims`` torus form, or None if they do not.

    The prefix is a sub-grid ``(k, d_{j+1}, ..., d_{k-1})`` when ``ranks = k * s_j`` with
    ``k <= d_j``; it keeps its wrap-around links (a torus) only if ``k`` is ``1``, ``2`` (one
    cable serves both directions) or ``d_j``.

    >>> sub_torus((16, 16), 256), sub_torus((16, 16), 32), sub_torus((16, 16), 8)
    ((16, 16), (2, 16), None)
    >>> sub_torus((4, 4, 4), 16), sub_torus((4, 4, 4), 48)
    ((4, 4), None)
    """
    dims = tuple(int(d) for d in dims)
    if ranks == math.prod(dims):
        return dims
    for j, size in enumerate(dims):
        inner = math.prod(dims[j + 1 :])
        if ranks % inner == 0 and ranks // inner <= size:
            k = ranks // inner
            if k in (1, 2, size):
                return ((k,) if k > 1 else ()) + dims[j + 1 :] or (1,)
            return None
    return None  # pragma: no cover - j = k - 1 always matches a ranks < prod(dims)


def default_chunks(call: Call) -> int:
    """1: one message per direction per step unless ``--chunks`` asks for pipelining."""
    return 1


def build(call: Call) -> Schedule:
    """The dimension-ordered torus schedule of ``call`` (see the module docstring), built as
    columns (:mod:`commsim.algorithms.torus_columns`)."""
    if call.torus_dims is None:
        raise ScheduleError(f"algorithm {NAME!r} needs a torus topology")
    coll = call.collective
    if coll not in COLLECTIVES:
        raise ScheduleError(f"algorithm {NAME!r} cannot run {coll.value}")
    from commsim.algorithms.torus_columns import torus_columns

    chunks = call.chunks or default_chunks(call)
    columns = torus_columns(tuple(call.torus_dims), call.nbytes, chunks,
                            coll is not Collective.ALL_GATHER,
                            coll is not Collective.REDUCE_SCATTER)
    return Schedule.of_columns(coll, NAME, call.ranks, call.nbytes, call.root, chunks, columns)
