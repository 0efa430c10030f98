"""The docstring examples of the engine, network, schedule and algorithm modules run and give
the outputs they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "commsim.engine.analytic",
    "commsim.engine.closed_forms",
    "commsim.engine.tasks",
    "commsim.gcpause",
    "commsim.network",
    "commsim.schedule",
    "commsim.table",
    "commsim.trace_events",
    "commsim.algorithms",
    "commsim.algorithms.plan",
    "commsim.algorithms.hierarchical",
    "commsim.algorithms.recursive",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    """Every ``>>>`` example in the module passes (whitespace-insensitive where it says so)."""
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
