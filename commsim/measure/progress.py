"""A one-line progress bar for ``commsim measure`` (stderr, only when it is a terminal).

Twenty lines of code do not justify a dependency (tqdm): the bar is redrawn in place with
``\\r`` and finished with a newline; when the stream is not a TTY nothing is written at all,
so logs and CI output stay clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``progress(world, done, total, label)`` callback drawing ``[####....] done/total``.

    >>> import io
    >>> bar = ProgressBar(io.StringIO(), force=True, width=10)
    >>> bar(2, 5, 10, "all_reduce 1048576 B")
    >>> bar.stream.getvalue().split("\\r")[-1]
    'world 2 [#####.....]   5/10  all_reduce 1048576 B'
    """

    def __init__(self, stream: TextIO | None = None, *, force: bool = False, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self._last = 0.0
        self._open = False

    def __call__(self, world: int, done: int, total: int, label: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.05:  # at most 20 redraws a second
            return
        self._last = now
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        digits = len(str(total))
        self.stream.write(f"\rworld {world} [{bar}] {done:>{digits + 1}}/{total}  {label}")
        self._open = True
        if done >= total:
            self.close()
        self.stream.flush()

    def close(self) -> None:
        """End the current line (call once the measurement ends, successful or not)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
