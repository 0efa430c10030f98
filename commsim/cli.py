"""The ``commsim`` command line: parse, load, one library call, print.

Every :class:`~commsim.errors.CommsimError` and every failure to read or write a file becomes
one line ``commsim: error: ...`` on stderr and exit status 2; usage errors are one line too.
:func:`main` takes ``argv`` and returns the exit status, so tests call it in-process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from commsim.errors import CommsimError

PROG = "commsim"
EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2

_RUN_EPILOG = """\
sizes:  1GiB = 2^30 B, 1GB = 10^9 B, 64KiB, 512B; a range MIN:MAX[:FACTOR] (factor 2 by default)
        gives one result per size, like nccl-tests' -b/-e/-f.
files:  with a size range, --transfers/--trace write one file per size, the size inserted
        before the suffix: --trace t.json -> t-1KiB.json, t-4KiB.json, ...

examples:
  commsim run all_reduce --topology dgx-h100x4 --size 1KiB:1GiB:4
  commsim run all_gather --topology ring.yaml --size 64MiB --algorithm ring --json
  commsim run broadcast --topology dgx-a100 --size 1GiB --chunks 16 --trace bcast.json
  commsim run all_reduce --topology dgx-h100 --size 8B:8GiB:8 --json   # NCCL's choices
  commsim run all_reduce --topology dgx-h100x12+sharp --size 1GiB --algorithm collnet
"""


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
    "run": ("commsim.cli", "_add_run_parser",
            "simulate one collective (one size or a range of sizes)"),
    "topologies": ("commsim.cli", "_add_topologies_parser", "list the preset topologies"),
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


def _add_run_parser(sub: Any) -> None:
    """``commsim run COLLECTIVE``: what to simulate, then how, then what to write."""
    from commsim.cliargs import add_topology, add_what_if

    run = sub.add_parser(
        "run",
        help="simulate one collective (one size or a range of sizes)",
        description="Simulate one collective on a topology and print an nccl-tests-like\n"
        "table (or JSON): time, algbw and busbw per size.",
        epilog=_RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "collective",
        metavar="COLLECTIVE",
        help="broadcast, reduce, all_gather, reduce_scatter, all_reduce or all_to_all "
        "(all-reduce, allreduce, alltoall too)",
    )
    add_topology(run)
    run.add_argument(
        "--size",
        "-s",
        default=None,
        metavar="SIZE|MIN:MAX[:FACTOR]",
        help="bytes of the full buffer (nccl-tests' size; all_to_all: each rank's send "
        "buffer), e.g. 1GiB or 1KiB:1GiB:4 (required unless --matrix)",
    )
    run.add_argument(
        "--matrix", default=None, metavar="FILE",
        help="all_to_all as all-to-allv: bytes rank s sends rank j at row s, column j of a "
        "CSV or YAML file (p x p); the size is the largest rank's send buffer",
    )  # fmt: skip
    run.add_argument(
        "--skew", type=float, default=None, metavar="S",
        help="all_to_all as all-to-allv: each rank sends SIZE bytes, rank 0 (1 + S) times "
        "the even share, the others the rest evenly (0: even)",
    )  # fmt: skip
    _add_run_how(run)
    add_what_if(run)
    _add_run_outputs(run)
    run.set_defaults(handler=cmd_run)


def _add_run_how(run: argparse.ArgumentParser) -> None:
    """``run``'s algorithm, root, ranks, chunks, engine and protocol."""
    run.add_argument(
        "--algorithm",
        "-a",
        default="auto",
        metavar="NAME",
        help="ring, ring_bidirectional, binomial_tree, recursive_doubling, rabenseifner, "
        "double_binary_tree, torus, hierarchical, hierarchical_rabenseifner, nvls, collnet, "
        "gloo; all_to_all: pairwise, bruck, all_pairs, pxn, torus, hierarchical; or auto "
        "(default: for each size, NCCL's choice where the topology runs NCCL, "
        "else the fastest: simulated up to 64 ranks, closed forms beyond)",
    )
    run.add_argument(
        "--root", type=int, default=0, metavar="RANK",
        help="root rank of broadcast and reduce (default 0)",
    )  # fmt: skip
    run.add_argument(
        "--ranks", type=int, default=None, metavar="R",
        help="use only the first R ranks of the topology (default: all)",
    )  # fmt: skip
    run.add_argument(
        "--chunks", type=int, default=None, metavar="N",
        help="pipelined pieces (default: the algorithm's choice; 1 = no pipelining)",
    )  # fmt: skip
    run.add_argument(
        "--engine",
        choices=("des", "analytic"),
        default="des",
        help="des: discrete-event simulation with contention (default); "
        "analytic: closed-form alpha-beta cost",
    )
    run.add_argument(
        "--protocol",
        default="auto",
        metavar="PROTO",
        help="NCCL protocol: auto (default: on a topology with an 'nccl:' block, NCCL's "
        "choice of protocol, and of algorithm for --algorithm auto, launch latency "
        "included; elsewhere plain alpha-beta), LL, LL128, Simple, or none (plain "
        "alpha-beta everywhere)",
    )


