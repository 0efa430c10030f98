"""Predict measured rows on a topology and report the error: what ``commsim validate`` prints.

Every row is predicted on the first ``ranks`` ranks of the topology exactly as ``commsim run``
times that call (:mod:`commsim.timing`): the same algorithm choice, protocol and engine
(``des`` by default; ``engine="auto"`` is the timing layer's size policy, the closed forms
beyond 64 ranks); each row says which engine predicted it. The signed error is
``(predicted - measured) / measured x 100``; the summary is the median of its absolute value,
over all rows and split at 1 MiB (latency-bound vs bandwidth-bound sizes).

>>> from commsim.collectives import Collective
>>> from commsim.validation.measurements import Measurement
>>> topo = {"kind": "switch", "ranks": 2, "link": {"latency": "10us", "bandwidth": "1GB/s"}}
>>> rows = [Measurement(collective=Collective.ALL_REDUCE, ranks=2, nbytes=2000, time_s=24e-6)]
>>> report = validate(rows, topo)
>>> report.rows[0].predicted_time_s, round(report.rows[0].error_pct, 6)
(1.2e-05, -50.0)
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from commsim.collectives import Collective, parse_collective
from commsim.errors import SpecError
from commsim.nccl import NcclModel, with_nccl
from commsim.network import Network
from commsim.timing import (
    CollectiveCall,
    Timer,
    canonical_algorithm,
    canonical_protocol,
    resolve_engine,
)
from commsim.topology.nccl_spec import parse_nccl_version
from commsim.topology.presets import TopologyRef, load_topology
from commsim.validation.measurements import Measurement

#: Rows below this size are "small" (latency-bound) in the split medians.
SPLIT_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Prediction:
    """A predicted time and how it was obtained (the algorithm ``auto`` resolved to)."""

    time_s: float
    algorithm: str
    engine: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationRow:
    """One measured row next to its prediction; ``error_pct`` is signed (+: predicted slower)."""

    collective: Collective
    ranks: int
    nbytes: int
    measured_time_s: float
    predicted_time_s: float
    algorithm: str
    engine: str
    error_pct: float
    #: The measured row's element type (``float``, ``bfloat16``, ...), "" where not known.
    dtype: str = ""

    @property
    def measured_busbw_Bps(self) -> float:
        """nccl-tests' bus bandwidth of the measured time."""
        return self.nbytes / self.measured_time_s * self.collective.busbw_factor(self.ranks)

    @property
    def predicted_busbw_Bps(self) -> float:
        """Bus bandwidth of the predicted time (0 for a zero prediction)."""
        if self.predicted_time_s <= 0:
            return 0.0
        return self.nbytes / self.predicted_time_s * self.collective.busbw_factor(self.ranks)

    def to_dict(self) -> dict[str, object]:
        """The row as ``--json`` prints it (contract keys first)."""
        return {
            "collective": self.collective.value,
            "ranks": self.ranks,
            "nbytes": self.nbytes,
            "measured_time_s": self.measured_time_s,
            "predicted_time_s": self.predicted_time_s,
            "error_pct": self.error_pct,
            "algorithm": self.algorithm,
            "engine": self.engine,
            "measured_busbw_GBps": self.measured_busbw_Bps / 1e9,
            "predicted_busbw_GBps": self.predicted_busbw_Bps / 1e9,
            "dtype": self.dtype or None,
        }


