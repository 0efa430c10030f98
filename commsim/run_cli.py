"""``commsim run COLLECTIVE``: its parser and the command (one library call per size, then
the table or JSON, and the files asked for). :mod:`commsim.cli` dispatches to it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

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


def add_parser(sub: Any) -> None:
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


def _per_size_path(path: str, nbytes: int, many: bool) -> Path:
    """``t.json`` for one size; ``t-1KiB.json`` for each size of a range."""
    from commsim.units import format_size

    out = Path(path)
    if not many:
        return out
    return out.with_name(f"{out.stem}-{format_size(nbytes)}{out.suffix}")


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
    return 0
