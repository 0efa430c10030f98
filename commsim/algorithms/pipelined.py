"""NCCL's tree across hosts as a schedule: the hierarchical all-reduce pipelined chunk by chunk.

NCCL's tree all-reduce across hosts (``hierarchical_pipelined``) reduces inside each host and
across the hosts at once, on a stream of chunks: while one chunk crosses the network, the
next is reduced inside its host and the one before is spread back. This builder makes that
an explicit schedule: the buffer is cut into ``chunks`` contiguous pieces and each piece runs
the hierarchical all-reduce with Rabenseifner rails
(:func:`~commsim.algorithms.hierarchical_rows.hierarchical_columns`: a ring reduce-scatter in
every host, every rail's log-depth all-reduce of its part over the NICs, as NCCL's trees cross
hosts in ``log2(hosts)`` hops, then a ring all-gather in every host). Pieces follow one another
transfer by transfer: transfer ``i`` of piece ``k`` waits for its own data (piece ``k``'s
dependencies) and for transfer ``i`` of piece ``k - 1`` (the same pair and step, one piece at a
time), so a link carries the host phase of one piece while the NICs carry the rails of an
earlier one, sharing what they both cross.

Every piece holds at least one byte per rank, so all pieces have the
same transfers, each on its own byte range: the symbolic checker proves the schedule like any
other.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from commsim.algorithms.hierarchical_rows import hierarchical_columns
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import Columns, Schedule

NAME = "hierarchical_pipelined"
#: Most pieces a call is cut into (one per 512 KiB until then,
#: :func:`~commsim.algorithms.plan.pipeline_chunks`): the pieces' hop latencies are scaled so
#: the pipeline pays a piece's depth of them once (:mod:`commsim.nccl_tree`), and more
#: pieces overlap the phases more (NVLS across 2 x 8 H100 at 256 MiB: 1.16 x the composed
#: estimate in 8 pieces, 1.02 x in 32, 1.00 x in 64).
MAX_PIECES = 64


def build(groups: list[list[int]], nbytes: int, pieces: int) -> Schedule:
    """The pipelined tree all-reduce of ``nbytes`` over ``groups`` (each host's ranks, hosts in
    order, ranks numbered ``0..R-1``) in ``pieces`` pieces (see the module docstring)."""
    return chained(NAME, groups, nbytes, pieces,
                   lambda size: hierarchical_columns(groups, size, 1, True))


def chained(name: str, groups: list[list[int]], nbytes: int, pieces: int,
            columns_of: Callable[[int], Columns], endpoints: int = 0) -> Schedule:
    """The all-reduce ``name`` of ``nbytes`` over ``groups`` in ``pieces`` pieces that follow
    one another, piece by piece the schedule ``columns_of(its bytes)`` (its transfers and
    dependencies; ``endpoints`` switches after the ranks)."""
    ranks = sum(len(g) for g in groups)
    if len(groups) < 2 or len({len(g) for g in groups}) != 1:
        raise ScheduleError(f"{name} needs several hosts with as many ranks each")
    if pieces < 1 or (pieces > 1 and nbytes // pieces < ranks):
        raise ScheduleError(f"{name}: {pieces} pieces of {nbytes} B leave a rank none")
    bounds = [nbytes * k // pieces for k in range(pieces + 1)]
    sizes = [hi - lo for lo, hi in zip(bounds, bounds[1:], strict=False)]
    made = {size: columns_of(size) for size in sorted(set(sizes))}  # a byte apart at most
    parts = [made[size] for size in sizes]
    return Schedule.of_columns(Collective.ALL_REDUCE, name, ranks, nbytes, 0, pieces,
                               _chain(parts, bounds[:-1], name), endpoints)


def _chain(parts: list[Columns], offsets: list[int], name: str) -> Columns:
    """``parts`` one after the other, part ``k``'s bytes at ``offsets[k]``, transfer ``i`` of
    part ``k`` also waiting for transfer ``i`` of part ``k - 1`` (put first: it is the lower
    index, so each row's dependencies stay sorted). Its ``level`` is the DAG's depth: a
    transfer's depth in its part plus ``k`` (a longest path to it is one inside a part after
    ``k`` steps from part to part, and the parts are one DAG)."""
    first = parts[0]
    m = len(first)
    for part in parts[1:]:
        if not (np.array_equal(part.src, first.src) and np.array_equal(part.dst, first.dst)
                and np.array_equal(part.dep_idx, first.dep_idx)
                and np.array_equal(part.dep_ptr, first.dep_ptr)):
            raise ScheduleError(f"{name}: pieces with different transfers cannot follow")
    counts = np.diff(first.dep_ptr) + 1
    # part k >= 1: each row's own dependencies shifted by k * m after the previous part's row
    ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    chained = np.zeros(int(ptr[-1]), dtype=bool)
    chained[ptr[:-1]] = True
    later = np.empty(int(ptr[-1]), dtype=np.int64)
    later[~chained] = first.dep_idx
    rows = np.arange(m, dtype=np.int64)
    idxs = [first.dep_idx]
    for k in range(1, len(parts)):
        deps = later + k * m
        deps[chained] = rows + (k - 1) * m
        idxs.append(deps)
    ptrs = [first.dep_ptr[:-1]] + [len(first.dep_idx) + (k - 1) * int(ptr[-1]) + ptr[:-1]
                                   for k in range(1, len(parts))]
    total = len(first.dep_idx) + (len(parts) - 1) * int(ptr[-1])
    depth = first.depths()
    return Columns(
        np.concatenate([p.src for p in parts]), np.concatenate([p.dst for p in parts]),
        np.concatenate([p.offset + off for p, off in zip(parts, offsets, strict=True)]),
        np.concatenate([p.nbytes for p in parts]), np.concatenate([p.reduce for p in parts]),
        np.concatenate([*ptrs, np.array([total], dtype=np.int64)]), np.concatenate(idxs),
        level=np.concatenate([depth + k for k in range(len(parts))]))
