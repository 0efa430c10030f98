"""The package as pip builds it: every subpackage of ``commsim`` is in pyproject's list.

An editable install finds a subpackage that ``[tool.setuptools] packages`` leaves out (it maps
the whole ``commsim`` folder), so the suite passes while ``pip install .`` ships a package that
fails on import; this test catches that.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_packaged() -> None:
    """Each folder of commsim/ with an __init__.py is listed under [tool.setuptools]."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "commsim").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set()
