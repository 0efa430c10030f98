"""``nvls`` and ``collnet`` (:mod:`commsim.algorithms.innetwork`) built as columns.

Rows come in the algorithm's natural order. A piece on a rank-switch port follows the previous
piece on that port (:func:`~commsim.algorithms.rows.previous` over every switch row); the
switch sends a piece down once every reduce of it arrived (the upload, for a gather). Between
phases a fence makes every later read of a rank's bytes also wait for the whole previous phase,
until a copy replaces those bytes: here, what reads bytes that were only reduced into since the
fence waits for every (non-empty) row of the phase before. """

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import pieces, ring_steps, segments
from commsim.algorithms.rows import Table, previous
from commsim.schedule import Columns


def _ring(table: Table, hosts: np.ndarray, lo: np.ndarray, hi: np.ndarray,
          phases: tuple[bool, ...]) -> np.ndarray:
    """Ring steps (one piece) on every row of ``hosts``; rows ``(steps, R, m)``."""
    cols = ring_steps(hosts, lo, hi, 1, phases)
    return table.extend(cols).reshape(-1, *hosts.shape)


def _after_all(table: Table, rows: np.ndarray, phase: np.ndarray, sizes: np.ndarray) -> None:
    """The non-empty ``rows`` wait for every non-empty row of ``phase`` (a fence)."""
    rows = rows.ravel()[sizes.ravel() > 0]
    before = phase.ravel()
    before = before[table.sizes(before) > 0]
    a, b = (x.ravel() for x in np.meshgrid(rows, before, indexing="ij"))
    table.follow(a, b)


def _switch_links(table: Table, rows: list[np.ndarray], ranks: int) -> None:
    """Each switch-port row after the previous one on the same ordered pair."""
    flat = np.concatenate([r.ravel() for r in rows])
    flat.sort()
    key = table.src(flat) * (2 * ranks + 2) + table.dst(flat)
    prev = previous(key)
    table.follow(flat[prev >= 0], flat[prev[prev >= 0]])


def collnet_columns(groups: list[list[int]], nbytes: int, chunks: int,
                    switch: int) -> Columns:
    """``collnet``: host ring reduce-scatter, every rail's part reduced in the fabric
    ``switch`` and multicast back, host ring all-gather; fences between the phases."""
    table = Table()
    hosts = np.array(groups, dtype=np.int64)                              # (H, G)
    n_hosts, per_host = hosts.shape
    ps, pe = segments(per_host, nbytes)
    lo, hi = np.broadcast_to(ps, hosts.shape), np.broadcast_to(pe, hosts.shape)
    first = _ring(table, hosts, lo, hi, (True,)) if per_host > 1 else None
    p_lo, p_hi = pieces(ps, pe, chunks)                                   # (G, c)
    rank = hosts.T[:, None, None, :]
    side = np.arange(2)[:, None]
    # rows (G, c, 2, H): rail by rail, piece by piece, up from every rank then down
    rows = table.add(np.where(side == 0, rank, switch), np.where(side == 0, switch, rank),
                     p_lo[:, :, None, None], p_hi[:, :, None, None], side == 0)
    up, down = rows[:, :, 0], rows[:, :, 1]
    _switch_links(table, [up, down], switch + 1)
    table.reads(down[:, :, :, None], up[:, :, None, :])
    if first is not None:
        _after_all(table, up, first, table.sizes(up))
        last = _ring(table, hosts, lo, hi, (False,))
        table.follow(last[0], first[-1])
        _after_all(table, last[0], np.stack([up, down]), table.sizes(last[0]))
    return table.columns()


def nvls_columns(groups: list[list[int]], nbytes: int, chunks: int,
                 switches: list[int]) -> Columns:
    """``nvls``: every host's buffer reduced in its node switch and multicast back; across
    hosts, ring rails then an all-gather through the switches, fences between the phases."""
    table = Table()
    hosts = np.array(groups, dtype=np.int64)                              # (H, G)
    n_hosts, per_host = hosts.shape
    sw = np.array(switches, dtype=np.int64)[:, None, None, None]
    lo, hi = pieces(0, nbytes, chunks)
    side = np.arange(2)[:, None]
    member = hosts[:, None, None, :]
    first = table.add(np.where(side == 0, member, sw), np.where(side == 0, sw, member),
                      lo[None, :, None, None], hi[None, :, None, None], side == 0)
    # a piece leaves the switch after every reduce of it into the switch so far: its host's
    # and those of earlier hosts behind the same switch
    reader, writer = _same_switch(np.array(switches, dtype=np.int64))
    table.reads(first[reader, :, 1, :, None], first[writer, :, 0, None, :])
    links = [first]
    if n_hosts > 1:
        ps, pe = segments(per_host, nbytes)
        sub = ps[:, None] + np.arange(n_hosts + 1) * (pe - ps)[:, None] // n_hosts
        rails = _ring(table, hosts.T.copy(), sub[:, :-1], sub[:, 1:], (True, False))
        fenced = rails[:n_hosts]        # the reduce-scatter and the all-gather's first step
        _after_all(table, fenced, first, table.sizes(fenced))
        links.append(_gather(table, hosts, sw.ravel(), (ps, pe), sub, chunks, (first, rails)))
    _switch_links(table, links, int(max(switches)) + 1)
    return table.columns()


