"""What an algorithm is: a pure function from a collective call to a schedule.

Builders never touch time, SimPy or the network; they see only the call (collective, ranks,
bytes, root, chunks and, for hierarchical algorithms, the host of each rank).
"""

from __future__ import annotations

import math
from collections import Counter
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
    ``host_switches`` gives, for each rank, the schedule endpoint (``ranks + k``, see
    :meth:`~commsim.network.Network.endpoint_device`) of the reducing switch its host port
    reaches (None unless every rank has one: NVLS); ``fabric_switch`` the endpoint of a
    reducing fabric switch (SHARP), for the in-network algorithms.
    """

    collective: Collective
    ranks: int
    nbytes: int
    root: int = 0
    chunks: int | None = None
    hosts: tuple[int, ...] | None = None
    host_switches: tuple[int, ...] | None = None
    fabric_switch: int | None = None
    #: The torus dimensions the ranks form, row-major (last dimension fastest), when the
    #: call runs on a ``kind: torus`` network (or a prefix of it that is a whole sub-torus).
    torus_dims: tuple[int, ...] | None = None
    #: All-to-allv: bytes rank ``s`` sends rank ``j`` at ``counts[s * ranks + j]`` (None: the
    #: even all-to-all of ``nbytes``); ``nbytes`` is then the largest rank's send buffer.
    counts: tuple[int, ...] | None = None

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
        if self.host_switches is not None and (
            len(self.host_switches) != self.ranks or min(self.host_switches) < self.ranks
        ):
            raise SpecError(f"host_switches must name an endpoint >= {self.ranks} per rank")
        if self.fabric_switch is not None and self.fabric_switch < self.ranks:
            raise SpecError(f"fabric_switch must be an endpoint >= {self.ranks}")
        if self.torus_dims is not None and (
            min(self.torus_dims, default=0) < 1 or math.prod(self.torus_dims) != self.ranks
        ):
            raise SpecError(f"torus dims {self.torus_dims} do not hold {self.ranks} ranks")
        if self.counts is not None:
            self._check_counts(self.counts)

    def _check_counts(self, counts: tuple[int, ...]) -> None:
        p = self.ranks
        if self.collective is not Collective.ALL_TO_ALL:
            raise SpecError(f"per-pair sizes are for all_to_all, not {self.collective.value}")
        if len(counts) != p * p:
            raise SpecError(f"an all-to-allv matrix for {p} ranks has {p * p} entries, "
                            f"got {len(counts)}")
        if min(counts) < 0:
            raise SpecError(f"all-to-allv sizes must not be negative, got {min(counts)}")
        largest = max(sum(counts[s * p:(s + 1) * p]) for s in range(p))
        if largest != self.nbytes:
            raise SpecError(f"an all-to-allv call's size is its largest send buffer, {largest} "
                            f"bytes, not {self.nbytes}")


@dataclass(frozen=True, slots=True)
class Algorithm:
    """A named algorithm, whole: the collectives it implements, where it applies (rank counts,
    hosts, tori, reducing switches: :meth:`check_supports`), its schedule builder and default
    pieces, whether it has a closed form and which NCCL algorithm it models.

    The closed forms themselves live in the engine layer, above this one, in
    :data:`commsim.engine.analytic.CLOSED_FORMS` keyed by :attr:`name`.
    """

    name: str
    collectives: frozenset[Collective]
    build: Callable[[Call], Schedule]
    default_chunks: Callable[[Call], int]
    power_of_two_only: bool = False
    needs_hosts: bool = False
    #: Runs only on a torus (``call.torus_dims``), like ``needs_hosts`` for hosts.
    needs_torus: bool = False
    summary: str = ""
    #: Offered to ``auto`` (False for a library's fixed choices, such as ``gloo``, that a
    #: topology names in its ``algorithms:`` mapping instead).
    automatic: bool = True
    #: :func:`commsim.engine.analytic.predict` has a closed form for it: an entry of
    #: :data:`commsim.engine.analytic.CLOSED_FORMS` under :attr:`name` (a test checks both ways).
    closed_form: bool = True
    #: Reduces inside switches: ``"host"`` (node switches, NVLS) or ``"fabric"`` (SHARP).
    #: It runs on :meth:`~commsim.network.Network.reducing_view` of the network.
    reduces_in: str | None = None
    #: The NCCL algorithm family it models, as ``src/graph/tuning.cc`` groups them (``"ring"``,
    #: ``"tree"``, ``"nvls"``, ``"collnet"``: the keys of :data:`commsim.nccl.BASE_LATENCY_US`);
    #: None where NCCL runs no such algorithm.
    nccl_family: str | None = None
    #: A further condition on the call (ScheduleError when it cannot run it), e.g. the same
    #: ranks on every host, in host order.
    check: Callable[[Call], None] | None = None

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
        if self.needs_torus and call.torus_dims is None:
            raise ScheduleError(
                f"algorithm {self.name!r} needs a torus topology (kind: torus; with --ranks, a "
                "prefix that is a whole sub-torus)"
            )
        if self.reduces_in == "host" and call.host_switches is None and call.ranks > 1:
            raise ScheduleError(
                f"algorithm {self.name!r} needs every rank behind a reducing switch "
                "(a switch port with reduction_bandwidth, e.g. NVSwitch NVLS)"
            )
        if self.reduces_in is not None and call.hosts is not None:
            sizes = set(Counter(call.hosts).values())
            if len(sizes) > 1:
                raise ScheduleError(
                    f"algorithm {self.name!r} needs the same number of ranks on every host"
                )
            if self.reduces_in == "host" and min(sizes) < 2 < call.ranks:
                raise ScheduleError(
                    f"algorithm {self.name!r} needs at least 2 ranks per host (a node switch "
                    "reduces among its own host's ranks)"
                )
        if self.check is not None:
            self.check(call)
        if self.reduces_in == "fabric" and call.fabric_switch is None and call.ranks > 1:
            raise ScheduleError(
                f"algorithm {self.name!r} needs a reducing fabric switch (inter port with "
                "reduction_bandwidth, e.g. InfiniBand SHARP: a preset's +sharp option)"
            )
