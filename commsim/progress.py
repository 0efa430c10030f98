"""The one progress bar of commsim (``sweep``, ``measure``, ``calibrate``): tqdm on stderr.

tqdm (a core dependency, see ``docs/design.md``) shows the count, the rate and the time left,
redraws at most ten times a second, and, by default here, draws nothing when stderr is not a
terminal, so logs and CI output stay clean. Commands turn it off with ``--quiet``. Callers
report absolute progress (``done`` of ``total``), which is what every loop here knows.

>>> import io
>>> bar = Progress("sweep", "point", enabled=False)
>>> bar.update_to(5, 10); bar.close()
>>> bar = Progress("fit", "step", stream=io.StringIO(), force=True)
>>> bar.update_to(3, 12); bar.close()
>>> "fit:  25%" in bar.stream.getvalue()
True
"""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm


class Progress:
    """A bar ``DESC:  50%|#####     | done/total [elapsed<left, rate UNIT/s] POSTFIX``.

    Parameters
    ----------
    desc, unit : str
        What is being done, and what one step of it is called.
    enabled : bool
        False: draw nothing (``--quiet``, a library call that did not ask for a bar).
    stream : text stream
        Where to draw (default: stderr).
    force : bool
        Draw even when ``stream`` is not a terminal (tests).
    """

    def __init__(
        self,
        desc: str,
        unit: str,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        force: bool = False,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        disable: bool | None = True if not enabled else (False if force else None)
        self._bar = tqdm(
            desc=desc,
            unit=unit,
            file=self.stream,
            disable=disable,
            dynamic_ncols=True,
            leave=True,
            ascii=True,
        )

    def update_to(self, done: int, total: int, postfix: str = "") -> None:
        """Show ``done`` of ``total`` (either may change between calls), and ``postfix``."""
        bar = self._bar
        if bar.disable:
            return
        if bar.total != total:
            bar.total = total
        if postfix:
            bar.set_postfix_str(postfix, refresh=False)
        bar.update(done - bar.n)

    def close(self) -> None:
        """End the bar's line (call once the work ends, successful or not)."""
        self._bar.close()
