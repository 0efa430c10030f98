"""Uneven pipeline stages in ``commsim plan``: the split searched or given, checked, timed
per stage, sized per stage and reported."""

from __future__ import annotations

import json

import pytest

from commsim.cli import main
from commsim.plan import SearchSpace, plan
from commsim.plan.blocks import PipelineCosts
from commsim.plan.evaluate import evaluate_pipeline
from commsim.plan.memory import peak_memory
from commsim.plan.models import catalogue_model
from commsim.replay.stages import chunk_layers, search_split

SMALL = ["gpt3-1.3b", "--topology", "dgx-a100", "--global-batch", "32"]
#: Llama 3 405B's published layout: TP 8, PP 16 (126 layers), one replica on 128 H100.
LLAMA = ["llama3-405b", "--topology", "dgx-h100x16", "--global-batch", "16", "--tp", "8",
         "--cp", "1", "--pp", "16", "--micro-batch", "1", "--data-parallel", "fsdp",
         "--recompute", "none"]


def _run(capsys, *argv):
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("split,needle", [
    ("12,11", "sums to 23 layers, the model has 24"),
    ("12,12,0", "every stage needs a whole number of layers >= 1"),
    ("6*4,0", "every stage needs a whole number of layers >= 1"),
    ("8,8,8", "3 stages, but pp is 2"),
    ("12,x", "'x' is not a layer count"),
    (",", "'' is not a layer count"),
])
def test_a_bad_split_is_one_line_exit_2(capsys, split, needle):
    """--stage-layers that sums wrong, has the wrong length (against --pp), holds a stage of
    no layers or is not numbers: one line naming it, exit 2."""
    pp = ["--pp", "2"] if split == "8,8,8" else []
    code, _, err = _run(capsys, *SMALL, "--stage-layers", split, *pp)
    assert code == 2, err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_an_even_split_changes_nothing(capsys):
    """Equal stages, whether pp divides the layers by itself or --stage-layers says so, give
    the same configurations, numbers and rejections as before uneven stages existed (the
    split is only added as ``stage_layers``)."""
    argv = [*SMALL, "--json", "--top", "0", "--tp", "1,2", "--pp", "2", "--micro-batch", "1,4",
            "--recompute", "none,full", "--data-parallel", "zero1,fsdp", "--schedule",
            "1f1b,interleaved:3"]
    _, plain, _ = _run(capsys, *argv)
    _, given, _ = _run(capsys, *argv, "--stage-layers", "12*2")
    assert plain == given
    data = json.loads(plain)
    assert all(c["stage_layers"] == [12, 12] for c in data["configs"])
    assert all("stage_layers" not in r for r in data["rejected"])


def test_llama3_405b_over_16_stages(capsys):
    """126 layers over 16 stages: planned with lighter first and last stages (Llama 3's
    layout), printed in the table and given as ``stage_layers`` in --json."""
    code, out, err = _run(capsys, *LLAMA, "--schedule", "1f1b,interleaved:8", "--top", "4")
    assert code == 0, err
    assert "pp16[7,8*14,7]" in out
    _, out, _ = _run(capsys, *LLAMA, "--schedule", "1f1b,interleaved:8", "--json")
    configs = json.loads(out)["configs"]
    assert {c["schedule"] for c in configs} == {"1f1b", "interleaved"}
    assert all(c["stage_layers"] == [7] + [8] * 14 + [7] for c in configs)


def test_csv_has_the_split(capsys):
    """--csv has a stage_layers column: the counts, first stage first, space-separated."""
    code, out, err = _run(capsys, *LLAMA, "--schedule", "1f1b", "--csv")
    assert code == 0, err
    header, first = out.splitlines()[:2]
    column = header.split(",").index("stage_layers")
    assert first.split(",")[column] == " ".join(["7"] + ["8"] * 14 + ["7"])


def test_a_what_if_on_uneven_stages(capsys):
    """A slow GPU on uneven stages: planned, each stage at its pace, the healthy step beside."""
    what_if = {"name": "slow", "ranks": {8: {"compute": 1.5}}}  # stage 1: 8 layers
    out = plan("llama3-405b", "dgx-h100x16", global_batch=16, top=2, what_if=what_if,
               space=SearchSpace(tp=(8,), cp=(1,), pp=(16,), micro_batch=(1,),
                                 schedule=(("1f1b", 1),), data_parallel=("fsdp",),
                                 recompute=("full",)))
    record = out.result.configs[0].record
    assert record["stage_layers"] == [7] + [8] * 14 + [7]
    assert record["slowest_rank_stage"] == 1 and record["slowdown"] > 1


def test_a_given_split_is_planned_as_given(capsys):
    """--stage-layers fixes the split (and the pp), heavier stages first if asked."""
    code, out, err = _run(capsys, *SMALL, "--stage-layers", "16,8", "--json", "--tp", "1")
    assert code == 0, err
    configs = json.loads(out)["configs"]
    assert configs and all(c["pp"] == 2 and c["stage_layers"] == [16, 8] for c in configs)


