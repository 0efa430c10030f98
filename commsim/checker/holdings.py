"""What every rank holds, replayed depth by depth on symbolic data (numpy arrays).

The holdings are an array ``(endpoints, cells, words)`` of uint64: bit ``r`` of a cell's words
says the cell carries rank ``r``'s contribution. Transfers take one time unit each, so a
transfer starts at its depth in the dependency DAG and ends one unit later; at each instant the
transfers that end write first (in index order), then those that start read. The race check
made the outcome independent of durations, so any will do; and it made a copy the only write
into its bytes at its instant, so a depth's writes go in at once (reduces that land together
are checked against one another in index order).
"""

from __future__ import annotations

import numpy as np

from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.schedule import Columns


def bits(words: np.ndarray) -> int:
    """A cell's words as one Python int (bit ``r``: rank ``r``)."""
    return int.from_bytes(np.ascontiguousarray(words, dtype="<u8").tobytes(), "little")


def names(mask: int) -> str:
    """``{0, 3}``: the ranks of ``mask``."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return "{" + ", ".join(map(str, out)) + "}"


def rank_words(ranks: int) -> int:
    """uint64 words a mask of ``ranks`` bits takes."""
    return max(1, (ranks + 63) // 64)


def one_rank(rank: int, words: int) -> np.ndarray:
    """The mask of ``rank`` alone."""
    out = np.zeros(words, dtype=np.uint64)
    out[rank // 64] = np.uint64(1) << np.uint64(rank % 64)
    return out


def initial(coll: Collective, p: int, n: int, root: int, bounds: np.ndarray,
            endpoints: int) -> np.ndarray:
    """Holdings before the collective: ``(p + endpoints, cells, words)``; switches empty."""
    cells, words = len(bounds) - 1, rank_words(p)
    state = np.zeros((p + endpoints, cells, words), dtype=np.uint64)
    if coll is Collective.BROADCAST:
        state[root, :] = one_rank(root, words)
    elif coll is Collective.ALL_GATHER:
        for r in range(p):
            lo, hi = np.searchsorted(bounds, segment(r, p, n))
            state[r, lo:hi] = one_rank(r, words)
    else:
        for r in range(p):
            state[r, :] = one_rank(r, words)
    return state


def extent(row: np.ndarray, k: int, bounds: np.ndarray, lo: int) -> tuple[int, int]:
    """Byte range of the run of cells of ``row`` equal to ``row[k]``, from ``k`` on (cell
    ``lo + k`` of the buffer)."""
    stop = k
    while stop < len(row) and np.array_equal(row[stop], row[k]):
        stop += 1
    return int(bounds[lo + k]), int(bounds[lo + stop])


class Replay:
    """One replay: ``rows``/``cells`` are every (transfer, cell) a transfer moves, by transfer
    then cell; ``depth`` each transfer's start."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, reduce: np.ndarray, depth: np.ndarray,
                 rows: np.ndarray, cells: np.ndarray, bounds: np.ndarray) -> None:
        self.src, self.dst, self.reduce = src, dst, reduce
        self.rows, self.cells, self.bounds = rows, cells, bounds
        self.order = np.argsort(depth[rows], kind="stable")  # by depth, transfer, cell
        self.at = np.searchsorted(depth[rows][self.order], np.arange(int(
            depth.max(initial=0)) + 3))

    def run(self, state: np.ndarray) -> None:
        """Play every transfer on ``state`` (changed in place); ScheduleError at the first
        read of bytes not held yet or contribution added twice."""
        flat = state.reshape(-1, state.shape[2])
        ncells = state.shape[1]
        held = np.zeros((0, state.shape[2]), dtype=np.uint64)
        for time in range(len(self.at) - 1):
            ending = self.order[self.at[time - 1]:self.at[time]] if time else self.order[:0]
            self._write(flat, ncells, ending, held)
            starting = self.order[self.at[time]:self.at[time + 1]]
            held = flat[self.src[self.rows[starting]] * ncells + self.cells[starting]]
            self._check_held(starting, held)

    def _check_held(self, starting: np.ndarray, held: np.ndarray) -> None:
        empty = np.flatnonzero(~held.any(axis=1))
        if not empty.size:
            return
        first = empty[0]  # records run by transfer, then cell: the first event's first cell
        i = int(self.rows[starting[first]])
        mine = np.flatnonzero(self.rows[starting] == i)
        lo = int(self.cells[starting[mine[0]]])
        a, b = extent(held[mine], int(first - mine[0]), self.bounds, lo)
        s, d = int(self.src[i]), int(self.dst[i])
        raise ScheduleError(
            f"transfer #{i} ({s}->{d}) reads rank {s} bytes [{a}, {b}), which it does not "
            "hold yet (missing transfer or dependency)"
        )

    def _write(self, flat: np.ndarray, ncells: int, ending: np.ndarray, held: np.ndarray) -> None:
        if not ending.size:
            return
        t = self.rows[ending]
        key = self.dst[t] * ncells + self.cells[ending]
        copy = ~self.reduce[t]
        flat[key[copy]] = held[copy]
        adds = np.flatnonzero(~copy)
        if not adds.size:
            return
        key, data = key[adds], held[adds]
        twice = (flat[key] | _earlier_in_group(key, data)) & data
        bad = np.flatnonzero(twice.any(axis=1))
        if bad.size:
            k = adds[bad[0]]
            i, cell = int(t[k]), int(self.cells[ending[k]])
            raise ScheduleError(
                f"double counting: transfer #{i} ({int(self.src[i])}->{int(self.dst[i])}) adds "
                f"contributions {names(bits(twice[bad[0]]))} to rank {int(self.dst[i])} bytes "
                f"[{int(self.bounds[cell])}, {int(self.bounds[cell + 1])}), which already hold "
                "them"
            )
        np.bitwise_or.at(flat, key, data)


def _earlier_in_group(key: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Per row: the OR of the earlier rows (in order) with the same ``key``."""
    out = np.zeros_like(data)
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    head = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    size = np.diff(np.r_[head, len(key)])
    step = 1
    while (size > step).any():
        grows = head[size > step] + step
        out[order[grows]] = out[order[grows - 1]] | data[order[grows - 1]]
        step += 1
    return out


def transfer_cells(cols: Columns, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (transfer, cell) a transfer moves, by transfer then cell: two arrays, the
    cells being the intervals between consecutive ``bounds`` (sorted byte offsets that
    include every transfer's ends)."""
    lo = np.searchsorted(bounds, cols.offset)
    hi = np.searchsorted(bounds, cols.offset + cols.nbytes)
    size = hi - lo
    rows = np.repeat(np.arange(len(cols), dtype=np.int64), size)
    cells = np.arange(int(size.sum()), dtype=np.int64) + np.repeat(lo - np.cumsum(size) + size,
                                                                   size)
    return rows, cells
