"""``commsim plan MODEL``: parse, load, one search, print (table, ``--json`` or ``--csv``).

Bad input raises :class:`~commsim.errors.SpecError`, which ``commsim.cli.main`` prints on one
line with exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from typing import Any

from commsim.cliargs import add_what_if, check_output
from commsim.errors import SpecError
from commsim.plan.compute import RECOMPUTE, RECOMPUTES
from commsim.plan.config import SCHEDULES
from commsim.plan.memory import DATA_PARALLEL
from commsim.plan.search import PlanResult, SearchSpace
from commsim.plan.stack import named_stack

_EPILOG = """\
An omitted axis is searched over every value that divides. LIST is a comma list.
A --pp that does not divide the layers gets lighter first and last stages (as Megatron-LM's
--decoder-first/last-pipeline-num-layers place them), the split whose slowest stage is
fastest; --stage-layers fixes the split (first stage first; 8*14 is fourteen stages of 8).
schedules: 1f1b, gpipe, interleaved (every V), interleaved:V.
data parallel: ddp, zero1, zero2, fsdp.  recompute: none, selective, full (and moe).
stacks: current, megatron-2021 (unfused attention, no sequence parallelism, weight gradients
added by a separate kernel, one gradient all-reduce after the backward, blocking pipeline
sends, fp16 loss scaling), llama3 (current with fp32 gradient accumulation and reduction),
pytorch-fsdp (PyTorch FSDP FULL_SHARD: weights gathered again for the backward, gradients
reduce-scattered in fp32 after every micro-batch, FlashAttention-2).
Configurations that do not fit the GPU memory are rejected (or, when fewer than --top fit,
ranked after those that do); --top 0 times every configuration that fits (no pruning).

examples:
  commsim plan --list-models
  commsim plan llama3-70b --topology dgx-h100x64 --global-batch 1024
  commsim plan gpt3-175b --topology dgx-a100x96 --global-batch 1536 --tp 8 --json
  commsim plan model.yaml --topology dgx-h100x4 --global-batch 64 --gpu-memory 40GiB --csv
  commsim plan llama3-8b --topology dgx-h100x4 --global-batch 256 --what-if slow-gpu.yaml
  commsim plan mpt-7b --topology dgx-h100 --global-batch 256 --precision fp8
  commsim plan mixtral-8x7b --topology dgx-h100x8 --global-batch 256 --seq 4096 --ep 4,8
  commsim plan qwen3-235b-a22b -t dgx-h100x32 --global-batch 2048 --tp 2 --pp 8 --etp 1,2
  commsim plan deepseek-v3 -t hgx-h800x256 --global-batch 15360 --moe-overlap dualpipe --pp 16
  commsim plan qwen3-30b-a3b -t dgx-h100x4 --global-batch 256 --ep 8,16 --dispatcher deepep
  commsim plan llama3-405b --topology dgx-h100x256 --global-batch 512 --pp 16 --tp 8
  commsim plan llama3-405b -t dgx-h100x256 --global-batch 512 --stage-layers 7,8*14,7 --tp 8
  commsim plan llama3-8b -t dgx-h100x2 --global-batch 64 --write-workload 1 best.yaml
  commsim replay best.yaml -t dgx-h100x2      # the same step, every rank simulated
