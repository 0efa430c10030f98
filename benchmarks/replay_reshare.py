"""A mixture of experts' replay, its collectives on views of the network (the all-to-alls
across hosts): contended links re-shared once per instant against once per starting transfer,
in one process.

Each all-to-all starts hundreds of transfers at one instant over links they share; max-min
sharing once at the instant's end (``_TaskSimulation.batch_reshare``, as the plain transfers'
DES does) gives the same rates as sharing after each start, at a fraction of the fillings.
The case: ``commsim plan``'s configuration of Qwen3-30B-A3B at TP 8, expert TP 1, EP 16 over
two DGX H100 (ZeRO-1, NCCL's all-to-all), written as a workload and replayed both ways; both
must give the same step.

    python benchmarks/replay_reshare.py [--layers N] [--quick]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from _common import parse_args, table

from commsim.engine.tasks import _TaskSimulation
from commsim.plan import SearchSpace, plan, replay_workload, workload_dict
from commsim.plan.models import catalogue_model
from commsim.replay import replay

TOPOLOGY = "dgx-h100x2"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8, help="the model's layers (48: whole)")
    args = parse_args(parser, {"layers": 2}, "two layers")
    model = replace(catalogue_model("qwen3-30b-a3b"), layers=args.layers, seq=2048)
    out = plan(model, TOPOLOGY, global_batch=4, top=1, engine="auto",
               space=SearchSpace(tp=(8,), etp=(1,), ep=(16,), pp=(1,), micro_batch=(1,),
                                 recompute=("none",), data_parallel=("zero1",)))
    best = out.result.configs[0]
    spec = replay_workload(workload_dict(out.model, best.config, 4, out.stack), TOPOLOGY)
    rows, steps = [], []
    for batch in (False, True):
        _TaskSimulation.batch_reshare = batch
        t0 = time.perf_counter()
        result = replay(spec, TOPOLOGY)
        rows.append(["once per instant" if batch else "per start (before)",
                     f"{result.step_time_s:.9f}", time.perf_counter() - t0])
        steps.append(result.step_time_s)
    _TaskSimulation.batch_reshare = True
    if steps[0] != steps[1]:
        raise SystemExit(f"the two ways differ: {steps[0]!r} s, {steps[1]!r} s")
    for row in rows:
        row.append(rows[0][2] / row[2])
    print(f"{best.config.label()} on {TOPOLOGY}, {args.layers} layers, "
          f"planned {best.record['step_time_s']:.6f} s")
    print(table(["<re-share", "replayed step s", "wall s", "speed-up"], rows))


if __name__ == "__main__":
    main()
