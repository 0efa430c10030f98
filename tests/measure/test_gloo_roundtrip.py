"""Checked against reality: real torch.distributed with gloo, measured, calibrated, validated.

``commsim measure`` launches 2 and then 4 gloo processes on this machine and times all five
collectives (and the send/recv ping-pong) at 9 sizes, 64 KiB to 16 MiB by factors of 2
(12 iterations of 4 calls each, in 6 rounds). The CPU-host model
(``commsim.measure.cpu_model``: one ``shared`` medium for every transfer and local copy, a
latency that grows once the ranks outnumber the cores, gamma, gloo's algorithms and PyTorch's
copies) is calibrated on the even-indexed sizes (64 KiB, 256 KiB, 1 MiB, 4 MiB, 16 MiB) and
validated on the others (128 KiB, 512 KiB, 2 MiB, 8 MiB), every collective and both world
sizes: 40 rows.

Observed on the 2-vCPU VM this project's CI resembles (torch 2.13.0+cpu), 17 runs of this
test: median |error| of the checking half 11.7-22.1% (median of the runs 14.5%); the worst
(collective, world size) group's own median 22-65% (2-rank reductions and broadcasts at small
sizes, where a sleeping vCPU wakes late in some runs and not in others). The bounds below sit
above the worst run seen, not at the typical one: a shared 2-core VM has slow spells that no
model of the host can foresee. Runs in about 45 s (measurement about 40 s, fit 3 s).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from commsim.collectives import Collective  # noqa: E402
from commsim.measure import MeasureSpec, measure, read_csv, write_csv  # noqa: E402
from commsim.measure.calibrate import calibrate_cpu  # noqa: E402
from commsim.validation import Measurement as VRow  # noqa: E402
from commsim.validation import validate  # noqa: E402

SIZES = tuple(2**k for k in range(16, 25))  # 64 KiB .. 16 MiB
FIT = SIZES[0::2]
CHECK = SIZES[1::2]
COLLECTIVES = ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce")
#: Median |error| of the checking half that the test asserts (observed 11.7-22.1%).
MEDIAN_BOUND_PCT = 30.0
#: Every (collective, world size) group's own median |error| must stay below this (observed
#: up to 65%): a broken part of the model (an algorithm, the copies) shows up here even when
#: the overall median hides it.
GROUP_BOUND_PCT = 100.0


def test_gloo_measure_calibrate_validate(tmp_path: Path) -> None:
    """A model fitted on half of the sizes predicts the other half, for every collective and
    both world sizes, within the stated median error; the CSV holds every row with its
    spread and environment."""
    spec = MeasureSpec(
        backend="gloo",
        world_sizes=(2, 4),
        sizes=SIZES,
        iterations=12,
        warmups=2,
        rounds=6,
        batch=4,
        init_timeout_s=120,
        timeout_s=240,
    )
    started = time.monotonic()
    rows = measure(spec)
    measured_s = time.monotonic() - started
    path = tmp_path / "m.csv"
    write_csv(rows, path)
    rows = read_csv(path)

    assert len(rows) == 2 * 6 * len(SIZES)
    for row in rows:
        assert row.backend == "gloo" and row.world_size == row.ranks in (2, 4)
        assert row.time_min_s <= row.time_p10_s <= row.time_s <= row.time_p90_s <= row.time_max_s
        assert row.iterations == 12 and row.torch_version and row.host and row.cpus >= 1

    calibration = calibrate_cpu(path, sizes=[(n, n) for n in FIT])
    check = [
        VRow(collective=Collective(r.collective), ranks=r.ranks, nbytes=r.nbytes, time_s=r.time_s)
        for r in rows
        if r.nbytes in CHECK and r.collective in COLLECTIVES
    ]
    report = validate(check, calibration.spec, engine="des")
    groups: dict[tuple[str, int], list[float]] = {}
    for r in report.rows:
        groups.setdefault((r.collective.value, r.ranks), []).append(abs(r.error_pct))
    summary = ", ".join(
        f"{c}@{p} {statistics.median(e):.0f}%" for (c, p), e in sorted(groups.items())
    )
    print(
        f"\ngloo round trip: measured in {measured_s:.0f} s; fit median "
        f"{calibration.report.median_abs_error_pct:.1f}%; check median "
        f"{report.median_abs_error_pct:.1f}% over {len(report.rows)} rows; {summary}; "
        f"{calibration.parameters}"
    )
    assert len(report.rows) == 40
    assert report.median_abs_error_pct <= MEDIAN_BOUND_PCT, summary
    worst = max(statistics.median(e) for e in groups.values())
    assert worst <= GROUP_BOUND_PCT, summary