def test_interleaving_refused_where_megatron_places_no_chunks():
    """Interleaved stages of different layers: each stage's layers must split into V chunks
    as Megatron-LM places them (a multiple of V, or one fewer on the first or last stage);
    other V are rejected with the reason, the placeable ones timed."""
    space = SearchSpace(tp=(1,), cp=(1,), pp=(2,), micro_batch=(1,), data_parallel=("ddp",),
                        recompute=("none",), schedule=(("interleaved", 2), ("interleaved", 3)),
                        stage_layers=(11, 13))
    out = plan("gpt3-1.3b", "dgx-a100", global_batch=32, space=space, top=0)
    # V = 2: (5, 6) and (7, 6); V = 3: (3, 4, 4) on the first stage, none for 13 on the last
    assert {e.config.chunks for e in out.result.configs} == {2}
    assert any("interleaved:3: stage 1's 13 layers" in r.reason for r in out.result.rejected)


def test_the_split_minimises_the_slowest_stage():
    """The searched split is the one whose slowest stage is fastest, among every split with
    first and last stages no heavier than the middle ones (brute force on small cases)."""
    import itertools

    for layers, pp, last in [(10, 3, 1.5), (11, 4, 0.2), (13, 2, 2.0), (30, 4, 3.7)]:
        best = min(
            max(max(s[:-1]), s[-1] + last)
            for s in itertools.product(range(1, layers + 1), repeat=pp)
            if sum(s) == layers and (pp == 2 or max(s[0], s[-1]) <= min(s[1:-1]) == max(s[1:-1]))
        )
        split = search_split(layers, pp, 1.0, last)
        assert sum(split) == layers and max(max(split[:-1]), split[-1] + last) == best


def _by_hand_costs(split, k, schedule, fwd, bwd, logits):
    return PipelineCosts(schedule=schedule, pp=len(split), chunks=1, microbatches=k,
                         layers_per_chunk=0, chunk_layers=tuple(split), attn_fwd=fwd / 2,
                         mlp_fwd=fwd / 2, attn_bwd=bwd / 2, mlp_bwd=bwd / 2, logits_fwd=logits,
                         logits_bwd=2 * logits, tp_ar=(0.0,) * len(split),
                         cp_gather=(0.0,) * len(split), cp_rs=(0.0,) * len(split))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_an_uneven_step_by_hand(schedule):
    """Two stages of 2 and 3 layers, 4 micro-batches, free sends: the last stage is the
    slowest, so it computes without a pause from the moment the first micro-batch's forward
    has crossed stage 0 (2 F) until its last backward, and stage 0 then runs that micro-batch's
    backward (2 B): step = (2 + 4 x 3)(F + B) + 4 x 3 L, with the output layer's L forward
    and 2 L backward on the last stage."""
    fwd, bwd, logits = 1.0, 2.0, 0.25
    step = evaluate_pipeline(_by_hand_costs((2, 3), 4, schedule, fwd, bwd, logits))
    assert step.step_time_s == pytest.approx((2 + 4 * 3) * (fwd + bwd) + 4 * 3 * logits)
    assert step.compute_s == pytest.approx((4 * 2 * 3.0, 4 * (3 * 3.0 + 3 * logits)))


def test_memory_of_an_explicit_even_split_is_the_even_memory():
    """Sizing every stage of an even split (the uneven path) finds the same heaviest stage
    and bytes as sizing the first and last (the even path), schedule by schedule."""
    m = catalogue_model("gpt3-1.3b")
    for schedule, chunks in [("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("interleaved", 3)]:
        kw = dict(tp=2, cp=1, pp=4, dp=2, micro_batch=2, microbatches=8, schedule=schedule,
                  chunks=chunks, data_parallel="zero1", recompute="selective")
        assert peak_memory(m, **kw, stage_layers=(6, 6, 6, 6)) == peak_memory(m, **kw)


def test_the_stage_that_holds_the_most_decides_memory():
    """With one layer fewer on the first stage, 1F1B's second stage (one micro-batch fewer
    in flight, one layer more each) can hold the most: every stage is sized."""
    m = catalogue_model("llama3-405b")
    kw = dict(tp=8, cp=1, pp=16, dp=1, micro_batch=1, microbatches=16, schedule="1f1b",
              chunks=1, data_parallel="fsdp", recompute="none")
    mem = peak_memory(m, **kw, stage_layers=(7,) + (8,) * 14 + (7,))
    assert mem.stage == 1  # 15 x 8 layers in flight against the first stage's 16 x 7
    assert chunk_layers((7,) + (8,) * 14 + (7,), 8)[0] == (0,) + (1,) * 7
