"""Fit a topology's latencies and bandwidths to measurements: ``commsim calibrate``.

What is fitted are the parameters of the template's *link classes*:

* no template, one host: a ``switch`` of ``ranks`` devices, one class ``link``;
* no template, several hosts (``hosts``, e.g. an nccl-tests log's device lines): a
  ``hierarchical`` topology, classes ``intra`` and ``inter``;
* a template of kind ring / fully_connected / switch / torus: its ``link``; hierarchical: its
  ``intra`` and its ``inter`` (the latter only when some row spans several hosts);
  custom: one class per distinct (latency, bandwidth) pair of its links, each scaled by a
  fitted factor (latency x a, 1/bandwidth x b), so a hand-built template keeps its shape;
* optionally ``gamma`` (seconds per byte reduced; CPU reductions cost, GPU ones hardly);
* a template with an ``nccl:`` block: its floor's machine times, ``overhead`` and (a run with
  several GPUs per host thread) ``host_per_gpu``, fitted after the links (:func:`_fit_in_stages`).

With a template, a parameter the fit takes to a bound no machine has (a bandwidth of 100 TB/s,
a scale of 10^4), or moves to where no row depends on it (a link made so fast that it no
longer binds: the rows bound it from one side only), is held at the template's value and the
rest fitted again.

**Objective.** Least squares on ``log(predicted / measured)``: relative error, symmetric, so a
4 KiB row counts as much as a 4 GiB one. **Optimizer.** A predicted time is linear in the time
parameters ``x`` (latencies, inverse bandwidths, gamma) wherever the schedule's critical path,
the link sharing and ``auto``'s choice of algorithm stay the same, plus a part no parameter
moves (under NCCL's model: its launch latency and, while not fitted, the floor's machine
times, docs/nccl.md):
``t(x) = c + J x``. Each outer iteration measures ``J`` at the current ``x`` by finite
differences (one prediction of every row per parameter), takes ``c = t(x) - J x``, and
solves the smooth problem ``min sum (log(c + J x) - log t)^2`` over ``x > 0`` by damped
Gauss-Newton in ``log x`` (numpy only), halving a step that does not improve the fit
(:data:`BACKTRACK` times at most); it stops when ``x`` settles and returns the best ``x``
seen. Everything is deterministic. Predictions use the same engine as ``validate``
(``auto``: the DES up to 32 ranks, closed forms beyond), so contention the DES sees is part
of the fit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from commsim.collectives import Collective
from commsim.errors import SpecError
from commsim.topology.build import build_network
from commsim.topology.presets import TopologyRef, topology_spec
from commsim.topology.spec import (
    FlatSpec,
    HierarchicalSpec,
    LinkSpec,
    SwitchSpec,
    TopologySpec,
)
from commsim.validation.calibration import Calibration, at_bounds, rows_summary, undetermined
from commsim.validation.measurements import Measurement
from commsim.validation.parameters import BOUNDS, Param, reported, template_parameters
from commsim.validation.solve import solve_log_linear
from commsim.validation.validate import (
    Predictor,
    as_run,
    placed_hosts,
    validate,
)

#: Outer iterations (re-measuring J); the inner Gauss-Newton loop is in :mod:`.solve`.
MAX_OUTER = 12
#: Relative step of the finite differences, and the settle tolerance on x.
STEP = 1e-3
TOLERANCE = 1e-6


# -- the template and its parameters -------------------------------------------------------
def _hosts_layout(hosts: Sequence[int]) -> int:
    """GPUs per host of a host index list like ``(0,)*8 + (1,)*8``; SpecError if uneven."""
    counts: dict[int, int] = {}
    for host in hosts:
        counts[host] = counts.get(host, 0) + 1
    sizes = set(counts.values())
    if len(sizes) != 1:
        raise SpecError(f"hosts: uneven ranks per host {sorted(counts.values())}")
    return sizes.pop()


def _initial_template(rows: Sequence[Measurement], hosts: Sequence[int] | None) -> TopologySpec:
    """The default template: a switch, or hierarchical when ``hosts`` spans several hosts."""
    most = max(r.ranks for r in rows)
    guess = LinkSpec(latency_s=1e-6, bandwidth_Bps=1e10)
    if hosts is not None and len(set(hosts)) > 1:
        per_host = _hosts_layout(hosts)
        return HierarchicalSpec(
            nodes=-(-most // per_host),
            gpus_per_node=per_host,
            intra=guess,
            inter=guess,
            description="calibrated hierarchical topology",
        )
    return SwitchSpec(ranks=most, link=guess, description="calibrated single-host topology")


def _grown(spec: TopologySpec, ranks: int) -> TopologySpec:
    """``spec`` with at least ``ranks`` ranks (more hosts / a larger flat kind)."""
    if spec.num_ranks >= ranks:
        return spec
    if isinstance(spec, HierarchicalSpec):
        return dataclasses.replace(spec, nodes=-(-ranks // spec.gpus_per_node))
    if isinstance(spec, FlatSpec):
        return dataclasses.replace(spec, ranks=ranks)
    raise SpecError(
        f"template {spec.name or spec.kind!r} has {spec.num_ranks} ranks, the measurements "
        f"need {ranks}"
    )


# -- the fit -------------------------------------------------------------------------------
#: Halvings (in log-parameters) of a Gauss-Newton step that did not improve the fit.
BACKTRACK = 4
#: ``progress(done, total)``: ``done`` of at most ``total`` outer iterations have run.
Progress = Callable[[int, int], None]


def calibrate(
    rows: Sequence[Measurement],
    template: TopologyRef | None = None,
    *,
    hosts: Sequence[int] | None = None,
    placement: str = "first",
    fit_gamma: bool = False,
    algorithm: str = "auto",
    engine: str = "auto",
    source: str = "",
    progress: Progress | None = None,
    gpus_per_thread: int | None = None,
    nccl_version: str | None = None,
    protocol: str = "auto",
) -> Calibration:
    """Fit the template's link classes (and ``gamma`` if asked) to ``rows``.

    Parameters
    ----------
    rows : sequence of Measurement
        What to fit (at least one row).
    template : topology reference, optional
        A preset, file, dict or spec whose kind and structure are kept (see the module
        docstring); None: a switch, or hierarchical when ``hosts`` spans several hosts.
    hosts : sequence of int, optional
        Host index of each rank of the largest world size (e.g. from nccl-tests device lines):
        the default template's shape.
    placement : str
        ``first``: the rows run on the template's first ranks; ``log``: on its hosts as
        ``hosts`` places them (:func:`~commsim.validation.validate`'s ``hosts``).
    fit_gamma : bool
        Also fit the reduction cost per byte.
    algorithm, engine, gpus_per_thread, nccl_version, protocol
        How rows are predicted while fitting, as :func:`~commsim.validation.validate` does
        (``gpus_per_thread``, ``nccl_version`` and ``protocol``: a log's ``nGpus``, ``NCCL
        version`` and the one protocol its ``NCCL_PROTO`` allows; the topology written is
        the machine's).
    progress : callable, optional
        Called as ``progress(done, total)`` after each outer iteration (the CLI's bar).

    Raises
    ------
    SpecError
        No rows; a template that cannot hold the largest world size; nothing to fit.
    """
    if not rows:
        raise SpecError("no measured rows to calibrate (check --sizes / --collectives)")
    spec, template_name = _template(rows, template, hosts)
    placed = placed_hosts(hosts, placement)
    multi_host = _spans_hosts(spec, rows, algorithm, placed)
    params, x, build = template_parameters(spec, multi_host, fit_gamma, gpus_per_thread)
    notes: list[str] = []
    if isinstance(spec, HierarchicalSpec) and not multi_host:
        notes.append("inter (network) link kept from the template: no row spans two hosts")
    predict = _Predictor(rows, build, algorithm, engine, (gpus_per_thread, nccl_version, placed),
                         protocol)
    if template is None:
        x = _initial_guess(rows, params, x, predict)
    best_x, active, held = _fit_in_stages(predict, params, x, _Staged(progress),
                                          template is not None)
    for p, used, kept in zip(params, active, held, strict=True):
        if kept:
            why = "took it to a bound" if kept == BOUND else "moved it where no row depends on it"
            notes.append(f"{p.name} not determined by the rows (the fit {why}): "
                         "kept at the template's value")
        elif not used:
            notes.append(f"{p.name} not fitted: no row depends on it (kept at its start value)")
    bounds = at_bounds(params, best_x, active)
    fitted = build(best_x)
    fitted_by = f"fitted by commsim calibrate to {source or 'measurements'}"
    sources = (fitted_by,) if template is None else (*fitted.sources, fitted_by)
    fitted = dataclasses.replace(fitted, sources=sources)
    report = validate(rows, fitted, algorithm=algorithm, engine=engine, source=source,
                      gpus_per_thread=gpus_per_thread, nccl_version=nccl_version, hosts=placed,
                      protocol=protocol)
    return Calibration(
        spec=fitted, parameters=reported(params, best_x), report=report, source=source,
        template=template_name, rows_summary=rows_summary(rows),
        notes=tuple(notes) + tuple(b.message for b in bounds), at_bounds=tuple(bounds),
    )


def _template(rows: Sequence[Measurement], template: TopologyRef | None,
              hosts: Sequence[int] | None) -> tuple[TopologySpec, str]:
    """(the spec to fit, the template's name): ``template`` grown to the largest world size,
    or with none a switch or hierarchical shape of ``hosts`` (``"none"``)."""
    from commsim.network import Network

    if template is not None and isinstance(template, Network):
        raise SpecError("calibrate needs a topology spec (a preset, file or dict), not a Network")
    if template is None:
        return _initial_template(rows, hosts), "none"
    spec = topology_spec(template)  # type: ignore[arg-type]
    return _grown(spec, max(r.ranks for r in rows)), spec.name or spec.kind


def _spans_hosts(spec: TopologySpec, rows: Sequence[Measurement], algorithm: str,
                 hosts: Sequence[int] | None) -> bool:
    """Whether some row's ranks span two hosts of ``spec`` (placed as ``hosts`` says)."""
    network = as_run(build_network(spec), algorithm, "auto", hosts=hosts)
    return any(len({network.host_of(r) for r in range(row.ranks)} - {None}) > 1
               for row in rows)


class _Predictor:
    """Predicted times of ``rows`` for a parameter vector ``x``; ``chosen`` fixes each row's
    algorithm (an empty list is filled with the algorithms ``auto`` resolved to)."""

    def __init__(
        self,
        rows: Sequence[Measurement],
        build: Callable[[np.ndarray], TopologySpec],
        algorithm: str,
        engine: str,
        ran: tuple[int | None, str | None, Sequence[int] | None] = (None, None, None),
        protocol: str = "auto",
    ) -> None:
        self.rows, self.build, self.algorithm, self.engine = rows, build, algorithm, engine
        self.ran = ran  # (GPUs per host thread, NCCL release, hosts) of the measured run
        self.protocol = protocol  # the one protocol the run was restricted to, or auto
        self.measured = np.asarray([r.time_s for r in rows], dtype=float)

    def __call__(self, x: np.ndarray, chosen: list[str] | None = None) -> np.ndarray:
        algorithm, engine = self.algorithm, self.engine
        network = as_run(build_network(self.build(x)), algorithm, self.protocol, *self.ran)
        predictor = Predictor(network, algorithm=algorithm, engine=engine, protocol=self.protocol)
        fixed: dict[str, Predictor] = {}
        cache: dict[tuple[Collective, int, int, str], float] = {}
        out = np.empty(len(self.rows))
        fill = chosen is not None and not chosen
        for i, row in enumerate(self.rows):
            name = algorithm if chosen is None or fill else chosen[i]
            key = (row.collective, row.ranks, row.nbytes, name)
            if key not in cache:
                if name == algorithm:
                    use = predictor
                else:
                    if name not in fixed:
                        fixed[name] = Predictor(predictor.network, algorithm=name, engine=engine)
                    use = fixed[name]
                prediction = use.predict(row.collective, row.ranks, row.nbytes)
                cache[key] = prediction.time_s
                cache[(row.collective, row.ranks, row.nbytes, prediction.algorithm)] = (
                    prediction.time_s
                )
                name = prediction.algorithm
            if fill:
                assert chosen is not None
                chosen.append(name)
            out[i] = cache[key]
        return out

    def objective(self, pred: np.ndarray) -> float:
        """Sum of squared log ratios of ``pred`` to the measured times."""
        if np.any(pred <= 0):
            return math.inf
        r = np.log(pred) - np.log(self.measured)
        return float(r @ r)


class _Staged:
    """One progress count over several fits: each reports its outer iterations after those
    of the fits before it."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress, self.before, self.done = progress, 0, 0

    def __call__(self, done: int, total: int) -> None:
        self.done = done
        if self.progress is not None:
            self.progress(self.before + done, self.before + total)

    def next_fit(self) -> None:
        self.before, self.done = self.before + self.done, 0


def _fit_in_stages(
    predict: _Predictor, params: list[Param], x: np.ndarray, progress: _Staged,
    has_template: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(best x, the parameters rows depend on, those held at the template's values, as
    :data:`BOUND` or :data:`IDLE` (0: not held); a held parameter is not among the former).

    The links first, the floor's times (``nccl`` class) as the template has them; then every
    parameter from there, so the floor's times only ever improve on the links' fit. With a
    template, a parameter the rows do not determine (:func:`undetermined`) is held at the
    template's value and the rest refitted."""
    floor = np.asarray([p.klass == "nccl" for p in params], dtype=bool)
    best_x = x
    if floor.any():
        best_x, _ = _fit(predict, params, x, progress, floor)
        progress.next_fit()
    best_x, active = _fit(predict, params, best_x, progress)
    held = np.zeros(len(x), dtype=int)  # 0, BOUND or IDLE: why it is held
    while has_template:
        bound, idle = undetermined(params, best_x, active), _idle(x, best_x, active, held)
        if not bound and not idle:
            break
        held[idle], held[bound] = IDLE, BOUND
        best_x, active = np.where(held > 0, x, best_x), active & (held == 0)
        if not active.any():
            break  # nothing left that the rows move: the template's values are the answer
        progress.next_fit()
        best_x, active = _fit(predict, params, best_x, progress, held > 0)
    return best_x, active, held


#: Why a parameter is held at the template's value: the fit took it to a bound, or moved it
#: where no row depends on it (:func:`_idle`).
BOUND, IDLE = 1, 2


def _idle(x: np.ndarray, best_x: np.ndarray, active: np.ndarray,
          held: np.ndarray) -> list[int]:
    """The parameters the fit moved but no row depends on where it left them (a link made so
    fast that it no longer binds): the rows bound them at most from one side, so, as for a
    bound, the template's value is the better guess."""
    return [i for i in range(len(x)) if not active[i] and not held[i] and best_x[i] != x[i]]


def _fit(
    predict: _Predictor, params: list[Param], x: np.ndarray, progress: Progress | None,
    held: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The best parameter vector found, and which parameters any row depends on (see the
    module docstring: outer iterations re-measure J, the inner solve is :mod:`.solve`);
    ``held`` parameters keep their values in ``x``."""
    if not np.all(np.isfinite(x)):  # pragma: no cover - start values are finite
        raise SpecError("calibrate: non-finite start values")
    low = np.asarray([BOUNDS[p.kind][0] for p in params])
    high = np.asarray([BOUNDS[p.kind][1] for p in params])
    x = np.clip(x, low, high)
    best_x, best_value = x.copy(), predict.objective(predict(x))
    active = np.ones(len(x), dtype=bool)
    for step in range(MAX_OUTER):
        chosen: list[str] = []
        base = predict(x, chosen)  # resolves auto once; the bumps keep these algorithms
        jac = np.zeros((len(predict.rows), len(x)))
        for c in range(len(x)):
            if held is not None and held[c]:
                continue
            bumped = x.copy()
            bumped[c] *= 1 + STEP
            jac[:, c] = (predict(bumped, chosen) - base) / (x[c] * STEP)
        jac = np.maximum(jac, 0.0)  # times never fall as a latency or 1/bandwidth grows
        active = np.any(jac > 0, axis=0)
        if not np.any(active):
            if step == 0:
                raise SpecError("nothing to fit: no parameter changes any predicted time")
            break  # every time is at a floor no parameter moves (e.g. NCCL's overheads)
        # the first-order model about x: base + J (x' - x); what no parameter moves (NCCL's
        # launch, the host's issue time) is its constant part, never fitted into the links
        offset = np.maximum(base - jac @ x, 0.0)
        new = x.copy()
        new[active] = solve_log_linear(
            jac[:, active], predict.measured, x[active], low[active], high[active], offset
        )
        value = predict.objective(predict(new))
        for _ in range(BACKTRACK):
            # a kinked model (max of phases, protocol caps) can make the full Gauss-Newton
            # step overshoot: shorten it, in log-parameters, before giving up on it
            if value < best_value:
                break
            new = x * np.sqrt(new / x)
            value = predict.objective(predict(new))
        if value < best_value:
            best_x, best_value = new.copy(), value
        settled = bool(np.all(np.abs(new - x) <= TOLERANCE * np.abs(x)))
        x = new
        if progress is not None:
            progress(step + 1, step + 1 if settled else MAX_OUTER)
        if settled:
            break
    return best_x, active


def _initial_guess(
    rows: Sequence[Measurement],
    params: list[Param],
    x: np.ndarray,
    predict: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """The best of a deterministic grid of start points (latency 1 ns..1 ms, bandwidth
    10 MB/s..10 TB/s; a network class 5x slower than the host's)."""
    measured = np.asarray([r.time_s for r in rows])
    best, best_value = x, math.inf
    for lat_scale in (1e-3, 1e-1, 1e1, 1e3):
        for bw_scale in (1e-3, 1e-1, 1e1, 1e3):
            trial = x.copy()
            for i, p in enumerate(params):
                slower = 5.0 if p.klass == "inter" else 1.0  # networks trail NVLink
                if p.kind == "latency":
                    trial[i] = 1e-6 * lat_scale * slower
                elif p.kind == "inverse_bandwidth":
                    trial[i] = 1e-10 * bw_scale * slower
            pred = predict(trial)
            if np.any(pred <= 0):
                continue
            r = np.log(pred) - np.log(measured)
            value = float(r @ r)
            if value < best_value:
                best, best_value = trial, value
    return best
