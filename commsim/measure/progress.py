"""``commsim measure``'s progress bar: rows timed of a world size's rows
(:class:`commsim.progress.Progress`), with the row being timed after the bar."""

from __future__ import annotations

from typing import TextIO

from commsim.progress import Progress


class ProgressBar:
    """``progress(world, done, total, label)`` callback: one bar per world size.

    >>> import io
    >>> bar = ProgressBar(io.StringIO(), force=True)
    >>> bar(2, 5, 10, "all_reduce 1048576 B"); bar.close()
    >>> text = bar.stream.getvalue()
    >>> "world 2:  50%" in text and "all_reduce 1048576 B" in text
    True
    """

    def __init__(
        self, stream: TextIO | None = None, *, enabled: bool = True, force: bool = False
    ) -> None:
        self.stream, self.enabled, self.force = stream, enabled, force
        self._world: int | None = None
        self._bar: Progress | None = None

    def __call__(self, world: int, done: int, total: int, label: str) -> None:
        if self._bar is None or world != self._world:
            self.close()
            self._world = world
            self._bar = Progress(
                f"world {world}", "row", enabled=self.enabled, stream=self.stream, force=self.force
            )
        self._bar.update_to(done, total, label)

    def close(self) -> None:
        """End the current bar, if any."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
