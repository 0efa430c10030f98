"""The symbolic checker: proves a schedule implements its collective, with no timing involved.

It replays the schedule on symbolic data. Each rank's buffer is cut at every byte offset any
transfer or segment boundary uses; each elementary range holds the set of ranks whose
contributions it carries (a bitmask; a multiset is never needed, since adding a contribution a
second time is rejected as double counting). A copy overwrites the destination's range with the
source's; a reduce adds the source's contributions to the destination's.

Semantics, as the engine times a schedule: a transfer starts when all its ``deps`` have ended,
reads ``src``'s bytes when it starts and writes them into ``dst`` when it ends. The checker
rejects, with a message naming the transfer, ranks and bytes:

* malformed transfers: a reduce with ``src == dst``, ranks or bytes out of range, a dependency
  that is not an earlier transfer (so no cycles);
* races, decided on the dependency DAG alone so that every timing gives the same result:
  a transfer ``t`` reading bytes of ``src`` that another transfer ``u`` writes, where ``u`` is
  neither an ancestor nor a descendant of ``t`` and ``t`` is not guaranteed to start first (every
  dependency of ``t`` is an ancestor of ``u``, so ``t`` starts no later than ``u`` and reads before
  ``u`` ends: the ``MPI_Sendrecv`` exchange); and a copy into bytes that a concurrent transfer
  also writes (concurrent reduces into the same bytes commute and are fine);
* reading bytes the source does not hold yet, and adding a contribution already present;
* a final state that misses the collective's postcondition.

All-to-all has its own semantics (blocks that belong to a sender, holdings that only grow):
:mod:`commsim.checker.exchange`.

It reads the schedule's columns (:class:`~commsim.schedule.Columns`), never a ``Transfer``
object: the races are pairs of transfers touching the same bytes of a rank, decided by batched
ancestor queries (:mod:`commsim.checker.reach`); the replay keeps every rank's holdings as
numpy bitmasks, advanced one depth of the DAG at a time (:mod:`commsim.checker.holdings`). The
first error reported is the one a transfer-by-transfer replay meets first.

In-network schedules (``Schedule.endpoints``) also address reducing switches, as endpoints
``ranks ..``: a switch starts empty and holds only what ranks send it, so a multicast before
every contribution arrived reads what the switch does not hold yet; the postcondition is on
the ranks alone.

>>> from commsim.schedule import ScheduleBuilder, OpKind
>>> b = ScheduleBuilder()
>>> _ = b.add(0, 1, 0, 4, OpKind.COPY)
>>> check(b.build(Collective.BROADCAST, "hand", 2, 4))
>>> check(ScheduleBuilder().build(Collective.BROADCAST, "hand", 2, 4))
Traceback (most recent call last):
...
commsim.errors.ScheduleError: broadcast: rank 1 holds nothing on bytes [0, 4) instead of {0}
"""

from __future__ import annotations

import numpy as np

from commsim.budget import budget_source, fits, memory_budget
from commsim.checker.exchange import check_exchange
from commsim.checker.holdings import (
    Replay,
    bits,
    extent,
    initial,
    names,
    one_rank,
    rank_words,
    transfer_cells,
)
from commsim.checker.races import check_races
from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError, SpecError
from commsim.schedule import Columns, Schedule


def check(schedule: Schedule) -> None:
    """Raise :class:`ScheduleError` unless ``schedule`` implements its collective."""
    _check_scalars(schedule)
    cols = schedule.columns
    _check_shape(schedule, cols)
    if schedule.collective is Collective.ALL_TO_ALL:
        check_exchange(schedule, cols)
        return
    p, n = schedule.ranks, schedule.nbytes
    coll = schedule.collective
    cuts = [np.array([0, n], dtype=np.int64), cols.offset, cols.offset + cols.nbytes]
    if coll in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        cuts.append(np.array([segment(r, p, n)[0] for r in range(p)], dtype=np.int64))
    bounds = np.unique(np.concatenate(cuts))
    rows, cells = transfer_cells(cols, bounds)
    _check_fits(schedule, len(bounds) - 1, len(rows))
    depth = cols.depths()
    check_races(cols, depth, bounds, rows, cells)
    state = initial(coll, p, n, schedule.root, bounds, schedule.endpoints)
    Replay(cols.src, cols.dst, cols.reduce, depth, rows, cells, bounds).run(state)
    _check_final(coll, p, n, schedule.root, bounds, state)


def _check_fits(schedule: Schedule, cells: int, moved: int) -> None:
    """SpecError, before the big arrays, when the holdings (a bitmask per rank and cell) and
    the per-cell records would exceed the memory budget (:mod:`commsim.budget`)."""
    need = ((schedule.ranks + schedule.endpoints) * cells * rank_words(schedule.ranks) * 8 * 2
            + moved * 8 * 48)  # measured: ~230 MB peak for a 512-rank ring (523,264 moved)
    if not fits(need):
        budget = memory_budget()
        raise SpecError(
            f"checking {schedule.algorithm} {schedule.collective.value} on {schedule.ranks} "
            f"ranks ({len(schedule)} transfers, {cells} byte ranges) would take about "
            f"{need / 1e6:.0f} MB, more than the {budget / 1e6:.0f} MB budget "
            f"({budget_source()})"
        )


