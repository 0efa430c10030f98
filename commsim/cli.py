"""The ``commsim`` command line: parse, load, one library call, print.

Every :class:`~commsim.errors.CommsimError` and every failure to read or write a file becomes
one line ``commsim: error: ...`` on stderr and exit status 2; usage errors are one line too.
:func:`main` takes ``argv`` and returns the exit status, so tests call it in-process.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from commsim.errors import CommsimError

PROG = "commsim"
EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


class _UsageError(Exception):
    """Raised by the parser instead of printing usage and exiting."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``commsim run: error: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: error: {message} (see '{self.prog} --help')")


#: The subcommands, in ``commsim --help``'s order: the module and function that add each
#: one's parser, and its help line. ``main`` imports only the module of the command it runs;
#: the others get a placeholder with the same help line (``tests/test_cli_lazy.py`` checks
#: the lines against the real parsers), so ``commsim --help`` imports no subcommand at all.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("commsim.run_cli", "add_parser",
            "simulate one collective (one size or a range of sizes)"),
    "topologies": ("commsim.topology.cli", "add_parser", "list the preset topologies"),
    "replay": ("commsim.replay.cli", "add_parsers",
               "replay a training step (DDP, FSDP, pipeline, tensor, hybrid) on a topology"),
    "bound": ("commsim.replay.cli", "add_parsers",
              "closed-form bounds (fsdp: is FSDP compute or communication bound?)"),
    "measure": ("commsim.measure.cli", "add_parser",
                "time real torch.distributed collectives (gloo on CPU, nccl on GPUs)"),
    "validate": ("commsim.validation.cli", "add_parsers",
                 "compare predictions with measurements (nccl-tests log or measurements CSV)"),
    "calibrate": ("commsim.validation.cli", "add_parsers",
                  "fit a topology's latencies and bandwidths to measurements"),
    "sweep": ("commsim.sweep.cli", "add_parser",
              "simulate a grid of collectives/sizes/algorithms/topologies (and workloads)"),
    "plan": ("commsim.plan.cli", "add_parser",
             "search TP/CP/PP/DP, micro-batch, schedule and recompute for a model (capacity "
             "planning)"),
    "goodput": ("commsim.goodput.cli", "add_parser",
                "expected fraction of wall time that trains under failures, and the best "
                "checkpoint interval"),
}


#: The commands that may run the discrete-event engine in this process: each takes
#: ``--max-memory SIZE`` (:mod:`commsim.budget`), which :func:`main` applies around it.
DES_COMMANDS = ("run", "replay", "validate", "calibrate", "plan")


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata
    costs tens of milliseconds)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from commsim import __version__

        print(f"{PROG} {__version__}")
        parser.exit()


def _requested(argv: Sequence[str] | None) -> str | None:
    """The subcommand ``argv`` runs (its first word that names one), None when none does."""
    if argv is None:
        return None
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``commsim`` parser with its subcommands: every subcommand's full parser, or with
    ``argv`` only that of the command it names (the others as help lines)."""
    import importlib

    parser = _Parser(
        prog=PROG,
        description="Simulate collective communication (all-reduce, all-gather, ...) on "
        "GPU/TPU cluster topologies.",
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = COMMANDS.get(_requested(argv) or "", ("", "", ""))[:2]
    added: set[tuple[str, str]] = set()
    for name, (module, adder, help_line) in COMMANDS.items():
        if argv is not None and (module, adder) != wanted:
            sub.add_parser(name, help=help_line, add_help=False)
        elif (module, adder) not in added:
            added.add((module, adder))
            getattr(importlib.import_module(module), adder)(sub)
    for name in DES_COMMANDS:
        if name in sub.choices and sub.choices[name].add_help:  # a real parser, not a line
            sub.choices[name].add_argument(
                "--max-memory", default=None, metavar="SIZE",
                help="memory a discrete-event simulation may use, e.g. 8GiB (default: half "
                "the memory available); a larger one is refused in one line before anything "
                "is built")
    return parser


# -- the memory budget (every DES command's --max-memory) ---------------------------------
def _max_memory(value: str | None) -> int | None:
    """``--max-memory SIZE`` in bytes (None: the default budget); a positive size."""
    from commsim.errors import SpecError
    from commsim.units import parse_size

    if value is None:
        return None
    nbytes = parse_size(value, "--max-memory")
    if nbytes <= 0:
        raise SpecError(f"--max-memory: must be positive (got {value!r})")
    return nbytes


# -- entry point ---------------------------------------------------------------------------
def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _fail(message: str, status: int = EXIT_USAGE) -> int:
    print(_one_line(message), file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``commsim`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Never raises and never prints a traceback (set ``COMMSIM_DEBUG=1`` to see one for an
    internal error).
    """
    try:
        from commsim.cliargs import join_negative_values

        words = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(words)
        args = parser.parse_args(join_negative_values(parser, words))
        handler: Callable[[argparse.Namespace], int] = args.handler
        if getattr(args, "max_memory", None) is None:
            return handler(args)
        from commsim.budget import limited

        with limited(_max_memory(args.max_memory)):
            return handler(args)
    except _UsageError as exc:
        return _fail(str(exc))
    except SystemExit as exc:  # --help and --version exit 0 through argparse
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    except CommsimError as exc:
        return _fail(f"{PROG}: error: {exc}")
    except BrokenPipeError:  # `commsim ... | head`: the reader left, nothing to report
        sys.stdout = open(os.devnull, "w")  # keep interpreter exit quiet
        return EXIT_OK
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return _fail(f"{PROG}: error: {where}{exc.strerror or exc}")
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("COMMSIM_DEBUG"):
            raise
        return _fail(
            f"{PROG}: internal error: {type(exc).__name__}: {exc} "
            "(set COMMSIM_DEBUG=1 for a traceback)",
            EXIT_INTERNAL,
        )


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