def _add_run_outputs(run: argparse.ArgumentParser) -> None:
    """``run``'s --json, --transfers, --trace and --plot."""
    run.add_argument(
        "--json", action="store_true", help="print JSON: an object for one size, a list for a range"
    )
    from commsim.cliargs import output_file

    run.add_argument(
        "--transfers",
        metavar="FILE.csv",
        default=None,
        type=output_file("--transfers"),
        help="write every point-to-point transfer as CSV "
        "(src,dst,start_s,end_s,nbytes,offset,op), of the same evaluation as the printed time",
    )
    run.add_argument(
        "--trace",
        metavar="FILE.json",
        default=None,
        type=output_file("--trace"),
        help="write a Chrome/Perfetto trace (open in ui.perfetto.dev) of the same evaluation",
    )
    run.add_argument(
        "--trace-ranks", metavar="LIST", default=None,
        help="keep in the trace only the transfers from or to these ranks (e.g. 0-7,12)",
    )
    run.add_argument(
        "--trace-links", metavar="PATTERN", default=None,
        help="keep in the trace only the lanes of the links whose label matches this pattern "
        "(as 'commsim topologies NAME --links' prints them, e.g. 'gpu[0-7]->*') and the transfers "
        "that cross them",
    )
    run.add_argument(
        "--trace-max-size", metavar="SIZE", default="256MiB",
        help="refuse, before writing anything, a trace larger than this (default 256MiB: "
        "larger JSON traces are slow or fail to open in ui.perfetto.dev)",
    )
    run.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        type=output_file("--plot", plot=True),
        help="save a plot: busbw vs size for a size range; for one size, the busiest links' "
        "utilization over time",
    )


def _add_topologies_parser(sub: Any) -> None:
    """``commsim topologies [NAME] [--json]``."""
    topo = sub.add_parser(
        "topologies",
        help="list the preset topologies",
        description="List the preset topologies usable as --topology NAME; with NAME, print "
        "that preset's YAML file (to copy, or to start a file of your own with 'base: NAME').",
    )
    topo.add_argument("name", nargs="?", metavar="NAME",
                      help="a preset: print its YAML file as shipped")
    topo.add_argument("--json", action="store_true",
                      help="print a JSON list (with NAME: that preset's object)")
    topo.add_argument("--links", action="store_true",
                      help="with NAME (a preset or a topology file): print every link's label, "
                      "one a line, as a what-if file's patterns match them")
    topo.set_defaults(handler=cmd_topologies)


# -- commands ------------------------------------------------------------------------------
def _per_size_path(path: str, nbytes: int, many: bool) -> Path:
    """``t.json`` for one size; ``t-1KiB.json`` for each size of a range."""
    from commsim.units import format_size

    out = Path(path)
    if not many:
        return out
    return out.with_name(f"{out.stem}-{format_size(nbytes)}{out.suffix}")


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


def _trace_keep(args: argparse.Namespace, recorded: list[Any]) -> Any:
    """``--trace-ranks``/``--trace-links`` as a TraceKeep, once every trace is known to fit
    ``--trace-max-size`` (SpecError, before anything is written, naming its size)."""
    from commsim.cliargs import rank_set
    from commsim.errors import SpecError
    from commsim.export import TraceKeep, trace_size
    from commsim.units import format_size, parse_size

    keep = TraceKeep(ranks=rank_set(args.trace_ranks) if args.trace_ranks else None,
                     links=args.trace_links)
    limit = parse_size(args.trace_max_size, "--trace-max-size")
    for result in recorded:
        if keep.ranks is not None and not keep.ranks & set(range(result.ranks)):
            raise SpecError(f"--trace-ranks {args.trace_ranks}: no rank of the "
                            f"{result.ranks} the call has")
        slices, nbytes = trace_size(result, result.network, keep)
        if keep.links is not None and slices == 0:
            raise SpecError(f"--trace-links {args.trace_links!r}: no link the transfers "
                            "cross matches it (see 'commsim topologies NAME --links')")
        if nbytes > limit:
            raise SpecError(
                f"--trace: the trace of {format_size(result.nbytes)} would hold {slices:,} "
                f"slices (about {nbytes / 1e6:,.0f} MB), more than --trace-max-size "
                f"{args.trace_max_size}: keep some ranks (--trace-ranks 0-7) or links "
                "(--trace-links PATTERN), or raise --trace-max-size")
    return keep


