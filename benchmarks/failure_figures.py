"""The figures of docs/what-if.md and docs/goodput.md: what failures, a straggler and a slow
log cost a 70B run on 2,048 H100 (the computations of notebooks/07).

Run: ``.venv/bin/python benchmarks/failure_figures.py [--quick] [--out DIR]``

Writes ``goodput-interval.png`` (goodput against the checkpoint interval: the closed form and
seeded simulated runs with their 95% CI), ``straggler-step.png`` (the step against one GPU's
compute factor, the same layout under ``plan(what_if=...)``) and ``diagnosis-issue290.png``
(the causes' median |error| on nccl-tests issue 290's forced ring) into ``--out``
(default docs/img), and prints the figures' numbers as a table. ``--quick``: 16 GPUs of a small
model and 10 simulated runs, into a temporary folder, for the test suite.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import ROOT, table
from matplotlib.figure import Figure

from commsim.goodput import GoodputSpec, analyse
from commsim.goodput.checkpoint import model_checkpoint_bytes
from commsim.plan import SearchSpace, plan
from commsim.plan.models import load_model
from commsim.validation.diagnose import diagnose
from commsim.validation.nccl_tests import read_nccl_tests

LOG = (ROOT / "tests" / "data" / "nccl-tests"
       / "h100-sxm_16gpu_2node_ib-ndr_allreduce-ring_nccl-tests-issue290.txt")
FACTORS = (1.0, 1.05, 1.1, 1.2, 1.3, 1.5)
SCALES = (0.1, 0.25, 0.5, 1, 2, 4, 10)


def _layout(model: str, topology: str, batch: int) -> tuple[float, SearchSpace, str]:
    """The healthy plan's step, its layout as a search space of one point, and its label."""
    best = plan(model, topology, global_batch=batch, top=1).result.configs[0]
    r = best.record
    space = SearchSpace(tp=(r["tp"],), cp=(r["cp"],), pp=(r["pp"],),
                        micro_batch=(r["micro_batch"],),
                        schedule=((r["schedule"], r["chunks_per_stage"]),),
                        data_parallel=(r["data_parallel"],), recompute=(r["recompute"],))
    return float(r["step_time_s"]), space, best.config.label()


def _save(fig: Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})


def goodput_figure(step_s: float, gpus: int, ckpt: int, runs: int, path: Path) -> list[tuple]:
    best = analyse(GoodputSpec(gpus=gpus, step_time_s=step_s, checkpoint_bytes=ckpt))
    rows = []
    for k in SCALES:
        tau = best.plain.outcome.interval_s * k
        a = analyse(GoodputSpec(gpus=gpus, step_time_s=step_s, checkpoint_bytes=ckpt,
                                interval_s=tau), runs=runs, seed=1)
        sim = a.plain.simulated
        assert sim is not None
        rows.append((f"interval x{k:g}", tau / 60, a.plain.outcome.goodput, sim.goodput, sim.ci95))
    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    ax.plot([r[1] for r in rows], [r[2] for r in rows], "-", label="closed form (Daly)")
    ax.errorbar([r[1] for r in rows], [r[3] for r in rows], yerr=[r[4] for r in rows], fmt="o",
                label=f"simulated ({runs} runs), 95% CI")
    ax.axvline(best.plain.outcome.interval_s / 60, ls=":", c="grey", label="best interval")
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval (min)")
    ax.set_ylabel("goodput")
    ax.set_title(f"{gpus} GPUs, step {step_s:.2f} s, checkpoint {ckpt / 1e12:.2f} TB")
    ax.legend()
    _save(fig, path)
    return rows


def straggler_figure(model: str, topology: str, batch: int, space: SearchSpace, step_s: float,
                     path: Path) -> list[tuple]:
    rows = []
    for f in FACTORS:
        rec = plan(model, topology, global_batch=batch, space=space, top=1,
                   what_if={"ranks": {1: {"compute": f}}}).result.configs[0].record
        rows.append((f"rank 1 x{f:g}", f, rec["step_time_s"], rec["step_time_s"] / step_s))
    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    ax.plot([r[1] for r in rows], [r[3] for r in rows], "o-", label="the step")
    ax.plot(FACTORS, FACTORS, ":", c="grey", label="as slow as the GPU")
    ax.set_xlabel("one GPU's compute factor")
    ax.set_ylabel("step time / healthy")
    ax.legend()
    _save(fig, path)
    return rows


def diagnosis_figure(path: Path) -> list[tuple]:
    found = diagnose(read_nccl_tests(LOG).measurements(), "dgx-h100x2", algorithm="ring")
    rows = [(f"{f.cause} {f.level}".strip(), f.median_abs_error_pct) for f in found.findings]
    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    ax.barh([r[0] for r in rows][::-1], [r[1] for r in rows][::-1])
    ax.set_xlabel("median |error| over the log's rows (%)")
    ax.set_title(f"nccl-tests issue 290, NCCL_ALGO=RING: verdict {found.verdict}")
    _save(fig, path)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small, into a temporary folder")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    model, topology, gpus, batch, runs = ("llama3-70b", "dgx-h100x256", 2048, 2048, 100)
    if args.quick:
        model, topology, gpus, batch, runs = ("llama2-7b", "dgx-h100x2", 16, 64, 10)
        args.out = Path(tempfile.mkdtemp())
    step_s, space, label = _layout(model, topology, batch)
    ckpt = model_checkpoint_bytes(load_model(model))
    print(f"# {model} on {gpus} GPUs of {topology}, global batch {batch}: {label}, "
          f"step {step_s:.3f} s")
    print(table(["<point", "interval min", "closed form", "simulated", "ci95"],
                goodput_figure(step_s, gpus, ckpt, runs, args.out / "goodput-interval.png")))
    print(table(["<point", "factor", "step s", "slowdown"],
                straggler_figure(model, topology, batch, space, step_s,
                                 args.out / "straggler-step.png")))
    print(table(["<cause", "median |error| %"],
                diagnosis_figure(args.out / "diagnosis-issue290.png")))


if __name__ == "__main__":
    main()
