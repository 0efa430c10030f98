"""The Python API: one call from a collective, a topology and a size to a :class:`Result`.

>>> from commsim import simulate
>>> r = simulate("all_reduce", {"kind": "ring", "ranks": 8,
...              "link": {"latency": "1us", "bandwidth": "100GB/s"}}, "1GiB", algorithm="ring")
>>> round(r.time_s / (14 * (1e-6 + 2**30 / 8 / 100e9)), 12)
1.0
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from commsim.algorithms.alltoall_sizes import MatrixSource, matrix_counts, skewed_counts
from commsim.algorithms.calls import make_call
from commsim.collectives import Collective, parse_collective
from commsim.engine.evaluate import ENGINES
from commsim.errors import SpecError
from commsim.network import Network
from commsim.results import Result
from commsim.timing import (
    PROTOCOL_CHOICES,
    CollectiveCall,
    Timer,
    canonical_protocol,
    runs_nccl,
)
from commsim.topology import load_topology
from commsim.topology.degrade import apply_what_if
from commsim.topology.what_if import WhatIfSource
from commsim.units import parse_size

__all__ = [
    "ENGINES",
    "PROTOCOL_CHOICES",
    "Engine",
    "canonical_protocol",
    "make_call",
    "runs_nccl",
    "simulate",
]

Engine = Literal["des", "analytic"]


def simulate(
    collective: Collective | str,
    topology: Network | str | Path | dict[str, object],
    size: int | str | None,
    *,
    algorithm: str = "auto",
    root: int = 0,
    ranks: int | None = None,
    chunks: int | None = None,
    engine: Engine | str = "des",
    protocol: str = "auto",
    what_if: WhatIfSource | None = None,
    matrix: MatrixSource | None = None,
    skew: float | None = None,
) -> Result:
    """Simulate one collective: :class:`~commsim.timing.Timer`'s answer for this call.

    Parameters
    ----------
    collective
        ``broadcast``, ``reduce``, ``all_gather``, ``reduce_scatter``, ``all_reduce`` or
        ``all_to_all``.
    topology
        A preset name, a YAML file, a parsed YAML mapping or a built :class:`Network`.
    size
        Bytes of the full buffer (nccl-tests' ``size``), an int or a string like ``"1GiB"``;
        for all-to-all each rank's whole send buffer. Ignored (may be None) with ``matrix``.
    algorithm
        An algorithm name, or ``auto`` for the fastest (see :mod:`commsim.timing`).
    ranks
        Use only the first ``ranks`` ranks of the topology.
    chunks
        Pipelined pieces (None: the algorithm's default).
    engine
        ``des`` (discrete-event, with contention) or ``analytic`` (closed form).
    protocol
        ``auto``: on a topology that runs NCCL (an ``nccl:`` block), NCCL's protocol choice
        with its launch latency (:mod:`commsim.nccl`), and ``algorithm="auto"`` is NCCL's
        choice of algorithm; elsewhere plain alpha-beta. ``LL``, ``LL128`` or ``Simple``:
        that protocol (on any topology). ``none``: plain alpha-beta everywhere, ``auto`` the
        fastest algorithm.
    what_if
        A what-if file (a path, its mapping or a parsed :class:`WhatIf`): the machine with
        those links degraded or failed (:mod:`commsim.topology.degrade`). Call again without
        it for the healthy machine.
    matrix
        All-to-allv: the bytes rank ``s`` sends rank ``j`` at row ``s``, column ``j`` (a CSV or
        YAML file, or rows); the size is then the largest rank's send buffer.
    skew
        All-to-allv: every rank sends ``size`` bytes, rank 0 ``(1 + skew)`` times the even
        share (:mod:`commsim.algorithms.alltoall_sizes`).

    The result's :meth:`~commsim.results.Result.transfers` are the records of the same
    evaluation (for ``engine="analytic"``, of a simulation that gives the same time).
    """
    network = load_topology(topology)
    if what_if is not None:
        network = apply_what_if(network, what_if)[0]
    group = None
    if ranks is not None and network.with_ranks(ranks) is not network:
        group = tuple(range(ranks))
    coll = parse_collective(collective)
    if size is None and matrix is None:
        raise SpecError("a size is needed (or, for all_to_all, a matrix)")
    counts = _counts(coll, ranks or network.ranks, size, matrix, skew)
    nbytes = parse_size(size, "--size") if counts is None else _largest(counts, ranks
                                                                        or network.ranks)
    call = CollectiveCall(collective=coll, nbytes=nbytes, group=group, root=root,
                          algorithm=algorithm, protocol=protocol, chunks=chunks, counts=counts)
    return Timer.of(network).time(call, engine)


def _counts(collective: Collective, ranks: int, size: int | str | None,
            matrix: MatrixSource | None, skew: float | None) -> tuple[int, ...] | None:
    """An all-to-allv's bytes per pair, from ``matrix`` or ``skew`` (None for neither)."""
    if matrix is None and skew is None:
        return None
    if collective is not Collective.ALL_TO_ALL:
        raise SpecError(f"--matrix and --skew are for all_to_all, not {collective.value}")
    if matrix is not None and skew is not None:
        raise SpecError("give --matrix or --skew, not both")
    if matrix is not None:
        return matrix_counts(matrix, ranks)
    return skewed_counts(ranks, parse_size(size, "--size"), float(skew))  # type: ignore[arg-type]


def _largest(counts: tuple[int, ...], ranks: int) -> int:
    """The largest rank's send buffer."""
    return max(sum(counts[s * ranks:(s + 1) * ranks]) for s in range(ranks))
