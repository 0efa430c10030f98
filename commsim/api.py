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

from commsim.algorithms import build_schedule, candidates, get_algorithm
from commsim.algorithms.base import Call
from commsim.collectives import Collective, parse_collective
from commsim.engine.des import simulate_des
from commsim.errors import SpecError
from commsim.network import Network
from commsim.results import Result
from commsim.topology import load_topology
from commsim.units import parse_size

Engine = Literal["des", "analytic"]
ENGINES = ("des", "analytic")


def make_call(
    collective: Collective | str,
    network: Network,
    size: int | str,
    *,
    root: int = 0,
    chunks: int | None = None,
) -> Call:
    """Validate the pieces of a collective call against the network it runs on."""
    return Call(
        collective=parse_collective(collective),
        ranks=network.ranks,
        nbytes=parse_size(size, "--size"),
        root=root,
        chunks=chunks,
        hosts=network.rank_hosts(),
    )


#: ``auto`` with the DES ranks candidates by simulating them when the call is this small
#: (ranks, and ranks^2 x chunks as a bound on the transfers a candidate may have); beyond it,
#: by the closed forms, which ignore contention.
DES_RANKING_MAX_RANKS = 64
DES_RANKING_MAX_WORK = 2**18


def choose_algorithm(call: Call, network: Network, engine: Engine | str = "analytic") -> str:
    """``auto``: the topology's algorithm for this collective if it names one (its
    ``algorithms:`` mapping), else the candidate that finishes first (ties: registry order).

    With ``engine="des"`` and a small call, each candidate is simulated, so contention the
    closed forms ignore (several tree children behind one switch port) is counted; otherwise
    candidates are ranked by their closed-form (contention-free) cost.
    """
    from commsim.engine.analytic import predict

    mapping = network.meta.get("algorithms")
    if isinstance(mapping, dict) and call.collective.value in mapping:
        name = str(mapping[call.collective.value])
        get_algorithm(name).check_supports(call)
        return get_algorithm(name).name
    by_des = (
        engine == "des"
        and call.ranks <= DES_RANKING_MAX_RANKS
        and call.ranks**2 * (call.chunks or 1) <= DES_RANKING_MAX_WORK
    )
    best_name, best_time = "", float("inf")
    for name in candidates(call):
        if by_des:
            time_s = simulate_des(build_schedule(call, name), network).time_s
        else:
            time_s = predict(call, network, name)
        if time_s < best_time:
            best_name, best_time = name, time_s
    if not best_name:
        raise SpecError(f"no algorithm can run {call.collective.value} on {call.ranks} ranks")
    return best_name


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
) -> Result:
    """Simulate one collective.

    Parameters
    ----------
    collective
        ``broadcast``, ``reduce``, ``all_gather``, ``reduce_scatter`` or ``all_reduce``.
    topology
        A preset name, a YAML file, a parsed YAML mapping or a built :class:`Network`.
    size
        Bytes of the full buffer (nccl-tests' ``size``), an int or a string like ``"1GiB"``.
    algorithm
        An algorithm name, or ``auto`` for the fastest (see :func:`choose_algorithm`).
    ranks
        Use only the first ``ranks`` ranks of the topology.
    chunks
        Pipelined pieces (None: the algorithm's default).
    engine
        ``des`` (discrete-event, with contention) or ``analytic`` (closed form).
    """
    if engine not in ENGINES:
        raise SpecError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    network = load_topology(topology)
    if ranks is not None:
        network = network.with_ranks(ranks)
    call = make_call(collective, network, size, root=root, chunks=chunks)
    if algorithm == "auto":
        name = choose_algorithm(call, network, engine)
    else:
        name = get_algorithm(algorithm).name
    algo = get_algorithm(name)
    algo.check_supports(call)
    used_chunks = call.chunks if call.chunks is not None else algo.default_chunks(call)
    common = dict(
        collective=call.collective,
        algorithm=name,
        topology=network.name,
        ranks=call.ranks,
        nbytes=call.nbytes,
        chunks=used_chunks,
        engine=engine,
    )
    if engine == "analytic":
        from commsim.engine.analytic import predict

        return Result(**common, time_s=predict(call, network, name))  # type: ignore[arg-type]
    schedule = build_schedule(call, name)
    timing = simulate_des(schedule, network)
    return Result(**common, time_s=timing.time_s, schedule=schedule, timing=timing)  # type: ignore[arg-type]
