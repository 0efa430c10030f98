"""The sweep's progress bar: ``[#####.....]  120/200 points`` redrawn in place on stderr.

It mirrors :class:`commsim.measure.progress.ProgressBar` (same rules: nothing at all is
written unless the stream is a terminal, at most 20 redraws a second, a newline at the end)
with a ``(done, total)`` callback instead of measure's per-world one.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``bar(done, total)`` draws ``sweep [####....] done/total points``.

    >>> import io
    >>> bar = ProgressBar(io.StringIO(), force=True, width=10)
    >>> bar(5, 10)
    >>> bar.stream.getvalue().split("\\r")[-1]
    'sweep [#####.....]   5/10 points'
    """

    def __init__(self, stream: TextIO | None = None, *, force: bool = False, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self._last = 0.0
        self._open = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.05:
            return
        self._last = now
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        digits = len(str(total))
        self.stream.write(f"\rsweep [{bar}] {done:>{digits + 1}}/{total} points")
        self._open = True
        if done >= total:
            self.close()
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line (once the sweep ends, successful or not)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