# -- structure ------------------------------------------------------------------------------------
def _check_scalars(schedule: Schedule) -> None:
    p, n = schedule.ranks, schedule.nbytes
    if p < 1:
        raise ScheduleError(f"schedule has {p} ranks; need at least 1")
    if n < 0:
        raise ScheduleError(f"schedule has a negative size {n}")
    if schedule.collective.rooted and not 0 <= schedule.root < p:
        raise ScheduleError(f"root {schedule.root} out of range for {p} ranks")


def _check_shape(schedule: Schedule, cols: Columns) -> None:
    """The first malformed transfer, in order, with its first fault."""
    p, n, ends = schedule.ranks, schedule.nbytes, schedule.ranks + schedule.endpoints
    src, dst, offset, nbytes = cols.src, cols.dst, cols.offset, cols.nbytes
    counts = np.diff(cols.dep_ptr)
    owner = np.repeat(np.arange(len(cols), dtype=np.int64), counts)
    backwards = (cols.dep_idx >= 0) & (cols.dep_idx < owner)
    faults = [
        (src < 0) | (src >= ends) | (dst < 0) | (dst >= ends),
        (src == dst) & cols.reduce,
        nbytes <= 0,
        (offset < 0) | (offset + nbytes > n),
        np.isin(np.arange(len(cols)), owner[~backwards]),
    ]
    bad = np.flatnonzero(np.logical_or.reduce(faults)) if len(cols) else faults[0][:0]
    if not bad.size:
        return
    i = int(bad[0])
    s, d, o, b = int(src[i]), int(dst[i]), int(offset[i]), int(nbytes[i])
    where = f"transfer #{i} ({s}->{d})"
    if faults[0][i]:
        raise ScheduleError(
            f"{where}: rank out of range for {p} ranks"
            + (f" and {schedule.endpoints} switches" if schedule.endpoints else "")
        )
    if faults[1][i]:
        raise ScheduleError(f"{where}: reduces into itself (only a copy may be local)")
    if faults[2][i]:
        raise ScheduleError(f"{where}: moves {b} bytes; must move at least 1")
    if faults[3][i]:
        raise ScheduleError(f"{where}: bytes [{o}, {o + b}) outside the {n}-byte buffer")
    lo = int(cols.dep_ptr[i])
    dep = int(cols.dep_idx[lo + int(np.flatnonzero(~backwards[lo:int(cols.dep_ptr[i + 1])])[0])])
    raise ScheduleError(
        f"{where}: depends on transfer #{dep}, which is not an earlier transfer"
        " (dependencies must point backwards: no cycles)"
    )


# -- postconditions -------------------------------------------------------------------------------
def _wanted(coll: Collective, p: int, n: int, root: int,
            bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (rank, cell): the mask the postcondition wants, and whether it wants one."""
    cells, words = len(bounds) - 1, rank_words(p)
    want = np.zeros((p, cells, words), dtype=np.uint64)
    fixed = np.zeros((p, cells), dtype=bool)
    everyone = np.zeros(words, dtype=np.uint64)
    for r in range(p):
        everyone |= one_rank(r, words)
    if coll is Collective.BROADCAST:
        want[:], fixed[:] = one_rank(root, words), True
    elif coll is Collective.REDUCE:
        want[root], fixed[root] = everyone, True
    elif coll is Collective.ALL_REDUCE:
        want[:], fixed[:] = everyone, True
    elif coll is Collective.REDUCE_SCATTER:
        for r in range(p):
            lo, hi = np.searchsorted(bounds, segment(r, p, n))
            want[r, lo:hi], fixed[r, lo:hi] = everyone, True
    else:
        for s in range(p):
            lo, hi = np.searchsorted(bounds, segment(s, p, n))
            want[:, lo:hi], fixed[:, lo:hi] = one_rank(s, words), True
    return want, fixed


def _check_final(coll: Collective, p: int, n: int, root: int, bounds: np.ndarray,
                 state: np.ndarray) -> None:
    want, fixed = _wanted(coll, p, n, root, bounds)
    wrong = np.flatnonzero((fixed & (state[:p] != want).any(axis=2)).reshape(-1))
    if not wrong.size:
        return
    rank, k = divmod(int(wrong[0]), len(bounds) - 1)  # the first rank, then its first cell
    # the run of equal cells from k, within the region that wants the same mask
    hi = k
    while hi < len(bounds) - 1 and fixed[rank, hi] and np.array_equal(want[rank, hi],
                                                                       want[rank, k]):
        hi += 1
    a, b = extent(state[rank, k:hi], 0, bounds, k)
    got, wanted = bits(state[rank, k]), bits(want[rank, k])
    missing = wanted & ~got
    extra = f"; missing {names(missing)}" if missing and got else ""
    raise ScheduleError(
        f"{coll.value}: rank {rank} holds {names(got) if got else 'nothing'} on bytes "
        f"[{a}, {b}) instead of {names(wanted)}{extra}"
    )
