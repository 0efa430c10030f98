"""Batched ancestor queries on a schedule's dependency DAG, exact and in bounded memory.

``Reach(cols)(a, b)`` tells, for arrays of transfer indices, whether ``a[k]`` is an ancestor of
``b[k]`` (a transitive dependency). A dependency is always an earlier transfer, so only
``a < b`` (and a smaller depth) can hold; a direct dependency is looked up in the sorted edge
list; the rest is decided by *chain clocks*:

* the DAG is covered by chains (each transfer continues the chain of the dependency that
  delivered the bytes it sends, else of its latest one, unless an earlier transfer already
  did), and a chain's transfers follow one another;
* for each transfer ``v`` and each chain ``c`` that holds a queried ancestor, ``clock[v][c]``
  is the latest transfer of ``c`` among ``v``'s ancestors (-1: none): the maximum over ``v``'s
  dependencies ``d`` of ``clock[d]``, with ``d`` itself on its own chain;
* ``a`` is an ancestor of ``b`` exactly when ``clock[b][chain(a)] >= a`` (the chain's
  transfer found there is ``a`` or a descendant of it on the chain); on one chain, exactly
  when ``a < b`` (a ring's chains follow each piece around the ring, so most queries end
  here).

Clocks are computed depth by depth and kept only while a later transfer still depends on them,
for as many chains at a time as :data:`MAX_CLOCK_BYTES` allows (several passes beyond).

>>> from commsim.schedule import Columns, OpKind, Transfer
>>> t = [Transfer(0, 1, 0, 8, OpKind.COPY), Transfer(1, 2, 0, 8, OpKind.COPY, (0,)),
...      Transfer(2, 3, 0, 8, OpKind.COPY, (1,)), Transfer(3, 0, 0, 8, OpKind.COPY)]
>>> reach = Reach(Columns.from_transfers(t))
>>> reach(np.array([0, 0, 3, 1]), np.array([1, 2, 2, 0])).tolist()
[True, True, False, False]
"""

from __future__ import annotations

import numpy as np

from commsim.schedule import Columns

#: The most memory the chain clocks of one pass may take.
MAX_CLOCK_BYTES = 256 << 20


