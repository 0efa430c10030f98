"""A schedule: a collective written as pure data, point-to-point transfers with dependencies.

Algorithm builders produce schedules; engines time them; the checker proves them correct.
Nothing here knows about time or the network.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from commsim.collectives import Collective
from commsim.gcpause import paused_gc
from commsim.lazy_rows import LazyRows

if TYPE_CHECKING:
    import numpy as np

#: A handle returned by :meth:`ScheduleBuilder.add`: the ids of real transfers that must end
#: before whatever depends on the handle may start. A dropped zero-byte transfer passes its
#: own dependencies through, so builders never special-case empty pieces.
Handle = frozenset[int]
NONE: Handle = frozenset()


class OpKind(StrEnum):
    """What a transfer does at its destination."""

    COPY = "copy"  #: dst now holds src's data for the byte range
    REDUCE = "reduce"  #: dst adds src's partial result into its own


@dataclass(frozen=True, slots=True)
class Transfer:
    """One point-to-point transfer of bytes ``[offset, offset + nbytes)`` of the full buffer.

    ``deps`` are indices of transfers in the same schedule that must have ended (arrived, and
    been reduced) before this one starts reading ``src``'s data.

    A *local copy* has ``src == dst`` and op ``copy``: a rank copying bytes within its own
    memory (a framework's staging copy). It leaves the data as it is and costs what the
    topology's route from a device to itself costs: nothing on the network kinds, a pass over
    the host's medium on ``shared``.
    """

    src: int
    dst: int
    offset: int
    nbytes: int
    op: OpKind
    deps: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class Columns:
    """A schedule's transfers as columns (numpy arrays, one row per transfer).

    ``src``, ``dst``, ``offset``, ``nbytes`` (int64) and ``reduce`` (bool: op ``reduce``) are
    :class:`Transfer`'s fields; the dependencies are CSR: transfer ``i`` waits for
    ``dep_idx[dep_ptr[i]:dep_ptr[i + 1]]``, sorted, each an earlier transfer. ``level``, when a
    builder knows it, is a step index per transfer larger than every dependency's (the
    evaluators then skip computing one). ``origin``, where given (all-to-all schedules that
    relay), is the rank whose send buffer each transfer's bytes come from: ``offset`` indexes
    that rank's buffer; None means every transfer sends its own ``src``'s bytes.

    >>> cols = Columns.from_transfers([Transfer(0, 1, 0, 8, OpKind.COPY),
    ...                                Transfer(1, 2, 0, 8, OpKind.REDUCE, (0,))])
    >>> cols.dep_ptr.tolist(), cols.dep_idx.tolist(), cols.transfer(1) == Transfer(
    ...     1, 2, 0, 8, OpKind.REDUCE, (0,))
    ([0, 0, 1], [0], True)
    """

    src: np.ndarray
    dst: np.ndarray
    offset: np.ndarray
    nbytes: np.ndarray
    reduce: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    level: np.ndarray | None = None
    origin: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.src)

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct (src, dst) pairs, sorted, as two arrays, and each row's pair index
        (for looking a route up once per pair)."""
        import numpy as np

        width = int(max(self.src.max(initial=0), self.dst.max(initial=0))) + 1
        keys, which = np.unique(self.src * width + self.dst, return_inverse=True)
        return keys // width, keys % width, which.reshape(-1)

    def depths(self) -> np.ndarray:
        """Each transfer's depth in the dependency DAG: 0 without dependencies, else one more
        than its deepest dependency's (its start when every transfer takes one time unit).

        >>> Columns.from_transfers([Transfer(0, 1, 0, 8, OpKind.COPY),
        ...                         Transfer(1, 2, 0, 8, OpKind.COPY, (0,)),
        ...                         Transfer(2, 0, 0, 8, OpKind.COPY, (0, 1))]).depths().tolist()
        [0, 1, 2]
        """
        import numpy as np

        n = len(self)
        counts = np.diff(self.dep_ptr)
        owner = np.repeat(np.arange(n, dtype=np.int64), counts)
        order = np.argsort(self.dep_idx, kind="stable")
        dependents = owner[order]
        dep_start = np.searchsorted(self.dep_idx[order], np.arange(n + 1))
        waiting = counts.copy()
        level = np.zeros(n, dtype=np.int64)
        frontier = np.flatnonzero(waiting == 0)
        depth = 0
        while frontier.size:
            level[frontier] = depth
            lo, hi = dep_start[frontier], dep_start[frontier + 1]
            sizes = hi - lo
            nxt = dependents[np.repeat(lo - np.cumsum(sizes) + sizes, sizes)
                             + np.arange(int(sizes.sum()))]
            np.subtract.at(waiting, nxt, 1)
            frontier = np.unique(nxt[waiting[nxt] == 0])
            depth += 1
        if (waiting > 0).any():
            raise RuntimeError("transfers never became ready (a cyclic schedule)")
        return level

    def transfer(self, index: int) -> Transfer:
        """Row ``index`` as a :class:`Transfer`."""
        lo, hi = int(self.dep_ptr[index]), int(self.dep_ptr[index + 1])
        return Transfer(int(self.src[index]), int(self.dst[index]), int(self.offset[index]),
                        int(self.nbytes[index]),
                        OpKind.REDUCE if self.reduce[index] else OpKind.COPY,
                        tuple(self.dep_idx[lo:hi].tolist()))

    def to_transfers(self) -> tuple[Transfer, ...]:
        """Every row as a :class:`Transfer`, in order."""
        ptr = self.dep_ptr.tolist()
        deps = self.dep_idx.tolist()
        ops = [OpKind.REDUCE if r else OpKind.COPY for r in self.reduce.tolist()]
        with paused_gc():  # many long-lived objects: see commsim.gcpause
            return tuple(
                Transfer(s, d, o, n, op, tuple(deps[ptr[i]:ptr[i + 1]]))
                for i, (s, d, o, n, op) in enumerate(zip(
                    self.src.tolist(), self.dst.tolist(), self.offset.tolist(),
                    self.nbytes.tolist(), ops, strict=True))
            )

    @staticmethod
    def from_transfers(transfers: Sequence[Transfer]) -> Columns:
        """The columns of ``transfers`` (the adapter for schedules built one object at a time)."""
        import numpy as np

        if isinstance(transfers, TransferView):
            return transfers.columns
        counts = [len(t.deps) for t in transfers]
        ptr = np.zeros(len(transfers) + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        deps = [d for t in transfers for d in t.deps]

        def column(values: list[int]) -> np.ndarray:
            return np.array(values, dtype=np.int64)

        return Columns(
            column([t.src for t in transfers]), column([t.dst for t in transfers]),
            column([t.offset for t in transfers]), column([t.nbytes for t in transfers]),
            np.array([t.op is OpKind.REDUCE for t in transfers], dtype=bool),
            ptr, column(deps),
        )


class TransferView(LazyRows[Transfer]):
    """The transfers of a columnar schedule as a sequence of :class:`Transfer`, made only when
    read (and then kept): a schedule built as columns never pays for objects it is not asked
    for. Equal to the tuple of the same transfers."""

    __slots__ = ("columns",)
    ITEM = "transfer"

    def __init__(self, columns: Columns) -> None:
        super().__init__()
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns)

    def _row(self, index: int) -> Transfer:
        return self.columns.transfer(index)

    def _make_all(self) -> tuple[Transfer, ...]:
        return self.columns.to_transfers()


