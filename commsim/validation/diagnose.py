"""Diagnosis of a measured log: which fault of the machine explains it best.

``commsim validate nccl-tests LOG --topology PRESET --diagnose`` predicts the log on the preset
as it is (``healthy``) and on faulty variants of it that real clusters show, each a what-if
(:mod:`commsim.topology.what_if`) built from the network's own links, applied with
:func:`~commsim.topology.degrade.degrade` and timed by the same :func:`validate` as the healthy
preset. The causes and their figures are :mod:`commsim.validation.causes` (``p2p-off``,
``nvlink-unused``, ``fewer-nics``, ``slow-nics``, ``socket``, ``nvls-off``, ``host-launch``).

A cause that does not apply to the machine as the log ran (no NVLink, no CPU device, one
host, no reducing NVSwitch, one NIC per host) is skipped and says why.

A cause is judged on the rows it changes: those whose prediction it moves by more than
:data:`CHANGED_PCT` (a slow NIC changes the large sizes, a slow host the small ones; the
other rows are evidence for neither). Its *score* is its median |error| on those rows over
the healthy preset's on the same rows; the causes are ranked by it (a cause that changes
fewer than :data:`MIN_CHANGED` rows is ranked last). A cause explains the log
(:func:`verdict`) where, on the rows it changes, the healthy preset's median |error| is above
:data:`HEALTHY_PCT` and the cause's at most :data:`RATIO` of it; up to two are found greedily
(:func:`explaining`). The verdict is the first; with none, ``healthy`` where the preset is
within :data:`HEALTHY_PCT` of the log, else ``unexplained``. The same rule for every log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from commsim.engine.reuse import in_scope
from commsim.errors import SpecError
from commsim.topology.degrade import degrade
from commsim.topology.presets import TopologyRef, load_topology
from commsim.topology.what_if import what_if_from_dict
from commsim.validation.causes import CAUSES, machine_of, variants_of
from commsim.validation.measurements import Measurement
from commsim.validation.validate import ValidationReport, validate

#: Above this median |error| a log is not as the model predicts clean runs: the floor under
#: any model's error (docs/validation.md: runs the model cannot tell apart differ by 14.4%
#: below 1 MiB and 17.7% at 1 MiB and above, at the median), rounded up.
HEALTHY_PCT = 20.0
#: A cause is the verdict only where its median |error| is at most this part of the healthy
#: preset's: it explains at least half of what the preset misses.
RATIO = 0.5
#: A row is one a cause changes where it moves the prediction by more than this (percent).
CHANGED_PCT = 5.0
#: A cause that changes fewer rows than this is not judged (too little evidence).
MIN_CHANGED = 3
@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A variant (or the healthy preset) timed on the log."""

    cause: str
    level: str
    explanation: str
    what_if: dict[str, Any]
    report: ValidationReport
    #: Rows this variant moves by more than CHANGED_PCT, and the median |error| on them of
    #: this variant and of the healthy preset (None: fewer than MIN_CHANGED rows).
    changed_rows: int = 0
    changed_pct: float | None = None
    healthy_changed_pct: float | None = None
    #: The indices of the rows it changes.
    changed_at: tuple[int, ...] = ()

    @property
    def median_abs_error_pct(self) -> float:
        return self.report.median_abs_error_pct

    @property
    def score(self) -> float:
        """Median |error| on the rows it changes over the healthy preset's there (1 for the
        healthy preset; inf when it changes too few rows)."""
        if self.cause == "healthy":
            return 1.0
        if self.changed_pct is None or not self.healthy_changed_pct:
            return float("inf")
        return self.changed_pct / self.healthy_changed_pct

    def to_dict(self) -> dict[str, object]:
        """The ``diagnosis`` entry of ``--json``."""
        return {"cause": self.cause, "level": self.level or None,
                "median_abs_error_pct": self.median_abs_error_pct,
                "changed_rows": self.changed_rows,
                "changed_median_abs_error_pct": self.changed_pct,
                "healthy_changed_median_abs_error_pct": self.healthy_changed_pct,
                "score": None if self.score == float("inf") else self.score,
                "median_abs_error_pct_below_1MiB": self.report.median_abs_error_pct_below_1MiB,
                "median_abs_error_pct_above_1MiB": self.report.median_abs_error_pct_above_1MiB,
                "explanation": self.explanation, "what_if": self.what_if}


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnosis:
    """Every finding, the verdict first, then by median |error|; the causes skipped."""

    findings: tuple[Finding, ...]
    skipped: tuple[tuple[str, str], ...]
    #: The causes that explain the log (:func:`explaining`), the first first; empty when none.
    causes: tuple[Finding, ...] = ()

    @property
    def verdict(self) -> str:
        """The first cause that explains the log; else ``healthy`` where the preset is within
        :data:`HEALTHY_PCT` of it, ``unexplained`` where it is not."""
        if self.causes:
            return self.causes[0].cause
        return "healthy" if self.healthy.median_abs_error_pct <= HEALTHY_PCT else "unexplained"

    @property
    def healthy(self) -> Finding:
        return next(f for f in self.findings if f.cause == "healthy")



