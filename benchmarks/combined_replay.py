"""Megatron-Core's combined 1F1B (``--moe-overlap ep-overlap``) planned and replayed, in one
process: the planner's woven pair (a max-plus pass, each collective at its own time) for each
combined step against the replay's (the DES, every collective on the links).

Each layout is planned with ``none`` and with ``ep-overlap``, written as a workload and
replayed in the DES (every rank, every all-to-all on the links); the table gives both steps,
the replay's difference from the plan and the share of the replayed step's communication
hidden under compute. Then the published Megatron-MoE-ModelZoo row with combined 1F1B
(Qwen3-235B-A22B, EP 32 across hosts, 256 H100: :data:`_moe_rows.MOE_ROWS`), whose whole
step is beyond the replay's task budget, cut to ``--zoo-layers`` layers (even per virtual
stage) and ``--zoo-microbatches`` micro-batches, the same way. The figures are
docs/planning.md's ("Replayed", under ``--moe-overlap``, and the published rows).

    python benchmarks/combined_replay.py [--zoo-layers N] [--zoo-microbatches K] [--quick]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from _common import parse_args, table
from _moe_rows import MOE_ROWS

from commsim.plan import SearchSpace, plan, replay_workload, workload_dict
from commsim.plan.models import ModelSpec, catalogue_model
from commsim.plan.stack import Stack
from commsim.replay import replay

#: (model, topology, tp, ep, pp, schedule, global batch, seq).
LAYOUTS = (
    ("qwen3-30b-a3b", "dgx-h100", 1, 8, 1, ("1f1b", 1), 64, 1024),
    ("qwen3-30b-a3b", "dgx-h100x2", 1, 16, 1, ("1f1b", 1), 64, 2048),
    ("qwen3-30b-a3b", "dgx-h100", 2, 2, 2, ("interleaved", 2), 8, 2048),
    ("mixtral-8x7b", "dgx-h100x2", 2, 4, 2, ("interleaved", 2), 32, 2048),
)


def _step(label: str, model: ModelSpec, topology: str, batch: int, stack: Stack,
          space: SearchSpace, seq: int | None = None) -> list[object]:
    """One table row: ``model``'s one configuration in ``space`` planned on ``topology``,
    written as a workload and replayed."""
    out = plan(model, topology, global_batch=batch, seq=seq, top=1, engine="auto",
               stack=stack, space=space)
    best = out.result.configs[0]
    planned = best.record["step_time_s"]
    result = replay(replay_workload(workload_dict(out.model, best.config, batch, out.stack),
                                    topology), topology)
    return [label.format(config=best.config.label()), topology, stack.moe_overlap, planned,
            result.step_time_s, f"{(result.step_time_s / planned - 1) * 100:+.1f}%",
            f"{result.overlap_fraction:.2f}"]


def row(layout: tuple, overlap: str, layers: int | None) -> list[object]:
    name, topology, tp, ep, pp, schedule, batch, seq = layout
    model = catalogue_model(name)
    model = replace(model, layers=layers) if layers else model
    space = SearchSpace(tp=(tp,), ep=(ep,), pp=(pp,), micro_batch=(1,), schedule=(schedule,),
                        recompute=("none",), data_parallel=("zero1",))
    return _step(f"{name} {{config}} seq {seq}", model, topology, batch,
                 Stack(moe_overlap=overlap), space, seq=seq)


def zoo_row(overlap: str, layers: int, microbatches: int) -> list[object]:
    """The published combined-1F1B row's layout, cut to ``layers`` and ``microbatches``."""
    zoo = next(r for r in MOE_ROWS if "1F1B overlap" in r.label)
    cfg = zoo.config  # its sizes; the search splits the cut model's layers evenly
    space = SearchSpace(tp=(cfg.tp,), etp=(cfg.etp,), cp=(cfg.cp,), ep=(cfg.ep,), pp=(cfg.pp,),
                        micro_batch=(cfg.micro_batch,), schedule=((cfg.schedule, cfg.chunks),),
                        recompute=(cfg.recompute,), data_parallel=(cfg.data_parallel,))
    return _step(f"{zoo.label}: {layers} layers, {microbatches} micro-batches",
                 replace(zoo.model, layers=layers), zoo.preset,
                 microbatches * cfg.dp * cfg.micro_batch,
                 replace(zoo.stack, moe_overlap=overlap), space)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=0,
                        help="cut each model to this many layers (0: whole)")
    parser.add_argument("--zoo-layers", type=int, default=32,
                        help="the published row's layers (0: leave it out)")
    parser.add_argument("--zoo-microbatches", type=int, default=64,
                        help="the published row's micro-batches per step (it has 128)")
    args = parse_args(parser, {"layers": 4, "zoo_layers": 0}, "the first layout, four layers")
    layouts = LAYOUTS[:1] if args.quick else LAYOUTS
    rows = [row(layout, overlap, args.layers or None)
            for layout in layouts for overlap in ("none", "ep-overlap")]
    if args.zoo_layers:
        rows += [zoo_row(overlap, args.zoo_layers, args.zoo_microbatches)
                 for overlap in ("none", "ep-overlap")]
    print(table(["<layout", "<topology", "<overlap", "planned s", "replayed s", "replay",
                 "hidden"], rows))


if __name__ == "__main__":
    main()
