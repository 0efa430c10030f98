"""``commsim validate`` and ``commsim calibrate``: parse, load, one library call, print.

:func:`add_parsers` adds both subcommands to ``commsim``'s subparsers. Their inputs are an
nccl-tests log (``validate nccl-tests LOG``) or a measurements CSV (``validate FILE.csv``); a
bare file is recognised by its content. Errors are :class:`~commsim.errors.CommsimError`
(one line, exit 2, printed by ``commsim.cli.main``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commsim.cliargs import add_topology, check_output
from commsim.errors import ParseError, SpecError

_VALIDATE_EPILOG = """\
inputs: an nccl-tests log (text or -J JSON, any version since 2019; the collective and rank
        count are inferred, --collective/--ranks override; a log of several runs, one test
        after another, gives every run's rows) or a measurements CSV with columns
        collective,ranks,nbytes,time_s (what 'commsim measure' writes).
filters: --sizes 64KiB,1MiB keeps those sizes (MIN:MAX keeps a range); --collectives
        all_reduce,broadcast keeps those collectives; on a CSV --collective/--ranks filter too.
algorithm: nccl-tests logs are predicted the way NCCL runs them (--algorithm nccl: ring, tree or
        hierarchical for all_reduce, ring otherwise, each with NCCL's LL/LL128/Simple protocols,
        the fastest); CSVs with auto (the topology's algorithms: mapping, else the fastest).
engine: des (default) predicts each row exactly as 'commsim run' times it; auto simulates calls
        of up to 64 ranks with the DES and larger ones with the closed forms; each row says which.
diagnose: --diagnose (nccl-tests logs) also times the log on faulty variants of the topology
        (p2p-off, nvlink-unused, fewer-nics, slow-nics, socket, nvls-off, host-launch), ranks
        them by median |error| and says which explains the log, or healthy.

examples:
  commsim validate nccl-tests all_reduce.log --topology dgx-h100x2 --plot ar.png
  commsim validate m.csv --topology fitted.yaml --sizes 64KiB:1MiB --json
  commsim validate nccl-tests slow.log --topology dgx-h100x2 --placement log --diagnose
"""

_CALIBRATE_EPILOG = """\
fits latency and bandwidth per link class (one class on one host; intra and inter when the
ranks span several hosts of --topology or of the log's device lines) by least squares on
log(predicted/measured), and writes a topology YAML whose header says what was fitted.

examples:
  commsim calibrate m.csv --out cpu.yaml --sizes 1KiB,64KiB,4MiB
  commsim calibrate nccl-tests ar.log --topology dgx-h100x2 --out fitted.yaml
"""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="[nccl-tests] FILE",
        help="'nccl-tests LOG' for an nccl-tests log, or a measurements CSV",
    )
    parser.add_argument(
        "--collective",
        default=None,
        metavar="NAME",
        help="nccl-tests: the collective the log measured (default: inferred); "
        "CSV: keep only this collective",
    )
    parser.add_argument(
        "--ranks",
        type=int,
        default=None,
        metavar="R",
        help="nccl-tests: the rank count (default: inferred); CSV: keep only this world size",
    )
    parser.add_argument(
        "--sizes", default=None, metavar="LIST", help="keep these sizes: 64KiB,1MiB or MIN:MAX"
    )
    parser.add_argument(
        "--collectives",
        default=None,
        metavar="LIST",
        help="keep these collectives: all_reduce,broadcast",
    )
    parser.add_argument(
        "--algorithm",
        "-a",
        default=None,
        metavar="NAME",
        help="how to predict: 'nccl' (NCCL's algorithms and LL/LL128/Simple protocols, the "
        "fastest; default for nccl-tests logs), 'auto' (the topology's mapping, else the "
        "fastest of all; default for CSVs), an algorithm name, or ALGORITHM/PROTOCOL as run "
        "prints it (ring/LL128)",
    )
    parser.add_argument(
        "--protocol",
        default=None,
        metavar="PROTO",
        help="restrict NCCL's choice to one protocol, LL, LL128 or Simple; 'auto' for NCCL's "
        "choice among all; 'none' for plain alpha-beta (default: the one protocol a log's "
        "printed NCCL_PROTO allows, else auto; an ALGORITHM/PROTOCOL --algorithm wins)",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "des", "analytic"),
        default=None,
        help="des (validate's default: as 'commsim run'), analytic, or auto (calibrate's "
        "default: DES up to 64 ranks, closed forms beyond)",
    )
    parser.add_argument(
        "--placement",
        choices=("first", "log"),
        default="first",
        help="where a log's ranks run on the topology: 'first' (its first R ranks, filling "
        "nodes in order; the default) or 'log' (on its hosts as the log's device lines "
        "place them: one GPU on each of two nodes crosses the network)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--partial",
        action="store_true",
        help="accept a truncated or corrupted nccl-tests log: use the rows that parse "
        "(stderr says how many)",
    )


def add_parsers(sub: Any) -> None:
    """Add ``validate`` and ``calibrate`` to ``commsim``'s subparsers ``sub``."""
    validate = sub.add_parser(
        "validate",
        help="compare predictions with measurements (nccl-tests log or measurements CSV)",
        description="Predict every measured row on a topology and report the signed error "
        "per row and the median |error| (overall, below and above 1 MiB).",
        epilog=_VALIDATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(validate)
    add_topology(validate)
    validate.add_argument(
        "--plot", metavar="FILE.png", default=None, help="plot measured vs predicted busbw"
    )
    validate.add_argument(
        "--diagnose",
        action="store_true",
        help="nccl-tests logs: also rank faulty variants of the topology (causes) by how "
        "well each explains the log, beside the topology as it is (healthy)",
    )
    validate.add_argument("--quiet", "-q", action="store_true",
                          help="no progress bar on stderr (--diagnose)")
    validate.set_defaults(handler=cmd_validate)

    calibrate = sub.add_parser(
        "calibrate",
        help="fit a topology's latencies and bandwidths to measurements",
        description="Fit latency and bandwidth per link class (and, on a topology that runs "
        "NCCL, the floor's overhead and host time per GPU) to a measurements CSV or an "
        "nccl-tests log and write a topology YAML that run, replay and validate accept.",
        epilog=_CALIBRATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(calibrate)
    calibrate.add_argument(
        "--out", "-o", required=True, metavar="FILE.yaml", help="where to write the topology"
    )
    add_topology(
        calibrate,
        required=False,
        metavar="TEMPLATE",
        help="a topology (preset or file) whose structure is kept and whose link classes "
        "are fitted (default: a switch, or hierarchical for a multi-host log)",
    )
    calibrate.add_argument("--quiet", "-q", action="store_true", help="no progress bar on stderr")
    calibrate.add_argument(
        "--fit-gamma", action="store_true", help="also fit gamma (seconds per byte reduced)"
    )
    calibrate.set_defaults(handler=cmd_calibrate)


# -- loading -------------------------------------------------------------------------------
@dataclass(slots=True)
class _Loaded:
    rows: list[Any]
    source: str
    notes: list[str]
    hosts: tuple[int, ...] | None
    partial: str = ""  # the --partial line, printed once the command has succeeded
    gpus_per_thread: int | None = None  # the log's nGpus (nccl-tests -g), when all runs agree
    nccl_version: str | None = None  # the NCCL release the log prints, when all runs agree
    protocol: str = "auto"  # the one protocol the log's NCCL_PROTO allows, when all runs agree
    kind: str = "nccl-tests"  # or "csv"


def _looks_like_csv(path: Path) -> bool:
    """True when the first non-comment line holds the measurement columns."""
    from commsim.validation.measurements import MEASUREMENT_COLUMNS

    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.strip() and not line.lstrip().startswith("#"):
                    names = {name.strip() for name in line.split(",")}
                    return all(c in names for c in MEASUREMENT_COLUMNS)
    except FileNotFoundError:
        raise ParseError(f"{path}: no such file") from None
    except OSError as exc:
        raise ParseError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return False


def _load(args: argparse.Namespace) -> _Loaded:
    """The measured rows the positional inputs and the filters select."""
    from commsim.collectives import parse_collective
    from commsim.validation.measurements import (
        filter_rows,
        parse_collectives_flag,
        parse_sizes_flag,
        read_measurements,
    )
    inputs = list(args.inputs)
    kind = None
    if inputs[0] in ("nccl-tests", "nccl_tests", "measurements", "csv"):
        kind = "nccl-tests" if inputs[0].startswith("nccl") else "csv"
        inputs = inputs[1:]
    if len(inputs) != 1:
        raise SpecError(
            f"expected one input file, got {len(inputs)} (usage: 'nccl-tests LOG' or 'FILE.csv')"
        )
    path = Path(inputs[0])
    if kind is None:
        kind = "csv" if _looks_like_csv(path) else "nccl-tests"
    if args.ranks is not None and args.ranks < 1:
        raise SpecError(f"--ranks must be >= 1, got {args.ranks}")
    notes: list[str] = []
    hosts = None
    partial = ""
    gpus = version = None
    protocol = "auto"
    if kind == "nccl-tests":
        rows, notes, hosts, partial, (gpus, version, protocol) = _load_log(path, args)
    else:
        if args.partial:
            raise SpecError(f"--partial: only for nccl-tests logs, not the CSV {str(path)!r}")
        rows = read_measurements(path)
        if args.collective is not None:
            rows = filter_rows(rows, collectives=[parse_collective(args.collective)])
            _nonempty(rows, f"--collective {args.collective}")
        if args.ranks is not None:
            rows = filter_rows(rows, ranks=[args.ranks])
            _nonempty(rows, f"--ranks {args.ranks}")
    if args.sizes is not None:
        rows = filter_rows(rows, sizes=parse_sizes_flag(args.sizes))
        _nonempty(rows, f"--sizes {args.sizes}")
    if args.collectives is not None:
        rows = filter_rows(rows, collectives=parse_collectives_flag(args.collectives))
        _nonempty(rows, f"--collectives {args.collectives}")
    if args.algorithm is None:
        args.algorithm = "nccl" if kind == "nccl-tests" else "auto"
    if args.protocol is not None:
        from commsim.timing import canonical_protocol

        protocol = canonical_protocol(args.protocol)
    return _Loaded(rows=rows, source=str(path), notes=notes, hosts=hosts, partial=partial,
                   gpus_per_thread=gpus, nccl_version=version, protocol=protocol, kind=kind)


def _load_log(
    path: Path, args: argparse.Namespace
) -> tuple[list[Any], list[str], tuple[int, ...] | None, str,
           tuple[int | None, str | None, str]]:
    """(rows, notes, hosts, the --partial line, (GPUs per host thread, NCCL release, the one
    protocol NCCL_PROTO allows)) of an nccl-tests log of one or several runs (each run
    inferred on its own; ``--collectives`` then picks among them)."""
    from commsim.validation.nccl_runs import how_driven, parse_nccl_tests_runs, split_runs
    from commsim.validation.nccl_tests import parse_nccl_tests, read_text

    text, source = read_text(path), str(path)
    if len(split_runs(text)) == 1:
        logs: tuple[Any, ...] = (parse_nccl_tests(
            text, source, collective=args.collective, ranks=args.ranks, partial=args.partial
        ),)
    elif args.collective is not None or args.ranks is not None:
        raise SpecError(
            f"{path}: several nccl-tests runs in one log; --collective/--ranks apply to one "
            "run (pick runs with --collectives)"
        )
    else:
        logs = parse_nccl_tests_runs(text, source, partial=args.partial)
    rows = [row for log in logs for row in log.measurements()]
    notes = [f"{log.collective.value}, {log.ranks} ranks; " + "; ".join(log.notes) for log in logs]
    partial = ""
    if args.partial:
        damage = "; ".join(log.damage for log in logs if log.damage)
        damage = f": {damage}" if damage else " (the log is complete)"
        count = sum(len(log.rows) for log in logs)
        partial = f"commsim: --partial: read {count} rows of {path}{damage}"
    hosts = {log.host_indices() for log in logs}
    protocols = {log.protocol for log in logs}
    if len(protocols) > 1:
        notes.append(f"runs differ in NCCL_PROTO ({', '.join(sorted(protocols))}): not applied")
    if not rows:
        raise ParseError(f"{path}: no row with a size > 0")
    return (rows, notes, hosts.pop() if len(hosts) == 1 else None, partial, how_driven(logs))


def _nonempty(rows: list[Any], flag: str) -> None:
    if not rows:
        raise SpecError(f"{flag}: no measured row left")


# -- commands ------------------------------------------------------------------------------
def cmd_validate(args: argparse.Namespace) -> int:
    """``commsim validate``: predict each row, print the table (or JSON), plot if asked; with
    ``--diagnose``, the ranked causes after it."""
    from commsim.validation.validate import format_report, validate

    check_output("--plot", args.plot, plot=True)
    loaded = _load(args)
    if args.diagnose and loaded.kind != "nccl-tests":
        raise SpecError(f"--diagnose: only for nccl-tests logs (its causes are faults of a "
                        f"machine running NCCL), not the CSV {loaded.source!r}")
    settings: dict[str, Any] = dict(
        algorithm=args.algorithm, engine=args.engine or "des", source=loaded.source,
        notes=loaded.notes, gpus_per_thread=loaded.gpus_per_thread,
        nccl_version=loaded.nccl_version, protocol=loaded.protocol, hosts=loaded.hosts,
        placement=args.placement)
    diagnosis = _diagnose(loaded, args, settings) if args.diagnose else None
    report = diagnosis.healthy.report if diagnosis else validate(loaded.rows, args.topology,
                                                                 **settings)
    if args.plot is not None:
        from commsim.validation.plot import save_plot

        save_plot(report, args.plot, title=Path(loaded.source).name)
    if args.json:
        out = report.to_dict()
        if diagnosis is not None:
            out["verdict"] = diagnosis.verdict
            out["causes"] = [{"cause": c.cause, "level": c.level or None,
                              "changed_rows": c.changed_rows,
                              "changed_median_abs_error_pct": c.changed_pct,
                              "healthy_changed_median_abs_error_pct": c.healthy_changed_pct}
                             for c in diagnosis.causes]
            out["diagnosis"] = [f.to_dict() for f in diagnosis.findings]
            out["not_applicable"] = {name: why for name, why in diagnosis.skipped}
        print(json.dumps(out, indent=2))
    else:
        print(format_report(report))
        if diagnosis is not None:
            from commsim.validation.diagnose import format_diagnosis

            print(format_diagnosis(diagnosis))
    _say_partial(loaded)
    return 0


def _diagnose(loaded: _Loaded, args: argparse.Namespace, settings: dict[str, Any]) -> Any:
    """The diagnosis of the loaded log, with a progress bar (on a terminal, unless -q)."""
    from commsim.progress import Progress
    from commsim.validation.diagnose import diagnose

    bar = Progress("diagnose", "variant", enabled=not args.quiet)
    try:
        return diagnose(loaded.rows, args.topology, progress=bar.update_to, **settings)
    finally:
        bar.close()


def _say_partial(loaded: _Loaded) -> None:
    """The one stderr line of ``--partial``, once the command has succeeded."""
    if loaded.partial:
        print(loaded.partial, file=sys.stderr)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``commsim calibrate``: fit, write the topology, print what was fitted (or JSON)."""
    from commsim.measure.calibrate import calibrate_cpu, is_cpu_measurement
    from commsim.validation.calibrate import calibrate
    from commsim.validation.calibration import write_topology
    from commsim.validation.measurements import parse_collectives_flag, parse_sizes_flag

    check_output("--out", args.out)
    loaded = _load(args)
    if args.topology is None and is_cpu_measurement(loaded.source):
        # gloo on one host: fit the shared-medium CPU model (commsim.measure.cpu_model)
        calibration = calibrate_cpu(
            loaded.source,
            sizes=parse_sizes_flag(args.sizes) if args.sizes is not None else None,
            collectives=(
                parse_collectives_flag(args.collectives) if args.collectives is not None else None
            ),
        )
        write_topology(calibration, args.out)
        return _print_calibration(args, calibration, loaded)
    from commsim.progress import Progress

    bar = Progress("calibrate", "iteration", enabled=not args.quiet)
    try:
        calibration = calibrate(
            loaded.rows,
            args.topology,
            hosts=loaded.hosts,
            fit_gamma=args.fit_gamma,
            algorithm=args.algorithm,
            engine=args.engine or "auto",
            source=loaded.source,
            progress=bar.update_to,
            placement=args.placement,
            gpus_per_thread=loaded.gpus_per_thread,
            nccl_version=loaded.nccl_version,
            protocol=loaded.protocol,
        )
    finally:
        bar.close()
    write_topology(calibration, args.out)
    return _print_calibration(args, calibration, loaded)


def _print_calibration(args: argparse.Namespace, calibration: Any, loaded: _Loaded) -> int:
    for bound in getattr(calibration, "at_bounds", ()):
        print(f"commsim: warning: {bound.message}", file=sys.stderr)
    if args.json:
        print(json.dumps(calibration.to_dict() | {"out": args.out}, indent=2))
    else:
        for line in calibration.header():
            print(f"# {line}")
        print(f"# wrote {args.out}")
    sys.stdout.flush()
    _say_partial(loaded)
    return 0
