"""A mixture of experts' all-to-alls overlapped with compute (``--moe-overlap``: Megatron-Core's
combined 1F1B, DeepSeek-V3's DualPipe) and its layer in FP8 (``--precision fp8``), each
pinned by hand on small cases."""

from __future__ import annotations

import json

import pytest

from commsim.cli import main
from commsim.errors import SpecError
from commsim.plan import SearchSpace, Stack, plan
from commsim.plan.blocks import MoEStage, PipelineCosts
from commsim.plan.compute import FP8_CAST_BYTES, gemm_time
from commsim.plan.config import PlanConfig
from commsim.plan.costs import estimate_step
from commsim.plan.device import DeviceSpec, network_device
from commsim.plan.evaluate import _paired_ops
from commsim.plan.experts import MoESpec
from commsim.plan.memory import peak_memory
from commsim.plan.models import ModelSpec
from commsim.plan.moe_layer import FP8_DISPATCH_BYTES, dispatch_bytes, moe_times
from commsim.plan.overlap import (
    _balanced,
    evaluate_dualpipe,
    paired_blocks,
    recompute_unfit,
    unfit,
)
from commsim.plan.stack import named_stack
from commsim.plan.workload import replay_spec
from commsim.replay.pipeline import PipeOp, stage_orders
from commsim.topology import load_topology

TINY = ModelSpec(name="tiny-moe", layers=4, hidden=1024, heads=16, kv_heads=4, ffn_hidden=2816,
                 vocab=32000, seq=2048, mlp="swiglu", tied_embeddings=False,
                 moe=MoESpec(experts=8, top_k=2, expert_ffn_hidden=1408))


def _costs(pp: int, k: int, *, a2a: float, overlap: str, schedule: str = "1f1b",
           chunks: int = 1, share: float = 0.0) -> PipelineCosts:
    """A pipeline of one MoE layer per chunk: attention 1 s forward and 2 s backward, experts
    1 s and 2 s, each all-to-all ``a2a`` s, nothing else; paired layers at SM ``share``."""
    m = MoEStage(1.0, 0.0, 1.0, 0.0, 2.0, a2a, 0.0)
    c = PipelineCosts(schedule=schedule, pp=pp, chunks=chunks, microbatches=k,
                      layers_per_chunk=1, attn_fwd=1.0, mlp_fwd=0.0, attn_bwd=2.0, mlp_bwd=0.0,
                      tp_ar=(0.0,) * pp, cp_gather=(0.0,) * pp, cp_rs=(0.0,) * pp,
                      moe=(m,) * pp, moe_overlap=overlap)
    from dataclasses import replace

    return replace(c, paired=tuple(paired_blocks(c, p, share) for p in range(pp)))


@pytest.mark.parametrize(("a2a", "share", "pair"), [
    (0.5, 0.25, 6.0 + 4 * 0.5 * 0.25),  # compute-bound: C + a x share, every all-to-all hidden
    (0.5, 0.0, 6.0),                    # no SMs taken: the compute alone
    (2.0, 0.25, 8.0 + 4 / 3),           # communication-bound: see the docstring
    (1.6, 0.25, 7.6 + 2 / 3),           # between: C + a share = 7.6, B waits twice 1/3 s
])
def test_a_pair_is_its_woven_compute_and_all_to_alls(a2a, share, pair):
    """A forward and a backward layer run together: C = 6 s of compute (1 + 1 forward, 2 + 2
    backward), 4 all-to-alls of ``a2a``, the compute stretched by 1 + a share / C (at most
    1 / (1 - share)), then woven as Megatron-Core's combined 1F1B issues them: F attention |
    B combine' | B experts' | F dispatch | F experts | B dispatch' | B attention' | F combine,
    each waiting for its own op's block before and its stream's. With a = 2 (compute x 4/3):
    F attention 0-4/3; B combine' 0-2, so B experts' 2-14/3 (2/3 waited); F dispatch 2-4,
    F experts 14/3-6; B dispatch' 14/3-20/3, B attention' 20/3-28/3 (2/3 waited); F's
    combine ends at 26/3, before it: 8 + 4/3 s, the waits exposed as ``ep`` time."""
    c = _costs(1, 2, a2a=a2a, overlap="ep-overlap")
    f, b = paired_blocks(c, 0, share)
    stretched = min(6.0 + 4 * a2a * share, 6.0 / (1 - share))
    assert sum(x for _, x in f + b) == pytest.approx(pair)
    assert sum(x for s, x in f + b if s == "ep") == pytest.approx(pair - stretched)
    assert f[0] == ("compute", pytest.approx(stretched / 6.0))
    assert paired_blocks(c, 0, share) == (f, b)  # the same again (the weave is memoised)


