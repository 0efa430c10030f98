"""Goodput: how much of a training run's wall time trains, on a machine that fails.

One module per concept: :mod:`.spec` (the validated inputs and their sourced defaults),
:mod:`.checkpoint` (a checkpoint's size from the memory model, its write, read and stall
times), :mod:`.closed_form` (Daly's exact expectation, the best interval, Young's and Daly's
estimates, the elastic restart's exact expectation), :mod:`.simulate` (seeded runs of
:mod:`commsim.engine.failures`, the SimPy oracle), :mod:`.analyse` (one answer, both ways) and
:mod:`.cli`. See docs/goodput.md.

>>> a = analyse(GoodputSpec(gpus=16384, step_time_s=5.5, checkpoint_bytes=2 * 10**12))
>>> round(a.plain.outcome.goodput, 4), round(a.plain.outcome.interval_s, 1)
(0.8892, 649.6)
"""

from commsim.goodput.analyse import Analysis, analyse
from commsim.goodput.spec import GoodputSpec

__all__ = ["Analysis", "GoodputSpec", "analyse"]
