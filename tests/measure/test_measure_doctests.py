"""The examples in the measure modules' docstrings run and hold (torch is not needed)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "commsim.measure.table",
    "commsim.measurements",
    "commsim.measure.launcher",
    "commsim.measure.cli",
    "commsim.measure.progress",
    "commsim.measure.cpu_model",
    "commsim.algorithms.gloo",
    "commsim.topology.constructors",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    """Every docstring example of ``name`` passes."""
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_importing_measure_does_not_import_torch() -> None:
    """torch is an optional extra: ``import commsim.measure`` (and the CLI module) leave it
    unimported; only the workers and measure() itself import it."""
    import subprocess
    import sys

    code = (
        "import sys, commsim.measure, commsim.measure.cli, commsim.measure.calibrate, "
        "commsim.cli; commsim.cli.build_parser(); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
