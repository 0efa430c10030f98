"""The topology modules' docstring examples run and give the outputs they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "commsim.topology.spec",
    "commsim.topology.loader",
    "commsim.topology.build",
    "commsim.topology.constructors",
    "commsim.topology.presets",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    """Every ``>>>`` example in the module passes (ELLIPSIS allowed in expected output)."""
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
