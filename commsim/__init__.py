"""commsim: a collective-communication simulator for distributed deep-learning training.

The public API: :func:`simulate` one collective on a topology (a preset name, a YAML file, a
dict or a :class:`~commsim.network.Network` from the builders below) and get a :class:`Result`.

>>> import commsim
>>> net = commsim.ring(8, latency="1us", bandwidth="100GB/s")
>>> r = commsim.simulate("all_reduce", net, "1GiB", algorithm="ring", chunks=1)
>>> round(r.time_s * 1e3, 3), round(r.busbw_Bps / 1e9, 1)
(18.804, 99.9)
>>> commsim.simulate("all_gather", "dgx-h100", "64MiB").ranks
8

:class:`Timer` answers a :class:`CollectiveCall` (a group of ranks, algorithm and protocol
or ``auto``) on a network: the one timing layer every command asks.

The names are imported on first use (PEP 562), so ``import commsim.units`` or
``import commsim.engine.analytic`` does not pull in SimPy or pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    __version__: str
    from commsim.api import simulate
    from commsim.collectives import Collective
    from commsim.errors import CommsimError, ParseError, ScheduleError, SpecError
    from commsim.network import Network
    from commsim.results import Result
    from commsim.sweep import load_grid, run_sweep
    from commsim.timing import CollectiveCall, Timer
    from commsim.topology import (
        custom,
        fully_connected,
        hierarchical,
        list_presets,
        load_topology,
        preset_names,
        ring,
        shared,
        switch,
        torus,
    )

#: Public name -> the module that defines it.
_EXPORTS = {
    "simulate": "commsim.api",
    "Collective": "commsim.collectives",
    "CommsimError": "commsim.errors",
    "ParseError": "commsim.errors",
    "ScheduleError": "commsim.errors",
    "SpecError": "commsim.errors",
    "Network": "commsim.network",
    "Result": "commsim.results",
    "CollectiveCall": "commsim.timing",
    "Timer": "commsim.timing",
    "load_grid": "commsim.sweep",
    "run_sweep": "commsim.sweep",
    "custom": "commsim.topology",
    "fully_connected": "commsim.topology",
    "hierarchical": "commsim.topology",
    "list_presets": "commsim.topology",
    "load_topology": "commsim.topology",
    "preset_names": "commsim.topology",
    "ring": "commsim.topology",
    "shared": "commsim.topology",
    "switch": "commsim.topology",
    "torus": "commsim.topology",
}

__all__ = [
    "Collective",
    "CollectiveCall",
    "CommsimError",
    "Network",
    "ParseError",
    "Result",
    "ScheduleError",
    "SpecError",
    "Timer",
    "__version__",
    "custom",
    "fully_connected",
    "hierarchical",
    "list_presets",
    "load_grid",
    "load_topology",
    "preset_names",
    "ring",
    "run_sweep",
    "shared",
    "simulate",
    "switch",
    "torus",
]


def _version() -> str:
    """The installed distribution's version (importlib.metadata costs tens of ms: asked for
    only when ``__version__`` is read)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("commsim")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "0.0.0"


def __getattr__(name: str) -> object:
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'commsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | {"__version__"})