def cmd_run(args: argparse.Namespace) -> int:
    """``commsim run``: simulate each size, write the requested files, print table or JSON."""
    from commsim.api import simulate
    from commsim.errors import SpecError
    from commsim.export import write_trace, write_transfers_csv
    from commsim.table import format_healthy, format_table
    from commsim.topology import load_topology
    from commsim.topology.degrade import apply_what_if
    from commsim.units import parse_size_range

    if args.size is None and args.matrix is None:
        raise SpecError("the following arguments are required: --size/-s (or --matrix)")
    if args.size is not None and args.matrix is not None:
        raise SpecError("--matrix gives the sizes: drop --size")
    many = args.size is not None and ":" in args.size  # a range gives a list, even of one
    sizes: list[int | None] = (list(parse_size_range(args.size, "--size"))
                               if args.size is not None else [None])
    healthy_network = load_topology(args.topology)
    if args.what_if is not None:  # the healthy and the degraded call share their alike phases
        from commsim.engine.reuse import in_scope

        healthy_network = in_scope(healthy_network)
    network, what_if = (apply_what_if(healthy_network, args.what_if)
                        if args.what_if is not None else (healthy_network, None))

    def run_on(net: object) -> list[Any]:
        return [simulate(args.collective, net, nbytes, algorithm=args.algorithm,  # type: ignore[arg-type]
                         root=args.root, ranks=args.ranks, chunks=args.chunks,
                         engine=args.engine, protocol=args.protocol, matrix=args.matrix,
                         skew=args.skew)
                for nbytes in sizes]

    results = run_on(network)
    healthy = run_on(healthy_network) if what_if is not None else None
    # File outputs read the records of the same evaluations: they never change a time, and a
    # result without records (a call NCCL's composed estimate times) fails here, before anything
    # is written.
    if args.transfers or args.trace or (args.plot and not many):
        recorded = [r.with_records() for r in results]
        keep = _trace_keep(args, recorded) if args.trace is not None else None
        for result in recorded:
            if args.transfers is not None:
                write_transfers_csv(result, _per_size_path(args.transfers, result.nbytes, many))
            if args.trace is not None:
                write_trace(result, _per_size_path(args.trace, result.nbytes, many),
                            result.network, keep)
    if args.plot is not None:
        from commsim.plots import plot_busbw, plot_link_utilization

        if many:
            fig = plot_busbw(results, by="topology")
        else:
            fig = plot_link_utilization(recorded[0])  # on the network the DES used
        fig.savefig(args.plot, dpi=100, metadata={"Software": None})
    if args.json:
        rows = [r.to_dict() for r in results]
        if healthy is not None and what_if is not None:
            rows = [{**row, "what_if": what_if.name, "healthy": h.to_dict(),
                     "slowdown": r.time_s / h.time_s if h.time_s > 0 else None}
                    for row, r, h in zip(rows, results, healthy, strict=True)]
        print(json.dumps(rows if many else rows[0], indent=2))
    else:
        print(format_table(results, root=args.root))
        if healthy is not None and what_if is not None:
            print(format_healthy(healthy, results, what_if.name))
    return EXIT_OK


def _preset_row(preset: object) -> dict[str, object]:
    """A preset's listing entry: name, kind, ranks, description first, then anything else."""
    if dataclasses.is_dataclass(preset) and not isinstance(preset, type):
        data = dataclasses.asdict(preset)
    else:
        data = dict(preset)  # type: ignore[call-overload]
    first = ("name", "kind", "ranks", "description")
    return {k: data.get(k) for k in first} | {k: v for k, v in data.items() if k not in first}


def cmd_topologies(args: argparse.Namespace) -> int:
    """``commsim topologies``: the presets, as a table or a JSON list; with a name, that
    preset's YAML file (or its JSON object)."""
    from commsim.topology import list_presets
    from commsim.topology.preset_files import preset_text

    if args.links:
        from commsim.errors import SpecError
        from commsim.topology import load_topology
        from commsim.topology.degrade import link_labels

        if args.name is None:
            raise SpecError("--links: name a preset or a topology file")
        labels = link_labels(load_topology(args.name))
        print(json.dumps(labels, indent=2) if args.json else "\n".join(labels))
        return EXIT_OK
    if args.name is not None and not args.json:
        print(preset_text(args.name), end="")
        return EXIT_OK
    rows = [_preset_row(p) for p in list_presets()]
    if args.name is not None:
        preset_text(args.name)  # an unknown name: one line, exit 2
        print(json.dumps(next(r for r in rows if r["name"] == args.name), indent=2))
        return EXIT_OK
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    name_w = max([4] + [len(str(r["name"])) for r in rows])
    kind_w = max([4] + [len(str(r["kind"])) for r in rows])
    print(f"{'name':<{name_w}}  {'kind':<{kind_w}}  {'ranks':>6}  description")
    for r in rows:
        print(
            f"{r['name']!s:<{name_w}}  {r['kind']!s:<{kind_w}}  {r['ranks']!s:>6}  "
            f"{r['description'] or ''}"
        )
    return EXIT_OK


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
