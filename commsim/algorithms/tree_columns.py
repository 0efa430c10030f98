"""Tree schedules as :class:`~commsim.schedule.Columns`: the binomial tree
(:mod:`commsim.algorithms.tree`) and NCCL's double binary tree
(:mod:`commsim.algorithms.double_binary_tree`), built in a few numpy operations.

A tree piece has only the dependencies the rules of :mod:`commsim.algorithms.plan` give it: the
same link's previous piece (one piece per link at a time), and the transfers that last wrote
its bytes into its source. A rank reduces a piece up once every child's partial of it arrived
(all of them: reduces add up); the root sends a piece down after every reduce into it
(all-reduce) and any other rank once the copy of it arrived. Zero-byte pieces are made and then
dropped (:func:`~commsim.algorithms.columnar.assemble`), standing for their dependencies. """

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import Pairs, assemble, pieces
from commsim.schedule import Columns


def binomial_columns(ranks: int, nbytes: int, root: int, chunks: int, up: bool,
                     down: bool) -> Columns:
    """Every piece reduced up the binomial tree (``up``) then copied down it (``down``), in
    :func:`commsim.algorithms.tree.build`'s order: per piece, the reduces of relative ranks
    ``p - 1 .. 1``, then the copies parent by parent, each parent's largest subtree first."""
    p, c = ranks, chunks
    w = np.arange(1, p, dtype=np.int64)                                  # non-root, relative
    par = w & (w - 1)
    pos_up = np.zeros(p, dtype=np.int64)
    pos_up[w] = p - 1 - w                                                # v = p-1 .. 1
    order = np.lexsort((-w, par))
    pos_down = np.zeros(p, dtype=np.int64)
    pos_down[w[order]] = np.arange(p - 1)
    per = (p - 1) * (up + down)
    j = np.arange(c, dtype=np.int64)[:, None]                            # (c, 1)
    offset, end = pieces(0, nbytes, c)
    size = end - offset

    def row_up(v: np.ndarray) -> np.ndarray:
        return j * per + pos_up[v]

    def row_down(v: np.ndarray) -> np.ndarray:
        return j * per + up * (p - 1) + pos_down[v]

    shape = (c, p - 1)
    link: Pairs = []
    data: Pairs = []
    blocks = []
    if up:
        blocks.append((w[::-1], par[::-1], True))
        link.append((row_up(w)[1:].ravel(), row_up(w)[:-1].ravel()))
        inner = par > 0
        data.append((row_up(par[inner]).ravel(), row_up(w[inner]).ravel()))
    if down:
        blocks.append((w[order], par[order], False))
        link.append((row_down(w)[1:].ravel(), row_down(w)[:-1].ravel()))
        inner = par > 0
        data.append((row_down(w[inner]).ravel(), row_down(par[inner]).ravel()))
        if up:  # the root's children wait for every reduce into the root
            top = w[par == 0]
            a, b = np.meshgrid(top, top, indexing="ij")
            data.append((row_down(a.ravel()).ravel(), row_up(b.ravel()).ravel()))
    src, dst, red = [], [], []
    for child, parent, is_up in blocks:
        a, b = (child, parent) if is_up else (parent, child)
        src.append(np.broadcast_to((a + root) % p, shape))
        dst.append(np.broadcast_to((b + root) % p, shape))
        red.append(np.full(shape, is_up))
    return _rows(src, dst, red, offset, size, link, data)


def _rows(src: list[np.ndarray], dst: list[np.ndarray], red: list[np.ndarray],
          offset: np.ndarray, size: np.ndarray, link: Pairs, data: Pairs) -> Columns:
    """Blocks of rows side by side per piece (each ``(pieces, k)``), row-major."""
    shape = (len(offset), sum(s.shape[1] for s in src))

    def flat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts, axis=1).ravel() if parts else np.zeros(0, np.int64)

    return assemble(flat(src), flat(dst), np.broadcast_to(offset[:, None], shape).ravel(),
                    np.broadcast_to(size[:, None], shape).ravel(), flat(red).astype(bool),
                    link, data)


