"""``commsim goodput``: parse the flags into a :class:`GoodputSpec`, analyse, print.

Bad input raises :class:`~commsim.errors.SpecError` naming the flag, which ``commsim.cli.main``
prints on one line with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from commsim.errors import SpecError
from commsim.goodput.analyse import Analysis, Policy, analyse
from commsim.goodput.checkpoint import model_checkpoint_bytes
from commsim.goodput.spec import GoodputSpec
from commsim.goodput.step import Step, elastic_step, planned_step, replayed_step
from commsim.plan.memory import DATA_PARALLEL
from commsim.units import parse_bandwidth, parse_count, parse_size, parse_time

HELP = "expected fraction of wall time that trains under failures, and the best checkpoint interval"

_EPILOG = """\
The closed form is Daly's exact expectation for Poisson failures (docs/goodput.md); --simulate
runs that many seeded SimPy runs of the same model and prints their mean with a 95% CI.
Defaults: 2e-5 failures per GPU-hour (Llama 3: 419 unexpected interruptions in 54 days on
16,384 GPUs), 10 min restart, 100 GB/s storage, 25 GB/s per writer, sharded writes.

examples:
  commsim goodput --gpus 16384 --step-time 5.5s --checkpoint-bytes 2TB
  commsim goodput --gpus 16384 --step-time 5.5s --model llama3-405b --async --simulate 1000
  commsim goodput --gpus 1024 --step-time 2s --model llama3-70b --data-parallel ddp --rank0 \\
      --tokens 2T --tokens-per-step 4M --json
  commsim goodput --gpus 512 --step-time 3s --checkpoint-bytes 1TB --elastic --spare-wait 2h
"""


def add_parser(sub: Any) -> None:
    """Add ``goodput`` to ``commsim``'s subparsers."""
    p = sub.add_parser("goodput", help=HELP, epilog=_EPILOG,
                       description="The expected fraction of wall time that trains on a machine "
                       "that fails, the wall time to train N tokens, and the best checkpoint "
                       "interval: in closed form, and by simulating seeded runs.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", metavar="N", help="GPUs of the job (required)")
    p.add_argument("--gpus-per-node", metavar="N", default="8", help="GPUs per node (default 8)")
    p.add_argument("--step-time", metavar="TIME", help="one training step, e.g. 5.5s (or from "
                   "--workload, or from --model with --topology and --global-batch)")
    p.add_argument("--topology", "-t", metavar="FILE|PRESET", help="with --model and "
                   "--global-batch: the step of plan's fastest configuration on --gpus GPUs of "
                   "it (and, with --elastic, on a node fewer); with --workload: its replay")
    p.add_argument("--global-batch", metavar="B", help="sequences per step, for the plan")
    p.add_argument("--workload", metavar="FILE", help="a replay workload: its step time on "
                   "--topology")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--checkpoint-bytes", metavar="SIZE", help="one checkpoint, e.g. 2TB")
    what.add_argument("--model", metavar="M", help="a catalogue model or model file: the "
                      "checkpoint is its weights and Adam states, 14 bytes per parameter")
    p.add_argument("--data-parallel", metavar="KIND", help=f"{', '.join(DATA_PARALLEL)}: ddp "
                   "replicates the states (written by rank 0 unless --sharded), the others "
                   "shard them (written by every rank unless --rank0)")
    p.add_argument("--write-bandwidth", metavar="BW", default="100GB/s",
                   help="the storage's aggregate write bandwidth (default 100GB/s)")
    p.add_argument("--read-bandwidth", metavar="BW", help="its read bandwidth (default: write)")
    p.add_argument("--rank-bandwidth", metavar="BW", default="25GB/s",
                   help="what one writer or reader moves (default 25GB/s)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--sharded", action="store_true", help="every rank writes its shard")
    how.add_argument("--rank0", action="store_true", help="rank 0 writes the whole checkpoint")
    p.add_argument("--async", dest="async_checkpoint", action="store_true",
                   help="asynchronous checkpoints: only the copy to host memory stalls training")
    p.add_argument("--host-bandwidth", metavar="BW", default="50GB/s",
                   help="GPU-to-host copy of --async (default 50GB/s)")
    _add_failures(p)
    _add_outputs(p)
    p.set_defaults(handler=cmd_goodput)


def _add_failures(p: argparse.ArgumentParser) -> None:
    p.add_argument("--failures-per-gpu-hour", metavar="RATE", default="2e-5",
                   help="failures per GPU-hour (default 2e-5, Llama 3's)")
    p.add_argument("--failures-per-node-hour", metavar="RATE", default="0",
                   help="failures per node-hour, added (default 0)")
    p.add_argument("--restart-time", metavar="TIME", default="10min",
                   help="restart after a failure, before reading the checkpoint (default 10min)")
    p.add_argument("--requeue-time", metavar="TIME", default="0",
                   help="waiting in the scheduler's queue after a failure (default 0)")
    p.add_argument("--interval", metavar="auto|Nsteps|TIME", default="auto",
                   help="compute between checkpoints (default auto: the best)")
    p.add_argument("--elastic", action="store_true", help="after a node is lost, compare "
                   "waiting for a spare with an elastic restart on the nodes left")
    p.add_argument("--spare-wait", metavar="TIME", default="1h",
                   help="until a lost node is replaced or repaired (default 1h)")
    p.add_argument("--elastic-step-time", metavar="TIME",
                   help="the step time on one node fewer (default: step x nodes / (nodes - 1))")


