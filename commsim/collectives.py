"""The five collectives, their names, and how nccl-tests counts their sizes and bus bandwidth."""

from __future__ import annotations

from enum import StrEnum

from commsim.errors import SpecError


class Collective(StrEnum):
    """A collective operation, spelled as torch.distributed spells it."""

    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_REDUCE = "all_reduce"
    ALL_TO_ALL = "all_to_all"

    @property
    def rooted(self) -> bool:
        """Broadcast and reduce have a root rank."""
        return self in (Collective.BROADCAST, Collective.REDUCE)

    def busbw_factor(self, ranks: int) -> float:
        """nccl-tests' busbw/algbw factor (doc/PERFORMANCE.md): 2(p-1)/p, (p-1)/p or 1."""
        if ranks <= 0:
            raise SpecError(f"ranks must be >= 1, got {ranks}")
        if self is Collective.ALL_REDUCE:
            return 2 * (ranks - 1) / ranks
        if self in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
            return (ranks - 1) / ranks
        return 1.0


_ALIASES = {
    "allreduce": Collective.ALL_REDUCE,
    "allgather": Collective.ALL_GATHER,
    "reducescatter": Collective.REDUCE_SCATTER,
    "alltoall": Collective.ALL_TO_ALL,
    "bcast": Collective.BROADCAST,
}


def parse_collective(name: object) -> Collective:
    """Accept ``all_reduce``, ``all-reduce``, ``allreduce`` (any case) and the like."""
    text = str(name).strip().lower().replace("-", "_")
    if text in _ALIASES:
        return _ALIASES[text]
    try:
        return Collective(text)
    except ValueError:
        compact = text.replace("_", "")
        if compact in _ALIASES:
            return _ALIASES[compact]
        known = ", ".join(c.value for c in Collective)
        raise SpecError(f"unknown collective {name!r} (known: {known})") from None


def segment(rank: int, ranks: int, nbytes: int) -> tuple[int, int]:
    """Byte range ``[start, stop)`` of the buffer that rank owns: ``[r*n//p, (r+1)*n//p)``."""
    return rank * nbytes // ranks, (rank + 1) * nbytes // ranks
