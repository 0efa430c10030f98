"""``commsim plan``'s step model against published training throughput.

Run: ``.venv/bin/python benchmarks/plan_published.py [--choose] [--quick] [--source TEXT]
[--moe [--replay]]``

For each published row, the step of the published layout is evaluated exactly as ``commsim
plan`` evaluates a configuration (the shipped preset's ``device:`` block: one set of
efficiency parameters per GPU type, never fitted per row), and converted to TFLOP/s per GPU
with the *source's own* FLOP count, so that the comparison is of step times:

* Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", Table 1 (GPT, s = 2048, V = 51200, A100 80GB, DGX A100 nodes with 8 x 200 Gb/s
  HDR): achieved TFLOP/s per GPU counted by their eq. 3, ``96 B s l h^2 (1 + s/6h + V/16lh)``
  (full recompute included). Per row, the micro-batch, the interleaving (layers per virtual
  stage) and the DDP implementation are the authors' own ``examples/sc21/run_table_1.sh``
  (NVIDIA/Megatron-LM): ``torch`` DDP (overlapped 25 MiB buckets) up to 18B, Megatron's
  ``local`` DDP (one all-reduce after the backward) beyond; full ("uniform") recompute. The
  software is the 2021 stack (:data:`commsim.plan.stack.MEGATRON_2021`: attention unfused,
  no sequence parallelism, weight gradients added by a separate kernel, blocking pipeline
  sends with the TP all-gather on receive, fp16 loss scaling).
* The Llama 3 team 2024, "The Llama 3 Herd of Models", Table 4 (405B on H100 80GB, 16M tokens
  per batch): TFLOP/s per GPU as model FLOPs (``6 N`` plus causal attention). The model's own
  126 layers over 16 stages as the paper places them (Section 3.3.2): one layer fewer on the
  first and the last stage (7, 8 x 14, 7), so that, interleaved with 8 chunks per stage (one
  layer each), the first model chunk holds only the embedding and the last only the output
  layer and the loss (Megatron-LM's embedding/loss-in-split rule,
  :mod:`commsim.replay.stages`). Micro-batch 1, FSDP, no
  recompute, today's stack (fused attention) with the paper's fp32 gradient accumulation and
  reduce-scatter (:data:`commsim.plan.stack.LLAMA3`). The RoCE fabric is modelled by the
  dgx-h100 preset's 400 Gb/s per GPU.

* MosaicML llm-foundry, ``scripts/train/benchmarking/README.md`` (``_foundry_rows.py``: the
  rows and the rule that picks them): MPT models on H100 (bf16 and Transformer Engine fp8)
  and A100, PyTorch FSDP ``FULL_SHARD`` on 8 to 64 GPUs, tp = cp = pp = 1, full recompute
  where activation checkpointing is on, the ``pytorch-fsdp`` stack (weights gathered again for
  the backward, gradients reduce-scattered after every micro-batch, in fp32 under Composer's
  ``DEFAULT`` mixed precision, bf16 under ``PURE``) with the runs' FlashAttention v1
  (``--attention fa1``). Published tokens per second per GPU,
  shown as TFLOP/s per GPU by ``6 N`` plus causal attention on both sides.

Every step also runs the loss on the last stage and each stage's optimizer step, and every
memory-bound kernel runs at the preset's achievable HBM bandwidth (docs/planning.md).

``--moe`` prints the mixtures of experts instead, compared by step time (the published
throughput turned into the seconds of one step of the published batch), each row with what
commsim assumes that the source does not state or that commsim does not model: the rows of
``_moe_rows.py`` (the Megatron-Core MoE README's Mixtral 8x7B, the DeepSeek-V3 report, the
Megatron-MoE-ModelZoo's Qwen3-235B table; its docstring states the rule that picks them),
with the median |step-time error| overall and per source. ``--moe --replay`` replays each
row's layout in the DES instead, every rank's traffic contending, where the replay lowers it
within its budget (the rows of ``--moe-overlap`` are refused, as are graphs of over a million
tasks that do not fold).

``--choose`` adds what ``commsim plan`` picks for the row's model, GPUs and batch (slow for
the largest rows: minutes). Prints the table and the median |error|.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _foundry_rows import ATTENTION as FOUNDRY_ATTENTION  # noqa: E402
from _foundry_rows import TABLES as FOUNDRY_TABLES  # noqa: E402
from _fp8_ratios import linear_ratios, torchtitan_ratios  # noqa: E402
from _moe_rows import (  # noqa: E402
    MOE_ROWS,
    MOE_ZOO_LONG,
    OUT_OF_SCOPE,
    MoERow,
    zoo_flop_check,
)

from commsim.errors import SpecError  # noqa: E402
from commsim.plan import SearchSpace, plan, replay_workload, workload_dict  # noqa: E402
from commsim.plan.bounds import moe_costs  # noqa: E402
from commsim.plan.compute import model_flops_per_token  # noqa: E402
from commsim.plan.config import PlanConfig  # noqa: E402
from commsim.plan.costs import StepEstimate, estimate_step, pipeline_costs  # noqa: E402
from commsim.plan.device import network_device  # noqa: E402
from commsim.plan.models import ModelSpec, catalogue_model  # noqa: E402
from commsim.plan.search import layer_costs  # noqa: E402
from commsim.plan.stack import (  # noqa: E402
    DEFAULT,
    LLAMA3,
    MEGATRON_2021,
    PYTORCH_FSDP,
    Stack,
)
from commsim.plan.timing import CollectiveTimer  # noqa: E402
from commsim.replay import replay  # noqa: E402
from commsim.replay.stages import split_label  # noqa: E402
from commsim.topology import load_topology  # noqa: E402

MEGATRON = "Narayanan et al. 2021, Table 1 (A100)"
LLAMA3_SRC = "Llama 3 2024, Table 4 (H100)"
#: Llama 3 405B's 126 layers over its 16 pipeline stages (Section 3.3.2)
LLAMA3_STAGES = (7,) + (8,) * 14 + (7,)


@dataclass(frozen=True)
class Row:
    """A published run: model, layout, batch and TFLOP/s per GPU."""

    source: str
    label: str
    model: ModelSpec
    preset: str
    config: PlanConfig
    global_batch: int
    published_tflops: float
    stack: Stack = DEFAULT


def _gpt(params: str, layers: int, hidden: int, heads: int) -> ModelSpec:
    return ModelSpec(name=f"gpt-{params}", layers=layers, hidden=hidden, heads=heads,
                     kv_heads=heads, ffn_hidden=4 * hidden, vocab=51200, seq=2048)


def _meg(params: str, heads: int, hidden: int, layers: int, tp: int, pp: int, gpus: int,
         batch: int, tflops: float, mbs: int, ddp: str, chunks: int = 1) -> Row:
    """A Table 1 row; ``mbs``, ``ddp`` (``torch``: overlapped buckets, ``local``: one
    all-reduce after the backward) and ``chunks`` (layers per virtual stage) as the authors'
    ``examples/sc21/run_table_1.sh`` sets them."""
    cfg = PlanConfig(tp=tp, cp=1, pp=pp, dp=gpus // (tp * pp), micro_batch=mbs,
                     schedule="interleaved" if chunks > 1 else "1f1b", chunks=chunks,
                     data_parallel="ddp", recompute="full")
    stack = replace(MEGATRON_2021, grad_overlap=ddp == "torch")
    return Row(MEGATRON, f"GPT {params}", _gpt(params, layers, hidden, heads),
               f"dgx-a100x{gpus // 8}", cfg, batch, tflops, stack)


def _llama(gpus: int, cp: int, seq: int, tflops: float) -> Row:
    model = replace(catalogue_model("llama3-405b"), seq=seq)
    pp, tp = 16, 8
    cfg = PlanConfig(tp=tp, cp=cp, pp=pp, dp=gpus // (tp * cp * pp), micro_batch=1,
                     schedule="interleaved", chunks=8, data_parallel="fsdp", recompute="none",
                     stage_layers=LLAMA3_STAGES)
    return Row(LLAMA3_SRC, f"Llama 3 405B cp{cp} s{seq}", model, f"dgx-h100x{gpus // 8}", cfg,
               16 * 2**20 // seq, tflops, LLAMA3)


def _foundry(source: str, preset: str, precision: str,
             row: tuple[str, int, int, int, int, int, bool, str]) -> Row:
    """An llm-foundry row (:mod:`_foundry_rows`), evaluated as ``commsim plan`` evaluates
    ``--tp 1 --cp 1 --pp 1 --data-parallel fsdp`` under ``--stack pytorch-fsdp`` with the
    rows' attention (``--attention fa1``)."""
    size, seq, gpus, mbs, accum, tokens, checkpointing, mixed = row
    model = replace(catalogue_model(f"mpt-{size}"), seq=seq)
    cfg = PlanConfig(tp=1, cp=1, pp=1, dp=gpus, micro_batch=mbs, schedule="1f1b", chunks=1,
                     data_parallel="fsdp", recompute="full" if checkpointing else "none")
    stack = replace(PYTORCH_FSDP, precision=precision, grad_bytes=2 if mixed == "PURE" else 4,
                    attention=FOUNDRY_ATTENTION)
    return Row(source, f"MPT {size.upper()} s{seq} ({tokens} tok/s/GPU)", model,
               f"{preset}x{gpus // 8}", cfg, mbs * accum * gpus,
               tokens * model_flops_per_token(model) / 1e12, stack)


