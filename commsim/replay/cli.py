"""``commsim replay`` and ``commsim bound fsdp``: parse, load, one library call, print.

:func:`add_parsers` adds both subcommands to ``commsim``'s subparsers; their handlers return
the exit status and raise :class:`~commsim.errors.CommsimError` (one line, exit 2, printed by
``commsim.cli.main``) on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from commsim.cliargs import add_topology, check_output
from commsim.errors import SpecError

_REPLAY_EPILOG = """\
workload kinds: pipeline, ddp, fsdp, tensor, hybrid (see docs/replay.md for every key).
captured traces: a directory of PyTorch profiler traces (*.json, *.json.gz; one per rank) or
         one trace file replays the captured step; the output adds measured_step_time_s
         (see docs/traces.md).
metrics: overlap = communication hidden under compute / communication;
         idle = mean over ranks of (time not computing / step time).

examples:
  commsim replay ddp.yaml --topology dgx-h100x4
  commsim replay pipeline.yaml --topology ring.yaml --json
  commsim replay fsdp.yaml --topology dgx-h100x2 --trace step.json --plot step.png
  commsim replay traces/ --topology dgx-h100x2 --step all --json
"""

_BOUND_EPILOG = """\
evaluates  alpha log2(p) <= (B S f / C - b / beta) n
(f FLOPs and b bytes per parameter; f = b = 1 is the textbook form).

example:
  commsim bound fsdp --latency 1us --bandwidth 50GB/s --flops 1500e12 --batch 10 --seq 8000 \\
                     --params-per-layer 1e8 --ranks 64 --json
"""


def add_parsers(sub: Any) -> None:
    """Add ``replay`` and ``bound`` (with its ``fsdp`` subcommand) to ``sub``."""
    replay = sub.add_parser(
        "replay",
        help="replay a training step (DDP, FSDP, pipeline, tensor, hybrid) on a topology",
        description="Replay one training step of a workload on the simulated network and "
        "report step time, compute, communication, exposed communication, overlap and idle "
        "fractions, per rank and aggregated.",
        epilog=_REPLAY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument(
        "workload",
        metavar="WORKLOAD",
        help="a workload YAML file, or captured PyTorch profiler traces: a directory of "
        "per-rank *.json/*.json.gz files or one such file",
    )
    add_topology(replay)
    replay.add_argument(
        "--algorithm",
        "-a",
        default=None,
        metavar="NAME",
        help="every collective's algorithm (default: the workload's, else auto: what "
        "'commsim run' chooses for the same call)",
    )
    replay.add_argument(
        "--protocol",
        default=None,
        metavar="PROTOCOL",
        help="every collective's NCCL protocol: auto, none, LL, LL128 or Simple (default: the "
        "workload's, else auto)",
    )
    replay.add_argument("--json", action="store_true", help="print the result as JSON")
    replay.add_argument(
        "--trace",
        metavar="FILE.json",
        default=None,
        help="write a Chrome/Perfetto trace of the step (compute and comm tracks per rank)",
    )
    replay.add_argument(
        "--plot", metavar="FILE.png", default=None, help="save a Gantt chart of the step"
    )
    replay.add_argument(
        "--step",
        metavar="N|last|all",
        default=None,
        help="captured traces: which ProfilerStep#N to replay (default: the last one; 'all': "
        "every profiled step)",
    )
    replay.set_defaults(handler=run_replay)
    _add_bound_parser(sub)


def _add_bound_parser(sub: Any) -> None:
    """``bound`` with its ``fsdp`` subcommand."""
    bound = sub.add_parser(
        "bound",
        help="closed-form bounds (fsdp: is FSDP compute or communication bound?)",
        description="Closed-form bounds.",
    )
    kinds = bound.add_subparsers(dest="bound", metavar="BOUND", required=True)
    fsdp = kinds.add_parser(
        "fsdp",
        help="is a layer's all-gather hidden under its forward compute?",
        description="The FSDP compute-bound condition: a layer's forward compute against the "
        "next layer's log-depth all-gather.",
        epilog=_BOUND_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for flag, meta, text in (
        ("--latency", "TIME", "alpha: latency per all-gather step, e.g. 1us"),
        ("--bandwidth", "BW", "beta: bandwidth per rank, e.g. 50GB/s or 400Gbps"),
        ("--flops", "FLOP/S", "C: FLOP/s per GPU, e.g. 1500e12 or 989TFLOP/s"),
        ("--batch", "B", "sequences per batch"),
        ("--seq", "S", "tokens per sequence"),
        ("--params-per-layer", "N", "n: parameters per layer, e.g. 1e8 or 100M"),
        ("--ranks", "P", "p: ranks sharing the layer"),
    ):
        fsdp.add_argument(flag, required=True, metavar=meta, help=text)
    fsdp.add_argument(
        "--flops-per-param", default="1", metavar="F", help="f: FLOPs per parameter per token"
    )
    fsdp.add_argument(
        "--bytes-per-param", default="1", metavar="B", help="b: bytes per parameter gathered"
    )
    fsdp.add_argument("--json", action="store_true", help="print the result as JSON")
    fsdp.set_defaults(handler=run_bound)


def run_replay(args: argparse.Namespace) -> int:
    """``commsim replay``: replay the workload, write trace/plot if asked, print."""
    from commsim.replay.step import replay

    check_output("--trace", args.trace)
    check_output("--plot", args.plot, plot=True)
    workload: Any = args.workload
    from commsim.traces.replay import is_trace_path, load_trace_workload

    if is_trace_path(workload):
        workload = load_trace_workload(workload, args.step)
    elif args.step is not None:
        raise SpecError(f"--step {args.step}: only for captured traces, not {workload!r}")
    result = replay(workload, args.topology, algorithm=args.algorithm, protocol=args.protocol)
    if args.trace is not None:
        from commsim.replay.trace import write_step_trace

        write_step_trace(result, args.trace)
    if args.plot is not None:
        from commsim.replay.plot import save_step_plot

        save_step_plot(result, args.plot)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_step(result.to_dict()))
    warn_over_memory(result.metrics.peak_memory_bytes, args.topology)
    return 0


def warn_over_memory(peak: int | None, topology: Any) -> None:
    """A line on stderr when the step's peak memory exceeds the GPU memory of the topology's
    ``device:`` block (the step is still reported: the memory model may be pessimistic)."""
    from commsim.topology import load_topology
    from commsim.units import parse_size

    device = load_topology(topology).meta.get("device")
    if peak is None or not isinstance(device, dict) or "memory" not in device:
        return
    memory = parse_size(device["memory"], "device.memory")
    if peak > memory:
        print(f"commsim: warning: the step needs {peak / 2**30:.1f} GiB per GPU at its peak, "
              f"the {device.get('name', 'GPU')} has {memory / 2**30:.1f} GiB", file=sys.stderr)


def _ms(seconds: object) -> str:
    return f"{float(seconds) * 1e3:12.3f} ms"  # type: ignore[arg-type]


def format_step(out: dict[str, Any]) -> str:
    """A short text summary of a step's JSON object: the aggregates, then one line per rank."""
    lines = [
        f"# commsim replay {out['workload']}: topology {out['topology']}, {out['ranks']} ranks",
        f"step time          {_ms(out['step_time_s'])}",
        *(
            [f"measured step      {_ms(out['measured_step_time_s'])}  (captured trace)"]
            if "measured_step_time_s" in out
            else []
        ),
        f"compute            {_ms(out['compute_time_s'])}  (mean over ranks)",
        f"communication      {_ms(out['comm_time_s'])}  (mean over ranks)",
        f"exposed comm       {_ms(out['exposed_comm_s'])}  (mean over ranks)",
        f"overlap            {out['overlap_fraction'] * 100:12.1f} %",
        f"idle               {out['idle_fraction'] * 100:12.1f} %",
    ]
    if "peak_memory_bytes" in out:
        lines.append(f"peak memory        {out['peak_memory_bytes'] / 2**30:12.3f} GiB")
    if "idle_fraction_estimate" in out:
        lines.append(f"idle est. p/(p+k)  {out['idle_fraction_estimate'] * 100:12.1f} %")
        lines.append(f"(p-1)/(k+p-1)      {out['bubble_fraction'] * 100:12.1f} %")
    if "tokens_per_s" in out:
        lines.append(f"tokens/s           {out['tokens_per_s']:12.0f}")
        lines.append(f"model TFLOP/s/GPU  {out['model_tflops_per_gpu']:12.1f}")
        lines.append(f"MFU                {out['mfu'] * 100:12.1f} %")
    lines.append("#")
    lines.append("#  rank   step(ms)  compute(ms)  comm(ms)  exposed(ms)  overlap  idle")
    for r in out["per_rank"]:
        lines.append(
            f"{r['rank']:7d} {r['step_time_s'] * 1e3:10.3f} {r['compute_time_s'] * 1e3:12.3f} "
            f"{r['comm_time_s'] * 1e3:9.3f} {r['exposed_comm_s'] * 1e3:12.3f} "
            f"{r['overlap_fraction']:8.3f} {r['idle_fraction']:5.3f}"
        )
    return "\n".join(lines)


