"""``hierarchical`` (ring rails) built as columns, for hosts of equal size.

The three phases of :mod:`commsim.algorithms.hierarchical` are ring steps
(:func:`commsim.algorithms.columnar.ring_steps`): a reduce-scatter on every host (``H`` rings of
``G`` ranks, the buffer in ``G`` parts), a reduce-scatter then all-gather on every rail (``G``
rings of ``H`` ranks, part ``l`` cut into ``H`` sub-ranges), an all-gather on every host. What
``Plan`` adds across phases is spelled out here, with ``X`` the host phase's last reduce of
part ``l`` into its owner (the pieces of it a range overlaps):

* a rail transfer of the first ``H`` rail steps also waits for ``X`` (a reduce adds to what
  the bytes held, so the owner's bytes wait for both until a copy overwrites them);
* the host all-gather's first step waits for the last host-phase piece on its link, and for
  every rail piece that last wrote the part it sends: the rail reduce-scatter's last reduce on
  the owner's own sub-range (and ``X`` there), the rail all-gather's copies elsewhere.

The result equals ``Plan``'s schedule transfer for transfer (tests compare the two); None
where hosts differ in size, a host or the rail has one rank, or a piece would be empty.
"""

from __future__ import annotations

import numpy as np

from commsim.algorithms.columnar import concat, overlapping, ring_steps, segments, with_deps
from commsim.schedule import Columns


def ring_rails_columns(groups: list[list[int]], nbytes: int, chunks: int) -> Columns | None:
    """The hierarchical ring-rail all-reduce over ``groups`` (ranks per host) as columns."""
    c = chunks
    if len({len(g) for g in groups}) != 1 or len(groups) < 2 or len(groups[0]) < 2:
        return None
    hosts = np.array(groups, dtype=np.int64)                              # (H, G)
    n_hosts, per_host = hosts.shape
    ps, pe = segments(per_host, nbytes)                                   # parts (G,)
    k = np.arange(n_hosts + 1, dtype=np.int64)
    sub = ps[:, None] + k * (pe - ps)[:, None] // n_hosts                 # (G, H + 1)
    phases = [
        ring_steps(hosts, _rows(ps, n_hosts), _rows(pe, n_hosts), c, (True,)),
        ring_steps(hosts.T.copy(), sub[:, :-1], sub[:, 1:], c, (True, False)),
        ring_steps(hosts, _rows(ps, n_hosts), _rows(pe, n_hosts), c, (False,)),
    ]
    if any(phase is None for phase in phases):
        return None
    a, b, last = phases
    assert a is not None and b is not None and last is not None
    size_a, size_b = len(a), len(b)
    steps_a, steps_b = per_host - 1, 2 * (n_hosts - 1)
    joined = concat([a, _shift_levels(b, steps_a * c),
                     _shift_levels(last, (steps_a + steps_b) * c)])
    a_starts = a.offset.reshape(steps_a, n_hosts, per_host, c)[0, 0]      # (G, c), in order
    a_starts = np.sort(a_starts.ravel())

    def x_rows(host: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray,
                                                                           np.ndarray]:
        """(range, row) pairs: the host phase's last reduces into the part's owner."""
        which, piece = overlapping(a_starts, lo, hi)
        part = piece // c
        row = (((steps_a - 1) * n_hosts + host[which]) * per_host
               + (part - 1) % per_host) * c + piece % c
        return which, row

    # rail transfers of the first H steps: + X
    shape_b = (steps_b, per_host, n_hosts, c)
    first = np.arange(n_hosts * per_host * n_hosts * c, dtype=np.int64)   # rows of g < H
    g_host = np.broadcast_to(np.arange(n_hosts)[None, None, :, None], shape_b).ravel()
    which, dep = x_rows(g_host[first], b.offset[first], b.offset[first] + b.nbytes[first])
    rows = [size_a + first[which]]
    deps = [dep]
    # host all-gather, first step: + the link's last host-phase piece, + the rail pieces
    first_c = np.arange(n_hosts * per_host * c, dtype=np.int64)           # rows of g == 0
    h = first_c // (per_host * c)
    part = first_c // c % per_host
    piece = first_c % c
    row_c = size_a + size_b + first_c
    lead = piece == 0
    rows.append(row_c[lead])
    deps.append((((steps_a - 1) * n_hosts + h[lead]) * per_host + part[lead]) * c + (c - 1))
    lo, hi = last.offset[first_c], last.offset[first_c] + last.nbytes[first_c]
    b_starts = np.sort(b.offset.reshape(shape_b)[0].ravel())              # (G, H, c), in order
    which, q = overlapping(b_starts, lo, hi)
    owner_host = h[which]
    rail, sub_k, jb = q // (n_hosts * c), q // c % n_hosts, q % c
    step = np.where(sub_k == owner_host, n_hosts - 2,
                    n_hosts - 1 + (owner_host - 1 - sub_k) % n_hosts)
    rows.append(row_c[which])
    deps.append(size_a + ((step * per_host + rail) * n_hosts + (owner_host - 1) % n_hosts) * c
                + jb)
    own_lo = np.maximum(lo, sub[part, h])
    own_hi = np.minimum(hi, sub[part, h + 1])
    inside = np.flatnonzero(own_lo < own_hi)
    which, dep = x_rows(h[inside], own_lo[inside], own_hi[inside])
    rows.append(row_c[inside[which]])
    deps.append(dep)
    return with_deps(joined, np.concatenate(rows), np.concatenate(deps))


def _rows(values: np.ndarray, count: int) -> np.ndarray:
    return np.broadcast_to(values, (count, len(values)))


def _shift_levels(cols: Columns, by: int) -> Columns:
    assert cols.level is not None
    return Columns(cols.src, cols.dst, cols.offset, cols.nbytes, cols.reduce, cols.dep_ptr,
                   cols.dep_idx, cols.level + by)
