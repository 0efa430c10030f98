"""No function in commsim/ is longer than :data:`MAX_LINES` lines; run this file as a script to
list the long ones."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1] / "commsim"
MAX_LINES = 80
#: Known long functions, as ``path:name`` (none left: every function is split by what it does).
ALLOWED: frozenset[str] = frozenset()


def long_functions(limit: int = MAX_LINES) -> list[tuple[int, str]]:
    """``(lines, "path:name")`` of every function (methods and nested ones too) longer than
    ``limit`` lines, longest first."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT.parent).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    out.append((lines, f"{where}:{node.name}"))
    return sorted(out, reverse=True)


def test_no_new_long_functions() -> None:
    """Every function over the limit is a known one (split long functions by what they do)."""
    assert [name for _, name in long_functions() if name not in ALLOWED] == []


if __name__ == "__main__":
    for lines, name in long_functions():
        print(f"{lines:5d}  {name}")