def test_combined_1f1b_pairs_by_hand():
    """Without pipelining, Megatron-Core's combined 1F1B runs F0, then (F1 with B0), (F2 with
    B1), then B2: with 3 micro-batches of one layer the step is F + 2 pairs + B, less two
    all-to-alls that wait for no compute: F0's combine runs under the first pair's compute
    (F1 needs nothing of F0), B2's first (its combine's gradient) under the last pair's;
    against 3 (F + B) when every all-to-all waits."""
    a2a, share = 0.5, 0.25
    pairs = _paired_ops("1f1b", 1, 3, 1)
    assert pairs == {(0, PipeOp("B", 0)), (0, PipeOp("F", 1)), (0, PipeOp("B", 1)),
                     (0, PipeOp("F", 2))}
    assert [str(op) for op in stage_orders("1f1b", stages=1, microbatches=3,
                                           combined=True)[0]] == ["F0", "F1", "B0", "F2",
                                                                  "B1", "B2"]
    fwd, bwd = 2.0 + 2 * a2a, 4.0 + 2 * a2a
    pair = 6.0 + 4 * a2a * share
    got = estimate_step([_costs(1, 3, a2a=a2a, overlap="ep-overlap", share=share)])
    assert got.step_time_s == pytest.approx(fwd + 2 * pair + bwd - 2 * a2a)
    none = estimate_step([_costs(1, 3, a2a=a2a, overlap="none")])
    assert none.step_time_s == pytest.approx(3 * (fwd + bwd))


def test_no_combined_schedule_for_plain_1f1b_with_stages():
    """Megatron-Core hosts the overlap without pipelining and in its interleaved schedule: a
    plain 1F1B of several stages pairs nothing (the same step as none); an interleaved one
    pairs its steady state and is faster when the all-to-alls are long."""
    assert _paired_ops("1f1b", 4, 8, 1) == frozenset()
    plain = [estimate_step([_costs(4, 8, a2a=1.0, overlap=o)]).step_time_s
             for o in ("none", "ep-overlap")]
    assert plain[0] == plain[1]
    assert _paired_ops("interleaved", 2, 4, 2)
    inter = [estimate_step([_costs(2, 4, a2a=1.0, overlap=o, schedule="interleaved",
                                   chunks=2, share=0.15)]).step_time_s
             for o in ("none", "ep-overlap")]
    assert inter[1] < inter[0]


