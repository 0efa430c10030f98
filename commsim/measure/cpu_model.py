"""The model of a CPU host that makes gloo measurements predictable, and its fit.

On one host, torch.distributed with gloo moves bytes between processes through loopback TCP:
every transfer is two memory copies done by the host's cores (into the kernel, out of it), and
PyTorch adds copies of its own. So the "network" is the host: all ranks share its cores and
memory bandwidth, whatever pairs they talk between. The model, a ``shared`` topology
(``docs/topologies.md``) run with the ``gloo`` algorithms (``commsim.algorithms.gloo``), says:

* every transfer and every local copy crosses one **medium** (``medium.bandwidth``): the
  concurrent ones share it max-min fairly, so ``p`` ranks exchanging at once each get a
  ``p``-th of it, as the measurements show;
* one transfer alone moves at most ``link.bandwidth`` (one process's copy rate);
* a message arrives ``latency + (q - 1) * latency_per_rank`` after its last byte left, with
  ``q`` ranks running: more processes than cores means each wake-up waits longer;
* reducing a byte costs ``gamma`` seconds;
* gloo runs its own algorithms (segmented rings with two messages in flight, a binomial
  broadcast, reduce_scatter as a full all-reduce) and PyTorch its own copies.

:func:`fit_host` fits these five numbers to measured rows (all five collectives and the
``sendrecv`` ping-pong, every world size at once) by Levenberg-Marquardt on
``log(predicted / measured)`` with a soft-L1 loss (the heavy tails of a busy 2-core machine
should not steer the fit), every prediction a DES run of the row's gloo schedule. The
result is a topology file that ``run``, ``replay`` and ``validate`` accept.

>>> spec = host_spec({"latency_s": 1e-4, "latency_per_rank_s": 5e-5, "bandwidth_Bps": 2e9,
...                   "medium_bandwidth_Bps": 4e9, "gamma_s_per_B": 0.0}, ranks=4)
>>> row = Measurement(collective="sendrecv", ranks=2, nbytes=2_000_000, time_s=1.0)
>>> [round(t * 1e6, 3) for t in predict_rows([row], spec)]  # 150 us + 2 MB / 2 GB/s
[1150.0]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from commsim.algorithms import SCHEDULED, Call, build_schedule
from commsim.collectives import Collective
from commsim.engine.des import simulate_des
from commsim.errors import SpecError
from commsim.measurements import POINT_TO_POINT, Measurement
from commsim.network import Network
from commsim.schedule import OpKind, Schedule, ScheduleBuilder
from commsim.topology.build import build_network
from commsim.topology.spec import LinkSpec, SharedSpec

#: Fitted parameters, in the order of the fit vector, with their bounds (SI units).
PARAMETERS: dict[str, tuple[float, float]] = {
    "latency_s": (1e-7, 1.0),
    "latency_per_rank_s": (1e-9, 1.0),
    "bandwidth_Bps": (1e6, 1e13),
    "medium_bandwidth_Bps": (1e6, 1e13),
    "gamma_s_per_B": (1e-16, 1e-6),
}
#: Where the fit starts (a 2-core VM's loopback: ~2 GB/s per flow).
START = {
    "latency_s": 1e-4,
    "latency_per_rank_s": 5e-5,
    "bandwidth_Bps": 2e9,
    "medium_bandwidth_Bps": 4e9,
    "gamma_s_per_B": 1e-10,
}
#: Scale of the soft-L1 loss on log(predicted/measured): errors beyond ~25% count less.
ROBUST_SCALE = 0.25
def host_spec(
    parameters: Mapping[str, float],
    ranks: int,
    *,
    cores: int = 1,
    name: str | None = None,
    description: str = "",
) -> SharedSpec:
    """The ``shared`` topology of ``parameters`` (keys of :data:`PARAMETERS`) on a host of
    ``cores`` cores, every collective mapped to the ``gloo`` algorithm."""
    return SharedSpec(
        ranks=ranks,
        cores=cores,
        link=LinkSpec(
            latency_s=float(parameters["latency_s"]),
            bandwidth_Bps=float(parameters["bandwidth_Bps"]),
        ),
        medium_bandwidth_Bps=float(parameters["medium_bandwidth_Bps"]),
        latency_per_rank_s=float(parameters["latency_per_rank_s"]),
        gamma_s_per_B=float(parameters["gamma_s_per_B"]),
        algorithms=tuple((c.value, "gloo") for c in SCHEDULED),
        name=name,
        description=description,
    )


def schedule_of(row: Measurement[str]) -> Schedule:
    """What a row ran: its gloo schedule, or for ``sendrecv`` one transfer rank 0 -> rank 1
    (its time is one way, half the measured round trip)."""
    name = str(row.collective)
    if name == POINT_TO_POINT:
        builder = ScheduleBuilder()
        builder.add(0, 1, 0, row.nbytes, OpKind.COPY)
        # a point-to-point message recorded as a 2-rank broadcast: the schedule's only role
        # here is to be timed
        return builder.build(Collective.BROADCAST, "sendrecv", 2, row.nbytes)
    call = Call(collective=Collective(name), ranks=row.ranks, nbytes=row.nbytes)
    return build_schedule(call, "gloo")


def _check_rows(rows: Sequence[Measurement[str]]) -> None:
    known = {c.value for c in SCHEDULED} | {POINT_TO_POINT}
    if not rows:
        raise SpecError("no measured rows to fit (check --sizes / --collectives)")
    for row in rows:
        if str(row.collective) not in known:
            raise SpecError(f"cannot model collective {str(row.collective)!r}")
        if str(row.collective) == POINT_TO_POINT and row.ranks < 2:
            raise SpecError("a sendrecv row needs a world of at least 2 ranks")


class _Timer:
    """Times a fixed set of rows on networks built from parameter vectors (schedules once)."""

    def __init__(self, rows: Sequence[Measurement[str]], ranks: int) -> None:
        self.rows = list(rows)
        self.ranks = ranks
        keys: dict[tuple[str, int, int], int] = {}
        self.index = []
        self.schedules: list[Schedule] = []
        self.worlds: list[int] = []
        for row in self.rows:
            key = (str(row.collective), row.ranks, row.nbytes)
            if key not in keys:
                keys[key] = len(self.schedules)
                self.schedules.append(schedule_of(row))
                self.worlds.append(row.ranks)
            self.index.append(keys[key])
        self.measured = np.array([row.time_s for row in self.rows], dtype=float)

    def times(self, spec: SharedSpec) -> np.ndarray:
        network = build_network(spec)
        views: dict[int, Network] = {}
        unique = []
        for schedule, world in zip(self.schedules, self.worlds, strict=True):
            if world not in views:
                views[world] = network.with_ranks(world)
            unique.append(simulate_des(schedule, views[world]).time_s)
        return np.array([unique[i] for i in self.index], dtype=float)


def predict_rows(rows: Iterable[Measurement[str]], spec: SharedSpec) -> list[float]:
    """Predicted seconds of every row on ``spec`` (the DES, gloo schedules)."""
    rows = list(rows)
    _check_rows(rows)
    return [float(t) for t in _Timer(rows, spec.ranks).times(spec)]


@dataclass(frozen=True, slots=True)
class HostFit:
    """A fitted host model.

    Attributes
    ----------
    spec : SharedSpec
        The fitted topology (ranks = the largest world size measured).
    parameters : dict
        The five fitted values by name (:data:`PARAMETERS`), SI units.
    rows : tuple
        The rows fitted to.
    predicted_s : tuple of float
        The model's time for each row.
    """

    spec: SharedSpec
    parameters: dict[str, float]
    rows: tuple[Measurement[str], ...]
    predicted_s: tuple[float, ...]

    @property
    def errors_pct(self) -> list[float]:
        """Signed error of every row, (predicted - measured) / measured x 100."""
        return [
            (p - r.time_s) / r.time_s * 100
            for p, r in zip(self.predicted_s, self.rows, strict=True)
        ]

    @property
    def median_abs_error_pct(self) -> float:
        """Median |error| over the rows fitted to."""
        return float(np.median(np.abs(self.errors_pct)))


def _parameters(x: np.ndarray) -> dict[str, float]:
    return {name: float(math.exp(v)) for name, v in zip(PARAMETERS, x, strict=True)}


def _soft_l1(residual: np.ndarray) -> np.ndarray:
    """Residuals whose squares sum to the soft-L1 loss of ``residual`` (scale ROBUST_SCALE)."""
    s = ROBUST_SCALE
    return np.sign(residual) * np.sqrt(2 * s * s * (np.sqrt(1 + (residual / s) ** 2) - 1))


def fit_host(
    rows: Sequence[Measurement[str]],
    *,
    ranks: int | None = None,
    cores: int = 1,
    start: Mapping[str, float] | None = None,
) -> HostFit:
    """Fit the host model to ``rows`` (see the module docstring).

    Parameters
    ----------
    rows
        Measured rows of any world sizes: the five collectives and ``sendrecv``.
    ranks
        Ranks of the fitted topology (default: the largest world size in ``rows``).
    cores
        The host's cores (the ``cpus`` column of ``commsim measure``'s CSV).
    start
        Starting values (default :data:`START`).

    Raises
    ------
    SpecError
        No rows, a collective the model does not know, ``ranks`` below a row's world size.
    """
    rows = list(rows)
    _check_rows(rows)
    most = max(row.ranks for row in rows)
    ranks = most if ranks is None else ranks
    if ranks < most:
        raise SpecError(f"ranks {ranks} is below the largest measured world size {most}")
    timer = _Timer(rows, ranks)
    log_measured = np.log(timer.measured)
    bounds = np.log(np.array(list(PARAMETERS.values()), dtype=float))

    def residuals(x: np.ndarray) -> np.ndarray:
        spec = host_spec(_parameters(x), ranks, cores=cores)
        return _soft_l1(np.log(timer.times(spec)) - log_measured)

    first = dict(START if start is None else start)
    x0 = np.log(np.array([first[name] for name in PARAMETERS], dtype=float))
    x = _levenberg_marquardt(residuals, np.clip(x0, bounds[:, 0], bounds[:, 1]), bounds)
    parameters = _parameters(x)
    spec = host_spec(parameters, ranks, cores=cores)
    return HostFit(spec, parameters, tuple(rows), tuple(float(t) for t in timer.times(spec)))


def _levenberg_marquardt(
    residuals: Any, x: np.ndarray, bounds: np.ndarray, *, iterations: int = 40
) -> np.ndarray:
    """Minimize ``|residuals(x)|^2`` within ``bounds`` (deterministic; forward differences)."""
    r = residuals(x)
    cost = float(r @ r)
    damping = 1e-2
    step_size = 1e-3
    for _ in range(iterations):
        jacobian = np.empty((r.size, x.size))
        for j in range(x.size):
            probe = x.copy()
            probe[j] += step_size
            jacobian[:, j] = (residuals(probe) - r) / step_size
        gradient = jacobian.T @ r
        normal = jacobian.T @ jacobian
        improved = False
        for _ in range(10):
            scaled = normal + damping * np.diag(np.diag(normal) + 1e-12)
            step = np.linalg.solve(scaled, -gradient)
            candidate = np.clip(x + step, bounds[:, 0], bounds[:, 1])
            r_new = residuals(candidate)
            cost_new = float(r_new @ r_new)
            if cost_new < cost:
                shrink = cost - cost_new
                x, r, cost = candidate, r_new, cost_new
                damping = max(damping / 3, 1e-9)
                improved = True
                break
            damping *= 4
        if not improved or shrink < 1e-10 * max(cost, 1e-30) or np.max(np.abs(step)) < 1e-5:
            break
    return x
