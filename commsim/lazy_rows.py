"""A sequence whose items are made from columns only when read: :class:`LazyRows`.

The topology builders keep tens of thousands of alike devices and links as numpy columns
(:mod:`commsim.devices`, :mod:`commsim.links`); code that reads a few of them gets objects made
one by one, code that reads most gets them all made once, and either way the sequence reads,
compares, hashes and iterates as the plain tuple of its items.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class LazyRows(Sequence[T]):
    """What a sequence of items made on demand shares; a subclass says how many there are
    (``__len__``), how to make one (:meth:`_row`) and how to make all (:meth:`_make_all`)."""

    __slots__ = ("_all", "_made")
    #: The item's name in an IndexError ("device", "link").
    ITEM = "item"

    def __init__(self) -> None:
        self._all: tuple[T, ...] | None = None
        self._made: dict[int, T] = {}  # items read one by one, until most are

    def _row(self, index: int) -> T:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _make_all(self) -> tuple[T, ...]:
        return tuple(self._row(i) for i in range(len(self)))

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return self.materialized()[index]
        if self._all is not None:
            return self._all[index]
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"{self.ITEM} {index} out of range ({size} {self.ITEM}s)")
        index = index + size if index < 0 else index
        item = self._made.get(index)
        if item is None:
            if len(self._made) > size // 8:  # most will be read: make them all
                return self.materialized()[index]
            item = self._made[index] = self._row(index)
        return item

    def materialized(self) -> tuple[T, ...]:
        """Every item, made once."""
        if self._all is None:
            self._all = self._make_all()
            self._made.clear()
        return self._all

    def __iter__(self) -> Iterator[T]:
        return iter(self.materialized())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(self.materialized())
