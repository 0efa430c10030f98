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

from commsim.algorithms.calls import make_call
from commsim.collectives import Collective, parse_collective
from commsim.engine.evaluate import ENGINES
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
    size: int | str,
    *,
    algorithm: str = "auto",
    root: int = 0,
    ranks: int | None = None,
    chunks: int | None = None,
    engine: Engine | str = "des",
    protocol: str = "auto",
    what_if: WhatIfSource | None = None,
) -> Result:
    """Simulate one collective: :class:`~commsim.timing.Timer`'s answer for this call.

    Parameters
    ----------
    collective
        ``broadcast``, ``reduce``, ``all_gather``, ``reduce_scatter`` or ``all_reduce``.
    topology
        A preset name, a YAML file, a parsed YAML mapping or a built :class:`Network`.
    size
        Bytes of the full buffer (nccl-tests' ``size``), an int or a string like ``"1GiB"``.
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

    The result's :meth:`~commsim.results.Result.transfers` are the records of the same
    evaluation (for ``engine="analytic"``, of a simulation that gives the same time).
    """
    network = load_topology(topology)
    if what_if is not None:
        network = apply_what_if(network, what_if)[0]
    group = None
    if ranks is not None and network.with_ranks(ranks) is not network:
        group = tuple(range(ranks))
    call = CollectiveCall(collective=parse_collective(collective),
                          nbytes=parse_size(size, "--size"), group=group, root=root,
                          algorithm=algorithm, protocol=protocol, chunks=chunks)
    return Timer.of(network).time(call, engine)
