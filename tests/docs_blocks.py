"""Executed documentation: find, run, compare and rewrite the blocks of README.md and docs/*.md.

Used by ``tests/test_docs.py`` (compare) and, run as a script, to regenerate the docs from real
runs after a change of the model::

    .venv/bin/python tests/docs_blocks.py            # rewrite every block that drifted
    .venv/bin/python tests/docs_blocks.py --check    # only list them (exit 1 if any)
    .venv/bin/python tests/docs_blocks.py docs/cli.md README.md   # some files only

What counts as a block, in a Markdown file:

* **command block**: a fenced block (any info string) whose first line starts with ``$ ``.
  Each ``$`` line is a shell command (a line ending in ``\\`` continues on the next one); the
  lines up to the next ``$`` line are its expected output, stdout and stderr together, as a
  terminal shows them. The exit status is not checked: the docs show errors too.
* **python block**: a fenced ``python`` block, run as a script. If the only text between it and
  the next fenced block is a line ``prints`` (or ``prints:``), that block is its expected
  stdout; otherwise the script must merely exit 0.
* **file block**: a fenced block whose first line is a comment naming a file, ``# NAME.yaml``;
  it is written to that name before the doc's later blocks run.
* **output block**: a fenced block right after ``<!-- docs-test: output-of: COMMAND -->`` holds
  the expected output of COMMAND (the README's ``make demo``: the Makefile's own recipe, with
  ``.venv/bin`` being the wrappers below and the install step marked done).

An HTML comment ``<!-- docs-test: skip (REASON) -->`` right before a block leaves it out (for
what cannot run on a CPU-only machine), ``<!-- docs-test: benchmark (REASON) -->`` marks a
benchmark's output, which ``benchmarks/run_all.py`` regenerates and the test does not run
(minutes of timing), and ``<!-- docs-test: timed (REASON) -->`` a block whose commands time real
runs (for those, and for ``commsim measure``, every number is masked).

Normalisation before comparing: trailing spaces and leading/trailing blank lines are dropped;
a line ``...`` in the expected output stands for any number of lines (long outputs are trimmed
that way, and a rewrite keeps the trim); in timed blocks every number becomes ``N`` and runs of
spaces one space. Nothing else: simulated numbers must match to the last digit.

Each doc runs in its own temporary folder, its blocks in order (so a file written by one block
is there for the next), with ``examples/``, ``topologies/``, ``tests/``, ``notebooks/``,
``benchmarks/``, the Makefile and pyproject.toml linked in, and ``commsim``, ``python``,
``.venv/bin/commsim`` and ``.venv/bin/python`` all running this checkout's code with this
interpreter.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED = (
    "examples", "topologies", "tests", "notebooks", "benchmarks", "Makefile", "pyproject.toml"
)
COMMAND_TIMEOUT_S = 300

_FENCE = re.compile(r"^```(\S*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*([\w-]+)\s*:?\s*(.*?)\s*-->\s*$")
_FILE_HEADER = re.compile(r"^#\s+([\w.-]+\.(?:ya?ml|csv|txt|json))\s*$")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class Block:
    """One fenced block: lines ``start`` (the opening fence) to ``end`` (the closing one)."""

    path: Path
    start: int
    end: int
    lang: str
    body: list[str]
    directive: tuple[str, str] | None = None
    kind: str = "other"
    #: For a python block, the block holding its expected stdout.
    prints: Block | None = None
    file_name: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.start + 1}"


@dataclass
class Outcome:
    """A block's expected and actual text (normalised), and the text to write back."""

    block: Block
    expected: list[str]
    actual: list[str]
    rewrite: list[str] = field(default_factory=list)
    #: The block whose body ``rewrite`` replaces (a python block's ``prints`` block).
    target: Block | None = None

    @property
    def ok(self) -> bool:
        return matches(self.expected, self.actual, timed=self.timed)

    @property
    def timed(self) -> bool:
        return is_timed(self.block)

    def diff(self) -> str:
        return "\n".join(
            difflib.unified_diff(self.expected, self.actual, "doc", "run", lineterm="")
        )


