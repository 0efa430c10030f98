"""The sweep's progress bar: points done of the grid's (:class:`commsim.progress.Progress`)."""

from __future__ import annotations

from typing import TextIO

from commsim.progress import Progress


class ProgressBar(Progress):
    """``bar(done, total)``: ``done`` of the sweep's ``total`` points.

    >>> import io
    >>> bar = ProgressBar(io.StringIO(), force=True)
    >>> bar(5, 10); bar.close()
    >>> "sweep:  50%" in bar.stream.getvalue() and "5/10" in bar.stream.getvalue()
    True
    """

    def __init__(self, stream: TextIO | None = None, *, force: bool = False) -> None:
        super().__init__("sweep", "point", stream=stream, force=force)

    def __call__(self, done: int, total: int) -> None:
        self.update_to(done, total)
