"""Double binary tree all-reduce, built the way NCCL builds it (``src/graph/trees.cc``).

Tree 0 is a binary tree over ranks ``0..p-1`` rooted at 0 in which odd ranks are leaves. For a
rank ``r > 0`` with lowest set bit ``b``, its parent is ``r`` with bit ``b`` cleared and bit
``2b`` set, or, when that is ``>= p``, just ``r`` with bit ``b`` cleared; the root's only child is
the largest power of two below ``p``. (Ranks 1..15 of a 16-rank tree: 8 under 0; 4 and 12 under
8; 2 and 6 under 4; ... the picture in the NCCL source.) Tree 1 is tree 0 mirrored,
``r -> p - 1 - r``, when ``p`` is even, and tree 0 shifted by one rank, ``r -> r + 1 mod p``,
when ``p`` is odd; either way the interior ranks of one tree are (nearly all) leaves of the other,
so every rank sends and receives about the same in total.

Tree 0 all-reduces the first half of the buffer, tree 1 the second half, each split into
``chunks`` pieces: a rank reduces a piece into its parent once its children's partials of that
piece arrived; the root, once every child's partial arrived, copies the piece down, and each rank
forwards it to its children once it has it. Like NCCL's channels, each tree has its own
connections: the one-piece-at-a-time order holds per tree and link, and the two trees' pieces
share a link only through the network's bandwidth sharing.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.algorithms.plan import pipeline_chunks
from commsim.collectives import Collective
from commsim.errors import ScheduleError
from commsim.schedule import Schedule

NAME = "double_binary_tree"
#: Upper bound of the default piece count per tree.
MAX_CHUNKS = 8


def btree_parents(ranks: int) -> list[int]:
    """Parent of every rank in tree 0 (-1 for the root, rank 0).

    >>> btree_parents(14)
    [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12]
    """
    parents = [-1] * ranks
    for r in range(1, ranks):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parents[r] = up if up < ranks else r ^ bit
    return parents


def dbt_parents(ranks: int) -> tuple[list[int], list[int]]:
    """Parents of every rank in tree 0 and tree 1 (-1 for each tree's root).

    >>> dbt_parents(4)
    ([-1, 2, 0, 2], [1, 3, 1, -1])
    >>> dbt_parents(3)[1]
    [1, -1, 0]
    """
    tree0 = btree_parents(ranks)
    if ranks % 2:  # shift by one rank
        shifted = [tree0[(r - 1) % ranks] for r in range(ranks)]
        tree1 = [-1 if u < 0 else (u + 1) % ranks for u in shifted]
    else:  # mirror
        mirrored = [tree0[ranks - 1 - r] for r in range(ranks)]
        tree1 = [-1 if u < 0 else ranks - 1 - u for u in mirrored]
    return tree0, tree1


def default_chunks(call: Call) -> int:
    """Pieces per tree: ``ceil((n / 2) / 512 KiB)``, clamped to ``[1, 8]``."""
    return pipeline_chunks(call.nbytes // 2, MAX_CHUNKS)


def build(call: Call) -> Schedule:
    """The double-binary-tree all-reduce of ``call``, built as columns
    (:func:`commsim.algorithms.tree_columns.double_tree_columns`)."""
    if call.collective is not Collective.ALL_REDUCE:
        raise ScheduleError(f"algorithm {NAME!r} cannot run {call.collective.value}")
    from commsim.algorithms.tree_columns import double_tree_columns

    chunks = call.chunks or default_chunks(call)
    columns = double_tree_columns(dbt_parents(call.ranks), call.nbytes, chunks)
    return Schedule.of_columns(call.collective, NAME, call.ranks, call.nbytes, call.root,
                               chunks, columns)
