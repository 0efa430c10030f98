"""A schedule: a collective written as pure data, point-to-point transfers with dependencies.

Algorithm builders produce schedules; engines time them; the checker proves them correct.
Nothing here knows about time or the network.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from commsim.collectives import Collective

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
    transfers: tuple[Transfer, ...]
    endpoints: int = 0

    def __len__(self) -> int:
        return len(self.transfers)


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
