"""A training run with random failures, as a SimPy process: the oracle of the goodput closed form.

One run trains ``work_s`` seconds of full-speed compute. It alternates compute intervals of
``interval_s`` and checkpoints that stall training for ``blocking_s``; a checkpoint becomes
durable ``commit_delay_s`` after its snapshot ends (0 for a synchronous write, the background
write time for an asynchronous one). Failures arrive as a Poisson process of ``rate_per_s``
(exponential gaps drawn from the run's own seeded ``numpy.random.Generator``), at any moment:
during compute, a checkpoint, a background write or a restart. A failure rolls the run back
to its last durable checkpoint and costs ``restart_s`` (restart, re-queue, reading the
checkpoint; a failure during it starts it again).

With ``elastic``, the failed node is out for ``repair_s``; until it is back the run trains on
the others, each node out costing the fraction ``slowdown`` of full speed. A repaired node
rejoins at the next restart after a failure, or at the next durable checkpoint, which then
pays ``rejoin_s`` (a planned restart on the larger set: nothing is lost).

Nothing random happens between two failures, so the process sleeps from one event to the
next (the next failure, the run's end, a node's return) instead of once per checkpoint, and
counts the checkpoints that completed in between from their deterministic schedule.
# NOTE: per-checkpoint timeouts give the same answer with ~50x the events (a month-long run
# checkpoints thousands of times between failures); benchmarks/goodput_agreement.py times it.

This module only knows seconds and rates: :mod:`commsim.goodput.simulate` maps a goodput spec
onto :class:`FailureModel` and summarises the runs.

>>> import numpy as np
>>> m = FailureModel(rate_per_s=1 / 3600, interval_s=300, blocking_s=10, commit_delay_s=0,
...                  restart_s=600, work_s=86400)
>>> run = simulate_run(m, np.random.default_rng(1))
>>> run.work_s >= 86400, 0 < run.goodput < 1, run.failures > 0
(True, True, True)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass

import numpy as np
import simpy

#: Exponential gaps drawn per call of the generator (one call per failure is slow in numpy).
_BATCH = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureModel:
    """One run's timeline parameters, in seconds (and failures per second).

    Attributes
    ----------
    rate_per_s
        Failures per second of wall time (the whole job: every GPU and node).
    interval_s
        Compute between two checkpoints.
    blocking_s
        Training stalls this long per checkpoint (the write, or an asynchronous snapshot).
    commit_delay_s
        After the stall, until the checkpoint is durable (an asynchronous write; 0: sync).
    restart_s
        After each failure, until training resumes (repeated when a failure hits it).
    work_s
        Full-speed compute the run must complete (rounded up to whole intervals).
    elastic, repair_s, slowdown, rejoin_s
        The elastic restart (see the module docstring).
    """

    rate_per_s: float
    interval_s: float
    blocking_s: float
    commit_delay_s: float
    restart_s: float
    work_s: float
    elastic: bool = False
    repair_s: float = 0.0
    slowdown: float = 0.0
    rejoin_s: float = 0.0

    @property
    def segment_s(self) -> float:
        """Wall time between two checkpoints' snapshots: compute and stall."""
        return self.interval_s + self.blocking_s

    def commit_time(self, j: float) -> float:
        """Since a (re)start, when the ``j``-th checkpoint (``j >= 1``) is durable."""
        return j * self.segment_s + self.commit_delay_s

    def commits_by(self, elapsed: float) -> int:
        """Checkpoints durable ``elapsed`` seconds after a (re)start."""
        if elapsed < self.commit_time(1):
            return 0
        return int((elapsed - self.commit_delay_s) // self.segment_s)


@dataclass(frozen=True, slots=True)
class RunResult:
    """One run: wall time, full-speed work done, failures and rejoins."""

    wall_s: float
    work_s: float
    failures: int
    rejoins: int

    @property
    def goodput(self) -> float:
        """Full-speed compute over wall time."""
        return self.work_s / self.wall_s


class _Failures:
    """The run's failure times: a Poisson process from its own generator."""

    def __init__(self, rate_per_s: float, rng: np.random.Generator) -> None:
        self._scale = 1.0 / rate_per_s if rate_per_s > 0 else math.inf
        self._rng = rng
        self._gaps: Iterator[float] = iter(())
        self.next_s = self._gap()

    def _gap(self) -> float:
        if math.isinf(self._scale):
            return math.inf
        gap = next(self._gaps, None)
        if gap is None:
            self._gaps = iter(self._rng.exponential(self._scale, _BATCH).tolist())
            gap = next(self._gaps)
        return gap

    def advance(self) -> None:
        """The failure at :attr:`next_s` happened: draw the one after it."""
        self.next_s += self._gap()


class _Run:
    """The state of one run, and its SimPy process (:meth:`train`)."""

    def __init__(self, env: simpy.Environment, model: FailureModel,
                 rng: np.random.Generator) -> None:
        self.env, self.m = env, model
        self.failures = _Failures(model.rate_per_s, rng)
        self.done_s = 0.0  # full-speed work in durable checkpoints
        self.out = 0  # nodes out (elastic)
        self.repairs: deque[float] = deque()  # when each node out is repaired, in order
        self.failed = self.rejoins = 0

    def _fail(self) -> None:
        self.failed += 1
        if self.m.elastic:
            self.out += 1
            self.repairs.append(self.failures.next_s + self.m.repair_s)
        self.failures.advance()

    def _repaired(self, now: float) -> int:
        return sum(1 for t in self.repairs if t <= now)

    def _rejoin(self, now: float) -> None:
        """Every repaired node joins the run (it is restarting anyway)."""
        back = self._repaired(now)
        for _ in range(back):
            self.repairs.popleft()
        self.out -= back

    def restart(self, duration: float) -> Generator[simpy.Event, None, None]:
        """A restart of ``duration``, begun again (as a failure's restart) after each failure
        that hits it."""
        env = self.env
        while self.failures.next_s < env.now + duration:
            yield env.timeout(self.failures.next_s - env.now)
            self._fail()
            duration = self.m.restart_s
        yield env.timeout(duration)
        if self.m.elastic:
            self._rejoin(env.now)

    def train(self) -> Generator[simpy.Event, None, None]:
        """Stretches of compute and checkpoints, each ended by a failure, the end or a rejoin."""
        m = self.m
        while self.done_s < m.work_s * (1 - 1e-12):
            ended = yield from self._stretch()
            if ended == "failure":
                yield from self.restart(m.restart_s)
            elif ended == "rejoin":
                self.rejoins += 1
                yield from self.restart(m.rejoin_s)

    def _stretch(self) -> Generator[simpy.Event, None, str]:
        """Train from a (re)start until a failure, the run's end or a planned rejoin."""
        m, env = self.m, self.env
        start = env.now
        speed = max(0.0, 1.0 - self.out * m.slowdown) if m.elastic else 1.0
        per_commit = m.interval_s * speed
        left: float = math.inf  # checkpoints to the run's end
        if speed > 0:
            left = max(1, math.ceil((m.work_s - self.done_s) / per_commit - 1e-9))
        end = start + m.commit_time(left) if speed > 0 else math.inf
        planned, stop = "end", left
        while True:
            repair = self.repairs[0] if self.repairs and planned == "end" else math.inf
            wake = min(end, self.failures.next_s, repair)
            yield env.timeout(wake - env.now)
            if wake == self.failures.next_s:
                if speed > 0:
                    self.done_s += per_commit * min(stop, m.commits_by(env.now - start))
                self._fail()
                return "failure"
            if wake == end:
                self.done_s += per_commit * stop
                return "rejoin" if stop < left else "end"
            # a repaired node: stop at the next durable checkpoint and grow back, unless the
            # run ends there anyway
            planned, stop = "seen", min(left, m.commits_by(env.now - start) + 1)
            end = start + m.commit_time(stop)


def simulate_run(model: FailureModel, rng: np.random.Generator) -> RunResult:
    """One run of ``model`` with failures drawn from ``rng``."""
    env = simpy.Environment()
    run = _Run(env, model, rng)
    env.process(run.train())
    env.run()
    return RunResult(env.now, run.done_s, run.failed, run.rejoins)
