"""commsim: a collective-communication simulator for distributed deep-learning training.

>>> import commsim
>>> r = commsim.simulate("all_reduce", "dgx-h100", "1GiB", algorithm="ring")
>>> r.collective, r.ranks, r.time_s > 0
(<Collective.ALL_REDUCE: 'all_reduce'>, 8, True)
"""

from importlib.metadata import PackageNotFoundError, version

from commsim.api import simulate
from commsim.collectives import Collective
from commsim.errors import CommsimError, ParseError, ScheduleError, SpecError
from commsim.results import Result
from commsim.topology import load_topology

try:
    __version__ = version("commsim")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "Collective",
    "CommsimError",
    "ParseError",
    "Result",
    "ScheduleError",
    "SpecError",
    "__version__",
    "load_topology",
    "simulate",
]
