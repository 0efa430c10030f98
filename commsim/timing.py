"""The one place that times a collective call on a network.

A :class:`CollectiveCall` says what is asked (collective, bytes, the group of ranks, root,
algorithm or ``auto``, protocol or ``auto``, chunks); :meth:`Timer.time` answers it with one
:class:`~commsim.results.Result`. ``commsim run``, ``sweep``, replay's lowering,
``validate``/``calibrate`` and the Python API all ask here, so a collective gets one time
whichever command asks, and output options only ask for the records of the same evaluation.

How a call is answered:

1. **Candidates.** On a machine that runs NCCL (an ``nccl:`` block, or a forced protocol) the
   (algorithm, protocol) pairs NCCL's tuner weighs (:class:`~commsim.nccl.NcclModel`);
   elsewhere the topology's mapped algorithm, or every algorithm able to run the call. A named
   algorithm (and protocol) narrows them.
2. **Choice.** With several candidates each is timed once, by :func:`ranking_engine`'s one
   policy (the DES for small calls, so contention counts; the closed forms beyond), and the
   fastest wins (ties: the first listed).
3. **Time.** The winner is timed by the requested engine; every evaluation is memoised per
   (group, call, candidate, engine), so ranking and answering never time the same thing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commsim.algorithms import candidates as algorithm_candidates
from commsim.algorithms import get_algorithm
from commsim.algorithms.base import Call
from commsim.algorithms.calls import make_call
from commsim.collectives import Collective, parse_collective
from commsim.engine.evaluate import Evaluation, check_engine, evaluate
from commsim.errors import ScheduleError, SpecError
from commsim.nccl import PIPELINED, NcclModel
from commsim.nccl_tree import MAX_TREE_DEPENDENCIES, MAX_TREE_TRANSFERS
from commsim.network import Network
from commsim.progress import Progress
from commsim.results import Result
from commsim.units import parse_size

PROTOCOL_CHOICES = ("auto", "none", "LL", "LL128", "Simple")
ENGINE_CHOICES = ("des", "analytic", "auto")

#: ``auto`` ranks candidates with the DES when the call is this small (ranks, and
#: ranks^2 x chunks as a bound on the transfers a candidate may have); beyond it, by the closed
#: forms, which ignore contention.
DES_RANKING_MAX_RANKS = 64
DES_RANKING_MAX_WORK = 2**18

#: From this many ranks on, ranking the candidates takes seconds: it shows a progress bar
#: (on a terminal only).
PROGRESS_MIN_RANKS = 16384

#: A candidate: (algorithm, NCCL protocol or None for plain alpha-beta).
Candidate = tuple[str, str | None]


def canonical_protocol(value: object) -> str:
    """``auto``, ``none``, ``LL``, ``LL128`` or ``Simple`` from any case; SpecError else."""
    if isinstance(value, str):
        for choice in PROTOCOL_CHOICES:
            if value.strip().lower() == choice.lower():
                return choice
    raise SpecError(f"unknown protocol {value!r} (known: {', '.join(PROTOCOL_CHOICES)})")


def canonical_algorithm(value: str) -> str:
    """``auto``, NCCL's composed ``hierarchical_pipelined``, or a registered algorithm's name."""
    key = str(value).strip().lower().replace("-", "_")
    if key in ("auto", PIPELINED):
        return key
    return get_algorithm(value).name


def runs_nccl(network: Network, protocol: str) -> bool:
    """Whether a call with ``protocol`` is timed by the NCCL model on ``network``."""
    protocol = canonical_protocol(protocol)
    if protocol == "none":
        return False
    return protocol != "auto" or isinstance(network.meta.get("nccl"), dict)


def resolve_engine(engine: str, ranks: int) -> str:
    """``des`` or ``analytic`` as asked; ``auto``: the DES up to :data:`DES_RANKING_MAX_RANKS`
    ranks, the closed forms beyond (the one size policy, shared with :func:`ranking_engine`)."""
    if engine == "auto":
        return "des" if ranks <= DES_RANKING_MAX_RANKS else "analytic"
    if engine not in ENGINE_CHOICES:
        raise SpecError(f"unknown engine {engine!r} (known: {', '.join(ENGINE_CHOICES)})")
    return engine


def ranking_engine(call: Call, engine: str) -> str:
    """The engine ``auto`` ranks candidates with: the requested DES for small calls, the closed
    forms otherwise (and whenever the closed form was asked for)."""
    small = (
        call.ranks <= DES_RANKING_MAX_RANKS
        and call.ranks**2 * (call.chunks or 1) <= DES_RANKING_MAX_WORK
    )
    return "des" if engine == "des" and small else "analytic"


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCall:
    """One collective call, as asked: the value :meth:`Timer.time` answers.

    ``group`` lists the ranks of the network taking part (group rank ``i`` is network rank
    ``group[i]``); None means all of them. ``algorithm`` and ``protocol`` are ``auto`` or a
    name (any case); ``chunks`` None is the algorithm's default.
    """

    collective: Collective
    nbytes: int
    group: tuple[int, ...] | None = None
    root: int = 0
    algorithm: str = "auto"
    protocol: str = "auto"
    chunks: int | None = None
    #: All-to-allv: bytes rank ``s`` sends rank ``j`` at ``counts[s * ranks + j]`` (``nbytes``
    #: is then the largest row's sum); None: every other collective, and even all-to-all.
    counts: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "collective", parse_collective(self.collective))
        object.__setattr__(self, "nbytes", parse_size(self.nbytes, "--size"))
        object.__setattr__(self, "algorithm", canonical_algorithm(self.algorithm))
        object.__setattr__(self, "protocol", canonical_protocol(self.protocol))
        if self.group is not None:
            object.__setattr__(self, "group", tuple(int(r) for r in self.group))


def _no_schedule(label: str) -> str:
    return (
        f"no transfers for {label}: NCCL's tree, NVLS and CollNet across hosts are simulated as "
        f"pipelined schedules under --engine des up to {MAX_TREE_TRANSFERS:,} transfers and "
        f"{MAX_TREE_DEPENDENCIES:,} dependencies; this "
        "call was timed by its closed form, the composed estimate of its phases, which has "
        "none (under --engine analytic, use --engine des; beyond that budget, fewer ranks or "
        "a smaller size)"
    )


class Timer:
    """Answers :class:`CollectiveCall` s on one network, memoising every evaluation."""

    def __init__(self, network: Network) -> None:
        self.network = network
        self._groups: dict[tuple[int, ...] | None, Network] = {}
        self._evaluations: dict[tuple[object, ...], Evaluation] = {}
        self._p2p: tuple[Network, float] | None = None

    @classmethod
    def of(cls, network: Network) -> Timer:
        """The timer kept with ``network`` (its memo lives as long as the network)."""
        return network.derived("timer", lambda: cls(network))

    # -- the question -----------------------------------------------------------------------
    def time(self, call: CollectiveCall, engine: str = "des", records: bool = False) -> Result:
        """The one answer to ``call``: the chosen algorithm and protocol, timed by ``engine``.

        With ``records`` the result carries the schedule and per-transfer times of the same
        evaluation; SpecError says in one line when it cannot have them.
        """
        check_engine(engine)
        net = self.group_network(call.group)
        c = make_call(call.collective, net, call.nbytes, root=call.root, chunks=call.chunks,
                      counts=call.counts)
        among = self.candidates(call, c, net)
        if len(among) == 1:
            best = among[0]
        else:
            ranking = ranking_engine(c, engine)
            totals = self._rank(call.group, c, net, among, ranking)
            best = among[totals.index(min(totals))]
            self._drop_records(call.group, c, [x for x in among if x != best], ranking)
        result = self._result(call.group, c, net, best, engine, records)
        if records and result.schedule is None:
            raise SpecError(_no_schedule(result.label))
        return result

    def group_network(self, group: tuple[int, ...] | None) -> Network:
        """The machine a group sees: group rank ``i`` on network rank ``group[i]``'s device."""
        if group not in self._groups:
            self._groups[group] = self._group_network(group)
        return self._groups[group]

    def _group_network(self, group: tuple[int, ...] | None) -> Network:
        network = self.network
        if group is None:
            return network
        if not group or len(set(group)) != len(group):
            raise SpecError(f"a group needs distinct ranks, got {list(group)}")
        bad = [r for r in group if not 0 <= r < network.ranks]
        if bad:
            raise SpecError(
                f"rank {bad[0]} is not in topology {network.name!r} ({network.ranks} ranks)"
            )
        if group == tuple(range(len(group))):
            return network.with_ranks(len(group))
        # an arbitrary group is no sub-torus: its ranks are not the torus's row-major prefix
        meta = {k: v for k, v in network.meta.items() if k != "dims"}
        return network.rebuilt(rank_devices=tuple(network.rank_devices[r] for r in group),
                               meta=meta)

    def point_to_point(self) -> tuple[Network, float]:
        """(view, launch latency) a send between two ranks runs with: on a machine that runs
        NCCL, its Simple protocol's latency and bandwidth (NCCL's send/recv kernels use
        Simple) and the ring/Simple launch latency, as NCCL's tuner has no entry for
        point-to-point; elsewhere the network itself, with no launch latency. Made once."""
        if self._p2p is None:
            if not runs_nccl(self.network, "auto"):
                self._p2p = self.network, 0.0
            else:
                model = NcclModel.of(self.network)
                self._p2p = (model.network_for(self.network.ranks, "send", "Simple"),
                             model.base_s("ring", "Simple"))
        return self._p2p

    # -- candidates -----------------------------------------------------------------------
    def candidates(self, call: CollectiveCall, c: Call, net: Network) -> list[Candidate]:
        """What ``call`` chooses among on ``net`` (see the module docstring)."""
        if runs_nccl(net, call.protocol):
            return self._nccl_candidates(call, c, net)
        if call.algorithm == PIPELINED:
            raise SpecError(f"{PIPELINED} is NCCL's; it needs a topology that runs NCCL")
        if call.algorithm != "auto":
            get_algorithm(call.algorithm).check_supports(c)
            return [(call.algorithm, None)]
        mapping = net.meta.get("algorithms")
        if isinstance(mapping, dict) and c.collective.value in mapping:
            mapped = get_algorithm(str(mapping[c.collective.value]))
            try:
                mapped.check_supports(c)
                return [(mapped.name, None)]
            except ScheduleError:
                # An automatic algorithm that cannot run this call (``torus`` on a --ranks
                # prefix that is no torus) gives way to the normal choice; a library's fixed
                # choice (gloo) raises: its error says why it cannot run.
                if not mapped.automatic:
                    raise
        names = algorithm_candidates(c)
        if not names:
            raise SpecError(f"no algorithm can run {c.collective.value} on {c.ranks} ranks")
        return [(name, None) for name in names]

    def _nccl_candidates(self, call: CollectiveCall, c: Call, net: Network) -> list[Candidate]:
        model = NcclModel.of(net)
        forced = None if call.protocol == "auto" else call.protocol
        if call.algorithm in ("auto", PIPELINED):
            among = model.candidates(c)
            if call.algorithm == PIPELINED:
                among = [x for x in among if x[0] == PIPELINED]
                if not among:
                    raise SpecError(f"{PIPELINED} (NCCL's trees across hosts) needs all_reduce "
                                    "over several hosts with as many ranks each")
            if forced:
                among = [x for x in among if x[1] == forced]
        else:
            get_algorithm(call.algorithm).check_supports(c)
            protocols = model.protocols_of(call.algorithm)
            if forced:
                model.check(f"{call.algorithm}+{forced}")
                protocols = (forced,)
            among = [(call.algorithm, p) for p in protocols]
        if not among:
            raise SpecError(f"NCCL runs no {c.collective.value} algorithm with protocol {forced}")
        return [(name, str(protocol)) for name, protocol in among]

    # -- evaluations ----------------------------------------------------------------------
    def _evaluate(self, group: tuple[int, ...] | None, c: Call, net: Network,
                  candidate: Candidate, engine: str, records: bool = False) -> Evaluation:
        """``candidate`` timed by ``engine``, launch latency not included (memoised)."""
        key = (group, c, candidate, engine)
        done = self._evaluations.get(key)
        name, protocol = candidate
        composed = protocol is not None and NcclModel.of(net).composed(name, c.ranks)
        if done is not None and (done.schedule is not None or not records or composed):
            return done
        if protocol is None:
            done = evaluate(c, net, name, engine, records)
        elif composed and (c.nbytes == 0 or c.ranks < 2):
            done = Evaluation(0.0, 1, net)  # nothing to move: NCCL returns at once
        else:
            done = NcclModel.of(net).evaluate(c, name, protocol, engine, records)
        self._evaluations[key] = done
        return done

    def _rank(self, group: tuple[int, ...] | None, c: Call, net: Network,
              among: list[Candidate], engine: str) -> list[float]:
        """Each candidate's total time; from :data:`PROGRESS_MIN_RANKS` ranks on (seconds of
        work) with a progress bar on a terminal."""
        if c.ranks < PROGRESS_MIN_RANKS:
            return [self._total(group, c, net, cand, engine) for cand in among]
        bar = Progress(f"ranking {len(among)} candidates on {c.ranks} ranks", "candidate")
        try:
            totals: list[float] = []
            for cand in among:
                bar.update_to(len(totals), len(among), "/".join(str(x) for x in cand if x))
                totals.append(self._total(group, c, net, cand, engine))
            bar.update_to(len(totals), len(among))
            return totals
        finally:
            bar.close()

    def _drop_records(self, group: tuple[int, ...] | None, c: Call,
                      losers: list[Candidate], engine: str) -> None:
        """Keep only the times of candidates that lost: their schedules are not asked for
        again, and a sweep would otherwise hold one per candidate and size."""
        for candidate in losers:
            key = (group, c, candidate, engine)
            done = self._evaluations.get(key)
            if done is not None and done.schedule is not None:
                self._evaluations[key] = Evaluation(done.time_s, done.chunks, done.network)

    @staticmethod
    def _launch_s(c: Call, net: Network, candidate: Candidate, device_s: float) -> float:
        """NCCL's launch before the first transfer of a call whose schedule takes
        ``device_s`` (:meth:`~commsim.nccl.NcclModel.launch_s`); 0 without a protocol."""
        name, protocol = candidate
        if protocol is None or c.nbytes == 0 or c.ranks < 2:
            return 0.0
        return NcclModel.of(net).launch_s(name, protocol, device_s)

    def _total(self, group: tuple[int, ...] | None, c: Call, net: Network,
               candidate: Candidate, engine: str) -> float:
        """A candidate's time for ranking: NCCL's composed candidates across hosts by their
        composed estimate (with ``engine``'s phases: a pipelined schedule's DES costs seconds,
        and only the chosen one is simulated), every other by its evaluation."""
        name, protocol = candidate
        if protocol is not None and c.nbytes and c.ranks > 1 \
                and NcclModel.of(net).composed(name, c.ranks):
            key = (group, c, candidate, f"composed {engine}")
            if key not in self._evaluations:
                self._evaluations[key] = NcclModel.of(net).composed_estimate(
                    c, name, protocol, engine)
            device = self._evaluations[key].time_s
        else:
            device = self._evaluate(group, c, net, candidate, engine).time_s
        return self._launch_s(c, net, candidate, device) + device

    def _result(self, group: tuple[int, ...] | None, c: Call, net: Network,
                candidate: Candidate, engine: str, records: bool) -> Result:
        done = self._evaluate(group, c, net, candidate, engine, records)
        if engine == "des" and done.schedule is None and done.note is None:
            # a DES answer carries its records (a loser's were dropped: made again here),
            # unless it was had by symmetry: then, as under the closed form, when asked
            done = self._evaluate(group, c, net, candidate, engine, True)
        launch = self._launch_s(c, net, candidate, done.time_s)
        timing = done.timing
        if timing is not None and launch:
            timing = timing.shifted(launch)
        name, protocol = candidate
        result = Result(
            collective=c.collective, algorithm=name, topology=self.network.name,
            ranks=c.ranks, nbytes=c.nbytes, chunks=done.chunks, engine=engine,
            time_s=launch + done.time_s, schedule=done.schedule, timing=timing,
            protocol=protocol, network=done.network if done.schedule is not None else None,
            launch_s=launch, note=done.note,
        )
        if done.schedule is not None:
            return result
        if protocol is not None and NcclModel.of(net).composed(name, c.ranks):
            return replace(result, records_error=_no_schedule(result.label))

        def with_records() -> Result:
            return self._result(group, c, net, candidate, engine, True)

        return replace(result, records_source=with_records)