def _median_abs(rows: Sequence[ValidationRow]) -> float | None:
    return statistics.median(abs(r.error_pct) for r in rows) if rows else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationReport:
    """Every row's prediction and error, with the summary medians.

    Attributes
    ----------
    source, topology : str
        Where the measurements came from; the topology's name.
    rows : tuple of ValidationRow
        In the order of the measurements.
    median_abs_error_pct : float
        Median of |error_pct| over all rows.
    median_abs_error_pct_below_1MiB, median_abs_error_pct_above_1MiB : float or None
        The same over rows with ``nbytes < 1 MiB`` and ``nbytes >= 1 MiB`` (None: no rows).
    notes : tuple of str
        How the measurements were read (inferred collective and ranks, ...).
    """

    source: str
    topology: str
    rows: tuple[ValidationRow, ...]
    median_abs_error_pct: float
    median_abs_error_pct_below_1MiB: float | None
    median_abs_error_pct_above_1MiB: float | None
    notes: tuple[str, ...] = ()

    @classmethod
    def from_rows(
        cls,
        rows: Sequence[ValidationRow],
        *,
        source: str = "",
        topology: str = "",
        notes: Sequence[str] = (),
    ) -> ValidationReport:
        """Summarise ``rows`` (at least one)."""
        if not rows:
            raise SpecError("no rows to validate")
        small = [r for r in rows if r.nbytes < SPLIT_BYTES]
        large = [r for r in rows if r.nbytes >= SPLIT_BYTES]
        overall = _median_abs(rows)
        assert overall is not None
        return cls(
            source=source,
            topology=topology,
            rows=tuple(rows),
            median_abs_error_pct=overall,
            median_abs_error_pct_below_1MiB=_median_abs(small),
            median_abs_error_pct_above_1MiB=_median_abs(large),
            notes=tuple(notes),
        )

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object."""
        return {
            "source": self.source,
            "topology": self.topology,
            "rows": [r.to_dict() for r in self.rows],
            "median_abs_error_pct": self.median_abs_error_pct,
            "median_abs_error_pct_below_1MiB": self.median_abs_error_pct_below_1MiB,
            "median_abs_error_pct_above_1MiB": self.median_abs_error_pct_above_1MiB,
            "engines": sorted({r.engine for r in self.rows}),
            "notes": list(self.notes),
        }


class Predictor:
    """Predicts calls on the first ranks of one network through the timing layer
    (:class:`~commsim.timing.Timer`), as ``commsim run`` times them.

    ``algorithm`` is ``auto`` (the topology's choice: NCCL's on a machine that runs it, its
    ``algorithms:`` mapping, else the fastest candidate), an algorithm name, ``nccl`` (NCCL's
    choice of algorithm and protocol even on a topology without an ``nccl:`` block), or
    ``ALGORITHM/PROTOCOL`` (``ring/LL128``, as ``run`` names it; ``ring+LL128`` too: that NCCL
    pair). ``engine`` is ``des`` (the
    default, as ``run``), ``analytic``, or ``auto`` (:func:`~commsim.timing.resolve_engine`).
    ``protocol`` is the timing layer's (``none``: plain alpha-beta even on a topology that
    runs NCCL).
    """

    def __init__(self, network: Network, *, algorithm: str = "auto", engine: str = "des",
                 protocol: str = "auto"):
        resolve_engine(engine, 1)  # validates the name
        algorithm = algorithm.replace("/", "+")  # ring/LL128, as run prints it, or ring+LL128
        self.network = network
        self.algorithm = algorithm
        self.engine = engine
        self._protocol = canonical_protocol(protocol)
        self._algorithm = algorithm
        if algorithm == "nccl":
            self._algorithm = "auto"
            if not isinstance(network.meta.get("nccl"), dict):
                network = network.rebuilt(meta={**network.meta, "nccl": {}})
        elif "+" in algorithm:
            NcclModel(network).check(algorithm)
            self._algorithm, _, self._protocol = algorithm.partition("+")
            self._protocol = canonical_protocol(self._protocol)
        self._algorithm = canonical_algorithm(self._algorithm)
        self._timer = Timer.of(network)

    def predict(self, collective: Collective | str, ranks: int, nbytes: int) -> Prediction:
        """The predicted time of one call on the first ``ranks`` ranks."""
        used = resolve_engine(self.engine, ranks)
        group = None if ranks == self.network.ranks else tuple(range(ranks))
        call = CollectiveCall(collective=parse_collective(collective), nbytes=nbytes, group=group,
                              algorithm=self._algorithm, protocol=self._protocol)
        result = self._timer.time(call, used)
        name = f"{result.algorithm}/{result.protocol}" if result.protocol else result.algorithm
        return Prediction(time_s=result.time_s, algorithm=name, engine=used)


def predict_time(
    collective: Collective | str,
    ranks: int,
    nbytes: int,
    network: Network,
    *,
    algorithm: str = "auto",
    engine: str = "des",
) -> Prediction:
    """Predicted time of one call on the first ``ranks`` ranks of ``network`` (see
    :class:`Predictor` for ``algorithm`` and ``engine``)."""
    return Predictor(network, algorithm=algorithm, engine=engine).predict(
        collective, ranks, nbytes
    )


def as_run(network: Network, algorithm: str, protocol: str = "auto",
           gpus_per_thread: int | None = None, nccl_version: str | None = None,
           hosts: Sequence[int] | None = None) -> Network:
    """``network`` as the measured run drove it: its ranks placed on the machine's hosts as
    the run placed them (``hosts``: each rank's host index, e.g. an nccl-tests log's device
    lines; :meth:`~commsim.network.Network.on_hosts`; the first ranks where None or where the
    machine cannot hold that placement, which :func:`placement_note` says); and, where its
    calls are timed with NCCL's model and floor, ``gpus_per_thread`` GPUs per host thread (an
    nccl-tests log's ``nGpus``) and the NCCL release the run used (``nccl_version``: the
    tuning tables that apply, :func:`~commsim.nccl.with_nccl`). What :func:`validate` and
    :func:`~commsim.validation.calibrate.calibrate` both predict on."""
    if hosts is not None:
        network = network.on_hosts(hosts) or network
    settings: dict[str, object] = {}
    if gpus_per_thread is not None:
        settings["gpus_per_thread"] = gpus_per_thread
    if nccl_version is not None:
        parse_nccl_version(nccl_version)  # a bad release is a SpecError naming it
        settings["version"] = nccl_version
    if settings and _runs_nccl_model(network, algorithm, protocol):
        return with_nccl(network, **settings)
    return network


def placed_hosts(hosts: Sequence[int] | None, placement: str) -> Sequence[int] | None:
    """The hosts to place a run's ranks on under ``placement`` (``first``: None, the
    topology's first ranks; ``log``: ``hosts``); SpecError naming any other value."""
    if placement not in ("first", "log"):
        raise SpecError(f"placement: 'first' or 'log', not {placement!r}")
    return hosts if placement == "log" else None