def _same_switch(switches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (host, earlier or same host) pair behind the same switch.

    >>> [x.tolist() for x in _same_switch(np.array([7, 8, 7]))]
    [[0, 2, 2, 1], [0, 0, 2, 1]]
    """
    order = np.lexsort((np.arange(len(switches)), switches))
    keys = switches[order]
    start = np.searchsorted(keys, keys, side="left")
    sizes = np.arange(len(keys)) - start + 1
    at = np.repeat(start - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))
    return np.repeat(order, sizes), order[at]


def _gather(table: Table, hosts: np.ndarray, sw: np.ndarray,
            parts: tuple[np.ndarray, np.ndarray], sub: np.ndarray, chunks: int,
            fences: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """An all-gather through the switch on every host: per piece, per owner ``l``, its piece of
    part ``l`` up to the switch, then down to the host's other ranks; the rows."""
    n_hosts, per_host = hosts.shape
    p_lo, p_hi = pieces(*parts, chunks)                                   # (G, c)
    owner = np.arange(per_host)[:, None]
    t = np.arange(1, per_host)[None, :]
    others = np.where(t - 1 < owner, t - 1, t)                            # (G, G - 1)
    to = np.concatenate([owner, others], axis=1)                          # 0: the owner
    h = np.arange(n_hosts)[:, None, None, None]
    src = np.where(np.arange(per_host) == 0, hosts[h, owner[None, None]], sw[h])
    dst = np.where(np.arange(per_host) == 0, sw[h], hosts[h, to[None, None]])
    lo = p_lo.T[None, :, :, None]                                         # (1, c, G, 1)
    hi = p_hi.T[None, :, :, None]
    rows = table.add(src, dst, lo, hi, False)                             # (H, c, G, G)
    up = rows[..., 0]
    table.reads(rows[..., 1:], up[..., None])
    sizes = table.sizes(up)
    first, rails = fences
    _after_all(table, up, rails, sizes)
    own_lo = sub[:, :-1].T[:, None, :]                                    # (H, 1, G)
    own_hi = sub[:, 1:].T[:, None, :]
    mine = (np.minimum(p_hi.T[None], own_hi) > np.maximum(p_lo.T[None], own_lo)) & (sizes > 0)
    _after_all(table, up[mine], first, sizes[mine])
    return rows


def nvls_tree_columns(groups: list[list[int]], nbytes: int, switches: list[int]) -> Columns:
    """NCCL's NVLS tree across hosts, one piece (its own switch per host): every rank's
    buffer up into its node switch, which sends part ``l`` reduced down to local rank ``l``
    alone (a reduce-scatter in the switch); ring rails all-reduce each part among its owners
    across hosts; the owners' parts up again and multicast to the host's other ranks."""
    table = Table()
    hosts = np.array(groups, dtype=np.int64)                              # (H, G)
    n_hosts, per_host = hosts.shape
    sw = np.array(switches, dtype=np.int64)
    ps, pe = segments(per_host, nbytes)
    up = table.add(hosts, sw[:, None], 0, nbytes, True)                   # (H, G)
    down = table.add(sw[:, None], hosts, ps[None, :], pe[None, :], False)  # (H, G)
    table.reads(down[:, :, None], up[:, None, :])
    first = np.stack([up, down])
    sub = ps[:, None] + np.arange(n_hosts + 1) * (pe - ps)[:, None] // n_hosts
    rails = _ring(table, hosts.T.copy(), sub[:, :-1], sub[:, 1:], (True, False))
    fenced = rails[:n_hosts]        # the reduce-scatter and the all-gather's first step
    _after_all(table, fenced, first, table.sizes(fenced))
    gather = _gather(table, hosts, sw, (ps, pe), sub, 1, (first, rails))
    _switch_links(table, [first, gather], int(max(switches)) + 1)
    return table.columns()