# -- the diagnosis ---------------------------------------------------------------------------
def verdict(healthy_pct: float, best_pct: float) -> bool:
    """Whether a cause of median |error| ``best_pct`` explains a log whose healthy preset
    misses it by ``healthy_pct``: the rule of the module docstring."""
    return healthy_pct > HEALTHY_PCT and best_pct <= RATIO * healthy_pct


def diagnose(
    rows: Sequence[Measurement],
    topology: TopologyRef,
    *,
    progress: Callable[[int, int], None] | None = None,
    **settings: Any,
) -> Diagnosis:
    """Time ``rows`` on ``topology`` as it is and on each cause's variants (the module
    docstring), ranked: the verdict first, then by median |error|.

    ``settings`` are :func:`validate`'s keywords (``algorithm``, ``engine``, ``source``,
    ``protocol``, ``gpus_per_thread``, ``nccl_version``, ``hosts``, ``placement``), applied
    to every variant alike. ``progress(done, total)`` is called after each variant.

    Raises
    ------
    SpecError
        What :func:`validate` raises; and where no cause applies to the machine as the log
        ran, naming each cause's reason.
    """
    if not rows:
        raise SpecError("no measured rows to diagnose (check --sizes / --collectives)")
    network = in_scope(load_topology(topology))  # the variants reuse the alike phases
    healthy_report = validate(rows, network, **settings)
    machine = machine_of(network, rows, settings.get("hosts"), settings.get("placement", "log"))
    variants, skipped = variants_of(machine)
    if not variants:
        reasons = "; ".join(f"{name}: {why}" for name, why in skipped)
        raise SpecError(f"--diagnose: no cause applies to topology {network.name!r} as the "
                        f"log ran ({reasons})")
    explain = {c.name: c.explanation for c in CAUSES}
    findings = [Finding(cause="healthy", level="", explanation="the preset as it is",
                        what_if={}, report=healthy_report)]
    for done, variant in enumerate(variants, 1):
        name = f"{variant.cause}{'-' + variant.level if variant.level else ''}"
        what_if = what_if_from_dict(variant.what_if, name=name)
        try:
            degraded = degrade(network, what_if)
        except SpecError as exc:
            skipped += ((variant.cause, str(exc)),)
            continue
        report = validate(rows, degraded, **settings)
        findings.append(Finding(cause=variant.cause, level=variant.level,
                                explanation=explain[variant.cause],
                                what_if=what_if.as_dict(), report=report,
                                **_changed(healthy_report, report)))
        if progress is not None:
            progress(done, len(variants))
    return Diagnosis(findings=_ranked(findings), skipped=skipped,
                     causes=explaining(findings))


def _changed(healthy: ValidationReport, variant: ValidationReport,
             among: frozenset[int] | None = None) -> dict[str, Any]:
    """The rows ``variant`` moves by more than :data:`CHANGED_PCT` (of ``among`` when given)
    and the median |error| of both reports on them (None with fewer than
    :data:`MIN_CHANGED`)."""
    at = [k for k, (h, v) in enumerate(zip(healthy.rows, variant.rows, strict=True))
          if (among is None or k in among) and abs(v.predicted_time_s - h.predicted_time_s)
          > CHANGED_PCT / 100 * h.predicted_time_s]
    if len(at) < MIN_CHANGED:
        return {"changed_rows": len(at), "changed_at": tuple(at)}
    return {"changed_rows": len(at), "changed_at": tuple(at),
            "changed_pct": float(np.median([abs(variant.rows[k].error_pct) for k in at])),
            "healthy_changed_pct": float(np.median([abs(healthy.rows[k].error_pct)
                                                    for k in at]))}


