"""A one-line progress bar on stderr, drawn only when it is a terminal (``measure``, ``sweep``).

Twenty lines of code do not justify a dependency (tqdm): the bar is redrawn in place with
``\\r`` (at most 20 times a second) and finished with a newline; when the stream is not a TTY
nothing is written at all, so logs and CI output stay clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """Draws ``PREFIX [####....] done/total SUFFIX``; subclasses give it a callback shape.

    >>> import io
    >>> bar = ProgressBar(io.StringIO(), force=True, width=10)
    >>> bar.draw(5, 10, "sweep", " points")
    >>> bar.stream.getvalue().split("\\r")[-1]
    'sweep [#####.....]   5/10 points'
    """

    def __init__(self, stream: TextIO | None = None, *, force: bool = False, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self._last = 0.0
        self._open = False

    def draw(self, done: int, total: int, prefix: str, suffix: str = "") -> None:
        """Redraw the bar (skipped when the last redraw was under 50 ms ago, unless done)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.05:
            return
        self._last = now
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        digits = len(str(total))
        self.stream.write(f"\r{prefix} [{bar}] {done:>{digits + 1}}/{total}{suffix}")
        self._open = True
        if done >= total:
            self.close()
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line (call once the work ends, successful or not)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