def parse(path: Path) -> list[Block]:
    """Every fenced block of ``path``, classified."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        block = Block(path, i, j, m.group(1), lines[i + 1 : j])
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and (d := _DIRECTIVE.match(lines[k].strip())):
            block.directive = (d.group(1), d.group(2))
        blocks.append(block)
        i = j + 1
    for n, block in enumerate(blocks):
        first = block.body[0] if block.body else ""
        if block.directive and block.directive[0] == "output-of":
            block.kind = "output"
        elif first.startswith("$ "):
            block.kind = "command"
        elif block.lang == "python":
            block.kind = "python"
            if n + 1 < len(blocks):
                between = lines[block.end + 1 : blocks[n + 1].start]
                if [s.strip() for s in between if s.strip()] in (["prints"], ["prints:"]):
                    block.prints = blocks[n + 1]
                    blocks[n + 1].kind = "prints"
        elif (f := _FILE_HEADER.match(first)) and block.lang in ("yaml", "yml", "csv", "text", ""):
            block.kind = "file"
            block.file_name = f.group(1)
    return blocks


def commands(block: Block) -> list[tuple[list[str], list[str]]]:
    """A command block's (command lines, expected output lines) pairs."""
    pairs: list[tuple[list[str], list[str]]] = []
    lines = block.body
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise ValueError(f"{block.where}: output before the first command")
        cmd = [lines[i]]
        while cmd[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd.append(lines[i])
        i += 1
        out: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        pairs.append((cmd, out))
    return pairs


def is_timed(block: Block) -> bool:
    """Numbers are masked: a block marked timed, or one running ``commsim measure``."""
    if block.directive and block.directive[0] == "timed":
        return True
    return any(re.search(r"\bcommsim measure\b", line) for line in block.body if line[:2] == "$ ")


def normalise(lines: list[str]) -> list[str]:
    """Trailing spaces and leading/trailing blank lines dropped."""
    out = [line.rstrip() for line in lines]
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def _mask(line: str) -> str:
    return " ".join(_NUMBER.sub("N", line).split())


def matches(expected: list[str], actual: list[str], *, timed: bool = False) -> bool:
    """``actual`` is ``expected`` with each ``...`` line standing for any lines."""
    if timed:
        expected = [e if e == "..." else _mask(e) for e in expected]
        actual = [_mask(a) for a in actual]
    parts: list[list[str]] = [[]]
    for line in expected:
        if line == "...":
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) == 1:
        return expected == actual
    head, middle, tail = parts[0], parts[1:-1], parts[-1]
    if len(head) + len(tail) > len(actual) or actual[: len(head)] != head:
        return False
    if tail and actual[-len(tail) :] != tail:
        return False
    pos, stop = len(head), len(actual) - len(tail)
    for part in middle:
        found = next(
            (j for j in range(pos, stop - len(part) + 1) if actual[j : j + len(part)] == part),
            None,
        )
        if found is None:
            return False
        pos = found + len(part)
    return True


def trim_like(expected: list[str], actual: list[str]) -> list[str]:
    """``actual``, trimmed with ``...`` where ``expected`` was: the same number of lines before
    the first and after the last ``...``, middle parts where they best match."""
    if "..." not in expected:
        return actual
    parts: list[list[str]] = [[]]
    for line in expected:
        if line == "...":
            parts.append([])
        else:
            parts[-1].append(line)
    head, middle, tail = parts[0], parts[1:-1], parts[-1]
    if len(head) + len(tail) + sum(map(len, middle)) >= len(actual):
        return actual
    out = actual[: len(head)]
    pos, stop = len(head), len(actual) - len(tail)
    for part in middle:
        if not part:
            continue
        best, at = -1.0, pos
        for j in range(pos, stop - len(part) + 1):
            score = difflib.SequenceMatcher(
                None, "\n".join(part), "\n".join(actual[j : j + len(part)])
            ).ratio()
            if score > best:
                best, at = score, j
        out += ["...", *actual[at : at + len(part)]]
        pos = at + len(part)
    out.append("...")
    out += actual[stop:] if tail else []
    return out


