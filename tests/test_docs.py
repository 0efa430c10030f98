"""Executed docs: every command and snippet of README.md and docs/*.md runs and prints what the
doc shows.

What is run and how it is compared is written down in ``tests/docs_blocks.py`` (its module
docstring), which also regenerates the docs after a change of the model
(``.venv/bin/python tests/docs_blocks.py``). In short: command blocks (``$`` lines) and
``python`` blocks followed by a ``prints`` block are run in a temporary folder holding the
repository's example files, through this interpreter and this checkout's ``commsim``; their
output must equal the doc's after dropping trailing spaces, with a ``...`` line standing for
any lines. Numbers are masked only in blocks that time real runs (``commsim measure`` and
blocks marked ``<!-- docs-test: timed -->``); simulated numbers must match to the last digit.
Blocks marked ``<!-- docs-test: benchmark -->`` quote a benchmark's timings
(``benchmarks/run_all.py`` rewrites them); ``<!-- docs-test: skip (reason) -->`` is for what
cannot run without a GPU.
"""

from __future__ import annotations

import re

import pytest
from docs_blocks import DOCS, ROOT, matches, parse, run_doc, trim_like

KNOWN_DIRECTIVES = {"skip", "benchmark", "timed", "output-of"}


@pytest.mark.parametrize("path", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_doc_blocks_print_what_the_doc_shows(path) -> None:
    """Every checked block of the doc runs, and prints exactly what the doc shows."""
    outcomes = list(run_doc(path))
    bad = [o for o in outcomes if not o.ok]
    report = "\n\n".join(f"{o.block.where}: drifted\n{o.diff()}" for o in bad)
    assert not bad, (
        f"{report}\n\nIf the change of output is intended, regenerate the docs with "
        "`.venv/bin/python tests/docs_blocks.py` and review the diff."
    )


def test_the_docs_have_blocks_to_check() -> None:
    """The parser finds the blocks it should: the README's make demo, command and python
    blocks, and at least 30 checked blocks over all docs (a parser that silently found
    nothing would pass every doc)."""
    blocks = [b for p in DOCS for b in parse(p)]
    left_out = ("skip", "benchmark")
    kinds = [b.kind for b in blocks if not (b.directive and b.directive[0] in left_out)]
    assert kinds.count("command") >= 20 and kinds.count("python") >= 8
    assert [b.kind for b in parse(ROOT / "README.md")].count("output") == 1
    assert len([k for k in kinds if k in ("command", "python", "output")]) >= 30


def test_directives_are_known_and_give_reasons() -> None:
    """Every ``docs-test`` comment is one of the known directives; skip, benchmark and timed
    say why; a benchmark block names a script that exists in benchmarks/."""
    for path in DOCS:
        for block in parse(path):
            if block.directive is None:
                continue
            name, argument = block.directive
            assert name in KNOWN_DIRECTIVES, (block.where, name)
            assert argument, f"{block.where}: docs-test: {name} needs a reason or a command"
            if name == "benchmark":
                scripts = re.findall(r"benchmarks/(\w+\.py)", "\n".join(block.body))
                assert scripts, block.where
                assert all((ROOT / "benchmarks" / s).is_file() for s in scripts), block.where


def test_links_stay_inside_the_project() -> None:
    """Every relative Markdown link of the docs points at a file or folder of the repository
    (no ``../shared/...`` pointers outside the project)."""
    for path in DOCS:
        text = path.read_text()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"\w+:", target):
                continue
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"{path.name}: {target} leaves the project"
            assert resolved.exists(), f"{path.name}: {target} does not exist"
        assert "../shared" not in text, path.name


def test_a_changed_number_is_a_mismatch() -> None:
    """Simulated numbers compare exactly: one digit changed anywhere fails, in a trimmed
    output too; in a timed block numbers are masked, but not the text around them."""
    row = "   1024  ring/LL   1   12.84   0.08"
    shown = ["# header", row, "...", "# Avg bus bandwidth: 154.22"]
    run = ["# header", row, "   2048  ring/LL   1   13.0   0.1",
           "# Avg bus bandwidth: 154.22"]
    assert matches(shown, run)
    assert not matches([shown[0], shown[1].replace("12.84", "12.85"), *shown[2:]], run)
    assert not matches([*shown[:3], "# Avg bus bandwidth: 154.23"], run)
    assert matches(["time 1.5 ms"], ["time  21.75 ms"], timed=True)
    assert not matches(["time 1.5 ms"], ["time 1.5 us"], timed=True)


def test_a_rewrite_keeps_the_trim() -> None:
    """The regenerate tool writes the new output with ``...`` where the doc had it: as many
    lines before the first and after the last as before."""
    shown = ["head", "...", "tail 1", "tail 2"]
    run = ["head'", "a", "b", "c", "tail 1'", "tail 2'"]
    assert trim_like(shown, run) == ["head'", "...", "tail 1'", "tail 2'"]
    assert trim_like(["a", "b"], run) == run