def placement_note(network: Network, hosts: Sequence[int] | None, ranks: int,
                   placement: str) -> str | None:
    """What to say of where rows of ``ranks`` ranks run, for a run whose ranks sat on
    ``hosts``: under ``log``, why they run on the first ranks after all (the device lines
    place another count, or the topology cannot hold the placement,
    :meth:`~commsim.network.Network.on_hosts`); under ``first``, that the run placed them
    otherwise. None where there is nothing to say."""
    if hosts is None or (placement == "first" and len(hosts) != ranks):
        return None
    if len(hosts) != ranks:
        return (f"placed on the first {ranks} ranks of {network.name!r}: the run's device "
                f"lines place {len(hosts)} ranks")
    placed = network.on_hosts(hosts)
    per_host = Counter(hosts)
    if placement == "log":
        if placed is not None:
            return None
        return (f"placed on the first {ranks} ranks of {network.name!r}: it cannot hold the "
                f"run's {len(per_host)} host(s) of {max(per_host.values())} rank(s) at most")
    if placed is not None and placed.rank_devices == network.rank_devices[:ranks]:
        return None
    return (f"the run's {ranks} ranks sat on {len(per_host)} host(s), "
            f"{max(per_host.values())} at most on one; predicted on the topology's first "
            f"{ranks} ranks (--placement log: as the run placed them)")


def _runs_nccl_model(network: Network, algorithm: str, protocol: str) -> bool:
    """Whether :class:`Predictor` times calls with NCCL's model (and so its floor)."""
    chosen = canonical_protocol(protocol)
    if chosen == "none":
        return False
    return (chosen != "auto" or isinstance(network.meta.get("nccl"), dict)
            or algorithm == "nccl" or "+" in algorithm or "/" in algorithm)


