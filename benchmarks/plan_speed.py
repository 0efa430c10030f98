"""How fast ``commsim plan`` searches: configurations considered and timed per second.

Run: ``.venv/bin/python benchmarks/plan_speed.py [--quick] [MODEL ...]`` (MODEL: only that
model's cases, e.g. ``deepseek-v3``)

Llama 3 70B over 512 H100 (``dgx-h100x64``, the issue's target: an answer in <= 10 s) with
the default pruning, its collectives timed by the default closed forms (``--engine
analytic``) and as ``replay`` times them (``--engine auto``: the DES up to 64 ranks); and
GPT-3 6.7B over 64 A100 with ``--top 0`` (every configuration that fits is timed: the
evaluation rate without pruning); and the 70B search again under a what-if with one slow GPU
(rank 100 at 1.2x: every configuration's stages at their slowest rank's pace, the top 10 timed
again on the healthy machine); and DeepSeek-V3 (a mixture of experts: EP searched beside the
other axes) over 2,048 H100 (``dgx-h100x256``, issue 40's target: <= 10 s) at its published
global batch of 15,360 sequences, and again with ``--pp 16`` (61 layers on 16 stages: the
uneven split ``3,4*14,2``, every stage sized for each of ~100,000 configurations; issue 41's
target: ~10 s). Wall and CPU seconds: on a shared machine the CPU time is the
steadier figure. ``--quick``: Llama 2 7B over 16 H100, healthy and with one slow GPU, and
Qwen3-30B-A3B over 16 H100, for the test suite.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from commsim.plan import SearchSpace, plan  # noqa: E402
from commsim.topology import load_topology  # noqa: E402

#: One slow GPU: the what-if of the last case.
SLOW_GPU = {"name": "slow-gpu", "ranks": {100: {"compute": 1.2}}}
CASES = (
    ("llama3-70b", "dgx-h100x64", 1024, 10, "analytic", None),
    ("llama3-70b", "dgx-h100x64", 1024, 10, "auto", None),
    ("gpt3-6.7b", "dgx-a100x8", 512, 0, "analytic", None),
    ("llama3-70b", "dgx-h100x64", 1024, 10, "analytic", SLOW_GPU),
    ("deepseek-v3", "dgx-h100x256", 15360, 10, "analytic", None),
    ("deepseek-v3", "dgx-h100x256", 15360, 10, "analytic", None, 16),
)
QUICK = (
    ("llama2-7b", "dgx-h100x2", 64, 10, "analytic", None),
    ("llama2-7b", "dgx-h100x2", 64, 10, "analytic", {"name": "slow-gpu",
                                                       "ranks": {3: {"compute": 1.2}}}),
    ("qwen3-30b-a3b", "dgx-h100x2", 64, 10, "analytic", None),
)


def main() -> None:
    models = [a for a in sys.argv[1:] if not a.startswith("--")]
    known = sorted({case[0] for case in CASES + QUICK})
    for name in models:
        if name not in known:
            print(f"plan_speed.py: no case of {name!r} (cases: {', '.join(known)})",
                  file=sys.stderr)
            sys.exit(2)
    for model, preset, batch, top, engine, what_if, *pp in (
            QUICK if "--quick" in sys.argv else CASES):
        if models and model not in models:
            continue
        load_topology(preset)  # build (and cache) the network outside the timing
        t0, c0 = time.perf_counter(), time.process_time()
        space = SearchSpace(pp=tuple(pp)) if pp else None
        out = plan(model, preset, global_batch=batch, top=top, engine=engine, what_if=what_if,
                   space=space)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        r = out.result
        timed = len(r.configs)
        best = r.configs[0]
        also = "" if what_if is None else f", --what-if {what_if['name']}"
        also += f", --pp {pp[0]}" if pp else ""
        print(f"{model} on {preset} (global batch {batch}, --top {top}, --engine {engine}{also}): "
              f"{wall:.2f} s ({cpu:.2f} s CPU); "
              f"{r.considered} configurations considered ({r.considered / wall:,.0f}/s), "
              f"{timed} timed ({timed / wall:,.0f}/s); best: {best.config.label()} "
              f"{best.record['step_time_s']:.3f} s/step, MFU {best.record['mfu']:.1%}")


if __name__ == "__main__":
    main()
