"""The hierarchical all-reduces (:mod:`commsim.algorithms.hierarchical`) built as columns, for
any hosts: host rings in lockstep (:mod:`commsim.algorithms.lockstep`), then rails, then host
rings again.

What the rules (:mod:`commsim.algorithms.plan`) give a piece beyond its ring (the previous
piece on its ordered pair, for every row; the data it reads), spelled out, with ``X`` the host
phase's last reduce of each part into its owner (the pieces of it a range overlaps):

* ring rails: the reduce-scatter's pieces and the all-gather's first step also wait for ``X``
  (a reduce adds to the bytes, a copy replaces them);
* Rabenseifner rails: a piece's source sent and its destination received one piece at a time
  over the rails, and of the rail transfers its data waits for only the latest; bytes never
  copied into the source wait for ``X`` and every rail reduce, copied bytes for the copy;
* the host all-gather's first step reads each owner's part as the rails left it: what is
  still only reduced (its own sub-ranges or blocks: ``X`` and the rail reduces there), what was
  copied in elsewhere.
"""

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import pieces
from commsim.algorithms.lockstep import Rings, Step, lockstep
from commsim.algorithms.rows import Table, Writes, join, overlaps, previous, read
from commsim.schedule import Columns


def read_kept(table: Table, reader: Writes, kept: Writes, phases: list[Writes]) -> None:
    """``reader``'s rows wait for the writes of ``phases`` overlapping what of their bytes
    lies in ``kept`` (ranges per rank, disjoint)."""
    which, by = overlaps(reader.rank, reader.lo, reader.hi, kept.rank, kept.lo, kept.hi)
    read(table, Writes(reader.rows[which], reader.rank[which],
                       np.maximum(reader.lo[which], kept.lo[by]),
                       np.minimum(reader.hi[which], kept.hi[by])), phases)


def _host_rings(groups: list[list[int]], nbytes: int) -> Rings:
    ranks = [np.array(g, dtype=np.int64) for g in groups]
    bounds = [np.arange(len(g) + 1, dtype=np.int64) * nbytes // len(g) for g in groups]
    return Rings.of(ranks, [b[:-1] for b in bounds], [b[1:] for b in bounds])


def _owners(hosts: Rings, n_hosts: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The rails: every range between consecutive part boundaries of all hosts (``cuts``) and
    its owner on each host, rail by rail ``(R, H)`` (``hierarchical._rails``)."""
    cuts = np.unique(np.concatenate([hosts.lo, [nbytes]]))
    owners = np.empty((len(cuts) - 1, n_hosts), dtype=np.int64)
    first = np.flatnonzero(hosts.place == 0)
    for h, start in enumerate(first):
        lo = hosts.lo[start:start + hosts.length[start]]
        owners[:, h] = hosts.rank[start + np.searchsorted(lo, cuts[:-1], side="right") - 1]
    return cuts, owners


def hierarchical_columns(groups: list[list[int]], nbytes: int, chunks: int,
                         rabenseifner: bool) -> Columns:
    """The hierarchical all-reduce over ``groups`` (ranks per host, hosts in order) with ring
    rails or (``rabenseifner``) Rabenseifner rails."""
    table = Table()
    c = chunks
    hosts = _host_rings(groups, nbytes)
    first = lockstep(table, hosts, c, (True,))[0]
    # X: into each owner (a position of a ring of 2 or more), from the one before it
    own = np.flatnonzero(hosts.length > 1)
    x_lo, x_hi = pieces(hosts.lo[own], hosts.hi[own], c)
    last = _latest(first, len(hosts.rank))
    x = Writes.of(last[hosts.previous[own]][:, None] + np.arange(c), hosts.rank[own][:, None],
                  x_lo, x_hi)
    cuts, owners = _owners(hosts, len(groups), nbytes)
    reduces: list[Writes] = []
    copies: list[Writes] = []
    kept = Writes.of(*(np.zeros(0, dtype=np.int64),) * 4)
    if len(groups) < 2 or not len(cuts) > 1:
        kept = Writes.of(np.zeros_like(hosts.rank), hosts.rank, hosts.lo, hosts.hi)
    elif rabenseifner:
        from commsim.algorithms.rails_columns import rabenseifner_rails

        kept = rabenseifner_rails(table, owners, cuts, c, x, reduces, copies)
    else:
        kept = _ring_rails(table, owners, cuts, c, x, reduces, copies)
    again = lockstep(table, hosts, c, (False,))[0]
    if again:
        reader = again[0].reads(hosts)
        read_kept(table, reader, kept, [x, *reduces])
        if copies:
            read(table, reader, [join(copies)])
    src, dst = table.src(np.arange(table.count)), table.dst(np.arange(table.count))
    prev = previous(src * (int(max(src.max(initial=0), dst.max(initial=0))) + 1) + dst)
    table.follow(np.flatnonzero(prev >= 0), prev[prev >= 0])
    return table.columns()


def _latest(steps: list[Step], positions: int) -> np.ndarray:
    """Each position's last row of piece 0 in ``steps`` (-1 where it sent none)."""
    latest = np.full(positions, -1, dtype=np.int64)
    for step in steps:
        latest[step.at] = step.rows[:, 0]
    return latest


def _ring_rails(table: Table, owners: np.ndarray, cuts: np.ndarray, c: int, x: Writes,
                reduces: list[Writes], copies: list[Writes]) -> Writes:
    """Every rail's ring all-reduce of its range (cut into one sub-range per host); the
    sub-ranges its owners keep reduced."""
    n_rails, n_hosts = owners.shape
    k = np.arange(n_hosts + 1, dtype=np.int64)
    sub = cuts[:-1, None] + k * (cuts[1:] - cuts[:-1])[:, None] // n_hosts   # (R, H + 1)
    rails = Rings.of(list(owners), list(sub[:, :-1]), list(sub[:, 1:]))
    scatter, gather = lockstep(table, rails, c, (True, False))
    read(table, join([step.reads(rails) for step in [*scatter, *gather[:1]]]), [x])
    # a rank receives a different sub-range at every step: each phase's writes are disjoint
    reduces.append(join([step.writes(rails) for step in scatter]))
    copies.append(join([step.writes(rails) for step in gather]))
    return Writes.of(np.zeros_like(owners), owners, sub[:, :-1], sub[:, 1:])
