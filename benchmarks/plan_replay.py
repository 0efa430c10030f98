"""``plan``'s step against the full ``replay`` of the configuration it ranks first.

For every catalogue model, ``commsim plan`` ranks the configurations of a cluster (the
default analytic engine, as a user runs it), the first is written as a ``hybrid`` workload
(:func:`commsim.plan.workload.workload_dict`, what ``--write-workload`` writes), and
``commsim replay`` simulates it, every rank and collective in one DES. The table gives both
steps and their difference: the replay sees contention between groups' traffic (DP and PP,
FSDP and CP, expert all-to-alls and gradient reductions on shared ports) that the planner's
one-pipeline evaluation does not, and timing collectives by the DES instead of the closed
forms. ``--quick`` runs two models on one DGX H100; ``--models a,b`` some of the full run's
(each row's progress goes to stderr as it is done). ``--top3`` asks whether the planner's
free choice holds up: Llama 3 70B on 512 H100 (``dgx-h100x64``, global batch 1024, every axis
searched), its first three configurations each replayed in full (replicas folded, exactly:
:mod:`commsim.replay.replicas`), their order and steps against the plan's.

    python benchmarks/plan_replay.py [--quick | --models NAME,... | --top3]
"""

from __future__ import annotations

import sys
import time

from _common import table

from commsim.plan import SearchSpace, plan
from commsim.plan.workload import replay_workload, workload_dict
from commsim.replay import replay

NONE = ("none",)
#: model -> (topology, global batch, seq (None: the model's), search axes)
FULL = {
    "gpt3-1.3b": ("dgx-h100x8", 256, None, dict(recompute=NONE)),
    "gpt3-2.7b": ("dgx-h100x8", 256, None, dict(recompute=NONE)),
    "gpt3-6.7b": ("dgx-h100x8", 256, None, dict(recompute=NONE)),
    "gpt3-13b": ("dgx-h100x8", 256, None, dict(recompute=NONE, pp=(1, 2))),
    "gpt3-175b": ("dgx-h100x8", 64, None, dict(recompute=NONE, tp=(8,), pp=(8,),
                                               schedule=(("1f1b", 1),))),
    "megatron-145b": ("dgx-h100x8", 64, None, dict(recompute=NONE, tp=(8,), pp=(8,),
                                                   schedule=(("1f1b", 1),))),
    "megatron-1t": ("dgx-h100x8", 32, None, dict(recompute=NONE, tp=(8,), pp=(8,),
                                                 schedule=(("1f1b", 1),))),
    "llama2-7b": ("dgx-h100x8", 256, None, dict(recompute=NONE)),
    "llama2-13b": ("dgx-h100x8", 256, None, dict(recompute=NONE, pp=(1, 2))),
    "llama2-70b": ("dgx-h100x8", 64, None, dict(recompute=NONE, tp=(8,), pp=(2, 4),
                                                schedule=(("1f1b", 1),))),
    "llama3-8b": ("dgx-h100x8", 128, None, dict(recompute=NONE, pp=(1, 2))),
    "llama3-70b": ("dgx-h100x8", 64, None, dict(recompute=NONE, tp=(8,), pp=(2, 4),
                                                schedule=(("1f1b", 1),))),
    "llama3-405b": ("dgx-h100x8", 8, None, dict(recompute=("full",), tp=(8,), pp=(8,),
                                                 schedule=(("1f1b", 1),))),
    "mistral-7b": ("dgx-h100x8", 128, None, dict(recompute=NONE, pp=(1, 2))),
    "mixtral-8x7b": ("dgx-h100x8", 64, 4096, dict(recompute=NONE, pp=(1, 2), ep=(8,))),
    "mixtral-8x22b": ("dgx-h100x8", 64, 4096, dict(recompute=NONE, tp=(8,), pp=(2, 4),
                                                   ep=(4, 8), schedule=(("1f1b", 1),))),
    "deepseek-v3": ("dgx-h100x8", 32, None, dict(recompute=("full",), tp=(2,), pp=(4,),
                                                 ep=(8,), schedule=(("1f1b", 1),))),
    "qwen3-30b-a3b": ("dgx-h100x8", 128, None, dict(recompute=NONE, pp=(1,), ep=(8,))),
    "qwen3-235b-a22b": ("dgx-h100x8", 64, None, dict(recompute=NONE, tp=(4, 8), pp=(2, 4),
                                                     ep=(8,), schedule=(("1f1b", 1),))),
    "gpt-oss-120b": ("dgx-h100x8", 64, None, dict(recompute=NONE, pp=(1, 2), ep=(8,))),
    # the same with DDP: no expert gathers and reductions beside the all-to-alls in backward
    "gpt-oss-120b ddp": ("dgx-h100x8", 64, None, dict(recompute=NONE, pp=(1, 2), ep=(8,),
                                                     data_parallel=("ddp",))),
}
QUICK = {
    "llama3-8b": ("dgx-h100", 16, 2048, dict(recompute=NONE, tp=(2,), pp=(2,))),
    "mixtral-8x7b": ("dgx-h100", 8, 2048, dict(recompute=NONE, tp=(1,), pp=(1,), ep=(8,))),
}


