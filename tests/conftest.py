"""Suite-wide configuration: the hypothesis profiles.

Two profiles, chosen by the environment variable ``HYPOTHESIS_PROFILE``:

* ``default`` (when the variable is unset): derandomized, so that every run draws the same
  examples and a property test fails only on a bug, never on a lucky draw; no deadline, since
  a shared 2-core machine makes any per-example time limit a source of noise; the failing
  example's reproduction blob is printed.
* ``fuzz`` (``HYPOTHESIS_PROFILE=fuzz``): random draws and 20 times the examples, for hunting
  bugs on purpose (``HYPOTHESIS_PROFILE=fuzz pytest tests/engine/test_properties.py``).

Tests that set a smaller example budget (expensive properties) write it as a multiple of
``EXAMPLE_SCALE`` of their module, ``settings.default.max_examples // 100``: 1 by default, 20
under ``fuzz``. No test sets ``derandomize`` or ``deadline`` itself.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("default", derandomize=True, deadline=None, print_blob=True)
settings.register_profile(
    "fuzz", derandomize=False, deadline=None, print_blob=True, max_examples=2000
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
