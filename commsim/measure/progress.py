"""``commsim measure``'s progress bar: one line per world size (see :mod:`commsim.progress`)."""

from __future__ import annotations

from commsim.progress import ProgressBar as _Bar


class ProgressBar(_Bar):
    """``progress(world, done, total, label)`` callback drawing ``[####....] done/total``.

    >>> import io
    >>> bar = ProgressBar(io.StringIO(), force=True, width=10)
    >>> bar(2, 5, 10, "all_reduce 1048576 B")
    >>> bar.stream.getvalue().split("\\r")[-1]
    'world 2 [#####.....]   5/10  all_reduce 1048576 B'
    """

    def __call__(self, world: int, done: int, total: int, label: str) -> None:
        self.draw(done, total, f"world {world}", f"  {label}")