def row(case: str, topology: str, batch: int, seq: int | None, axes: dict) -> list[object]:
    name = case.split()[0]
    out = plan(name, topology, global_batch=batch, seq=seq, space=SearchSpace(**axes), top=1)
    best = out.result.configs[0]
    spec = replay_workload(workload_dict(out.model, best.config, batch, out.stack), topology)
    start = time.perf_counter()
    result = replay(spec, topology)
    wall = time.perf_counter() - start
    planned, full = best.record["step_time_s"], result.step_time_s
    print(f"# {case}: {best.config.label()}: plan {planned:.4f} s, replay {full:.4f} s "
          f"({wall:.0f} s)", file=sys.stderr, flush=True)
    return [case, f"{out.gpus} x {topology}", best.config.label(), f"{planned:.4f}",
            f"{full:.4f}", f"{100 * (full / planned - 1):+.2f}%", len(result.graph.tasks),
            f"{wall:.1f}"]


def top3() -> None:
    """The planner's first three for Llama 3 70B on 512 H100, each replayed in full."""
    topology, batch = "dgx-h100x64", 1024
    out = plan("llama3-70b", topology, global_batch=batch, top=3)
    rows = []
    for rank, best in enumerate(out.result.configs[:3], 1):
        spec = replay_workload(workload_dict(out.model, best.config, batch, out.stack), topology)
        start = time.perf_counter()
        result = replay(spec, topology)
        wall = time.perf_counter() - start
        planned, full = best.record["step_time_s"], result.step_time_s
        rows.append([rank, best.config.label(), f"{planned:.4f}", f"{full:.4f}",
                     f"{100 * (full / planned - 1):+.2f}%", f"{wall:.1f}"])
    print(table([">plan rank", "<configuration", "plan s", "replay s", "replay-plan",
                 "replay wall s"], rows))
    order = sorted(range(len(rows)), key=lambda i: (float(rows[i][3]), i))
    print(f"replayed order: {[rows[i][0] for i in order]} (ties in plan order)")


def main() -> None:
    if "--top3" in sys.argv:
        top3()
        return
    cases = QUICK if "--quick" in sys.argv else FULL
    if "--models" in sys.argv:  # a comma list: those of FULL only
        names = sys.argv[sys.argv.index("--models") + 1].split(",")  # "gpt-oss-120b ddp"
        cases = {name: FULL[name] for name in names}
    rows = [row(name, *case) for name, case in cases.items()]
    print(table(["<model", "<cluster", "<configuration (plan's first)", "plan s", "replay s",
                 "replay-plan", "tasks", "replay wall s"], rows))


if __name__ == "__main__":
    main()
