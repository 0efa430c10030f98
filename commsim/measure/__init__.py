"""Measure real torch.distributed collectives: ``commsim measure``.

:func:`measure` launches its own processes (gloo on CPU, nccl on GPUs), times all five
collectives and a send/recv ping-pong over a size range, and returns :class:`Measurement` rows
that :func:`write_csv` writes as the contract's CSV. torch is imported only by the spawned
workers and by :func:`measure` itself, never on ``import commsim.measure``.

:mod:`commsim.measure.cpu_model` holds the model of a CPU host that makes such measurements
predictable: all ranks share one medium (the host's cores and memory), and gloo's own algorithms.
"""

from commsim.measure.launcher import COLLECTIVES, MeasureSpec, measure
from commsim.measurements import Measurement, format_csv, parse_csv, read_csv, write_csv

__all__ = [
    "COLLECTIVES",
    "MeasureSpec",
    "Measurement",
    "format_csv",
    "measure",
    "parse_csv",
    "read_csv",
    "write_csv",
]