"""

CSV_COLUMNS = (
    "tp", "cp", "pp", "dp", "micro_batch", "schedule", "chunks_per_stage", "data_parallel",
    "recompute", "ep", "etp", "stage_layers", "microbatches", "step_time_s", "tokens_per_s",
    "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "exposed_comm_s", "bubble_fraction",
    "peak_memory_bytes", "precision", "moe_overlap", "dispatcher", "fits", "reason",
)


def add_parser(sub: Any) -> None:
    """Add ``plan`` to ``commsim``'s subparsers."""
    p = sub.add_parser(
        "plan",
        help="search TP/CP/PP/DP, micro-batch, schedule and recompute for a model (capacity "
        "planning)",
        description="Rank the training configurations of MODEL on the topology's GPUs by step "
        "time, with memory checked against the GPU.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", nargs="?",
                   help="a catalogue name (--list-models) or a model YAML file")
    p.add_argument("--topology", "-t", metavar="FILE|PRESET", help="a GPU preset or YAML file")
    p.add_argument("--global-batch", metavar="B", help="sequences per step")
    p.add_argument("--seq", metavar="S", help="sequence length (default: the model's)")
    p.add_argument("--gpus", metavar="N", help="GPUs to use (default: the topology's ranks)")
    for axis in ("tp", "cp", "pp", "micro-batch"):
        p.add_argument(f"--{axis}", metavar="LIST", help=f"{axis} values to try")
    p.add_argument("--ep", metavar="LIST", help="expert-parallel sizes to try (mixtures of "
                   "experts; taken from the data-parallel ranks: each divides the experts and dp)")
    p.add_argument("--etp", metavar="LIST", help="expert tensor-parallel sizes to try (Megatron-"
                   "Core's --expert-tensor-parallel-size; the MoE layers' own grid over a "
                   "stage's ranks: etp x ep divides tp x cp x dp); default: the attention's TP")
    p.add_argument("--stage-layers", metavar="LIST",
                   help="layers per pipeline stage, first stage first (7,8*14,7: sums to the "
                   "layers, one entry per stage); default: equal, or lighter first and last "
                   "stages where --pp does not divide the layers")
    p.add_argument("--schedule", metavar="LIST", help=", ".join(SCHEDULES) + ", interleaved:V")
    p.add_argument("--data-parallel", metavar="LIST", help=", ".join(DATA_PARALLEL))
    p.add_argument("--recompute", metavar="LIST",
                   help=", ".join(RECOMPUTE) + " (searched by default), moe (MoE models: each "
                   "MoE layer's MLP half recomputed, all-to-alls too)")
    p.add_argument("--stack", metavar="NAME", default="current",
                   help="software stack: current (fused attention, sequence parallelism, "
                   "overlapped gradient reduction; the default), megatron-2021, llama3 or "
                   "pytorch-fsdp (FULL_SHARD: weights resharded after the forward, fp32 "
                   "reductions, FlashAttention-2)")
    p.add_argument("--attention", metavar="IMPL",
                   help="fused (today's kernel), fa2 (FlashAttention-2), fa1 (FlashAttention "
                   "v1, half of fa2's speed) or unfused (overrides --stack's)")
    p.add_argument("--precision", metavar="P", help="bf16 or fp8 (the linear layers' GEMMs "
                   "as Transformer Engine runs them; needs a device with an fp8 peak)")
    p.add_argument("--moe-overlap", metavar="MODE", help="a mixture of experts' all-to-alls: "
                   "none (wait for each; the default), ep-overlap (Megatron-Core's "
                   "--overlap-moe-expert-parallel-comm) or dualpipe (DeepSeek-V3's DualPipe)")
    p.add_argument("--dispatcher", metavar="D", help="what moves a mixture of experts' routed "
                   "tokens: alltoall (NCCL's all-to-all of every copy; the default) or deepep "
                   "(DeepEP: each token once per rank and per host that needs it)")
    p.add_argument("--no-overlap-cost", action="store_true",
                   help="the gradient reductions that overlap the backward leave its compute "
                   "unslowed (by default their SMs and HBM traffic slow it; docs/planning.md)")
    p.add_argument("--engine", default="analytic", metavar="ENGINE",
                   help="how collectives are timed: analytic (closed forms; the default), des, "
                   "or auto (as replay: the DES up to 64 ranks)")
    p.add_argument("--gpu-memory", metavar="SIZE", help="override the device memory (80GiB)")
    p.add_argument("--top", metavar="K", default="10", help="rows to print and keep (default 10)")
    p.add_argument("--write-workload", nargs=2, metavar=("K", "FILE"),
                   help="write the K-th ranked configuration as a hybrid workload that "
                   "`commsim replay FILE` times with the same compute model")
    add_what_if(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print every configuration as JSON")
    out.add_argument("--csv", action="store_true", help="print every configuration as CSV")
    p.add_argument("--list-models", action="store_true", help="list the model catalogue")
    p.set_defaults(handler=cmd_plan)


def _int(value: str, flag: str, minimum: int = 1) -> int:
    try:
        number = int(value.strip())
    except (ValueError, AttributeError):
        raise SpecError(f"{flag} {value!r}: not an integer") from None
    if number < minimum:
        raise SpecError(f"{flag} {value!r}: must be >= {minimum}")
    return number


def _ints(value: str | None, flag: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    items = [v for v in value.split(",") if v.strip()]
    if not items:
        raise SpecError(f"{flag} {value!r}: empty list")
    return tuple(sorted({_int(v, flag) for v in items}))


def _words(value: str | None, flag: str, known: tuple[str, ...]) -> tuple[str, ...] | None:
    if value is None:
        return None
    out = []
    for word in value.split(","):
        w = word.strip().lower()
        if w not in known:
            raise SpecError(f"{flag} {word!r}: unknown (known: {', '.join(known)})")
        if w not in out:
            out.append(w)
    return tuple(out)


def _split(value: str | None) -> tuple[int, ...] | None:
    """``--stage-layers``: layer counts in order, ``n*count`` for ``count`` stages of ``n``
    (the library checks them against the model and ``--pp``)."""
    if value is None:
        return None
    out: list[int] = []
    for word in value.split(","):
        n, _, times = word.strip().partition("*")
        try:
            out += [int(n)] * (int(times) if times else 1)
        except ValueError:
            raise SpecError(f"--stage-layers {value}: {word.strip()!r} is not a layer count "
                            "(n, or n*stages)") from None
    if not out:
        raise SpecError(f"--stage-layers {value!r}: empty list")
    return tuple(out)


def _schedules(value: str | None) -> tuple[tuple[str, int | None], ...] | None:
    if value is None:
        return None
    out: list[tuple[str, int | None]] = []
    for word in value.split(","):
        name, _, v = word.strip().lower().partition(":")
        if name not in SCHEDULES or (v and name != "interleaved"):
            raise SpecError(f"--schedule {word!r}: unknown (known: {', '.join(SCHEDULES)}, "
                            "interleaved:V)")
        item = (name, _int(v, "--schedule interleaved:V", 2) if v else None)
        if name != "interleaved":
            item = (name, 1)
        if item not in out:
            out.append(item)
    return tuple(out)


def cmd_plan(args: argparse.Namespace) -> int:
    """``commsim plan``: search and print."""
    from commsim.plan import plan
    from commsim.plan.models import CATALOGUE

    if args.list_models:
        for name, m in CATALOGUE.items():
            moe = "" if m.moe is None else (
                f" E={m.moe.experts} k={m.moe.top_k} fe={m.moe.expert_ffn_hidden} "
                f"active {m.active_params / 1e9:.1f}B")
            print(f"{name:15s} {m.params / 1e9:7.1f}B  l={m.layers} h={m.hidden} a={m.heads} "
                  f"g={m.kv_heads} f={m.ffn_hidden} V={m.vocab} s={m.seq}{moe}  # {m.source}")
        return 0
    for flag, value in (("MODEL", args.model), ("--topology", args.topology),
                        ("--global-batch", args.global_batch)):
        if value is None:
            raise SpecError(f"plan: {flag} is required")
    space = SearchSpace(
        tp=_ints(args.tp, "--tp"), cp=_ints(args.cp, "--cp"), pp=_ints(args.pp, "--pp"),
        micro_batch=_ints(args.micro_batch, "--micro-batch"),
        schedule=_schedules(args.schedule),
        data_parallel=_words(args.data_parallel, "--data-parallel", DATA_PARALLEL)
        or DATA_PARALLEL,
        recompute=_words(args.recompute, "--recompute", RECOMPUTES) or RECOMPUTE,
        ep=_ints(args.ep, "--ep"),
        etp=_ints(args.etp, "--etp"),
        stage_layers=_split(args.stage_layers),
    )
    top = _int(args.top, "--top", 0)
    written = None
    if args.write_workload is not None:
        written = (_int(args.write_workload[0], "--write-workload K"), args.write_workload[1])
        check_output("--write-workload", written[1])
    outcome = plan(
        args.model, args.topology, global_batch=_int(args.global_batch, "--global-batch"),
        seq=None if args.seq is None else _int(args.seq, "--seq"),
        gpus=None if args.gpus is None else _int(args.gpus, "--gpus"),
        space=space, top=top, gpu_memory=args.gpu_memory, progress=True,
        stack=named_stack(args.stack, args.attention, args.precision, args.moe_overlap,
                          args.dispatcher, overlap_cost=not args.no_overlap_cost),
        engine=args.engine.strip().lower(),
        what_if=args.what_if,
    )
    if written is not None:
        _write(outcome, *written)
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
    elif args.csv:
        extra = () if outcome.what_if is None else WHAT_IF_COLUMNS
        sys.stdout.write(to_csv(outcome.result, extra))
    else:
        print(outcome.table(top))
    return 0


def _write(outcome: Any, k: int, path: str) -> None:
    """``--write-workload K FILE``: the K-th ranked configuration as a workload."""
    from commsim.plan.workload import write_workload

    configs = outcome.result.configs
    if k > len(configs):
        raise SpecError(f"--write-workload {k}: only {len(configs)} configurations were ranked")
    e = configs[k - 1]
    write_workload(path, outcome.model, e.config, outcome.global_batch, outcome.stack)
    print(f"wrote configuration {k} ({e.config.label()}) to {path}", file=sys.stderr)


#: The columns a what-if adds to the CSV (before ``reason``; stage_compute_factors, a list,
#: only in --json).
WHAT_IF_COLUMNS = ("healthy_step_time_s", "slowdown", "slowest_rank", "slowest_compute_factor",
                   "slowest_rank_stage", "slowest_rank_replica")


def to_csv(result: PlanResult, extra: tuple[str, ...] = ()) -> str:
    """Every configuration: the ranked ones, then the rejected ones with their reason
    (``extra``: more record keys, e.g. :data:`WHAT_IF_COLUMNS`, before the reason)."""
    buf = io.StringIO()
    columns = (*CSV_COLUMNS[:-1], *extra, CSV_COLUMNS[-1])
    writer = csv.DictWriter(buf, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for e in result.configs:
        writer.writerow({**e.record, "stage_layers": _layers(e.record["stage_layers"]),
                         "reason": ""})
    for r in result.rejected:
        layers = r.axes.get("stage_layers")
        writer.writerow({**r.axes, "stage_layers": "" if layers is None else _layers(layers),
                         "peak_memory_bytes": r.peak_memory_bytes, "fits": "",
                         "reason": r.reason})
    return buf.getvalue()


def _layers(split: list[int]) -> str:
    """A split in a CSV cell: its counts joined by spaces."""
    return " ".join(str(n) for n in split)
