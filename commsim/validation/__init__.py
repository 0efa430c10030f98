"""Checking the model against reality: measured rows, nccl-tests logs, validate, calibrate.

The flow is one way: a measurements CSV (:mod:`.measurements`) or an nccl-tests log
(:mod:`.nccl_tests`) -> :class:`Measurement` rows -> :func:`validate` (predicted time and error
per row, :mod:`.validate`) or :func:`calibrate` (a fitted topology, :mod:`.calibrate`; the
result and the file it is written as, :mod:`.calibration`) -> tables, JSON, YAML and plots
(:mod:`.plot`). ``commsim validate`` and ``commsim calibrate``
(:mod:`.cli`) are thin layers over these functions. See ``docs/validation.md``.
"""

from commsim.validation.calibrate import calibrate
from commsim.validation.calibration import Calibration, write_topology
from commsim.validation.measurements import (
    MEASUREMENT_COLUMNS,
    Measurement,
    filter_rows,
    format_measurements,
    parse_collectives_flag,
    parse_measurements,
    parse_sizes_flag,
    read_measurements,
    write_measurements,
)
from commsim.validation.nccl_tests import (
    NcclTestsLog,
    NcclTestsRow,
    parse_nccl_tests,
    read_nccl_tests,
)
from commsim.validation.validate import (
    Prediction,
    ValidationReport,
    ValidationRow,
    format_report,
    predict_time,
    validate,
)

__all__ = [
    "MEASUREMENT_COLUMNS",
    "Calibration",
    "Measurement",
    "NcclTestsLog",
    "NcclTestsRow",
    "Prediction",
    "ValidationReport",
    "ValidationRow",
    "calibrate",
    "filter_rows",
    "format_measurements",
    "format_report",
    "parse_collectives_flag",
    "parse_measurements",
    "parse_nccl_tests",
    "parse_sizes_flag",
    "predict_time",
    "read_measurements",
    "read_nccl_tests",
    "validate",
    "write_measurements",
    "write_topology",
]