def tree_depths(parents: np.ndarray) -> np.ndarray:
    """Depth of every rank of a tree (``parents[root] = -1``) by pointer jumping: O(log depth)
    array operations instead of a Python walk over the ranks.

    >>> tree_depths(np.array([-1, 0, 0, 1, 3])).tolist()
    [0, 1, 1, 2, 3]
    """
    up = parents.copy()  # an ancestor of each rank (-1 once past the root)...
    depth = np.where(up >= 0, 1, 0)  # ...and how many levels up it is
    while True:
        live = np.flatnonzero(up >= 0)
        if live.size == 0:
            return depth
        above = up[live]
        depth[live] += depth[above]
        up[live] = up[above]


def double_tree_columns(trees: tuple[list[int], list[int]], nbytes: int,
                        chunks: int) -> Columns:
    """:func:`commsim.algorithms.double_binary_tree.build`'s all-reduce on ``trees`` (each
    rank's parent in either tree, -1 at the root): per tree, per piece, the reduces leaves
    first (by depth, then rank), then the copies root first."""
    p, c = len(trees[0]), chunks
    cols: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * 5
    link: Pairs = []
    data: Pairs = []
    for channel, tree in enumerate(trees):
        parents = np.asarray(tree, dtype=np.int64)
        lo, hi = (0, nbytes // 2) if channel == 0 else (nbytes // 2, nbytes)
        offset, end = pieces(lo, hi, c)
        size = end - offset
        src, dst, red = _tree(parents, c, channel * c * 2 * (p - 1), link, data)
        made = (src, dst, np.repeat(offset, 2 * (p - 1)), np.repeat(size, 2 * (p - 1)), red)
        cols = [np.concatenate([a, b]) for a, b in zip(cols, made, strict=True)]
    src, dst, offset, size, red = cols
    return assemble(src, dst, offset, size, red.astype(bool), link, data)


def _tree(parents: np.ndarray, c: int, base: int, link: Pairs,
          data: Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One tree's rows (per piece: reduces, then copies) from row ``base``: their sources,
    destinations and ops; their dependencies appended to ``link`` and ``data``."""
    p = len(parents)
    depth = tree_depths(parents)
    r = np.arange(p, dtype=np.int64)
    child = r[parents >= 0]
    par = parents[child]
    up = child[np.lexsort((child, -depth[child]))]
    down = child[np.lexsort((child, depth[child]))]
    pos_up, pos_down = np.zeros(p, dtype=np.int64), np.zeros(p, dtype=np.int64)
    pos_up[up], pos_down[down] = np.arange(p - 1), np.arange(p - 1)
    j = np.arange(c, dtype=np.int64)[:, None]

    def row_up(v: np.ndarray) -> np.ndarray:
        return (base + j * 2 * (p - 1) + pos_up[v]).ravel()

    def row_down(v: np.ndarray) -> np.ndarray:
        return (base + j * 2 * (p - 1) + (p - 1) + pos_down[v]).ravel()

    inner = parents[par] >= 0                      # the parent is not the root
    top = child[~inner]
    a, b = (x.ravel() for x in np.meshgrid(top, top, indexing="ij"))
    link += [(row_up(child)[p - 1:], row_up(child)[: (c - 1) * (p - 1)]),
             (row_down(child)[p - 1:], row_down(child)[: (c - 1) * (p - 1)])]
    data += [(row_up(par[inner]), row_up(child[inner])),
             (row_down(child[inner]), row_down(par[inner])),
             (row_down(a), row_up(b))]
    src = np.concatenate([up, parents[down]])
    dst = np.concatenate([parents[up], down])
    red = np.concatenate([np.ones(p - 1, dtype=bool), np.zeros(p - 1, dtype=bool)])
    return np.tile(src, c), np.tile(dst, c), np.tile(red, c)