class Workspace:
    """A temporary folder with the repository's example files and wrappers that run commsim."""

    def __init__(self, timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.dir = Path(tempfile.mkdtemp(prefix="commsim-docs-"))
        for name in LINKED:
            (self.dir / name).symlink_to(ROOT / name)
        bin_dir = self.dir / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        for name, argv in (("python", ""), ("commsim", " -m commsim")):
            script = bin_dir / name
            script.write_text(f'#!/bin/sh\nexec "{sys.executable}"{argv} "$@"\n')
            script.chmod(0o755)
        self.env = dict(
            os.environ,
            PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            PYTHONPATH=os.pathsep.join(
                filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])
            ),
            MPLBACKEND="Agg",
            COLUMNS="100",
            PYTHONHASHSEED="0",
        )

    def shell(self, command: str, cwd: Path | None = None) -> list[str]:
        """Stdout and stderr of ``command`` in bash, merged as a terminal shows them."""
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd or self.dir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=self.timeout_s,
            check=False,
        )
        return normalise(done.stdout.replace(str(self.dir) + "/", "").splitlines())

    def python(self, code: str) -> tuple[int, str, str]:
        """Exit status, stdout and stderr of ``code`` run as a script."""
        script = self.dir / "_docs_block.py"
        script.write_text(code + "\n")
        done = subprocess.run(
            [sys.executable, script.name],
            cwd=self.dir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=self.timeout_s,
            check=False,
        )
        script.unlink()
        return done.returncode, done.stdout, done.stderr

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def run_doc(
    path: Path,
    *,
    benchmarks: bool = False,
    timeout_s: float = COMMAND_TIMEOUT_S,
    only: str = "",
) -> Iterator[Outcome]:
    """Run the blocks of one doc in order; one outcome per checked block. With
    ``benchmarks``, run only the blocks marked ``benchmark`` (and write the file blocks).
    Each command may take ``timeout_s``; with ``only``, command blocks whose text lacks that
    string are left out."""
    work = Workspace(timeout_s)
    try:
        for block in parse(path):
            directive = block.directive[0] if block.directive else None
            if block.kind in ("other", "prints") or directive == "skip":
                continue
            if (directive == "benchmark") != benchmarks and block.kind != "file":
                continue
            if only and block.kind == "command" and only not in "\n".join(block.body):
                continue
            if block.kind == "file":
                (work.dir / str(block.file_name)).write_text("\n".join(block.body) + "\n")
            elif block.kind == "output":
                command = block.directive[1] if block.directive else ""
                actual = work.shell(command)
                expected = normalise(block.body)
                yield Outcome(block, expected, actual, trim_like(expected, actual), block)
            elif block.kind == "command":
                expected_all: list[str] = []
                actual_all: list[str] = []
                rewrite: list[str] = []
                for cmd, out in commands(block):
                    line = "\n".join(c[2:] if n == 0 else c for n, c in enumerate(cmd))
                    actual = work.shell(line.replace("\\\n", " "))
                    expected = normalise(out)
                    expected_all += [*cmd, *expected]
                    actual_all += [*cmd, *actual]
                    rewrite += [*cmd, *trim_like(expected, actual)]
                yield Outcome(block, expected_all, actual_all, rewrite, block)
            elif block.kind == "python":
                status, stdout, stderr = work.python("\n".join(block.body))
                if status != 0:
                    failure = [f"exit status {status}", *stderr.splitlines()[-15:]]
                    yield Outcome(block, ["exit status 0"], failure)
                elif block.prints is not None:
                    expected = normalise(block.prints.body)
                    actual = normalise(stdout.splitlines())
                    rewrite = trim_like(expected, actual)
                    yield Outcome(block, expected, actual, rewrite, block.prints)
                else:
                    yield Outcome(block, [], [])
    finally:
        work.close()


def rewrite(outcomes: list[Outcome]) -> list[Path]:
    """Write each drifted block's actual output into its file; the files changed."""
    by_path: dict[Path, list[Outcome]] = {}
    for o in outcomes:
        if not o.ok and o.target is not None:
            by_path.setdefault(o.target.path, []).append(o)
    for path, items in by_path.items():
        lines = path.read_text().splitlines()
        for o in sorted(items, key=lambda o: o.target.start, reverse=True):  # type: ignore[union-attr]
            t = o.target
            assert t is not None
            lines[t.start + 1 : t.end] = o.rewrite
        path.write_text("\n".join(lines) + "\n")
    return sorted(by_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="docs to run (default: all)")
    parser.add_argument("--check", action="store_true", help="list drifted blocks only")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.files] or DOCS
    outcomes = [o for p in paths for o in run_doc(p)]
    bad = [o for o in outcomes if not o.ok]
    for o in bad:
        print(f"{o.block.where}: drifted\n{o.diff()}\n")
    print(f"{len(outcomes)} blocks run, {len(bad)} drifted")
    if args.check or not bad:
        return 1 if bad else 0
    unfixable = [o for o in bad if o.target is None]
    for path in rewrite(bad):
        print(f"rewrote {path.relative_to(ROOT)}")
    for o in unfixable:
        print(f"{o.block.where}: fails, fix it by hand")
    return 1 if unfixable else 0


if __name__ == "__main__":
    sys.exit(main())
