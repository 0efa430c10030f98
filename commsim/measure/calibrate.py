"""``commsim calibrate`` for measurements of a CPU host (gloo): the host model's fit as a
:class:`commsim.validation.Calibration`.

The generic fit of :mod:`commsim.validation.calibrate` adjusts a template's latency and
bandwidth; a gloo measurement needs the host model of :mod:`commsim.measure.cpu_model` (a
``shared`` medium, a latency that grows once the ranks outnumber the cores, gamma, gloo's
algorithms and PyTorch's copies). :func:`calibrate_cpu` fits it and returns the same
:class:`~commsim.validation.Calibration` the generic fit returns, so the CLI writes, prints and
validates it the same way. :func:`is_cpu_measurement` tells the two kinds of input apart.

``sendrecv`` rows are not fitted to: a ping-pong leaves one side of each message idle, and on a
virtual machine an idle vCPU wakes late (0.1 ms in some runs, 1-2 ms one way in others at 2
ranks, for the same host), which the collectives, whose ranks all stay busy, do not see.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from commsim.collectives import Collective
from commsim.errors import SpecError
from commsim.measure.cpu_model import fit_host
from commsim.measurements import Measurement, SizeFilter, collectives_only, filter_rows, read_csv

if TYPE_CHECKING:
    from commsim.validation import Calibration


def csv_backend(path: str | Path) -> str | None:
    """The ``backend`` column shared by every row of a measurement CSV, else None (no such
    column, mixed backends, or not a measurement file)."""
    try:
        rows = read_csv(path)
    except Exception:  # noqa: BLE001 - anything unreadable is simply "not ours"
        return None
    backends = {row.backend for row in rows}
    return backends.pop() if len(backends) == 1 and "" not in backends else None


def is_cpu_measurement(path: str | Path) -> bool:
    """True for a ``commsim measure --backend gloo`` CSV (the host model applies)."""
    return csv_backend(path) == "gloo"


def calibrate_cpu(
    source: str | Path | Sequence[Measurement],
    *,
    sizes: Sequence[SizeFilter] | None = None,
    collectives: Sequence[Collective | str] | None = None,
    cores: int | None = None,
    name: str | None = None,
) -> Calibration:
    """Fit the CPU-host model to a gloo measurement (a CSV path or its rows).

    Parameters
    ----------
    source
        ``commsim measure``'s CSV, or its rows (:func:`commsim.measure.read_csv`).
    sizes, collectives
        Keep only these rows (``--sizes`` / ``--collectives``); ``sendrecv`` rows are never
        fitted to (see the module docstring).
    cores
        The host's cores (default: the CSV's ``cpus`` column, else 1).
    name
        Name of the fitted topology.

    Raises
    ------
    SpecError
        No collective row is left after the filters.
    ParseError
        The CSV cannot be read.
    """
    from commsim.validation import Calibration, validate

    if isinstance(source, str | Path):
        label, rows = str(source), read_csv(source)
    else:
        label, rows = "measurements", list(source)
    fitted = collectives_only(filter_rows(rows, sizes=sizes, collectives=collectives))
    if not fitted:
        raise SpecError("no collective rows left to fit (check --sizes / --collectives)")
    if cores is None:
        cores = max((row.cpus for row in fitted), default=0) or 1
    fit = fit_host(fitted, cores=cores)
    backends = sorted({row.backend for row in fitted if row.backend})
    spec = dataclasses.replace(
        fit.spec,
        name=name or f"cpu-host-{fit.spec.ranks}",
        description=(
            f"one host, {cores} cores, torch.distributed {'/'.join(backends) or 'gloo'}: "
            "every rank's bytes cross one shared medium (commsim calibrate)"
        ),
    )
    report = validate(fitted, spec, engine="des", source=label)
    values = fit.parameters
    parameters = {
        "link.latency_s": values["latency_s"],
        "latency_per_rank_s": values["latency_per_rank_s"],
        "link.bandwidth_Bps": values["bandwidth_Bps"],
        "medium.bandwidth_Bps": values["medium_bandwidth_Bps"],
        "gamma_s_per_B": values["gamma_s_per_B"],
    }
    skipped = sum(1 for row in rows if not row.is_collective)
    notes = [
        "model: kind shared (one medium for every transfer and local copy; the latency grows "
        f"by latency_per_rank per rank beyond {cores} cores) with gloo's algorithms and "
        "PyTorch's copies (commsim.measure.cpu_model); soft-L1 loss, DES predictions",
    ]
    if skipped:
        notes.append(f"{skipped} sendrecv (ping-pong) rows not fitted to (idle-side wake-ups)")
    return Calibration(
        spec=spec,
        parameters=parameters,
        report=report,
        source=label,
        template="shared (CPU host model)",
        rows_summary=_summary(fitted),
        notes=tuple(notes),
    )


def _summary(rows: Sequence[Measurement[Collective]]) -> str:
    from commsim.units import format_size

    by: dict[str, set[int]] = {}
    for row in rows:
        by.setdefault(row.collective, set()).add(row.ranks)
    what = "; ".join(
        f"{name} x {','.join(map(str, sorted(ranks)))} ranks" for name, ranks in by.items()
    )
    sizes = [row.nbytes for row in rows]
    return f"{len(rows)} ({what}; {format_size(min(sizes))}..{format_size(max(sizes))})"
