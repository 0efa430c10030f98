"""The memory a simulation may use: a fraction of the memory available, or what the user set.

Work whose size is known before it starts (a discrete-event simulation: its transfers are
estimated by :mod:`commsim.algorithms.estimate` before any schedule is built) is checked
against :func:`memory_budget` and refused in one line when it would not fit, rather than
swapping or being killed. ``commsim run --max-memory SIZE`` sets the budget for one command
(:func:`limited`); by default it is :data:`DEFAULT_FRACTION` of the memory the system reports
available when asked.

>>> with limited(1 << 30):
...     memory_budget()
1073741824
>>> 0 < memory_budget()
True
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: The share of the available memory a simulation may use unless ``--max-memory`` says.
DEFAULT_FRACTION = 0.5
#: What is assumed available where the system does not say (4 GiB).
FALLBACK_BYTES = 4 << 30
#: Work needing at most this much fits without asking the system (:func:`fits`): reading
#: ``/proc/meminfo`` costs about 10 us, which a fit's thousands of small simulations add up.
SMALL_BYTES = 64 << 20

_LIMIT: ContextVar[int | None] = ContextVar("commsim_memory_budget", default=None)


def available_bytes() -> int:
    """The memory available now: what the system reports (``MemAvailable`` on Linux, else the
    free physical pages, else :data:`FALLBACK_BYTES`), at most this process's address-space
    limit (``ulimit -v``) where one is set."""
    return min(_system_available(), _address_space_limit())


def _address_space_limit() -> int:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return FALLBACK_BYTES * 1024
    return soft if soft > 0 else FALLBACK_BYTES * 1024  # RLIM_INFINITY is -1


def _system_available() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):  # pragma: no cover - not POSIX
        return FALLBACK_BYTES


def memory_budget() -> int:
    """Bytes a simulation may use: the :func:`limited` value in force, else
    :data:`DEFAULT_FRACTION` of :func:`available_bytes`."""
    limit = _LIMIT.get()
    return limit if limit is not None else int(available_bytes() * DEFAULT_FRACTION)


def fits(need: int | float) -> bool:
    """Whether work needing ``need`` bytes is within :func:`memory_budget`; the system is
    asked only beyond :data:`SMALL_BYTES` (unless ``--max-memory`` set the budget).

    >>> with limited(1 << 10):
    ...     fits(1 << 10), fits(1 << 11)
    (True, False)
    >>> fits(1 << 20)
    True
    """
    limit = _LIMIT.get()
    if limit is not None:
        return need <= limit
    return need <= SMALL_BYTES or need <= memory_budget()


def budget_source() -> str:
    """How :func:`memory_budget` was set, for error messages."""
    if _LIMIT.get() is not None:
        return "--max-memory"
    return f"{DEFAULT_FRACTION:.0%} of the available memory; --max-memory SIZE changes it"


def over_budget(need: int | float, budget: int) -> str:
    """An error message's words for ``need`` bytes beyond ``budget``.

    >>> with limited(65536):
    ...     over_budget(3 * 10**8, memory_budget())
    'about 300 MB of memory, more than the 65.5 kB budget (--max-memory)'
    """
    return f"about {_mb(need)} of memory, more than the {_mb(budget)} budget ({budget_source()})"


def _mb(nbytes: int | float) -> str:
    return f"{nbytes / 1e6:.0f} MB" if nbytes >= 10**6 else f"{nbytes / 1e3:.1f} kB"


@contextmanager
def limited(max_bytes: int | None) -> Iterator[None]:
    """Within the block, :func:`memory_budget` is ``max_bytes`` (None: the default)."""
    token = _LIMIT.set(max_bytes)
    try:
        yield
    finally:
        _LIMIT.reset(token)