def _add_outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokens", metavar="N", help="tokens to train, e.g. 15T (with "
                   "--tokens-per-step): prints the expected wall time")
    p.add_argument("--tokens-per-step", metavar="T", help="tokens per step, e.g. 16M")
    p.add_argument("--simulate", metavar="RUNS", help="also simulate RUNS seeded runs")
    p.add_argument("--seed", metavar="S", default="0", help="the simulation's seed (default 0)")
    p.add_argument("--horizon", metavar="TIME", help="compute each simulated run trains "
                   "(default: --tokens' work, else 30 days)")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _int(value: str, flag: str, minimum: int = 1) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SpecError(f"{flag}: not a whole number (got {value!r})") from None
    if number < minimum:
        raise SpecError(f"{flag}: must be >= {minimum} (got {value!r})")
    return number


def _rate(value: str, flag: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise SpecError(f"{flag}: not a number (got {value!r})") from None


def _interval(value: str, step_s: float) -> float | None:
    text = value.strip().lower()
    if text == "auto":
        return None
    if text.endswith("steps") or text.endswith("step"):
        return _int(text.removesuffix("s").removesuffix("step"), "--interval Nsteps") * step_s
    try:
        return parse_time(text, "--interval")
    except SpecError:
        raise SpecError(f"--interval: not auto, Nsteps or a time (got {value!r})") from None


def _checkpoint(args: argparse.Namespace) -> tuple[int, str]:
    """The checkpoint's bytes and who writes it."""
    if args.data_parallel is not None and args.data_parallel not in DATA_PARALLEL:
        raise SpecError(f"--data-parallel: unknown {args.data_parallel!r} "
                        f"(known: {', '.join(DATA_PARALLEL)})")
    writers = "rank0" if args.rank0 or (args.data_parallel == "ddp" and not args.sharded) \
        else "sharded"
    if args.model is not None:
        from commsim.plan.models import load_model

        return model_checkpoint_bytes(load_model(args.model)), writers
    if args.checkpoint_bytes is None:
        raise SpecError("goodput: --checkpoint-bytes or --model is required")
    return parse_size(args.checkpoint_bytes, "--checkpoint-bytes"), writers


def _steps(args: argparse.Namespace, gpus: int, per_node: int
           ) -> tuple[Step, float | None, int | None]:
    """The step (a number, or from a replay or a plan), the elastic step (given, or the plan
    on a node fewer with --elastic), and tokens per step (given, or the plan's)."""
    given = [flag for flag, value in (("--step-time", args.step_time),
                                      ("--workload", args.workload),
                                      ("--global-batch", args.global_batch)) if value is not None]
    if len(given) != 1:
        raise SpecError("goodput: give one of --step-time, --workload (with --topology) or "
                        "--model with --topology and --global-batch"
                        + (f" (got {', '.join(given)})" if given else ""))
    elastic = (None if args.elastic_step_time is None
               else parse_time(args.elastic_step_time, "--elastic-step-time"))
    if args.step_time is not None:
        return Step(time_s=parse_time(args.step_time, "--step-time"), source="given"), \
            elastic, None
    if args.topology is None:
        raise SpecError(f"goodput: {given[0]} needs --topology")
    if args.workload is not None:
        return replayed_step(args.workload, args.topology), elastic, None
    if args.model is None:
        raise SpecError("goodput: --global-batch needs --model (the model to plan)")
    batch = _int(args.global_batch, "--global-batch")
    step = planned_step(args.model, args.topology, global_batch=batch, gpus=gpus)
    if elastic is None and args.elastic and gpus > per_node:
        elastic = elastic_step(args.model, args.topology, global_batch=batch, gpus=gpus,
                               gpus_per_node=per_node, full=step).time_s
    return step, elastic, step.tokens


def spec_from_args(args: argparse.Namespace) -> GoodputSpec:
    """The flags as a :class:`GoodputSpec` (each parse error names its flag)."""
    if args.gpus is None:
        raise SpecError("goodput: --gpus is required")
    gpus = _int(args.gpus, "--gpus")
    per_node = _int(args.gpus_per_node, "--gpus-per-node")
    nbytes, writers = _checkpoint(args)
    found, elastic_step, planned_tokens = _steps(args, gpus, per_node)
    step = found.time_s
    write = parse_bandwidth(args.write_bandwidth, "--write-bandwidth")
    return GoodputSpec(
        gpus=gpus, gpus_per_node=per_node, step_source=found.source,
        step_time_s=step, checkpoint_bytes=nbytes, writers=writers, write_Bps=write,
        read_Bps=write if args.read_bandwidth is None
        else parse_bandwidth(args.read_bandwidth, "--read-bandwidth"),
        rank_Bps=parse_bandwidth(args.rank_bandwidth, "--rank-bandwidth"),
        async_checkpoint=args.async_checkpoint,
        host_Bps=parse_bandwidth(args.host_bandwidth, "--host-bandwidth"),
        failures_per_gpu_hour=_rate(args.failures_per_gpu_hour, "--failures-per-gpu-hour"),
        failures_per_node_hour=_rate(args.failures_per_node_hour, "--failures-per-node-hour"),
        restart_s=parse_time(args.restart_time, "--restart-time"),
        requeue_s=parse_time(args.requeue_time, "--requeue-time"),
        interval_s=_interval(args.interval, step),
        tokens=None if args.tokens is None else parse_count(args.tokens, "--tokens"),
        tokens_per_step=(planned_tokens if args.tokens is not None else None)
        if args.tokens_per_step is None
        else parse_count(args.tokens_per_step, "--tokens-per-step"),
        spare_wait_s=parse_time(args.spare_wait, "--spare-wait"),
        elastic_step_time_s=elastic_step,
    )


def cmd_goodput(args: argparse.Namespace) -> int:
    """``commsim goodput``: analyse and print."""
    spec = spec_from_args(args)
    runs = None if args.simulate is None else _int(args.simulate, "--simulate")
    seed = _int(args.seed, "--seed", 0)
    horizon = None
    if args.horizon is not None:
        horizon = parse_time(args.horizon, "--horizon")
        if horizon <= 0:
            raise SpecError(f"--horizon: must be > 0 (got {args.horizon!r})")
    result = analyse(spec, runs=runs, seed=seed, horizon_s=horizon, elastic=args.elastic,
                     progress=not args.quiet)
    print(json.dumps(result.to_dict(), indent=2) if args.json else text(result))
    return 0


def _duration(seconds: float) -> str:
    if math.isinf(seconds):
        return "never"
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.2f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:,.2f} h"
    return f"{seconds:,.1f} s"