ROWS = (
    _meg("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137, 16, "torch"),
    _meg("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138, 16, "torch"),
    _meg("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142, 16, "torch"),
    _meg("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135, 8, "torch"),
    _meg("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138, 4, "local"),
    _meg("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, "local", 3),
    _meg("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, "local", 2),
    _meg("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, "local", 2),
    _meg("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, "local", 3),
    _meg("1008B", 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, "local"),
    _llama(8192, 1, 8192, 430),
    _llama(16384, 1, 8192, 400),
    _llama(16384, 16, 131072, 380),
) + tuple(_foundry(source, preset, precision, r)
          for source, preset, precision, rows in FOUNDRY_TABLES for r in rows)
#: The sources in the order of their rows.
SOURCES = tuple(dict.fromkeys(r.source for r in ROWS))


def published_flops(row: Row) -> float:
    """FLOPs of one step as the source counts them."""
    m, b = row.model, row.global_batch
    if row.source == MEGATRON:
        s, h, lay, v = m.seq, m.hidden, m.layers, m.vocab
        return 96 * b * s * lay * h * h * (1 + s / (6 * h) + v / (16 * lay * h))
    return model_flops_per_token(m) * b * m.seq


def predict(row: Row | MoERow) -> float:
    """Predicted step seconds of the published layout."""
    return estimate(row).step_time_s


def estimate(row: Row | MoERow) -> StepEstimate:
    """The predicted step of the published layout, with its mean compute and exposed
    communication per stage."""
    network = load_topology(row.preset)
    device = network_device(network)
    cfg = row.config
    k = row.global_batch // (cfg.micro_batch * cfg.dp)
    times = layer_costs(row.model, device, cfg.tp, cfg.cp, cfg.micro_batch, cfg.recompute,
                        row.stack)
    step = estimate_step(pipeline_costs(cfg, row.model, times, CollectiveTimer(network), k,
                                        stack=row.stack, device=device,
                                        moe=moe_costs(row.model, device, cfg, row.stack)))
    return step


def tflops(row: Row, step_s: float) -> float:
    """TFLOP/s per GPU of a step of ``step_s``, by the source's FLOP count."""
    return published_flops(row) / step_s / row.config.world / 1e12


def choose(row: Row, step_s: float) -> str:
    """What ``commsim plan`` picks for the row's model, GPUs, batch and stack (TP within a
    node; for Llama 3, PP of every power of two to 32, uneven where it does not divide the
    126 layers), and its predicted step against the published layout's ``step_s``."""
    # Llama 3 405B's 126 layers divide by no PP beyond 2: its uneven depths are asked for
    pp = (1, 2, 4, 8, 16, 32) if row.source == LLAMA3_SRC else None
    tp = tuple(t for t in (1, 2, 4, 8) if row.model.heads % t == 0)  # MPT 3B: 20 heads
    space = SearchSpace(tp=tp, cp=(row.config.cp,), pp=pp,
                        recompute=("none", "selective", "full"))
    out = plan(row.model, row.preset, global_batch=row.global_batch, space=space, top=1,
               stack=row.stack)
    best = out.result.configs[0]
    return f"{best.config.label()} ({best.record['step_time_s'] / step_s - 1:+.0%})"


def _schedule(c: PlanConfig) -> str:
    return f"{c.schedule_label} mb{c.micro_batch}"


def moe_table(rows: tuple[MoERow, ...]) -> None:
    """Print the MoE rows: published and predicted step, the step-time error, the median."""
    errors, notes = [], []
    print("| source | model | GPUs | TP | ETP | EP | PP | DP | schedule | MoE overlap, GEMMs "
          "| batch x seq | published | published step | predicted step | error "
          "| commsim assumes |")
    print("|" + "---|" * 16)
    for row in rows:
        est = estimate(row)
        step = est.step_time_s
        err = 100 * (step - row.published_step_s) / row.published_step_s
        errors.append(abs(err))
        c = row.config
        pp = f"{c.pp} ({split_label(c.stage_layers)})" if c.stage_layers else str(c.pp)
        print(f"| {row.source} | {row.label} | {c.world} {row.gpu} | {c.tp} | {c.etp} | {c.ep} "
              f"| {pp} "
              f"| {c.dp} {c.data_parallel} | {_schedule(c)} | {row.stack.moe_overlap}, "
              f"{row.stack.precision} | {row.global_batch} x {row.model.seq} "
              f"| {row.published} | {row.published_step_s:.2f} s | {step:.2f} s "
              f"| {err:+.1f}% | {row.assumes} |", flush=True)
        notes.append(f"{row.label}: a mean stage computes {est.compute_s:.2f} s and waits "
                     f"{est.exposed_comm_s:.2f} s on exposed communication; bubble "
                     f"{est.bubble_fraction:.1%}")
    print()
    print("\n".join(notes))
    _moe_medians(rows, errors)
    if any(r.source == MOE_ZOO_LONG for r in rows):
        implied, causal, full = zoo_flop_check()
        print(f"{MOE_ZOO_LONG}: the short table's TFLOP/s x step time give "
              f"{min(implied):.1f}-{max(implied):.1f} GFLOP per token at sequence 4096; "
              f"Megatron-LM's count with causal attention {causal:.1f}, with full attention "
              f"{full:.1f}")
    _moe_settings(rows)


def _moe_medians(rows: tuple[MoERow, ...], errors: list[float]) -> None:
    """Median |step-time error| per source and over all rows, and the rows the selection rule
    picks that commsim cannot evaluate (:data:`_moe_rows.OUT_OF_SCOPE`)."""
    print()
    for source in dict.fromkeys(r.source for r in rows):
        errs = [e for r, e in zip(rows, errors, strict=True) if r.source == source]
        print(f"median |step-time error| {source}: {statistics.median(errs):.1f}% "
              f"({len(errs)} row{'s' * (len(errs) > 1)})")
    print(f"median |step-time error| MoE, {len(errors)} rows: {statistics.median(errors):.1f}%")
    for source, row, why in OUT_OF_SCOPE:
        if any(r.source == source for r in rows):
            print(f"out of scope, {source}: {row} ({why})")


def _moe_settings(rows: tuple[MoERow, ...]) -> None:
    """Each row whose software overlaps its all-to-alls or computes in fp8, predicted with
    each of the two left out in turn (what each contributes to the prediction)."""
    for row in rows:
        if row.stack.moe_overlap == "none" and row.stack.precision == "bf16":
            continue
        print()
        for overlap, precision in dict.fromkeys((("none", "bf16"),
                                                 ("none", row.stack.precision),
                                                 (row.stack.moe_overlap, "bf16"),
                                                 (row.stack.moe_overlap, row.stack.precision))):
            step = predict(replace(row, stack=replace(row.stack, moe_overlap=overlap,
                                                      precision=precision)))
            err = 100 * (step - row.published_step_s) / row.published_step_s
            print(f"{row.label} with {overlap}, {precision}: {step:.2f} s ({err:+.1f}%)")


def moe_replays(rows: tuple[MoERow, ...]) -> None:
    """Each row's layout replayed in the DES, every rank's traffic contending (the planner's
    workload, ``commsim replay``), against the plan's step and the published one; a row the
    replay does not lower or time is named with its one-line reason."""
    for row in rows:
        workload = workload_dict(row.model, row.config, row.global_batch, row.stack)
        try:
            step = replay(replay_workload(workload, row.preset), row.preset).step_time_s
        except SpecError as exc:
            print(f"{row.label}: not replayed: {exc}")
            continue
        planned = predict(row)
        print(f"{row.label}: replayed {step:.3f} s, planned {planned:.3f} s "
              f"({100 * (step / planned - 1):+.1f}%), published {row.published_step_s:.2f} s "
              f"({100 * (step / row.published_step_s - 1):+.1f}%)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--choose", action="store_true", help="also run the search per row")
    parser.add_argument("--quick", action="store_true",
                        help="the first row of each source and the first MoE row, for the "
                             "test suite")
    parser.add_argument("--moe", action="store_true",
                        help="the mixtures of experts, by step time")
    parser.add_argument("--replay", action="store_true",
                        help="with --moe: replay each row's layout in the DES instead (minutes)")
    parser.add_argument("--gather-once", action="store_true",
                        help="time the llm-foundry rows' FSDP as gathered once per step and "
                        "reduced once (the model before PyTorch's FSDP was)")
    parser.add_argument("--source", default="", metavar="TEXT",
                        help="only the rows whose source contains TEXT")
    args = parser.parse_args()
    if args.moe:
        rows = MOE_ROWS[:1] if args.quick else MOE_ROWS
        (moe_replays if args.replay else moe_table)(rows)
        return
    rows = tuple(r for r in ROWS if args.source in r.source)
    if args.gather_once:
        rows = tuple(replace(r, stack=replace(r.stack, fsdp_reshard=False)) for r in rows)
    if not rows:
        parser.error(f"--source {args.source!r}: no source contains it "
                     f"(sources: {', '.join(SOURCES)})")
    if args.quick:
        rows = tuple(next(r for r in rows if r.source == s)
                     for s in dict.fromkeys(r.source for r in rows))
    errors, steps = [], []
    header = ("| source | model | GPUs | TP | CP | PP | DP | schedule | batch | published | "
              "predicted | error |")
    print(header + (" plan's choice (its step against the published layout's) |"
                    if args.choose else ""))
    print("|" + "---|" * (header.count("|") - 1 + (1 if args.choose else 0)))
    for row in rows:
        t0 = time.perf_counter()
        step = predict(row)
        steps.append(step)
        pred = tflops(row, step)
        err = 100 * (pred - row.published_tflops) / row.published_tflops
        errors.append(err)
        c = row.config
        pp = f"{c.pp} ({split_label(c.stage_layers)})" if c.stage_layers else str(c.pp)
        line = (f"| {row.source} | {row.label} | {c.world} | {c.tp} | {c.cp} | {pp} | {c.dp} "
                f"| {_schedule(c)} | {row.global_batch} | {row.published_tflops:.0f} "
                f"| {pred:.0f} | {err:+.1f}% |")
        if args.choose:
            line += f" {choose(row, step)} |"
        print(line, flush=True)
        if args.choose:  # the search is what takes time
            print(f"  ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    by_source = {s: [e for r, e in zip(rows, errors, strict=True) if r.source == s]
                 for s in dict.fromkeys(r.source for r in rows)}
    print()
    for source, errs in by_source.items():
        print(f"median |error| {source}: {statistics.median(map(abs, errs)):.1f}% "
              f"(median error {statistics.median(errs):+.1f}%, {len(errs)} rows)")
    print(f"median |error| all {len(errors)} rows: "
          f"{statistics.median(map(abs, errors)):.1f}%")
    _speedups(rows, steps)
    if args.quick:  # the MoE path too, on its first row
        print()
        moe_table(MOE_ROWS[:1])


def _speedups(rows: tuple[Row, ...], steps: list[float]) -> None:
    """fp8 over bf16, published and predicted: llm-foundry's fp8 rows that have a bf16 row
    of the same model, sequence, GPUs, micro-batch and batch, and torchtitan's Llama 3.1 8B
    (:mod:`_fp8_ratios`)."""
    def key(r: Row) -> tuple:
        return (r.model, r.config, r.global_batch, r.preset)

    if not any(r.stack.precision == "fp8" for r in rows):
        return
    bf16 = {key(r): (r, s) for r, s in zip(rows, steps, strict=True)
            if r.source.startswith("llm-foundry") and r.stack.precision == "bf16"}
    print()
    for r, s in zip(rows, steps, strict=True):
        if r.stack.precision == "fp8" and key(r) in bf16:
            base, base_s = bf16[key(r)]
            print(f"fp8/bf16 {r.label.split(' (')[0]} on {r.config.world} GPUs: published "
                  f"{r.published_tflops / base.published_tflops:.2f}x, predicted "
                  f"{base_s / s:.2f}x")
    for gpus, published, predicted in torchtitan_ratios():
        print(f"fp8/bf16 torchtitan Llama 3.1 8B on {gpus} GPUs: published {published:.2f}x, "
              f"predicted {predicted:.2f}x")
    for m, k, n, published, predicted in linear_ratios():
        print(f"fp8/bf16 torchao linear M,K,N={m},{k},{n}: published {published:.2f}x, "
              f"predicted {predicted:.2f}x")


if __name__ == "__main__":
    main()
