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

from bisect import bisect_left
from collections.abc import Sequence

from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.schedule import OpKind, Schedule, Transfer


def check(schedule: Schedule) -> None:
    """Raise :class:`ScheduleError` unless ``schedule`` implements its collective."""
    _check_shape(schedule)
    transfers = schedule.transfers
    p, n = schedule.ranks, schedule.nbytes
    coll = schedule.collective

    cuts = {0, n}
    for t in transfers:
        cuts.update((t.offset, t.offset + t.nbytes))
    if coll in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        cuts.update(segment(r, p, n)[0] for r in range(p))
    bounds = sorted(cuts)
    spans = [_cells((t.offset, t.offset + t.nbytes), bounds) for t in transfers]

    ancestors = _ancestors(transfers)
    _check_races(schedule, bounds, spans, ancestors)
    state = _initial_state(coll, p, n, schedule.root, bounds)
    # reducing switches start empty: they hold only what ranks send them
    state += [[0] * (len(bounds) - 1) for _ in range(schedule.endpoints)]
    _replay(schedule, bounds, spans, state)
    _check_final(coll, p, n, schedule.root, bounds, state)


# -- structure ------------------------------------------------------------------------------------
def _check_shape(schedule: Schedule) -> None:
    p, n = schedule.ranks, schedule.nbytes
    if p < 1:
        raise ScheduleError(f"schedule has {p} ranks; need at least 1")
    if n < 0:
        raise ScheduleError(f"schedule has a negative size {n}")
    if schedule.collective.rooted and not 0 <= schedule.root < p:
        raise ScheduleError(f"root {schedule.root} out of range for {p} ranks")
    ends = p + schedule.endpoints
    for i, t in enumerate(schedule.transfers):
        where = f"transfer #{i} ({t.src}->{t.dst})"
        if not (0 <= t.src < ends and 0 <= t.dst < ends):
            raise ScheduleError(
                f"{where}: rank out of range for {p} ranks"
                + (f" and {schedule.endpoints} switches" if schedule.endpoints else "")
            )
        if t.src == t.dst and t.op is not OpKind.COPY:
            raise ScheduleError(f"{where}: reduces into itself (only a copy may be local)")
        if t.nbytes <= 0:
            raise ScheduleError(f"{where}: moves {t.nbytes} bytes; must move at least 1")
        if t.offset < 0 or t.offset + t.nbytes > n:
            raise ScheduleError(
                f"{where}: bytes [{t.offset}, {t.offset + t.nbytes}) outside the {n}-byte buffer"
            )
        if not isinstance(t.op, OpKind):
            raise ScheduleError(f"{where}: unknown op {t.op!r}")
        for d in t.deps:
            if not 0 <= d < i:
                raise ScheduleError(
                    f"{where}: depends on transfer #{d}, which is not an earlier transfer"
                    " (dependencies must point backwards: no cycles)"
                )


def _ancestors(transfers: Sequence[Transfer]) -> list[int]:
    """Bitset of the transitive dependencies of every transfer."""
    out: list[int] = []
    for t in transfers:
        mask = 0
        for d in t.deps:
            mask |= out[d] | (1 << d)
        out.append(mask)
    return out


# -- races ----------------------------------------------------------------------------------------
def _check_races(
    schedule: Schedule,
    bounds: list[int],
    spans: list[tuple[int, int]],
    ancestors: list[int],
) -> None:
    transfers = schedule.transfers
    cells = len(bounds) - 1
    writes = [[0] * cells for _ in range(schedule.ranks + schedule.endpoints)]
    copies = [[0] * cells for _ in range(schedule.ranks + schedule.endpoints)]
    for i, (t, (lo, hi)) in enumerate(zip(transfers, spans, strict=True)):
        bit = 1 << i
        row = writes[t.dst]
        for k in range(lo, hi):
            row[k] |= bit
        if t.op is OpKind.COPY:
            row = copies[t.dst]
            for k in range(lo, hi):
                row[k] |= bit

    def overlap(t: Transfer, u: Transfer) -> str:
        a = max(t.offset, u.offset)
        b = min(t.offset + t.nbytes, u.offset + u.nbytes)
        return f"[{a}, {b})"

    for i, (t, (lo, hi)) in enumerate(zip(transfers, spans, strict=True)):
        mine = ancestors[i] | (1 << i)
        # Reads of src against every write into src.
        seen = 0
        for k in range(lo, hi):
            seen |= writes[t.src][k]
        for u in _bits(seen & ~mine):
            if (ancestors[u] >> i) & 1 or ancestors[i] & ~ancestors[u] == 0:
                continue  # u after t, or t surely starts (and reads) before u ends
            raise ScheduleError(
                f"race: transfer #{i} ({t.src}->{t.dst}) reads rank {t.src} bytes "
                f"{overlap(t, transfers[u])} while transfer #{u} ({transfers[u].src}->"
                f"{transfers[u].dst}) writes them, unordered (missing dependency)"
            )
        # Writes into dst: a copy must be ordered with every other write there.
        rows = writes if t.op is OpKind.COPY else copies
        seen = 0
        for k in range(lo, hi):
            seen |= rows[t.dst][k]
        for u in _bits(seen & ~mine):
            if (ancestors[u] >> i) & 1:
                continue
            raise ScheduleError(
                f"race: transfers #{i} ({t.src}->{t.dst}, {t.op.value}) and #{u} "
                f"({transfers[u].src}->{transfers[u].dst}, {transfers[u].op.value}) both write "
                f"rank {t.dst} bytes {overlap(t, transfers[u])}, unordered, and one is a copy"
            )


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