def _policy_lines(p: Policy, step_s: float, label: str) -> list[str]:
    o = p.outcome
    lines = [f"{label:18s}interval {o.interval_s:,.1f} s ({o.interval_s / step_s:,.0f} steps)"
             f", goodput {o.goodput:.4f}"]
    if p.simulated is not None:
        s = p.simulated
        lines.append(f"{'':18s}simulated {s.goodput:.4f} +- {s.ci95:.4f} (95% CI, {s.runs:,} "
                     f"runs, {s.failures_per_run:,.1f} failures per run)")
    if o.wall_time_s is not None:
        lines.append(f"{'':18s}wall time {_duration(o.wall_time_s)}")
    return lines


def text(a: Analysis) -> str:
    """The answer as ``commsim goodput`` prints it."""
    s, c = a.spec, a.cost
    mtbf = f", one every {_duration(1 / s.rate_per_s)}" if s.rate_per_s > 0 else ""
    lines = [
        f"# commsim goodput: {s.gpus:,} GPUs ({s.nodes:,} nodes of {s.gpus_per_node}), "
        f"step {s.step_time_s:g} s" + ("" if s.step_source == "given"
                                        else f" ({s.step_source})"),
        f"# failures: {s.failures_per_gpu_hour:g} per GPU-hour + {s.failures_per_node_hour:g} "
        f"per node-hour = {s.rate_per_s * 86400:.2f} per day{mtbf}",
        f"# checkpoint: {s.checkpoint_bytes / 1e12:,.3f} TB, {s.writers} writes "
        f"{_duration(c.write_s)}, read {_duration(c.read_s)}; training stalls "
        f"{_duration(c.blocking_s)} per checkpoint" + (" (async)" if s.async_checkpoint else ""),
        f"# after a failure: restart {_duration(s.restart_s)} + re-queue "
        f"{_duration(s.requeue_s)} + read = {_duration(a.recovery_s)}",
    ]
    if a.young_s is not None and a.daly_s is not None:
        lines.append(f"# best interval estimates: Young {a.young_s:,.1f} s, Daly "
                     f"{a.daly_s:,.1f} s")
    if a.plain.simulated is not None:
        trains = _duration(s.work_s or a.horizon_s)
        lines.append(f"# simulated: seed {a.seed}, each run trains {trains} of compute")
    lines += _policy_lines(a.plain, s.step_time_s, "spare at hand")
    if a.spare is not None and a.elastic is not None:
        lines.append(f"# a lost node back after {_duration(s.spare_wait_s)}; one node out costs "
                     f"an elastic run {s.slowdown:.2%} of its speed")
        lines += _policy_lines(a.spare, s.step_time_s, "wait for spare")
        lines += _policy_lines(a.elastic, s.step_time_s, "elastic")
    return "\n".join(lines)
