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
from commsim.algorithms.innetwork import network_for
from commsim.algorithms.torus import sub_torus
from commsim.collectives import Collective, parse_collective
from commsim.engine.des import simulate_des
from commsim.errors import ScheduleError, SpecError
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
    host_switches, fabric_switch = network.reducing_switches_of()
    return Call(
        collective=parse_collective(collective),
        ranks=network.ranks,
        nbytes=parse_size(size, "--size"),
        root=root,
        chunks=chunks,
        hosts=network.rank_hosts(),
        host_switches=host_switches,
        fabric_switch=fabric_switch,
        torus_dims=_torus_dims(network),
    )


def _torus_dims(network: Network) -> tuple[int, ...] | None:
    """The torus a ``kind: torus`` network's ranks form (None: not a torus, or a ``--ranks``
    prefix that is not a whole sub-torus)."""
    dims = network.meta.get("dims")
    if network.meta.get("kind") != "torus" or not isinstance(dims, tuple | list):
        return None
    return sub_torus(dims, network.ranks)



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
        mapped = get_algorithm(str(mapping[call.collective.value]))
        try:
            mapped.check_supports(call)
            return mapped.name
        except ScheduleError:
            # An automatic algorithm that cannot run this call (``torus`` on a --ranks prefix
            # that is no torus) gives way to the normal choice; a library's fixed choice
            # (gloo) raises: its error says why it cannot run.
            if not mapped.automatic:
                raise
    by_des = (
        engine == "des"
        and call.ranks <= DES_RANKING_MAX_RANKS
        and call.ranks**2 * (call.chunks or 1) <= DES_RANKING_MAX_WORK
    )
    best_name, best_time = "", float("inf")
    for name in candidates(call):
        net = network_for(call, network, name)
        if by_des:
            time_s = simulate_des(build_schedule(call, name), net).time_s
        else:
            time_s = predict(call, net, name)
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
    protocol: str = "auto",
    need_schedule: bool = False,
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
    protocol
        ``auto``: on a topology that runs NCCL (an ``nccl:`` block), NCCL's protocol choice
        with its launch latency (:mod:`commsim.nccl`), and ``algorithm="auto"`` is NCCL's
        choice of algorithm; elsewhere plain alpha-beta. ``LL``, ``LL128`` or ``Simple``:
        that protocol (on any topology). ``none``: plain alpha-beta everywhere, ``auto`` the
        fastest algorithm.
    need_schedule
        Under NCCL, choose only among algorithms with a schedule (not NCCL's pipelined phases
        across hosts, which are composed estimates), so the result has its transfers.
    """
    if engine not in ENGINES:
        raise SpecError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    network = load_topology(topology)
    if ranks is not None:
        network = network.with_ranks(ranks)
    call = make_call(collective, network, size, root=root, chunks=chunks)
    if runs_nccl(network, protocol):
        return _simulate_nccl(call, network, algorithm, protocol, engine,
                              need_schedule and engine == "des")
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
    network = network_for(call, network, name)
    if engine == "analytic":
        from commsim.engine.analytic import predict

        return Result(**common, time_s=predict(call, network, name))  # type: ignore[arg-type]
    schedule = build_schedule(call, name)
    timing = simulate_des(schedule, network)
    return Result(**common, time_s=timing.time_s, schedule=schedule, timing=timing,  # type: ignore[arg-type]
                  network=network)


PROTOCOL_CHOICES = ("auto", "none", "LL", "LL128", "Simple")


def canonical_protocol(value: object) -> str:
    """``auto``, ``none``, ``LL``, ``LL128`` or ``Simple`` from any case; SpecError else."""
    if isinstance(value, str):
        for choice in PROTOCOL_CHOICES:
            if value.strip().lower() == choice.lower():
                return choice
    raise SpecError(f"unknown protocol {value!r} (known: {', '.join(PROTOCOL_CHOICES)})")


def runs_nccl(network: Network, protocol: str) -> bool:
    """Whether a call with ``protocol`` is timed by the NCCL model on ``network``."""
    protocol = canonical_protocol(protocol)
    if protocol == "none":
        return False
    return protocol != "auto" or isinstance(network.meta.get("nccl"), dict)


def _simulate_nccl(call: Call, network: Network, algorithm: str, protocol: str,
                   engine: str, need_schedule: bool = False) -> Result:
    """``simulate`` on a machine running NCCL: pick (algorithm, protocol) as NCCL's tuner
    would among those allowed, then time the winner on its protocol's network, launch
    latency first (the transfers start after it)."""
    from dataclasses import replace

    from commsim.engine.des import Timing
    from commsim.nccl import PIPELINED, PROTOCOLS, SIMPLE_ONLY, NcclModel, base_latency_s

    model = NcclModel.of(network)
    coll, p = call.collective, call.ranks
    protocol = canonical_protocol(protocol)
    forced = None if protocol == "auto" else protocol
    if algorithm == "auto" or algorithm.strip().lower().replace("-", "_") == PIPELINED:
        among = model.candidates(coll, p)
        if algorithm != "auto":
            among = [c for c in among if c.startswith(PIPELINED + "+")]
            if not among:
                raise SpecError(f"{PIPELINED} (NCCL's trees across hosts) needs all_reduce "
                                "over several hosts with as many ranks each")
        if forced:
            among = [c for c in among if c.endswith("+" + forced)]
    else:
        name = get_algorithm(algorithm).name
        get_algorithm(name).check_supports(call)
        protocols = ["Simple"] if name in SIMPLE_ONLY else [x.name for x in PROTOCOLS]
        if forced:
            model.check(f"{name}+{forced}")
            protocols = [forced]
        among = [f"{name}+{x}" for x in protocols]
    if need_schedule:
        among = [c for c in among if not model.composed(c.partition("+")[0], p)]
        if not among:
            raise SpecError(
                f"{algorithm} under NCCL across hosts is a pipelined estimate without a "
                "schedule: no transfers (use --protocol none for commsim's own schedule)"
            )
    if not among:
        raise SpecError(f"NCCL runs no {coll.value} algorithm with protocol {forced}")
    small = p <= DES_RANKING_MAX_RANKS and p**2 * (call.chunks or 1) <= DES_RANKING_MAX_WORK
    rank_engine = engine if engine == "des" and small else "analytic"
    choice = among[0] if len(among) == 1 else model.fastest(
        coll, p, call.nbytes, rank_engine, among)[1]
    name, _, proto = choice.partition("+")
    if model.composed(name, p):
        time_s = model.time(coll, p, call.nbytes, choice, engine)
        return Result(collective=coll, algorithm=name, topology=network.name, ranks=p,
                      nbytes=call.nbytes, chunks=1, engine=engine, time_s=time_s,
                      protocol=proto)
    inner = simulate(coll, model.network_for(p, choice), call.nbytes, algorithm=name,
                     root=call.root, chunks=call.chunks, engine=engine, protocol="none")
    base = base_latency_s(name, proto) if call.nbytes and p > 1 else 0.0
    timing = inner.timing
    if timing is not None and base:
        timing = Timing(tuple(t + base for t in timing.start_s),
                        tuple(t + base for t in timing.end_s))
    return replace(inner, topology=network.name, protocol=proto, time_s=inner.time_s + base,
                   timing=timing)
