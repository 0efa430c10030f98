"""Devices (chips and switches) and the sequences that hold a network's devices.

A network's devices are a ``Sequence[Device]``: a plain tuple (most builders) or a
:class:`DeviceTable` (numpy columns, a :class:`Device` made when one is read: the
``hierarchical`` kind, whose 65,536 GPUs and 8,193 switches are rarely read one by one).
:func:`device_columns` reads either as arrays (kind, host, reduction bandwidth).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, overload

import numpy as np


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


class DeviceTable(Sequence[Device]):
    """Devices kept as :class:`DeviceColumns`, names from ``names(index)``; a :class:`Device`
    is made when read. It reads, compares, hashes and pickles as the tuple of its devices.

    >>> table = DeviceTable(DeviceColumns(np.array(["gpu", "switch"]), np.array([0, -1]),
    ...                                   np.array([np.nan, 5.0])), ["gpu0", "sw"].__getitem__)
    >>> table[1], table == (Device("gpu0", "gpu", 0), Device("sw", "switch", None, 5.0))
    (Device(name='sw', kind='switch', host=None, reduction_Bps=5.0), True)
    """

    __slots__ = ("_all", "_columns", "_names")

    def __init__(self, columns: DeviceColumns, names: Callable[[int], str]) -> None:
        self._columns, self._names = columns, names
        self._all: tuple[Device, ...] | None = None

    def __len__(self) -> int:
        return len(self._columns.host)

    def columns(self) -> DeviceColumns:
        return self._columns

    @overload
    def __getitem__(self, index: int) -> Device: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Device, ...]: ...
    def __getitem__(self, index: int | slice) -> Device | tuple[Device, ...]:
        if isinstance(index, slice):
            return self.materialized()[index]
        if self._all is not None:
            return self._all[index]
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"device {index} out of range ({size} devices)")
        index = index + size if index < 0 else index
        c = self._columns
        host, rate = int(c.host[index]), float(c.reduction_Bps[index])
        return Device(self._names(index), str(c.kind[index]), None if host < 0 else host,
                      None if np.isnan(rate) else rate)

    def materialized(self) -> tuple[Device, ...]:
        """Every device, made once."""
        if self._all is None:
            self._all = tuple(self[i] for i in range(len(self)))
        return self._all

    def __iter__(self) -> Iterator[Device]:
        return iter(self.materialized())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(self.materialized())

    def __reduce__(self) -> tuple[type, tuple[DeviceColumns, Callable[[int], str]]]:
        return DeviceTable, (self._columns, self._names)
