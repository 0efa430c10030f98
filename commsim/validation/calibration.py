"""The result of ``commsim calibrate``: the fitted topology, how well it fits, the parameters
that ended on a bound, and the file it is written as (a ``#`` header saying what was fitted,
from what, and the residuals, then the topology's YAML)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commsim.topology.dump import dump_yaml, format_bandwidth, format_time
from commsim.topology.spec import TopologySpec
from commsim.units import format_size
from commsim.validation.measurements import Measurement
from commsim.validation.parameters import BOUND_TOLERANCE, BOUNDS, Param
from commsim.validation.validate import ValidationReport, summary_line


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """A fitted topology and how well it fits.

    Attributes
    ----------
    spec : TopologySpec
        The fitted topology (at least as many ranks as the largest measured world size).
    parameters : dict
        Fitted values by name, SI (``link.latency_s``, ``link.bandwidth_Bps``, ``gamma_s_per_B``,
        or ``links[...].latency_scale`` / ``bandwidth_scale`` for custom templates).
    report : ValidationReport
        The fitted topology validated on the rows it was fitted to (the residuals).
    source : str
        Where the rows came from.
    template : str
        What the fit started from (``"none"`` or the template's name).
    at_bounds : tuple of AtBound
        Fitted parameters that ended on a bound (their values mean nothing; also in
        ``notes``, so the written file's header says so).
    """

    spec: TopologySpec
    parameters: dict[str, float]
    report: ValidationReport
    source: str = ""
    template: str = "none"
    rows_summary: str = ""
    notes: tuple[str, ...] = field(default=())
    at_bounds: tuple[AtBound, ...] = field(default=())

    def header(self) -> list[str]:
        """The comment lines :meth:`to_yaml` puts above the topology."""
        fitted = ", ".join(_describe(name, value) for name, value in self.parameters.items())
        errors = [abs(r.error_pct) for r in self.report.rows]
        lines = [
            f"Calibrated by `commsim calibrate` from {self.source or 'measurements'}",
            f"rows: {self.rows_summary}",
            f"template: {self.template}; fitted: {fitted}",
            "objective: least squares on log(predicted/measured) (relative error); "
            f"engine {', '.join(sorted({r.engine for r in self.report.rows}))}",
            f"residuals on these rows: {summary_line(self.report)}, max {max(errors):.1f}%",
            *self.notes,
        ]
        return lines

    def to_yaml(self) -> str:
        """The topology file: a ``#`` header (what was fitted, from what, residuals), then the
        YAML that ``run``, ``replay`` and ``validate`` accept."""
        head = "".join(f"# {' '.join(line.split())}\n" for line in self.header())
        return head + dump_yaml(self.spec)

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object of ``commsim calibrate``."""
        return {
            "source": self.source,
            "template": self.template,
            "kind": self.spec.kind,
            "ranks": self.spec.num_ranks,
            "parameters": dict(self.parameters),
            "median_abs_error_pct": self.report.median_abs_error_pct,
            "median_abs_error_pct_below_1MiB": self.report.median_abs_error_pct_below_1MiB,
            "median_abs_error_pct_above_1MiB": self.report.median_abs_error_pct_above_1MiB,
            "at_bounds": [b.to_dict() for b in self.at_bounds],
            "rows": [r.to_dict() for r in self.report.rows],
        }


def _describe(name: str, value: float) -> str:
    if name.endswith("latency_s"):
        return f"{name.removesuffix('_s')} {format_time(value)}"
    if name.endswith("bandwidth_Bps"):
        return f"{name.removesuffix('_Bps')} {format_bandwidth(value)}"
    if name == "gamma_s_per_B":
        return f"gamma {format_time(value)}/B"
    if name.endswith("_s"):
        return f"{name.removesuffix('_s')} {format_time(value)}"
    return f"{name} {value:.6g}"


def write_topology(calibration: Calibration, path: str | Path) -> None:
    """Write :meth:`Calibration.to_yaml` to ``path``."""
    Path(path).write_text(calibration.to_yaml(), encoding="utf-8")


# -- parameters that end on a bound ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AtBound:
    """A fitted parameter that ended on one of its :data:`BOUNDS`: the data do not determine
    it (another parameter explains the rows), so its value is the bound, not a measurement."""

    parameter: str
    side: str  # "lower" or "upper"
    bound: float  # in the reported unit (bandwidths as bytes per second)
    message: str

    def to_dict(self) -> dict[str, object]:
        return {
            "parameter": self.parameter,
            "side": self.side,
            "bound": self.bound,
            "meaning": self.message,
        }


#: What each kind of fitted parameter is called in the at-bound message.
_NOUNS = {
    "latency": "latency",
    "inverse_bandwidth": "bandwidth",
    "gamma": "gamma",
    "latency_scale": "latency scale",
    "inverse_bandwidth_scale": "bandwidth scale",
    "call_time": "time",
}


def at_bounds(params: list[Param], x: np.ndarray, active: np.ndarray) -> list[AtBound]:
    """The fitted (``active``) parameters of ``x`` that lie on a bound, each with what it
    means; e.g. ``inter.latency_s hit its 1ns lower bound: the measurements do not determine
    it; the fitted latency is meaningless``."""
    out = []
    for p, value, used in zip(params, x, active, strict=True):
        if not used:
            continue
        low, high = BOUNDS[p.kind]
        for side, bound in (("lower", low), ("upper", high)):
            if abs(value - bound) > BOUND_TOLERANCE * bound:
                continue
            if (p.kind, side) == ("call_time", "lower"):
                continue  # none beyond the model's floor: a value, written as 0
            shown = bound
            if p.kind in ("inverse_bandwidth", "inverse_bandwidth_scale"):
                side, shown = ("upper" if side == "lower" else "lower"), 1.0 / bound
            what = _NOUNS[p.kind]
            text = _describe(p.name, shown).split(" ", 1)[-1]
            out.append(
                AtBound(
                    parameter=p.name,
                    side=side,
                    bound=shown,
                    message=f"{p.name} hit its {text} {side} bound: the measurements do not "
                    f"determine it; the fitted {what} is meaningless",
                )
            )
    return out


#: Kinds whose lower bound stands for zero: a value the rows can ask for (a ``call_time`` at
#: zero is not even reported by :func:`at_bounds`).
_ZERO_AT_LOWER = ("latency", "gamma")


def undetermined(params: list[Param], x: np.ndarray, active: np.ndarray) -> list[int]:
    """The fitted parameters of ``x`` on a bound that no measurement means (a bandwidth at
    100 TB/s, a scale at 10^4, a latency at 10 s), not a time or gamma at zero: the rows do not
    determine them, so a template's value is a better guess than the bound."""
    sides = {b.parameter: b.side for b in at_bounds(params, x, active)}
    return [i for i, p in enumerate(params)
            if p.name in sides and not (p.kind in _ZERO_AT_LOWER and sides[p.name] == "lower")]


def rows_summary(rows: Sequence[Measurement]) -> str:
    by: dict[str, set[int]] = {}
    for r in rows:
        by.setdefault(r.collective.value, set()).add(r.ranks)
    what = "; ".join(
        f"{name} x {','.join(map(str, sorted(ranks)))} ranks" for name, ranks in by.items()
    )
    sizes = [r.nbytes for r in rows]
    return f"{len(rows)} ({what}; {format_size(min(sizes))}..{format_size(max(sizes))})"