def _positive_int(value: str, flag: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise SpecError(f"{flag}: must be a positive integer, got {value!r}") from None
    if number < 1:
        raise SpecError(f"{flag}: must be a positive integer, got {value!r}")
    return number


def _positive_float(value: str, flag: str) -> float:
    from commsim.units import parse_count

    number = parse_count(value, flag)
    if number <= 0:
        raise SpecError(f"{flag}: must be > 0, got {value!r}")
    return number


def run_bound(args: argparse.Namespace) -> int:
    """``commsim bound fsdp``: evaluate the bound and print it."""
    from commsim.bound import fsdp_bound
    from commsim.units import parse_bandwidth, parse_flops, parse_time

    result = fsdp_bound(
        latency_s=parse_time(args.latency, "--latency"),
        bandwidth_Bps=parse_bandwidth(args.bandwidth, "--bandwidth"),
        flops=parse_flops(args.flops, "--flops"),
        batch=_positive_int(args.batch, "--batch"),
        seq=_positive_int(args.seq, "--seq"),
        params_per_layer=_positive_float(args.params_per_layer, "--params-per-layer"),
        ranks=_positive_int(args.ranks, "--ranks"),
        flops_per_param=_positive_float(args.flops_per_param, "--flops-per-param"),
        bytes_per_param=_positive_float(args.bytes_per_param, "--bytes-per-param"),
    )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    verdict = "communication bound" if result.comm_bound else "compute bound"
    log2p = result.max_log2_ranks
    print(
        "\n".join(
            [
                "# commsim bound fsdp: alpha log2(p) <= (B S f / C - b / beta) n",
                f"lhs  alpha log2(p)         {result.lhs_s * 1e6:14.3f} us",
                f"rhs  (B S f/C - b/beta) n  {result.rhs_s * 1e6:14.3f} us",
                f"verdict                    {verdict}",
                f"min batch                  {result.min_batch:14d}",
                "max log2 ranks             " + ("none" if log2p is None else f"{log2p:14d}"),
            ]
        )
    )
    return 0
