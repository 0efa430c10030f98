"""``commsim measure``: parse, one library call (:func:`commsim.measure.measure`), write, print.

torch is imported only once the command runs, so ``commsim --help`` stays fast and works
without it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from commsim.cliargs import check_output
from commsim.errors import SpecError

_EPILOG = """\
sizes:   bytes of the full buffer as nccl-tests counts them (all_gather: the gathered output,
         reduce_scatter: the unreduced input), float32; a range MIN:MAX[:FACTOR] (factor 2 by
         default) or a comma list (64KiB,1MiB,16MiB). Rounded down to a multiple of
         4 x world size bytes; the CSV gives the bytes used.
timing:  after --warmups untimed calls, each of --iterations timed iterations waits at a barrier,
         then times --batch calls back to back; an iteration's time is their mean on the
         slowest rank, a row's time_s the median over iterations (with p10/p90/min/max).
         --rounds spreads a row's iterations over that many sweeps of the whole plan, --passes
         over that many launches of every world size, so a slow spell of a busy machine
         hits every row a little instead of some rows entirely.
collectives: broadcast, reduce, all_gather, reduce_scatter, all_reduce and sendrecv (ping-pong
         between ranks 0 and 1; time_s is one way, half the round trip). Default: all six.

examples:
  commsim measure --backend gloo --world-size 2,4 --collectives all_reduce,all_gather \\
                  --sizes 1KiB:16MiB --out m.csv
  commsim calibrate m.csv --out host.yaml
  commsim validate m.csv --topology host.yaml
"""


def add_parser(sub: Any) -> None:
    """Add ``measure`` to ``commsim``'s subparsers ``sub``."""
    measure = sub.add_parser(
        "measure",
        help="time real torch.distributed collectives (gloo on CPU, nccl on GPUs)",
        description="Launch WORLD_SIZE processes on this machine (127.0.0.1), time real "
        "torch.distributed collectives over a size range and write one CSV row per "
        "(collective, world size, size).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    measure.add_argument(
        "--backend", default="gloo", metavar="NAME", help="gloo (CPU, default) or nccl (GPUs)"
    )
    measure.add_argument(
        "--world-size",
        "-n",
        default="2",
        metavar="N[,N...]",
        help="processes per run, one launch each, e.g. 2,4 (default 2)",
    )
    measure.add_argument(
        "--collectives",
        "-c",
        default=None,
        metavar="NAME[,NAME...]",
        help="which to time (default: all five and sendrecv)",
    )
    measure.add_argument(
        "--sizes",
        "-s",
        default="64KiB:16MiB",
        metavar="SIZES",
        help="MIN:MAX[:FACTOR] or a comma list (default 64KiB:16MiB)",
    )
    measure.add_argument(
        "--out", "-o", default=None, metavar="FILE.csv", help="write the CSV here (default stdout)"
    )
    measure.add_argument("--iterations", type=int, default=20, metavar="N", help="default 20")
    measure.add_argument("--warmups", type=int, default=2, metavar="N", help="default 2")
    measure.add_argument(
        "--batch", type=int, default=4, metavar="N", help="calls per timed iteration (default 4)"
    )
    measure.add_argument(
        "--rounds", type=int, default=4, metavar="N", help="sweeps of the plan (default 4)"
    )
    measure.add_argument(
        "--passes", type=int, default=1, metavar="N", help="launches per world size (default 1)"
    )
    measure.add_argument(
        "--port", type=int, default=None, metavar="PORT", help="rendezvous port (default: free)"
    )
    measure.add_argument(
        "--init-timeout",
        default="60s",
        metavar="TIME",
        help="init_process_group and per-collective timeout (default 60s)",
    )
    measure.add_argument(
        "--timeout",
        default="600s",
        metavar="TIME",
        help="wall-clock limit per launch, start-up included (default 600s)",
    )
    measure.add_argument("--quiet", "-q", action="store_true", help="no progress bar on stderr")
    measure.set_defaults(handler=cmd_measure)


def parse_world_sizes(text: str) -> tuple[int, ...]:
    """``"2,4"`` -> ``(2, 4)``; SpecError naming the bad item.

    >>> parse_world_sizes("2, 4")
    (2, 4)
    """
    out = []
    for item in str(text).split(","):
        item = item.strip()
        try:
            value = int(item)
        except ValueError:
            raise SpecError(f"--world-size: invalid world size {item!r}") from None
        if value < 1:
            raise SpecError(f"--world-size: must be >= 1, got {value}")
        out.append(value)
    return tuple(out)


def parse_sizes(text: str) -> tuple[int, ...]:
    """A range ``MIN:MAX[:FACTOR]`` or a comma list of sizes and ranges, sorted, no repeats.

    >>> parse_sizes("1MiB,64KiB:256KiB")
    (65536, 131072, 262144, 1048576)
    """
    from commsim.units import parse_size_range

    sizes: set[int] = set()
    for item in str(text).split(","):
        if not item.strip():
            raise SpecError(f"--sizes: empty item in {text!r}")
        sizes.update(parse_size_range(item.strip(), "--sizes"))
    return tuple(sorted(sizes))


def parse_collectives(text: str | None) -> tuple[str, ...]:
    """Collective names (any spelling ``commsim run`` accepts) and ``sendrecv``, in the order
    :data:`commsim.measure.COLLECTIVES` lists them.

    >>> parse_collectives("allreduce,sendrecv,broadcast")
    ('broadcast', 'all_reduce', 'sendrecv')
    """
    from commsim.collectives import parse_collective
    from commsim.measure.launcher import COLLECTIVES

    if text is None:
        return COLLECTIVES
    wanted = set()
    for item in str(text).split(","):
        name = item.strip().lower().replace("-", "_")
        if name in ("sendrecv", "send_recv", "pingpong", "ping_pong"):
            wanted.add("sendrecv")
            continue
        try:
            value = parse_collective(name).value
        except SpecError:
            value = ""
        if value not in COLLECTIVES:  # all_to_all is named but not measured
            known = ", ".join(COLLECTIVES)
            raise SpecError(f"--collectives: unknown collective {item!r} (known: {known})")
        wanted.add(value)
    return tuple(name for name in COLLECTIVES if name in wanted)


def cmd_measure(args: argparse.Namespace) -> int:
    """``commsim measure``: launch, time, write the CSV (or print it), print a summary."""
    from commsim.measure.launcher import MeasureSpec, measure
    from commsim.measure.progress import ProgressBar
    from commsim.measure.table import format_table
    from commsim.measurements import format_csv, write_csv
    from commsim.units import parse_time

    check_output("--out", args.out)
    spec = MeasureSpec(
        backend=str(args.backend).strip().lower(),
        world_sizes=parse_world_sizes(args.world_size),
        collectives=parse_collectives(args.collectives),
        sizes=parse_sizes(args.sizes),
        iterations=args.iterations,
        warmups=args.warmups,
        batch=args.batch,
        rounds=args.rounds,
        passes=args.passes,
        port=args.port,
        init_timeout_s=parse_time(args.init_timeout, "--init-timeout"),
        timeout_s=parse_time(args.timeout, "--timeout"),
    )
    bar = ProgressBar(sys.stderr, enabled=not args.quiet)
    try:
        rows = measure(spec, bar)
    finally:
        bar.close()
    if args.out is None:
        sys.stdout.write(format_csv(rows))
    else:
        write_csv(rows, args.out)
        print(format_table(rows))
        print(f"# wrote {args.out}")
    sys.stdout.flush()
    return 0
