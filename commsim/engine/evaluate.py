"""Evaluate one named algorithm on one alpha-beta network: the engines behind one door.

:func:`evaluate` is what every layer above uses to time a schedule-level candidate: the DES
(``engine="des"``: the schedule simulated, contention counted, per-transfer records kept) or
the closed form (``engine="analytic"``). It knows nothing of NCCL, of ``auto`` or of the API:
:mod:`commsim.timing` chooses the algorithm and the network view, this module times it.

Records of a closed-form evaluation come from simulating the same schedule: they are given only
when that simulation reproduces the closed-form time (to :data:`RECORDS_RTOL`), so a trace never
shows a different time than the one printed.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.algorithms import Algorithm, get_algorithm
from commsim.algorithms.base import Call
from commsim.algorithms.estimate import estimate_des_bytes, estimate_transfers
from commsim.algorithms.innetwork import network_for
from commsim.algorithms.memo import memo_schedule
from commsim.budget import fits, memory_budget, over_budget
from commsim.engine.analytic import predict
from commsim.engine.des import Timing
from commsim.engine.exact import full_des_forced, takes_at_least, time_schedule
from commsim.engine.reuse import reused_timing
from commsim.engine.symmetry import symmetric_note
from commsim.errors import SpecError
from commsim.network import Network
from commsim.schedule import Schedule

ENGINES = ("des", "analytic")
#: A closed-form time and the DES of the same schedule agree to this (relative) when nothing is
#: contended; records are refused beyond it.
RECORDS_RTOL = 1e-9
#: The most transfers one schedule may have (an upper-bound estimate, made before anything is
#: built): every algorithm builds numpy columns, timed exactly in numpy when uncontended
#: (:mod:`commsim.engine.exact`), about 1 s per million transfers. Beyond it the call is
#: refused in one line rather than running for minutes.
MAX_TRANSFERS = 4_000_000
#: The most transfers the event loop runs (contended, or forced with ``COMMSIM_FULL_DES``): it
#: reads the columns without an object per transfer, so about 4 us each; a contended schedule
#: is refused beyond it once built.
MAX_DES_TRANSFERS = 2_500_000
#: From this many transfers (an estimate) on, or beyond the memory budget, a symmetric ring's
#: DES time is had from one representative (:mod:`commsim.engine.symmetry`, exact), whether or
#: not records are asked for (records never change a time); smaller simulations just run.
SYMMETRY_MIN_TRANSFERS = 50_000


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One algorithm timed on one network.

    ``network`` is the view the transfers ran on (an in-network algorithm's reducing view);
    ``schedule`` and ``timing`` are the per-transfer records (None when not asked for under the
    closed form).
    """

    time_s: float
    chunks: int
    network: Network
    schedule: Schedule | None = None
    timing: Timing | None = None
    #: How the time was had when it is not the plain engine's (a symmetric ring's DES time
    #: from one representative, :mod:`commsim.engine.symmetry`); None otherwise.
    note: str | None = None


def check_engine(engine: str) -> str:
    """``engine`` if it is ``des`` or ``analytic``; SpecError naming it otherwise."""
    if engine not in ENGINES:
        raise SpecError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    return engine


def check_des_size(call: Call, algo: Algorithm, chunks: int, limit: int | None = None) -> None:
    """SpecError, in one line, when simulating ``call`` by ``algo`` would exceed ``limit``
    transfers (default :data:`MAX_TRANSFERS`: seconds) or the memory budget
    (:mod:`commsim.budget`)."""
    transfers = estimate_transfers(call, algo.name, chunks)
    if limit is None:
        limit = MAX_TRANSFERS
    what = (f"simulating {algo.name} {call.collective.value} on {call.ranks} ranks in "
            f"{chunks} piece(s) would take about {transfers:.3g} transfers")
    options = "use --engine analytic (closed form), fewer --chunks or fewer --ranks"
    if transfers > limit:
        raise SpecError(f"{what}, more than the {limit:.0e} the discrete-event "
                        f"engine runs in seconds: {options}")
    need = estimate_des_bytes(transfers)
    if not fits(need):
        raise SpecError(f"{what} and {over_budget(need, memory_budget())}: {options}, or a "
                        "larger --max-memory")


def _small(call: Call, algo: Algorithm, chunks: int) -> bool:
    """Whether simulating ``call`` is cheap enough to just run (below
    :data:`SYMMETRY_MIN_TRANSFERS` and within the memory budget)."""
    transfers = estimate_transfers(call, algo.name, chunks)
    return (transfers < SYMMETRY_MIN_TRANSFERS
            and fits(estimate_des_bytes(transfers)))


def evaluate(call: Call, network: Network, algorithm: str, engine: str,
             records: bool = False, max_transfers: int | None = None,
             cap: float | None = None) -> Evaluation:
    """Time ``call`` run by ``algorithm`` on ``network`` with ``engine``; a simulation of
    more than ``max_transfers`` (default: :func:`check_des_size`'s) is refused.

    With ``records`` the result carries the schedule and its per-transfer timing: from the DES
    run itself, or (closed form) from a DES run that gives the same time; SpecError when the
    schedule is contended so that the two differ.

    ``cap`` says that only ``min(time, cap)`` is wanted: a DES (without records) whose
    schedule provably takes ``cap`` or longer (:func:`~commsim.engine.exact.takes_at_least`)
    is not run, and the evaluation's time is ``cap``; ``min(time_s, cap)`` is then always the
    true time's, to the bit.
    """
    algo = get_algorithm(algorithm)
    algo.check_supports(call)
    chunks = call.chunks if call.chunks is not None else algo.default_chunks(call)
    view = network_for(call, network, algo.name)
    if check_engine(engine) == "analytic":
        time_s, note = predict(call, view, algo.name), None
    else:
        note = (None if _small(call, algo, chunks) or full_des_forced()
                else symmetric_note(call, view, algo.name))
        if note is None:  # the DES runs (or its exact uncontended evaluation)
            check_des_size(call, algo, chunks, max_transfers)
            schedule = memo_schedule(call, algo.name)
            if (cap is not None and not records and len(schedule) <= MAX_DES_TRANSFERS
                    and takes_at_least(schedule, view, cap)):
                return Evaluation(cap, chunks, view)
            timing = reused_timing(schedule, view, MAX_DES_TRANSFERS)
            return Evaluation(timing.time_s, chunks, view, schedule, timing)
        time_s = predict(call, view, algo.name)  # a symmetric ring's DES is its closed form
    if not records:
        return Evaluation(time_s, chunks, view, note=note)
    check_des_size(call, algo, chunks, max_transfers)
    schedule = memo_schedule(call, algo.name)
    timing = time_schedule(schedule, view, MAX_DES_TRANSFERS)
    if abs(timing.time_s - time_s) > RECORDS_RTOL * max(time_s, 1e-30):
        raise SpecError(
            f"no transfers for {algo.name} with --engine analytic: the closed form "
            f"({time_s:.6g} s) ignores contention the schedule has ({timing.time_s:.6g} s "
            "simulated); use --engine des"
        )
    return Evaluation(time_s, chunks, view, schedule, timing, note=note)
