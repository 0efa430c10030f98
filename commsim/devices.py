"""Devices (chips and switches) and the sequences that hold a network's devices.

A network's devices are a ``Sequence[Device]``: a plain tuple (most builders) or a
:class:`DeviceTable` (numpy columns, a :class:`Device` made when one is read: the
``hierarchical`` kind, whose 65,536 GPUs and 8,193 switches are rarely read one by one).
:func:`device_columns` reads either as arrays (kind, host, reduction bandwidth).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from commsim.lazy_rows import LazyRows


@dataclass(frozen=True, slots=True)
class Device:
    """A chip (``gpu``/``tpu``/``cpu``) or a ``switch``; ``host`` groups chips in one server.

    ``reduction_Bps``: a switch that reduces in-network (NVLS, SHARP) and the bandwidth per
    direction of each of its ports while it does; None for every other device.
    """

    name: str
    kind: str
    host: int | None = None
    reduction_Bps: float | None = None


class DeviceColumns(NamedTuple):
    """Devices as arrays: ``kind`` (str), ``host`` (int64, -1 for none), ``reduction_Bps``
    (float64, NaN for none)."""

    kind: np.ndarray
    host: np.ndarray
    reduction_Bps: np.ndarray


def device_columns(devices: Sequence[Device]) -> DeviceColumns:
    """``devices`` as columns (kept by a :class:`DeviceTable`; made from the objects
    otherwise).

    >>> device_columns((Device("gpu0", "gpu", 0), Device("sw", "switch", None, 5.0))).host
    array([ 0, -1])
    """
    if isinstance(devices, DeviceTable):
        return devices.columns()
    n = len(devices)
    return DeviceColumns(
        np.array([d.kind for d in devices], dtype=str),
        np.fromiter((-1 if d.host is None else d.host for d in devices), np.int64, n),
        np.fromiter((np.nan if d.reduction_Bps is None else d.reduction_Bps for d in devices),
                    np.float64, n),
    )


class DeviceTable(LazyRows[Device]):
    """Devices kept as :class:`DeviceColumns`, names from ``names(index)``; a :class:`Device`
    is made when read. It reads, compares, hashes and pickles as the tuple of its devices.

    >>> table = DeviceTable(DeviceColumns(np.array(["gpu", "switch"]), np.array([0, -1]),
    ...                                   np.array([np.nan, 5.0])), ["gpu0", "sw"].__getitem__)
    >>> table[1], table == (Device("gpu0", "gpu", 0), Device("sw", "switch", None, 5.0))
    (Device(name='sw', kind='switch', host=None, reduction_Bps=5.0), True)
    """

    __slots__ = ("_columns", "_names")
    ITEM = "device"

    def __init__(self, columns: DeviceColumns, names: Callable[[int], str]) -> None:
        super().__init__()
        self._columns, self._names = columns, names

    def __len__(self) -> int:
        return len(self._columns.host)

    def columns(self) -> DeviceColumns:
        return self._columns

    def _row(self, index: int) -> Device:
        c = self._columns
        host, rate = int(c.host[index]), float(c.reduction_Bps[index])
        return Device(self._names(index), str(c.kind[index]), None if host < 0 else host,
                      None if np.isnan(rate) else rate)

    def __reduce__(self) -> tuple[type, tuple[DeviceColumns, Callable[[int], str]]]:
        return DeviceTable, (self._columns, self._names)