class Reach:
    """Ancestor queries on the dependency DAG of ``cols`` (dependencies point backwards)."""

    def __init__(self, cols: Columns, depth: np.ndarray | None = None) -> None:
        self.cols = cols
        self.n = n = len(cols)
        self.depth = cols.depths() if depth is None else depth
        self.counts = np.diff(cols.dep_ptr)
        self.owner = np.repeat(np.arange(n, dtype=np.int64), self.counts)
        self.edges = np.sort(cols.dep_idx * n + self.owner)
        #: per transfer: the depth of its deepest dependent (-1: none depends on it)
        self.last = np.full(n, -1, dtype=np.int64)
        np.maximum.at(self.last, cols.dep_idx, self.depth[self.owner])
        self._chain: np.ndarray | None = None
        self._live = 0

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether ``a[k]`` is an ancestor of ``b[k]``, for every ``k``."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        out = np.zeros(len(a), dtype=bool)
        maybe = np.flatnonzero((a < b) & (self.depth[a] < self.depth[b]))
        if not maybe.size:
            return out
        keys = a[maybe] * self.n + b[maybe]
        at = np.minimum(np.searchsorted(self.edges, keys), max(len(self.edges) - 1, 0))
        direct = self.edges[at] == keys if len(self.edges) else np.zeros(len(keys), dtype=bool)
        out[maybe[direct]] = True
        rest = maybe[~direct]
        if rest.size:  # a chain's transfers are each other's ancestors, in order
            chain = self.chains()
            same = chain[a[rest]] == chain[b[rest]]
            out[rest[same]] = True
            rest = rest[~same]
        if rest.size:
            out[rest] = self._by_clocks(a[rest], b[rest])
        return out

    # -- chains --------------------------------------------------------------------------
    def chains(self) -> np.ndarray:
        """Each transfer's chain, named by its first transfer."""
        if self._chain is None:
            cols, n = self.cols, self.n
            dep, owner = cols.dep_idx, self.owner
            # each transfer picks the dependency that delivered the bytes it sends on (the
            # latest such), else its latest: chains then follow the data
            feeds = cols.dst[dep] == cols.src[owner]
            overlap = ((cols.offset[dep] < cols.offset[owner] + cols.nbytes[owner])
                       & (cols.offset[owner] < cols.offset[dep] + cols.nbytes[dep]))
            best = np.lexsort((dep, feeds, feeds & overlap, owner))
            last = np.r_[owner[best][1:] != owner[best][:-1], True] if len(best) else best > 0
            has, picked = owner[best][last], dep[best][last]
            # a dependency continues into its first dependent that picked it, only
            _, first = np.unique(picked, return_index=True)
            root = np.arange(n, dtype=np.int64)
            root[has[first]] = picked[first]
            while True:  # pointer jumping: every transfer to its chain's first
                nxt = root[root]
                if np.array_equal(nxt, root):
                    break
                root = nxt
            self._chain = root
        return self._chain

    def _by_clocks(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        chain = self.chains()
        wanted = np.unique(chain[a])
        live, width = self._peak_rows()
        self._live = live
        per_pass = max(1, MAX_CLOCK_BYTES // (4 * max(live, width, 1)))
        out = np.zeros(len(a), dtype=bool)
        for lo in range(0, len(wanted), per_pass):
            group = wanted[lo:lo + per_pass]
            column = np.full(self.n, -1, dtype=np.int64)
            column[group] = np.arange(len(group))
            column = column[chain]  # per transfer: its chain's column, -1 if not tracked
            mine = np.flatnonzero(column[a] >= 0)
            out[mine] = self._sweep(column, len(group), a[mine], b[mine])
        return out

    def _peak_rows(self) -> tuple[int, int]:
        """The most clocks kept at once, and the most dependencies of one depth."""
        depth, last, levels = self.depth, self.last, int(self.depth.max(initial=0)) + 1
        kept = last >= 0
        change = np.zeros(levels + 1, dtype=np.int64)
        np.add.at(change, depth[kept], 1)
        np.add.at(change, last[kept] + 1, -1)
        per_depth = np.bincount(depth[self.owner], minlength=levels) if self.n else change[:1]
        return int(np.cumsum(change).max(initial=0)), int(per_depth.max(initial=0))

    def _sweep(self, column: np.ndarray, width: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Chain clocks over ``width`` chains (``column`` per transfer), depth by depth;
        whether ``clock[b][column[a]] >= a``."""
        depth, last = self.depth, self.last
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
        kept = np.flatnonzero(last >= 0)
        freed = kept[np.argsort(last[kept], kind="stable")]
        free_at = np.searchsorted(last[freed], np.arange(len(bounds)))
        q_order = np.argsort(depth[b], kind="stable")
        q_at = np.searchsorted(depth[b][q_order], np.arange(len(bounds)))
        rows = np.full((self._live + 1, width), -1, dtype=np.int32)
        slot = np.full(self.n, -1, dtype=np.int64)
        free = list(range(len(rows) - 1, 0, -1))  # row 0 stays -1: "no dependency"
        out = np.zeros(len(a), dtype=bool)
        for level in range(len(bounds) - 1):
            nodes = order[bounds[level]:bounds[level + 1]]
            clocks = self._clocks(nodes, column, rows, slot)
            mine = q_order[q_at[level]:q_at[level + 1]]
            if mine.size:
                at = np.searchsorted(nodes, b[mine])
                out[mine] = clocks[at, column[a[mine]]] >= a[mine]
            keep = nodes[last[nodes] >= 0]
            if keep.size:
                got = [free.pop() for _ in range(len(keep))]
                slot[keep] = got
                rows[got] = clocks[np.searchsorted(nodes, keep)]
            done = freed[free_at[level]:free_at[level + 1]]
            free.extend(slot[done].tolist())
        return out

    def _clocks(self, nodes: np.ndarray, column: np.ndarray, rows: np.ndarray,
                slot: np.ndarray) -> np.ndarray:
        """The clocks of ``nodes`` (one depth, ascending) from their dependencies' rows."""
        cols = self.cols
        counts = self.counts[nodes]
        out = np.full((len(nodes), rows.shape[1]), -1, dtype=np.int32)
        if not counts.any():
            return out
        starts = cols.dep_ptr[nodes]
        total = int(counts.sum())
        deps = cols.dep_idx[np.repeat(starts - np.cumsum(counts) + counts, counts)
                            + np.arange(total)]
        seen = rows[slot[deps]]
        on = column[deps]
        tracked = np.flatnonzero(on >= 0)
        seen[tracked, on[tracked]] = deps[tracked]
        heads = np.cumsum(counts) - counts
        # NOTE: the k-th dependency of every transfer at once (reduceat along rows is slow)
        for k in range(int(counts.max())):
            has = np.flatnonzero(counts > k)
            out[has] = np.maximum(out[has], seen[heads[has] + k])
        return out