def test_dualpipe_step_is_table_2s_bubble_by_hand():
    """DualPipe over 4 stages and 8 micro-batches: k F&B + (PP/2 - 1)(F&B + B - 3W), with
    F&B the pair (compute-bound here: 6 + 4 a share), B = 4 + 2 a the backward chunk alone
    and W half its compute (2)."""
    a2a, share, k, pp = 0.5, 0.25, 8, 4
    c = _costs(pp, k, a2a=a2a, overlap="dualpipe", share=share)
    fb, b, w = 6.0 + 4 * a2a * share, 4.0 + 2 * a2a, 2.0
    want = k * fb + (pp // 2 - 1) * (fb + b - 3 * w)
    assert evaluate_dualpipe(c).step_time_s == pytest.approx(want)
    assert estimate_step([c]).step_time_s == pytest.approx(want)
    one_f_one_b = estimate_step([_costs(pp, k, a2a=a2a, overlap="none")]).step_time_s
    assert one_f_one_b == pytest.approx((k + pp - 1) * (2.0 + 2 * a2a + b))  # (k+PP-1)(F+B)
    assert want < one_f_one_b


def test_combined_1f1b_refuses_full_and_moe_recompute():
    """Megatron-Core's combined 1F1B asserts no full recomputation and no ``moe`` in its
    recompute modules: the planner rejects those layouts with the reason, and the replay
    refuses such a workload in one line; selective recompute, and DualPipe, stay."""
    stack = Stack(moe_overlap="ep-overlap")
    cfg = PlanConfig(tp=1, cp=1, pp=1, dp=8, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="zero1", recompute="full", ep=8)
    from dataclasses import replace

    for rc in ("full", "moe"):
        why = unfit(replace(cfg, recompute=rc), 8, stack)
        assert why is not None and "Megatron-Core" in why and rc in why
    assert unfit(replace(cfg, recompute="selective"), 8, stack) is None
    assert recompute_unfit("full", Stack(moe_overlap="dualpipe")) is None
    device = network_device(load_topology("dgx-h100"))
    with pytest.raises(SpecError, match="combined 1F1B runs without full recompute"):
        replay_spec(TINY, cfg, 64, device, stack)
    out = plan(TINY, "dgx-h100", global_batch=16, top=0, stack=stack,
               space=SearchSpace(tp=(1,), cp=(1,), pp=(1,), micro_batch=(1,), ep=(8,),
                                 data_parallel=("zero1",), recompute=("none", "full")))
    assert {e.config.recompute for e in out.result.configs} == {"none"}
    assert any("combined 1F1B" in r.reason for r in out.result.rejected)


def test_a_recomputing_backward_hands_over_as_often_as_the_forward():
    """A backward that runs its forward again has twice the forward's hand-overs per layer;
    the weave keeps every second (its last among them), so the two ops advance a layer per
    layer instead of the forward running out half way through the chunk."""
    assert _balanced([frozenset({2, 4}), frozenset({2, 4, 7, 10})]) == [
        frozenset({2, 4}), frozenset({4, 10})]
    assert _balanced([frozenset({1, 3}), frozenset({1, 3})]) == [frozenset({1, 3})] * 2


def test_dualpipe_needs_an_even_pipeline_and_enough_micro_batches():
    """DualPipe's own assertions: an even number of ranks, an even number of micro-batches of
    at least twice the ranks; the planner rejects the rest with the reason."""
    stack = Stack(moe_overlap="dualpipe")
    cfg = PlanConfig(tp=1, cp=1, pp=4, dp=2, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="ddp", recompute="none")
    assert unfit(cfg, 8, stack) is None and unfit(cfg, 8, Stack()) is None
    assert "at least" in unfit(cfg, 6, stack)
    odd = PlanConfig(tp=1, cp=1, pp=3, dp=2, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="ddp", recompute="none")
    assert "even pipeline" in unfit(odd, 8, stack)
    from dataclasses import replace

    assert "fsdp" in unfit(replace(cfg, data_parallel="fsdp"), 8, stack)
    out = plan(TINY, "dgx-h100", global_batch=16, top=0, stack=stack,
               space=SearchSpace(tp=(1,), cp=(1,), pp=(1, 2), micro_batch=(1,),
                                 data_parallel=("ddp",), recompute=("none",), ep=(2,)))
    assert {e.config.pp for e in out.result.configs} == {2}
    assert all(e.record["moe_overlap"] == "dualpipe" for e in out.result.configs)
    assert any("dualpipe" in r.reason for r in out.result.rejected)
    # nothing left: the error names what rejected most, not the first rejection
    with pytest.raises(SpecError, match=r"is left: --moe-overlap dualpipe: needs an even "
                                        r"pipeline .* \(\d+ of \d+ rejected for that\)"):
        plan(TINY, "dgx-h100", global_batch=16, top=0, stack=stack,
             space=SearchSpace(tp=(1, 2), cp=(1,), pp=(1,), micro_batch=(1,),
                               data_parallel=("ddp",), recompute=("none",), ep=(2,)))


def test_dualpipe_holds_two_stages():
    """A DualPipe rank holds stage r and stage PP-1-r: twice the parameters' states of one,
    and PP + 1 micro-batches of activations (1F1B's PP - r and r + 1)."""
    kw = dict(tp=1, cp=1, pp=4, dp=2, micro_batch=1, microbatches=8, schedule="1f1b",
              chunks=1, data_parallel="ddp", recompute="none", ep=2)
    one = peak_memory(TINY, **kw)
    two = peak_memory(TINY, **kw, stack=Stack(moe_overlap="dualpipe"))
    assert one.weights < two.weights <= 2 * one.weights
    assert two.gradients > one.gradients and two.optimizer > one.optimizer
    assert two.activations > one.activations  # stage 0's 4 micro-batches and stage 3's 1


DEV = DeviceSpec(name="x", memory_bytes=2**36, memory_bandwidth_Bps=3e12, peak_flops=1e15,
                 peak_flops_fp8=2e15, sms=132, gemm_efficiency=0.7, attention_efficiency=0.45)


def test_fp8_expert_gemms_by_hand():
    """Under fp8 the experts' grouped GEMMs run at the fp8 peak with their casts at HBM
    bandwidth (input and weight forward, output gradient backward, 4 bytes each); the
    router stays bf16. One expert per rank (ep 8): n = k T ep / E = 4096 tokens."""
    bf16 = moe_times(TINY, DEV, tp=1, cp=1, ep=8, micro_batch=1)
    fp8 = moe_times(TINY, DEV, tp=1, cp=1, ep=8, micro_batch=1, precision="fp8")
    n, h, f = 2 * 2048 * 8 // 8, 1024, 1408
    hbm = DEV.hbm_Bps

    def grouped(precision: str) -> tuple[float, float]:
        fwd = gemm_time(DEV, n, 2 * f, h, 1, precision) + gemm_time(DEV, n, h, f, 1, precision)
        bwd = (gemm_time(DEV, n, h, 2 * f, 1, precision) + gemm_time(DEV, h, 2 * f, n, 1,
                                                                     precision)
               + gemm_time(DEV, n, f, h, 1, precision) + gemm_time(DEV, f, h, n, 1, precision))
        if precision == "fp8":
            fwd += FP8_CAST_BYTES * (n * h + h * 2 * f + n * f + f * h) / hbm
            bwd += FP8_CAST_BYTES * (n * 2 * f + n * h) / hbm
        return fwd, bwd

    for name, i in (("experts_fwd", 0), ("experts_bwd", 1)):
        diff = getattr(bf16, name) - getattr(fp8, name)
        assert diff == pytest.approx(grouped("bf16")[i] - grouped("fp8")[i])
    assert fp8.pre_fwd == bf16.pre_fwd and fp8.pre_bwd == bf16.pre_bwd  # the router: bf16
    assert fp8.experts_fwd < bf16.experts_fwd


def test_fp8_dispatch_bytes():
    """The FP8 dispatch sends 1 byte per value and an fp32 scale per 128; the combine stays
    bf16 (two of a layer's four all-to-alls each)."""
    bf16 = dispatch_bytes(TINY, tp=1, cp=1, ep=8, micro_batch=1)
    fp8 = dispatch_bytes(TINY, tp=1, cp=1, ep=8, micro_batch=1, precision="fp8")
    assert bf16 == 2 * 2048 * 1024 * 2
    assert fp8 == int(2 * 2048 * 1024 * FP8_DISPATCH_BYTES) < bf16
    net = load_topology("dgx-h100")
    dev = network_device(net, None)
    space = SearchSpace(tp=(1,), cp=(1,), pp=(1,), micro_batch=(1,), data_parallel=("ddp",),
                        recompute=("none",), ep=(8,))
    steps = [plan(TINY, net, global_batch=8, space=space, stack=Stack(precision=p))
             .result.configs[0].record["step_time_s"] for p in ("bf16", "fp8")]
    assert steps[1] < steps[0] and dev.peak_flops_fp8


def test_moe_overlap_in_json_and_csv(capsys):
    """--moe-overlap is each configuration's moe_overlap in --json and --csv, and the stack
    line of the table names it."""
    argv = ["plan", "mixtral-8x7b", "--topology", "dgx-h100x8", "--global-batch", "256",
            "--tp", "1", "--cp", "1", "--pp", "2", "--micro-batch", "1", "--schedule",
            "interleaved:2", "--data-parallel", "zero1", "--recompute", "none", "--ep", "8",
            "--top", "1", "--moe-overlap", "ep-overlap"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["configs"][0]["moe_overlap"] == "ep-overlap"
    assert out["stack"]["moe_overlap"] == "ep-overlap"
    assert main([*argv, "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "moe_overlap" in lines[0].split(",")
    assert main(argv) == 0
    assert "ep-overlap" in capsys.readouterr().out.splitlines()[1]


@pytest.mark.parametrize("value", ["bogus", "dual-pipe", ""])
def test_bad_moe_overlap_is_one_line_exit_2(capsys, value):
    """An unknown --moe-overlap is one line on stderr naming it, exit 2."""
    code = main(["plan", "mixtral-8x7b", "--topology", "dgx-h100x8", "--global-batch", "256",
                 "--moe-overlap", value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--moe-overlap" in err
    with pytest.raises(SpecError, match="comm_sms"):
        Stack(comm_sms=-1)
    assert named_stack("current", moe_overlap=" DualPipe ").moe_overlap == "dualpipe"


@pytest.mark.parametrize("overlap", ["ep-overlap", "dualpipe"])
def test_pruning_never_changes_the_top_under_overlap(overlap):
    """The search's bounds stay lower bounds when the all-to-alls hide (none of them enters
    the bound) and under DualPipe's shorter bubble: the best of a pruned search is the best
    of all."""
    stack = Stack(moe_overlap=overlap)
    space = SearchSpace(tp=(1,), cp=(1,), pp=(1, 2, 4), micro_batch=(1, 2),
                        data_parallel=("ddp",), recompute=("none",))
    every = plan(TINY, "dgx-h100x2", global_batch=64, top=0, stack=stack, space=space)
    best = plan(TINY, "dgx-h100x2", global_batch=64, top=1, stack=stack, space=space)
    steps = sorted(e.record["step_time_s"] for e in every.result.configs if e.fits)
    assert best.result.configs[0].record["step_time_s"] == pytest.approx(steps[0])


def test_fp8_weight_copies_of_a_moe_layer_are_the_ranks_own():
    """Under fp8 each layer in flight keeps the fp8 copies of the weights its rank holds: for
    a MoE layer the attention, router and its 1/ep of the routed experts, so EP shrinks
    them."""
    from commsim.plan.memory import FP8_WEIGHT_BYTES

    kw = dict(tp=1, cp=1, pp=1, dp=8, micro_batch=1, microbatches=1, schedule="1f1b",
              chunks=1, data_parallel="ddp", recompute="none")
    for ep in (1, 8):
        bf16 = peak_memory(TINY, **kw, ep=ep)
        fp8 = peak_memory(TINY, **kw, ep=ep, stack=Stack(precision="fp8"))
        own = TINY.dense_params_at(0) + TINY.experts_at(0) / ep
        assert fp8.activations - bf16.activations == pytest.approx(
            TINY.layers * FP8_WEIGHT_BYTES * own, abs=1)
