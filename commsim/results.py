"""Results of a simulated collective: the summary row and the per-transfer records.

A plain value below the timing layer (:mod:`commsim.timing` makes them); pandas is imported
only when :meth:`Result.transfers` builds its DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from commsim.collectives import Collective
from commsim.engine.des import Timing
from commsim.errors import SpecError
from commsim.network import Network
from commsim.schedule import OpKind, Schedule

if TYPE_CHECKING:
    import pandas as pd

#: Columns of :meth:`Result.transfers`, as the contract's ``--transfers`` CSV writes them.
TRANSFER_COLUMNS = ("src", "dst", "start_s", "end_s", "nbytes", "offset", "op")


@dataclass(frozen=True, slots=True)
class Result:
    """One simulated collective.

    Attributes
    ----------
    collective, algorithm, topology, ranks, nbytes, chunks, engine
        What was run (``algorithm`` is the one ``auto`` resolved to).
    protocol
        The NCCL protocol (``LL``, ``LL128``, ``Simple``) on a topology that runs NCCL, its
        launch latency included in ``time_s``; None for a plain alpha-beta run.
    time_s
        Seconds from the call to the last transfer's arrival (NCCL's launch latency, then the
        transfers).
    schedule, timing
        The schedule and its per-transfer times (``None`` for the analytic engine until
        :meth:`with_records` asks for them, and for a call timed by NCCL's composed estimate
        across hosts: its closed form, or a pipelined schedule beyond the DES's budget).
    launch_s
        NCCL's launch latency included in ``time_s`` (0 for a plain alpha-beta run).
    note
        How the time was had when not by the plain engine, e.g. a symmetric ring's DES time
        from one representative rank (:mod:`commsim.engine.symmetry`); None otherwise.
    """

    collective: Collective
    algorithm: str
    topology: str
    ranks: int
    nbytes: int
    chunks: int
    engine: str
    time_s: float
    schedule: Schedule | None = None
    timing: Timing | None = None
    protocol: str | None = None
    #: The network the transfers were timed on (a protocol's or an in-network view of the
    #: topology under NCCL); None for the analytic engine.
    network: Network | None = field(default=None, compare=False, repr=False)
    launch_s: float = 0.0
    note: str | None = field(default=None, compare=False)
    #: Why this result can have no per-transfer records (None: it has them, or can get them).
    records_error: str | None = field(default=None, compare=False, repr=False)
    #: Makes the same result with its records (the timing layer's evaluation of them).
    records_source: Callable[[], Result] | None = field(default=None, compare=False, repr=False)

    def with_records(self) -> Result:
        """This result with its schedule and per-transfer timing: from the same evaluation,
        with the same ``time_s``; SpecError saying why when there are none."""
        if self.schedule is not None and self.timing is not None:
            return self
        if self.records_source is None:
            raise SpecError(self.records_error or f"no transfers for {self.label}")
        return self.records_source()

    def records(self) -> tuple[Schedule, Timing]:
        """The schedule and per-transfer timing of :meth:`with_records` (SpecError when there
        are none): read as columns and arrays, ``schedule.columns`` row ``i`` started at
        ``timing.start_s[i]``."""
        full = self.with_records()
        assert full.schedule is not None and full.timing is not None
        return full.schedule, full.timing

    @property
    def label(self) -> str:
        """``algorithm``, or ``algorithm/protocol`` when NCCL's protocols were modelled."""
        return f"{self.algorithm}/{self.protocol}" if self.protocol else self.algorithm

    @property
    def algbw_Bps(self) -> float:
        """nccl-tests' algorithm bandwidth: size / time (0 when time is 0)."""
        return self.nbytes / self.time_s if self.time_s > 0 else 0.0

    @property
    def busbw_Bps(self) -> float:
        """nccl-tests' bus bandwidth: algbw x the collective's factor."""
        return self.algbw_Bps * self.collective.busbw_factor(self.ranks)

    def to_dict(self) -> dict[str, object]:
        """The contract's JSON object (GB = 1e9 B)."""
        out: dict[str, object] = {
            "collective": self.collective.value,
            "algorithm": self.algorithm,
            "topology": self.topology,
            "ranks": self.ranks,
            "nbytes": self.nbytes,
            "chunks": self.chunks,
            "engine": self.engine,
            "time_s": self.time_s,
            "algbw_GBps": self.algbw_Bps / 1e9,
            "busbw_GBps": self.busbw_Bps / 1e9,
            "transfers": len(self.schedule) if self.schedule is not None else None,
            "protocol": self.protocol,
        }
        if self.note:  # how the time was had, when not by the plain engine
            out["note"] = self.note
        return out

    def transfers(self) -> pd.DataFrame:
        """One row per point-to-point transfer, columns :data:`TRANSFER_COLUMNS`.

        ``start_s`` is when src's data is read, ``end_s`` when it has arrived (and, for a
        ``reduce``, been added in); ``[offset, offset + nbytes)`` is the byte range of the
        collective's full buffer.
        """
        import numpy as np
        import pandas as pd

        schedule, timing = self.records()
        cols = schedule.columns
        return pd.DataFrame(
            {
                "src": cols.src,
                "dst": cols.dst,
                "start_s": timing.start_s,
                "end_s": timing.end_s,
                "nbytes": cols.nbytes,
                "offset": cols.offset,
                "op": np.where(cols.reduce, OpKind.REDUCE.value, OpKind.COPY.value).astype(object),
            },
            columns=list(TRANSFER_COLUMNS),
        )
