"""``commsim`` imports only what the command it runs needs: ``--help`` no subcommand module,
numpy, pandas, matplotlib or the DES; ``run`` no pandas or matplotlib. The help lines the
lazy parser shows for the commands it did not import are those of their real parsers."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from commsim.cli import COMMANDS, build_parser, main

PROBE = """
import sys
from commsim.cli import main
status = main(sys.argv[1:])
heavy = ("numpy", "pandas", "matplotlib", "simpy", "commsim.engine.des", "commsim.plan",
         "commsim.replay", "commsim.validation", "importlib.metadata")
print(status, *sorted(m for m in heavy if m in sys.modules))
"""


def _imported(argv: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.splitlines()[-1].split()


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    for action in parser._actions:  # noqa: SLF001 - argparse has no public list
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return {a.dest: a.help for a in action._choices_actions}  # noqa: SLF001
    raise AssertionError("no subcommands")


def test_help_imports_no_subcommand() -> None:
    """``commsim --help`` (and ``--version``'s parser) import none of the heavy modules."""
    assert _imported(["--help"]) == ["0"]


def test_run_imports_no_pandas_or_matplotlib() -> None:
    """A run that writes no file needs neither pandas nor matplotlib (nor replay or plan)."""
    line = _imported(["run", "all_reduce", "-t", "dgx-h100", "-s", "1KiB", "--json"])
    assert line[0] == "0"
    assert not {"pandas", "matplotlib", "commsim.plan", "commsim.replay"} & set(line)


def test_lazy_help_lines_are_the_real_ones() -> None:
    """Each placeholder's help line is its command's real one, in the same order."""
    real = _help_lines(build_parser())
    assert list(real) == list(COMMANDS)
    assert real == {name: help_line for name, (_, _, help_line) in COMMANDS.items()}
    assert _help_lines(build_parser(["--help"])) == real


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_parses_alone(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``commsim COMMAND --help`` builds that command's real parser (exit 0, its own usage)."""
    argv = ["bound", "fsdp", "--help"] if command == "bound" else [command, "--help"]
    assert main(argv) == 0
    assert f"usage: commsim {' '.join(argv[:-1])}" in capsys.readouterr().out