def _explains(finding: Finding) -> bool:
    return (finding.cause != "healthy" and finding.changed_pct is not None
            and finding.healthy_changed_pct is not None
            and verdict(finding.healthy_changed_pct, finding.changed_pct))


def explaining(findings: Sequence[Finding], most: int = 2) -> tuple[Finding, ...]:
    """The causes that explain the log, greedily: the best-scored cause that the rule
    (:func:`verdict`) accepts on the rows it changes, then, on the rows it leaves, the next
    (a log may show a slow host at its small sizes and slow NICs at its large ones); at most
    ``most``, each of another cause."""
    healthy = findings[0]
    left = frozenset(range(len(healthy.report.rows)))
    found: list[Finding] = []
    pool = [f for f in findings if f.cause != "healthy"]
    while pool and len(found) < most:
        judged = [replace(f, **_changed(healthy.report, f.report, left)) for f in pool]
        best = min(judged, key=lambda f: (f.score, f.median_abs_error_pct), default=None)
        if best is None or not _explains(best):
            break
        found.append(best)
        left = left - frozenset(best.changed_at)
        pool = [f for f in pool if f.cause != best.cause]
    return tuple(found)


def _ranked(findings: list[Finding]) -> tuple[Finding, ...]:
    """The first cause that explains the log first (else healthy), then the others by score,
    then median |error| (ties in catalogue order)."""
    order = sorted(enumerate(findings),
                   key=lambda p: (p[1].score, p[1].median_abs_error_pct, p[0]))
    ranked = [f for _, f in order]
    causes = explaining(findings)
    first = next((f for f in ranked if causes and f.cause == causes[0].cause
                  and f.level == causes[0].level), findings[0])
    return (first, *(f for f in ranked if f is not first))


def _name(finding: Finding) -> str:
    return f"{finding.cause} ({finding.level})" if finding.level else finding.cause


def _evidence(finding: Finding) -> str:
    """The rows a finding changes and its error there against the healthy preset's."""
    if finding.cause == "healthy":
        return "every row"
    if finding.changed_pct is None or finding.healthy_changed_pct is None:
        return f"{finding.changed_rows} rows changed (too few)"
    return (f"{finding.changed_rows} rows: {finding.changed_pct:.1f}% vs "
            f"{finding.healthy_changed_pct:.1f}%")


def format_diagnosis(diagnosis: Diagnosis) -> str:
    """The ranked causes (median |error| over every row, and on the rows each changes against
    the healthy preset's there), the causes skipped and the verdict: what ``--diagnose``
    prints after the table."""
    healthy = diagnosis.healthy.median_abs_error_pct
    width = max(len(_name(f)) for f in diagnosis.findings)
    evidence = [_evidence(f) for f in diagnosis.findings]
    ev_width = max(len(e) for e in evidence)
    lines = ["#", "# diagnosis: the preset as it is (healthy) and faulty variants of it, each "
             "judged on the rows it changes (its error there vs the healthy preset's)",
             f"# {'cause':<{width}}  {'all rows':>8}  {'rows changed':<{ev_width}}  explanation"]
    lines += [f"# {_name(f):<{width}}  {f.median_abs_error_pct:>7.1f}%  {e:<{ev_width}}  "
              f"{f.explanation}" for f, e in zip(diagnosis.findings, evidence, strict=True)]
    lines += [f"# not applicable: {name}: {why}" for name, why in diagnosis.skipped]
    if not diagnosis.causes:
        best = diagnosis.findings[1] if len(diagnosis.findings) > 1 else diagnosis.healthy
        base = best.healthy_changed_pct
        why = ("no cause changes enough rows" if base is None or best is diagnosis.healthy else
               f"where {_name(best)} acts the preset misses by {base:.1f}%, within the model's "
               f"error on clean runs ({HEALTHY_PCT:g}%)" if base <= HEALTHY_PCT else
               f"the best cause, {_name(best)}, does not halve the preset's {base:.1f}% on the "
               f"rows it changes ({best.changed_pct:.1f}%)")
        lines.append(f"# verdict: {diagnosis.verdict} ({why}; all rows: {healthy:.1f}%)")
    for k, cause in enumerate(diagnosis.causes):
        lines.append(f"# {'verdict' if k == 0 else 'and then'}: {_name(cause)}: "
                     f"{cause.changed_pct:.1f}% on the {cause.changed_rows} rows it changes"
                     + ("" if k == 0 else " of those left")
                     + f", where the preset as it is gives {cause.healthy_changed_pct:.1f}%")
    return "\n".join(lines)
