"""What an algorithm is: a pure function from a collective call to a schedule.

Builders never touch time, SimPy or the network; they see only the call (collective, ranks,
bytes, root, chunks and, for hierarchical algorithms, the host of each rank).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from commsim.collectives import Collective
from commsim.errors import ScheduleError, SpecError
from commsim.schedule import Schedule


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One collective call: what to do, among how many ranks, on how many bytes.

    ``chunks`` is the number of pipelined pieces (None: the algorithm's default).
    ``hosts`` gives the host (server) index of each rank, for hierarchical algorithms.
    """

    collective: Collective
    ranks: int
    nbytes: int
    root: int = 0
    chunks: int | None = None
    hosts: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.ranks < 1:
            raise SpecError(f"ranks must be >= 1, got {self.ranks}")
        if self.nbytes < 0:
            raise SpecError(f"size must not be negative, got {self.nbytes}")
        if not 0 <= self.root < self.ranks:
            raise SpecError(f"--root {self.root} out of range for {self.ranks} ranks")
        if self.chunks is not None and self.chunks < 1:
            raise SpecError(f"--chunks must be >= 1, got {self.chunks}")
        if self.hosts is not None and len(self.hosts) != self.ranks:
            raise SpecError(f"hosts lists {len(self.hosts)} ranks, call has {self.ranks}")


@dataclass(frozen=True, slots=True)
class Algorithm:
    """A named algorithm: the collectives it implements and its schedule builder."""

    name: str
    collectives: frozenset[Collective]
    build: Callable[[Call], Schedule]
    default_chunks: Callable[[Call], int]
    power_of_two_only: bool = False
    needs_hosts: bool = False
    summary: str = ""
    #: Offered to ``auto`` (False for a library's fixed choices, such as ``gloo``, that a
    #: topology names in its ``algorithms:`` mapping instead).
    automatic: bool = True
    #: :func:`commsim.engine.analytic.predict` has a closed form for it.
    closed_form: bool = True

    def check_supports(self, call: Call) -> None:
        """Raise ScheduleError when this algorithm cannot run ``call``."""
        if call.collective not in self.collectives:
            can = ", ".join(sorted(c.value for c in self.collectives))
            raise ScheduleError(
                f"algorithm {self.name!r} cannot run {call.collective.value} (it runs: {can})"
            )
        if self.power_of_two_only and call.ranks & (call.ranks - 1):
            raise ScheduleError(
                f"algorithm {self.name!r} needs a power-of-two rank count, got {call.ranks}"
            )
        if self.needs_hosts and call.hosts is None:
            raise ScheduleError(f"algorithm {self.name!r} needs a multi-host topology")
