"""Directed links and the sequences that hold a network's links.

A network's links are a ``Sequence[Link]``: a plain tuple (most builders), a
:class:`LinkTable` (numpy columns, a :class:`Link` made when one is read: the ``hierarchical``
kind, whose 65,536 GPUs have 262,144 links), or a :class:`DerivedLinks` view (another
sequence's links with new latencies and bandwidths, computed for all links at once in numpy:
a protocol's view, a reducing switch's ports). Each compares equal to the tuple of the same
links; :func:`link_columns` reads any of them as columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from commsim.lazy_rows import LazyRows


@dataclass(frozen=True, slots=True)
class Link:
    """A directed link ``src -> dst`` (device indices), bandwidth per direction."""

    src: int
    dst: int
    latency_s: float
    bandwidth_Bps: float
    label: str = ""


class LinkColumns(NamedTuple):
    """Links as arrays, one entry per link: ends (int64) and latency, bandwidth (float64)."""

    src: np.ndarray
    dst: np.ndarray
    latency_s: np.ndarray
    bandwidth_Bps: np.ndarray


def link_columns(links: Sequence[Link]) -> LinkColumns:
    """``links`` as columns (kept by a :class:`LinkTable` or :class:`DerivedLinks`; made
    from the objects otherwise).

    >>> link_columns((Link(0, 1, 1e-6, 5.0), Link(1, 0, 2e-6, 4.0))).bandwidth_Bps.tolist()
    [5.0, 4.0]
    """
    if isinstance(links, _LazyLinks):
        return links.columns()
    n = len(links)
    return LinkColumns(
        np.fromiter((link.src for link in links), np.int64, n),
        np.fromiter((link.dst for link in links), np.int64, n),
        np.fromiter((link.latency_s for link in links), np.float64, n),
        np.fromiter((link.bandwidth_Bps for link in links), np.float64, n),
    )


def link_values(links: Sequence[Link], at: np.ndarray) -> LinkColumns:
    """The links at indices ``at`` as columns (only those computed, for a view)."""
    if isinstance(links, _LazyLinks):
        return links.values(at)
    return link_columns([links[i] for i in at.tolist()])


class _LazyLinks(LazyRows[Link]):
    """What a sequence of links made on demand shares (:class:`~commsim.lazy_rows.LazyRows`),
    plus its links as columns, and pickling as the tuple of its links."""

    __slots__ = ()
    ITEM = "link"

    def columns(self) -> LinkColumns:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def values(self, at: np.ndarray) -> LinkColumns:
        """The links at indices ``at`` as columns."""
        return LinkColumns(*(column[at] for column in self.columns()))

    def __reduce__(self) -> tuple[type, tuple[tuple[Link, ...]]]:
        """Pickled as the plain tuple of its links (a view's function may be local)."""
        return tuple, (self.materialized(),)


class LinkTable(_LazyLinks):
    """Links kept as :class:`LinkColumns`, labels from ``labels(index)``; a :class:`Link` is
    made when read. What a builder of many alike links writes in numpy.

    >>> table = LinkTable(LinkColumns(np.array([0, 1]), np.array([1, 0]),
    ...                               np.array([1e-6, 1e-6]), np.array([5.0, 5.0])),
    ...                   lambda i: f"cable{i}")
    >>> table[1], table == (Link(0, 1, 1e-6, 5.0, "cable0"), Link(1, 0, 1e-6, 5.0, "cable1"))
    (Link(src=1, dst=0, latency_s=1e-06, bandwidth_Bps=5.0, label='cable1'), True)
    """

    __slots__ = ("_columns", "_labels")

    def __init__(self, columns: LinkColumns, labels: Callable[[int], str]) -> None:
        super().__init__()
        self._columns, self._labels = columns, labels

    def __len__(self) -> int:
        return len(self._columns.src)

    def columns(self) -> LinkColumns:
        return self._columns

    def _row(self, index: int) -> Link:
        c = self._columns
        return Link(int(c.src[index]), int(c.dst[index]), float(c.latency_s[index]),
                    float(c.bandwidth_Bps[index]), self._labels(index))

    def __reduce__(self) -> tuple[type, tuple[LinkColumns, Callable[[int], str]]]:  # type: ignore[override]
        return LinkTable, (self._columns, self._labels)

    def _make_all(self) -> tuple[Link, ...]:
        c, labels = self._columns, self._labels
        return tuple(map(Link, c.src.tolist(), c.dst.tolist(), c.latency_s.tolist(),
                         c.bandwidth_Bps.tolist(), map(labels, range(len(self)))))


#: A change of links, given as columns and their indices: ``change(columns, at) ->
#: (latency_s, bandwidth_Bps)``, arrays aligned with ``at``.
Change = Callable[[LinkColumns, np.ndarray], tuple[np.ndarray, np.ndarray]]


class DerivedLinks(_LazyLinks):
    """Another sequence's links with their latencies and bandwidths changed by
    ``change(columns, indices)`` (same ends and labels), in numpy: for the few links a closed
    form reads, one at a time; for all of them at once when most are read or the columns are
    asked for.

    A view of a large network that changes every link (a protocol's latencies and bandwidths,
    a reducing switch's ports) is built in constant time and read as columns
    (:func:`link_columns`, :func:`link_values`) in a few numpy operations; only what iterates
    the links (a simulation) makes a :class:`Link` of each, once.
    """

    __slots__ = ("_base", "_change", "_values")

    def __init__(self, base: Sequence[Link], change: Change) -> None:
        super().__init__()
        self._base, self._change = base, change
        self._values: LinkColumns | None = None

    def __len__(self) -> int:
        return len(self._base)

    @property
    def ends(self) -> Sequence[Link]:
        """The first links these derive from (through any chain of derived links): the same
        ends (``src``, ``dst``), in the same order."""
        base = self._base
        return base.ends if isinstance(base, DerivedLinks) else base

    def columns(self) -> LinkColumns:
        if self._values is None:
            self._values = self._derive(link_columns(self._base), np.arange(len(self)))
        return self._values

    def values(self, at: np.ndarray) -> LinkColumns:
        if self._values is not None:
            return super().values(at)
        return self._derive(link_values(self._base, at), at)

    def _derive(self, base: LinkColumns, at: np.ndarray) -> LinkColumns:
        latency, bandwidth = self._change(base, at)
        return LinkColumns(base.src, base.dst, latency, bandwidth)

    def _row(self, index: int) -> Link:
        if self._values is not None:
            return self._with(self._base[index], self._values, index)
        return self._with(self._base[index], self.values(np.array([index])), 0)

    @staticmethod
    def _with(link: Link, values: LinkColumns, at: int) -> Link:
        return Link(link.src, link.dst, float(values.latency_s[at]),
                    float(values.bandwidth_Bps[at]), link.label)

    def _make_all(self) -> tuple[Link, ...]:
        values = self.columns()
        return tuple(Link(link.src, link.dst, latency, bandwidth, link.label)
                     for link, latency, bandwidth in zip(
                         self._base, values.latency_s.tolist(), values.bandwidth_Bps.tolist(),
                         strict=True))
