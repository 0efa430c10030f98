"""What every ``commsim`` subcommand's arguments share: ``--topology``, output-path checks and
values that start with ``-``.

* :func:`add_topology` adds the one ``--topology/-t FILE|PRESET`` argument every command uses.
* :func:`check_output` checks an output path (``--out``, ``--trace``, ``--transfers``,
  ``--plot``, ``--csv``) before any work, with one wording.
* :func:`join_negative_values` lets a flag take a value that starts with ``-``:
  ``-s -1GiB`` reaches commsim's size parser (and its one-line error) as ``-s=-1GiB``, instead
  of argparse's "expected one argument", because argparse reads any ``-x...`` token that is
  not a plain negative number as an option.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from commsim.errors import SpecError

#: A token that is a value with a leading minus sign (``-1GiB``, ``-2.5ms``, ``-.5``), not a flag.
_NEGATIVE = re.compile(r"^-(\d|\.\d)")


def add_topology(
    parser: argparse.ArgumentParser,
    *,
    required: bool = True,
    metavar: str = "FILE|PRESET",
    help: str = "a YAML topology file or a preset name (see 'commsim topologies')",
) -> None:
    """Add ``--topology/-t`` to ``parser`` (``required`` unless the command has a default)."""
    parser.add_argument(
        "--topology", "-t", required=required, default=None, metavar=metavar, help=help
    )


def add_what_if(parser: argparse.ArgumentParser) -> None:
    """Add ``--what-if FILE``: a degraded machine, reported beside the healthy one."""
    parser.add_argument(
        "--what-if", default=None, metavar="FILE",
        help="a what-if file (links degraded or failed, slow ranks, jitter; docs/what-if.md): "
        "run on the degraded machine and report the healthy one beside it",
    )  # fmt: skip


def plot_formats() -> list[str]:
    """The file suffixes matplotlib can save a figure as (``png``, ``pdf``, ``svg``, ...)."""
    from matplotlib.figure import Figure

    return sorted(Figure().canvas.get_supported_filetypes())


def check_output(flag: str, value: str | Path | None, *, plot: bool = False) -> None:
    """SpecError when ``value`` (an output file of ``flag``) cannot be written: its directory
    does not exist, it is a directory, or (``plot``) matplotlib cannot write its format.
    None (flag not given) passes."""
    if value is None:
        return
    path = Path(value)
    if not str(value).strip():
        raise SpecError(f"{flag}: empty file name")
    if path.is_dir():
        raise SpecError(f"{flag} {value}: is a directory, not a file")
    if not path.resolve().parent.is_dir():
        raise SpecError(f"{flag} {value}: directory {str(path.parent)!r} does not exist")
    if plot:
        formats = plot_formats()
        if path.suffix.lower().lstrip(".") not in formats:
            raise SpecError(
                f"{flag} {value}: cannot save a plot as {path.suffix or 'no suffix'!r} "
                f"(formats: {', '.join(formats)})"
            )


def output_file(flag: str, *, plot: bool = False) -> Callable[[str], str]:
    """An argparse ``type=`` that applies :func:`check_output` while parsing (for commands
    whose handler checks nothing itself)."""

    def check(value: str) -> str:
        try:
            check_output(flag, value, plot=plot)
        except SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag} ")) from None
        return value

    return check


def _value_flags(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings of ``parser`` that take exactly one value."""
    return {
        option
        for action in parser._actions  # noqa: SLF001 - argparse has no public list
        if action.option_strings and action.nargs is None and action.const is None
        for option in action.option_strings
    }


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return action.choices.get(name)
    return None


def join_negative_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` with each value-taking flag followed by a ``-``-led number joined to it:
    ``["run", "-s", "-1GiB"]`` -> ``["run", "-s=-1GiB"]`` (argparse reads ``-s=VALUE`` and
    ``--size=VALUE`` alike). Flags are looked up in the (sub)command's own parser."""
    out: list[str] = []
    current, flags = parser, _value_flags(parser)
    args = list(argv)
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            return out + args[i:]
        nested = None if token.startswith("-") else _subparser(current, token)
        if nested is not None:
            current, flags = nested, _value_flags(nested)
        if token in flags and i + 1 < len(args) and _NEGATIVE.match(args[i + 1]):
            out.append(f"{token}={args[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def rank_set(value: str) -> frozenset[int]:
    """``--trace-ranks``: ranks and ranges, ``0-7,12`` -> {0..7, 12}; SpecError naming a bad
    part.

    >>> sorted(rank_set("0-2,5"))
    [0, 1, 2, 5]
    """
    ranks: set[int] = set()
    for part in str(value).split(","):
        low, _, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if high else int(low)
        except ValueError:
            raise SpecError(f"--trace-ranks: {part.strip()!r} is not a rank or a range "
                            "like 0-7") from None
        if first < 0 or last < first or last - first > 1 << 20:
            raise SpecError(f"--trace-ranks: {part.strip()!r} is not a range of ranks >= 0")
        ranks.update(range(first, last + 1))
    return frozenset(ranks)