# -- replay ---------------------------------------------------------------------------------------
def _initial_state(
    coll: Collective, p: int, n: int, root: int, bounds: list[int]
) -> list[list[int]]:
    cells = len(bounds) - 1
    if coll is Collective.BROADCAST:
        return [[1 << root if r == root else 0] * cells for r in range(p)]
    if coll is Collective.ALL_GATHER:
        state = [[0] * cells for _ in range(p)]
        for r in range(p):
            lo, hi = _cells(segment(r, p, n), bounds)
            state[r][lo:hi] = [1 << r] * (hi - lo)
        return state
    return [[1 << r] * cells for r in range(p)]


def _replay(
    schedule: Schedule, bounds: list[int], spans: list[tuple[int, int]], state: list[list[int]]
) -> None:
    """Run the schedule with unit durations: reads at start, writes at end; ends first on ties.

    The race check made the outcome independent of durations, so any will do.
    """
    transfers = schedule.transfers
    end: list[int] = []
    events: list[tuple[int, int, int]] = []
    for i, t in enumerate(transfers):
        start = max((end[d] for d in t.deps), default=0)
        end.append(start + 1)
        events.append((start, 1, i))
        events.append((start + 1, 0, i))
    events.sort()
    held: dict[int, list[int]] = {}
    for _, starting, i in events:
        t = transfers[i]
        lo, hi = spans[i]
        if starting:
            data = state[t.src][lo:hi]
            for k, mask in enumerate(data):
                if not mask:
                    a, b = _extent(data, k, bounds, lo)
                    raise ScheduleError(
                        f"transfer #{i} ({t.src}->{t.dst}) reads rank {t.src} bytes "
                        f"[{a}, {b}), which it does not hold yet (missing transfer or dependency)"
                    )
            held[i] = data
            continue
        data = held.pop(i)
        row = state[t.dst]
        if t.op is OpKind.COPY:
            row[lo:hi] = data
            continue
        for k, mask in enumerate(data):
            twice = row[lo + k] & mask
            if twice:
                raise ScheduleError(
                    f"double counting: transfer #{i} ({t.src}->{t.dst}) adds contributions "
                    f"{_names(twice)} to rank {t.dst} bytes [{bounds[lo + k]}, "
                    f"{bounds[lo + k + 1]}), which already hold them"
                )
            row[lo + k] |= mask


def _extent(data: list[int], k: int, bounds: list[int], lo: int) -> tuple[int, int]:
    """Byte range of the run of cells equal to ``data[k]`` starting at ``k``."""
    stop = k
    while stop < len(data) and data[stop] == data[k]:
        stop += 1
    return bounds[lo + k], bounds[lo + stop]


def _cells(byte_range: tuple[int, int], bounds: list[int]) -> tuple[int, int]:
    return bisect_left(bounds, byte_range[0]), bisect_left(bounds, byte_range[1])


def _names(mask: int) -> str:
    return "{" + ", ".join(str(r) for r in _bits(mask)) + "}"


# -- postconditions -------------------------------------------------------------------------------
def _check_final(
    coll: Collective, p: int, n: int, root: int, bounds: list[int], state: list[list[int]]
) -> None:
    everyone = (1 << p) - 1
    cells = len(bounds) - 1
    # (rank, first cell, last cell, wanted mask) for every region the postcondition fixes.
    wanted: list[tuple[int, int, int, int]] = []
    if coll is Collective.BROADCAST:
        wanted = [(r, 0, cells, 1 << root) for r in range(p)]
    elif coll is Collective.REDUCE:
        wanted = [(root, 0, cells, everyone)]
    elif coll is Collective.ALL_REDUCE:
        wanted = [(r, 0, cells, everyone) for r in range(p)]
    elif coll is Collective.REDUCE_SCATTER:
        wanted = [(r, *_cells(segment(r, p, n), bounds), everyone) for r in range(p)]
    else:
        for r in range(p):
            wanted += [(r, *_cells(segment(s, p, n), bounds), 1 << s) for s in range(p)]
    for rank, lo, hi, want in wanted:
        row = state[rank]
        for k in range(lo, hi):
            if row[k] != want:
                a, b = _extent(row[lo:hi], k - lo, bounds, lo)
                got = _names(row[k]) if row[k] else "nothing"
                missing = want & ~row[k]
                extra = f"; missing {_names(missing)}" if missing and row[k] else ""
                raise ScheduleError(
                    f"{coll.value}: rank {rank} holds {got} on bytes [{a}, {b}) instead of "
                    f"{_names(want)}{extra}"
                )
