"""Every ``>>>`` example in every commsim module runs and prints what it shows, so no
docstring example can rot unnoticed (ellipsis and whitespace-insensitive matching)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import commsim

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(commsim.__path__, "commsim.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    """The module's examples pass."""
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(importlib.import_module(name), optionflags=flags)
    assert result.failed == 0, f"{name}: {result.failed} example(s) failed"
