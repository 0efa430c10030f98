"""Pause Python's cyclic garbage collector while a large object graph is built or walked.

A schedule of 10^5 transfers is 10^5 small objects (transfers, dependency tuples, handles)
that live until the run ends and form no reference cycles. CPython's cyclic collector
nonetheless runs a full (generation 2) collection each time the number of live objects has
grown by a quarter, and each one scans them all: at 4096 ranks that was a third or more of the
time of building and simulating a schedule (benchmarks/des_scale.py). Reference counting
still frees everything as usual; the collector is only off for the ``with`` block, and any
cycles made there are collected later.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block (restoring its previous state after).

    >>> import gc
    >>> with paused_gc():
    ...     gc.isenabled()
    False
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def frozen_gc() -> Iterator[None]:
    """Leave the objects made before the block out of the cyclic collector's scans inside it
    (:func:`gc.freeze`; they are scanned again after): for a large set of long-lived objects
    that make no cycles, while the block makes garbage of its own (the DES's cycles) that the
    collector should still free. Nothing is frozen if something else froze objects already.

    >>> import gc
    >>> with frozen_gc():
    ...     gc.get_freeze_count() > 0
    True
    >>> gc.get_freeze_count()
    0
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
