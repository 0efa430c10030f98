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

from commsim.cliargs import add_topology, add_what_if, check_output
from commsim.errors import SpecError

_REPLAY_EPILOG = """\
workload kinds: pipeline, ddp, fsdp, tensor, hybrid (see docs/replay.md for every key).
hybrid without compute: is the planner's description (a model file's keys, parallel.ep,
         stack), timed by the topology's device: block; `commsim plan --write-workload K
         FILE` writes one.
captured traces: a directory of PyTorch profiler traces (*.json, *.json.gz; one per rank) or
         one trace file replays the captured step; the output adds measured_step_time_s
         (see docs/traces.md).
metrics: overlap = communication hidden under compute / communication;
         idle = mean over ranks of (time not computing / step time);
         wait (--json: wait_s per rank, wait_time_s their mean) = time a rank only waits
         for others to reach a collective or to send what it receives.

examples:
  commsim replay ddp.yaml --topology dgx-h100x4
  commsim replay pipeline.yaml --topology ring.yaml --json
  commsim replay fsdp.yaml --topology dgx-h100x2 --trace step.json --plot step.png
  commsim replay traces/ --topology dgx-h100x2 --step all --json
  commsim replay ddp.yaml --topology dgx-h100x4 --what-if slow-rank.yaml
  commsim replay best.yaml --topology dgx-h100x2 --trace best.json   # from plan --write-workload
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
    add_what_if(replay)
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
        "--no-fold",
        dest="fold",
        action="store_false",
        help="hybrid: simulate every data-parallel replica, even where they are images of one "
        "another (by default one block of replicas is simulated for all, exactly; its tasks "
        "alone are in --trace and --plot)",
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
    else:
        workload = _planned(workload, args.topology)
    result = replay(workload, args.topology, algorithm=args.algorithm, protocol=args.protocol,
                    what_if=args.what_if, fold=args.fold)
    healthy = None
    if result.what_if is not None:
        healthy = replay(workload, args.topology, algorithm=args.algorithm,
                         protocol=args.protocol, fold=args.fold)
    if args.trace is not None:
        from commsim.replay.trace import write_step_trace

        write_step_trace(result, args.trace)
    if args.plot is not None:
        from commsim.replay.plot import save_step_plot

        save_step_plot(result, args.plot)
    if args.json:
        print(json.dumps(what_if_dict(result, healthy), indent=2))
    elif healthy is None:
        print(format_step(result.to_dict()))
    else:
        print(format_what_if(result, healthy))
    warn_over_memory(result.metrics.peak_memory_bytes, args.topology)
    return 0


def _planned(workload: str, topology: Any) -> Any:
    """A ``hybrid`` workload in the planner's description (no flat ``compute:``) as the
    replay's spec, timed by the topology's device (:mod:`commsim.plan.workload`); any other
    workload file unchanged."""
    from pathlib import Path

    from commsim.plan.workload import is_planned, replay_workload
    from commsim.replay import fields

    if not Path(workload).is_file():
        return workload
    try:
        data = fields.read_yaml(workload)
    except SpecError:
        return workload  # replay reports it
    return replay_workload(workload, topology) if is_planned(data) else workload


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


def what_if_dict(result: Any, healthy: Any) -> dict[str, Any]:
    """``--json``'s object: the step's keys; under a what-if also ``what_if`` (its name),
    ``compute_factors`` (per rank; under slow ranks or jitter), ``healthy`` (the same keys on
    the healthy machine) and ``slowdown`` (step time over the healthy one's)."""
    out = result.to_dict()
    if healthy is None or result.what_if is None:
        return out
    out["what_if"] = result.what_if.name
    if result.compute_factors is not None:
        out["compute_factors"] = list(result.compute_factors)
    out["healthy"] = healthy.to_dict()
    out["slowdown"] = (result.step_time_s / healthy.step_time_s
                       if healthy.step_time_s > 0 else None)
    return out


def format_what_if(result: Any, healthy: Any) -> str:
    """The step under a what-if (with each rank's wait and compute factor), then the
    healthy step's aggregates and how much slower the what-if makes it."""
    out, base = result.to_dict(), healthy.to_dict()
    name = result.what_if.name
    factors = result.compute_factors or (1.0,) * len(out["per_rank"])
    lines = format_step(out, factors).split("\n")
    lines[0] += f", what-if {name!r}"
    lines.append(f"# the healthy machine (without what-if {name!r}):")
    lines.extend(_aggregates(base)[1:])
    if healthy.step_time_s > 0:
        lines.append(f"# step time: {result.step_time_s / healthy.step_time_s:.3f}x the healthy "
                     "step")
    return "\n".join(lines)


def _ms(seconds: object) -> str:
    return f"{float(seconds) * 1e3:12.3f} ms"  # type: ignore[arg-type]


def format_step(out: dict[str, Any], factors: Any = None) -> str:
    """A short text summary of a step's JSON object: the aggregates, then one line per rank
    (``factors``, each rank's compute factor under a what-if: with the ranks' waits too)."""
    lines = _aggregates(out, factors is not None)
    lines.append("#")
    head = "#  rank   step(ms)  compute(ms)  comm(ms)  exposed(ms)  overlap  idle"
    lines.append(head + ("  wait(ms)  factor" if factors is not None else ""))
    for r in out["per_rank"]:
        line = (
            f"{r['rank']:7d} {r['step_time_s'] * 1e3:10.3f} {r['compute_time_s'] * 1e3:12.3f} "
            f"{r['comm_time_s'] * 1e3:9.3f} {r['exposed_comm_s'] * 1e3:12.3f} "
            f"{r['overlap_fraction']:8.3f} {r['idle_fraction']:5.3f}"
        )
        if factors is not None:
            line += f" {r['wait_s'] * 1e3:9.3f} {factors[r['rank']]:7.3f}"
        lines.append(line)
    return "\n".join(lines)


def _aggregates(out: dict[str, Any], wait: bool = True) -> list[str]:
    """The heading and the aggregate lines of a step's JSON object (``wait``: with the mean
    wait for other ranks)."""
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
    if wait and "wait_time_s" in out:
        lines.append(f"wait for others    {_ms(out['wait_time_s'])}  (mean over ranks)")
    fold = out.get("replica_fold")
    if fold and "reason" not in fold:
        lines.append(f"replicas folded    {fold['replicas']:>7} -> {fold['simulated']}  "
                     "(one block simulated for all: exact)")
    return lines


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