def validate(
    rows: Sequence[Measurement],
    topology: TopologyRef,
    *,
    algorithm: str = "auto",
    engine: str = "des",
    source: str = "",
    notes: Sequence[str] = (),
    protocol: str = "auto",
    gpus_per_thread: int | None = None,
    nccl_version: str | None = None,
    hosts: Sequence[int] | None = None,
    placement: str = "log",
) -> ValidationReport:
    """Predict every measured row on ``topology`` and report the errors.

    ``hosts``: the host index of each rank of the measured run (an nccl-tests log's device
    lines, :meth:`~commsim.validation.nccl_tests.NcclTestsLog.host_indices`): the rows are
    predicted on ranks placed on the machine's hosts the same way (one GPU on each of two
    hosts crosses the network), where the topology can hold that placement; None: its first
    ranks. ``placement="first"`` keeps the first ranks and notes where ``hosts`` differ.

    ``gpus_per_thread``: the GPUs each host thread drove in the measured run (an nccl-tests
    log's ``nGpus``, :attr:`~commsim.validation.nccl_tests.NcclTestsLog.gpus_per_thread`);
    where the calls run NCCL's model, they are predicted on
    :func:`~commsim.nccl.with_gpus_per_thread` of the topology (None: the topology's own).
    ``nccl_version``: the NCCL release the run used (a log's ``NCCL version`` line,
    :attr:`~commsim.validation.nccl_tests.NcclTestsLog.nccl_version`; None: the topology's).
    ``protocol``: ``auto``, or the one protocol the run was restricted to (a log's
    ``NCCL_PROTO``, :attr:`~commsim.validation.nccl_tests.NcclTestsLog.protocol`).

    Raises
    ------
    SpecError
        No rows, a row with more ranks than the topology, an unknown engine/algorithm.
    """
    if not rows:
        raise SpecError("no measured rows to validate (check --sizes / --collectives)")
    network = load_topology(topology)
    most = max(r.ranks for r in rows)
    if most > network.ranks:
        raise SpecError(
            f"the measurements have {most} ranks, topology {network.name!r} only "
            f"{network.ranks} (use a larger topology, e.g. a preset with an xN suffix)"
        )
    place = placed_hosts(hosts, placement)  # a bad placement is a SpecError naming it
    said = placement_note(network, hosts, most, placement)
    hosts = place if said is None else None
    network = as_run(network, algorithm, protocol, gpus_per_thread, nccl_version, hosts)
    predictor = Predictor(network, algorithm=algorithm, engine=engine, protocol=protocol)
    cache: dict[tuple[Collective, int, int], Prediction] = {}
    out: list[ValidationRow] = []
    for row in rows:
        key = (row.collective, row.ranks, row.nbytes)
        if key not in cache:
            cache[key] = predictor.predict(row.collective, row.ranks, row.nbytes)
        prediction = cache[key]
        error = (prediction.time_s - row.time_s) / row.time_s * 100
        out.append(
            ValidationRow(
                collective=row.collective,
                ranks=row.ranks,
                nbytes=row.nbytes,
                measured_time_s=row.time_s,
                predicted_time_s=prediction.time_s,
                algorithm=prediction.algorithm,
                engine=prediction.engine,
                error_pct=error,
                dtype=row.dtype,
            )
        )
    notes = (*notes, said) if said else tuple(notes)
    return ValidationReport.from_rows(out, source=source, topology=network.name, notes=notes)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def summary_line(report: ValidationReport) -> str:
    """``median |error| 12.3% (< 1 MiB: 40.1%, >= 1 MiB: 5.2%) over 30 rows``."""
    return (
        f"median |error| {_pct(report.median_abs_error_pct)} "
        f"(< 1 MiB: {_pct(report.median_abs_error_pct_below_1MiB)}, "
        f">= 1 MiB: {_pct(report.median_abs_error_pct_above_1MiB)}) "
        f"over {len(report.rows)} rows"
    )


def format_report(report: ValidationReport) -> str:
    """An nccl-tests-like table: size, collective, ranks, measured and predicted time and
    busbw, signed error; then the medians. Rows of several element types (nccl-tests ``-d
    all``) get a ``type`` column after the size."""
    engines = ", ".join(sorted({r.engine for r in report.rows}))
    typed = len({r.dtype for r in report.rows}) > 1
    width = max(len("type"), *(len(r.dtype) for r in report.rows)) if typed else 0
    algo = max([18, *(len(r.algorithm) for r in report.rows)])  # hierarchical_pipelined/LL128

    def type_cell(text: str) -> str:
        return f"  {text:<{width}}" if typed else ""

    lines = [
        f"# commsim validate {report.source}: topology {report.topology}, engine {engines}",
        *(f"# {note}" for note in report.notes),
        "#",
        f"#{'size':>11}{type_cell('type')}  {'collective':<14} {'ranks':>5}  "
        f"{'algorithm':<{algo}}  {'measured':>10}  {'predicted':>10}  {'error':>8}  {'busbw':>8}  "
        f"{'busbw':>8}",
        f"#{'(B)':>11}{type_cell('')}  {'':<14} {'':>5}  {'':<{algo}}  {'(us)':>10}  {'(us)':>10}  "
        f"{'(%)':>8}  {'meas':>8}  {'pred':>8}",
    ]
    for r in report.rows:
        lines.append(
            f"{r.nbytes:>12}{type_cell(r.dtype)}  {r.collective.value:<14} {r.ranks:>5}  "
            f"{r.algorithm:<{algo}}  "
            f"{r.measured_time_s * 1e6:>10.2f}  {r.predicted_time_s * 1e6:>10.2f}  "
            f"{r.error_pct:>+8.1f}  {r.measured_busbw_Bps / 1e9:>8.2f}  "
            f"{r.predicted_busbw_Bps / 1e9:>8.2f}"
        )
    lines.append(f"# {summary_line(report)}")
    return "\n".join(lines)