@dataclass(frozen=True, slots=True)
class Schedule:
    """A collective call lowered to transfers between ranks ``0..ranks-1``.

    ``endpoints`` counts the in-network reducing switches the transfers also address, as
    endpoints ``ranks .. ranks+endpoints-1`` (``Network.endpoint_device``); 0 for schedules
    among ranks only.
    """

    collective: Collective
    algorithm: str
    ranks: int
    nbytes: int
    root: int
    chunks: int
    #: A tuple, or a :class:`TransferView` of :attr:`columns` for a schedule built as columns.
    transfers: Sequence[Transfer]
    endpoints: int = 0
    #: All-to-allv: the bytes rank ``s`` sends rank ``j`` at ``counts[s * ranks + j]`` (each
    #: rank's blocks back to back in its send buffer); None: nccl-tests' even all-to-all.
    counts: tuple[int, ...] | None = None
    _columns: list[Columns] = field(default_factory=list, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.transfers)

    @property
    def columns(self) -> Columns:
        """The transfers as :class:`Columns` (made once from the objects when built that way)."""
        if isinstance(self.transfers, TransferView):
            return self.transfers.columns
        if not self._columns:
            self._columns.append(Columns.from_transfers(self.transfers))
        return self._columns[0]

    @staticmethod
    def of_columns(collective: Collective, algorithm: str, ranks: int, nbytes: int, root: int,
                   chunks: int, columns: Columns, endpoints: int = 0,
                   counts: tuple[int, ...] | None = None) -> Schedule:
        """A schedule whose transfers are ``columns``."""
        return Schedule(collective, algorithm, ranks, nbytes, root, chunks,
                        TransferView(columns), endpoints, counts)


@dataclass(slots=True)
class ScheduleBuilder:
    """Accumulates transfers; zero-byte transfers are dropped and their deps passed through.

    >>> b = ScheduleBuilder()
    >>> h = b.add(0, 1, 0, 8, OpKind.COPY)
    >>> b.add(1, 2, 0, 0, OpKind.COPY, [h]) == h     # empty: stands for its deps
    True
    """

    transfers: list[Transfer] = field(default_factory=list)

    def add(
        self,
        src: int,
        dst: int,
        offset: int,
        nbytes: int,
        op: OpKind,
        deps: Iterable[Handle] = (),
    ) -> Handle:
        """Append a transfer after ``deps``; return its handle."""
        merged: set[int] = set()
        for handle in deps:
            merged.update(handle)
        if nbytes <= 0:
            return frozenset(merged)
        self.transfers.append(Transfer(src, dst, offset, nbytes, op, tuple(sorted(merged))))
        return frozenset((len(self.transfers) - 1,))

    def build(
        self,
        collective: Collective,
        algorithm: str,
        ranks: int,
        nbytes: int,
        root: int = 0,
        chunks: int = 1,
        endpoints: int = 0,
    ) -> Schedule:
        return Schedule(
            collective, algorithm, ranks, nbytes, root, chunks, tuple(self.transfers), endpoints
        )


def join(*handles: Handle) -> Handle:
    """One handle that waits for all of ``handles``."""
    out: set[int] = set()
    for handle in handles:
        out.update(handle)
    return frozenset(out)
