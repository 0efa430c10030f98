"""The sweep's progress bar: ``sweep [#####.....]  120/200 points`` (:mod:`commsim.progress`)."""

from __future__ import annotations

from commsim.progress import ProgressBar as _Bar


class ProgressBar(_Bar):
    """``bar(done, total)`` draws ``sweep [####....] done/total points``.

    >>> import io
    >>> bar = ProgressBar(io.StringIO(), force=True, width=10)
    >>> bar(5, 10)
    >>> bar.stream.getvalue().split("\\r")[-1]
    'sweep [#####.....]   5/10 points'
    """

    def __call__(self, done: int, total: int) -> None:
        self.draw(done, total, "sweep", " points")
