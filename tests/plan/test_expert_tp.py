"""Expert tensor parallelism of its own (``etp``, Megatron-Core's MoE Parallel Folding): the MoE
layers' ``tp-ep-dp-pp`` grid over a stage's ranks, what it changes in a step (groups, the
all-to-all, the expert GEMMs, the expert TP collectives, memory), and ``--etp``."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commsim.cli import main
from commsim.errors import SpecError
from commsim.plan import SearchSpace, plan, replay_workload, workload_dict
from commsim.plan.compute import BF16, _fwd_bwd
from commsim.plan.config import LLAMA3_ORDER, MEGATRON_ORDER, PlanConfig
from commsim.plan.costs import pipeline_costs
from commsim.plan.device import network_device
from commsim.plan.experts import MoESpec
from commsim.plan.memory import WEIGHT_BYTES, peak_memory, stage_params
from commsim.plan.models import ModelSpec
from commsim.plan.moe_layer import dispatch_bytes, moe_times
from commsim.plan.search import layer_costs
from commsim.plan.stack import DEFAULT
from commsim.plan.timing import CollectiveTimer
from commsim.replay import replay
from commsim.replay.layout import Parallel
from commsim.topology import load_topology

TINY = ModelSpec(name="tiny-moe", layers=4, hidden=1024, heads=16, kv_heads=4, ffn_hidden=2816,
                 vocab=32000, seq=2048, mlp="swiglu", tied_embeddings=False,
                 moe=MoESpec(experts=8, top_k=2, expert_ffn_hidden=1408))
#: One stage of 16 GPUs (dgx-h100x2): TP 2 x DP 8; one micro-batch of 2048 tokens.
FIXED = dict(tp=(2,), cp=(1,), pp=(1,), micro_batch=(1,), schedule=(("1f1b", 1),),
             data_parallel=("zero1",), recompute=("none",))


def _cfg(**kw) -> PlanConfig:
    base = dict(tp=2, cp=1, pp=1, dp=8, micro_batch=1, schedule="1f1b", chunks=1,
                data_parallel="zero1", recompute="none", ep=4, order=MEGATRON_ORDER)
    return PlanConfig(**{**base, **kw})


def test_default_is_the_attention_tp_and_searching_it_changes_nothing():
    """``etp`` defaults to ``tp`` (the same configuration, groups and label); ``--etp`` with
    only the TP's value ranks the same records as no ``--etp``."""
    assert _cfg() == _cfg(etp=2) and _cfg().etp == 2 and "etp" not in _cfg().label()
    assert _cfg().ep_groups(0) == _cfg(etp=2).ep_groups(0) == [(0, 2, 4, 6), (8, 10, 12, 14)]
    net = load_topology("dgx-h100x2")
    default = plan(TINY, net, global_batch=8, space=SearchSpace(**FIXED), top=0)
    explicit = plan(TINY, net, global_batch=8, space=SearchSpace(**FIXED, etp=(2,)), top=0)
    assert [e.record for e in default.result.configs] == \
        [e.record for e in explicit.result.configs]
    assert {e.record["etp"] for e in default.result.configs} == {2}


def test_etp1_folds_ep_over_the_attention_tp_ranks():
    """TP 2, ETP 1, EP 8 on 16 GPUs (one stage): a stage's local rank is ``et + etp (e + ep
    ed)``, so an EP group is 8 consecutive GPUs (TP ranks 0 and 1 of replicas 0-3: one host),
    the expert-DP group ``edp = 2 x 8 / (1 x 8) = 2`` ranks 8 apart, each expert TP group one
    rank; as ETP 2 x EP 4 it was TP rank 0 of four replicas."""
    new, old = _cfg(ep=8, etp=1), _cfg(ep=4)
    assert new.label() == "tp2 cp1 pp1 dp8 ep8 etp1 mb1 1f1b zero1 none"
    assert new.ep_group(0, 0) == tuple(range(8)) and new.ep_group(0, 5) == tuple(range(8, 16))
    assert new.ep_groups(0) == [tuple(range(8)), tuple(range(8, 16))]
    assert new.expert_dp_group(0) == (0, 8) and new.expert_dp == 2
    assert new.etp_group(0) == (0,) and old.etp_group(0) == (0, 1)
    assert old.ep_group(0, 0) == (0, 2, 4, 6) and old.expert_dp_group(0) == (0, 8)
    # ETP 1 x EP 4: four EP groups of 4 consecutive ranks, an expert-DP group of 4
    quarter = _cfg(ep=4, etp=1)
    assert quarter.ep_groups(0) == [tuple(range(i, i + 4)) for i in range(0, 16, 4)]
    assert quarter.expert_dp_group(0) == (0, 4, 8, 12)


def test_etp1_step_pieces_by_hand():
    """The all-to-all is the timing layer's over ranks 0-7, of each rank's own ``k (T/t) h``
    bf16 values (2 x 1024 x 1024 x 2 bytes); no expert TP collective (ETP 1, no shared
    experts); the busiest rank's one expert (8 / EP 8) runs the whole ``f_e`` on
    ``n = k T EP etp / (t E) = 2 x 2048 x 8 / (2 x 8) = 2048`` tokens."""
    net = load_topology("dgx-h100x2")
    dev = network_device(net, None)
    cfg = _cfg(ep=8, etp=1)
    nbytes = dispatch_bytes(TINY, tp=2, cp=1, ep=8, micro_batch=1)
    assert nbytes == 2 * 1024 * 1024 * 2
    moe = moe_times(TINY, dev, tp=2, cp=1, ep=8, micro_batch=1, etp=1)
    timer = CollectiveTimer(net, "analytic")
    stage = pipeline_costs(cfg, TINY, layer_costs(TINY, dev, 2, 1, 1, "none"), timer, 1,
                           device=dev, moe=moe)[0].moe[0]
    assert stage.a2a == timer.collective("all_to_all", tuple(range(8)), nbytes) > 0
    assert stage.tp == 0.0
    up = _fwd_bwd(dev, 2048, 2 * 1408, 1024, "bf16", batch=1)
    down = _fwd_bwd(dev, 2048, 1024, 1408, "bf16", batch=1)
    act = 2048 * 3 * 1408 * BF16 / dev.hbm_Bps  # SwiGLU reads 2 f_e rows, writes 1
    unpermute = 2.0 * 2 * 1024 * 1024 * BF16 / dev.hbm_Bps  # k T/t tokens, read and write
    assert moe.experts_fwd == pytest.approx(up[0] + down[0] + act + unpermute, rel=1e-12)
    # ETP 2 x EP 4 all-reduces the k T h routed values over the TP pair instead
    old = pipeline_costs(_cfg(ep=4), TINY, layer_costs(TINY, dev, 2, 1, 1, "none"), timer, 1,
                         device=dev, moe=moe_times(TINY, dev, tp=2, cp=1, ep=4,
                                                   micro_batch=1))[0].moe[0]
    assert old.tp == timer.collective("all_reduce", (0, 1), 2 * 2048 * 1024 * BF16) > 0


def test_etp1_expert_memory_by_hand():
    """A rank holds ``1/(ep etp)`` of the routed experts (ETP 1 x EP 8 and ETP 2 x EP 4 both
    1/8; ETP 1 x EP 4, 1/4) in bf16, its Adam states (12 bytes) over the ``edp`` expert-DP
    ranks under ZeRO-1, the rest ``1/t`` sharded over ``dp``."""
    expert = TINY.moe.experts * TINY.expert_params * TINY.layers  # every layer is MoE
    dense = stage_params(TINY, tp=2, pp=1, stage=0)
    for ep, etp, share, edp in ((8, 1, 8, 2), (4, 2, 8, 2), (4, 1, 4, 4)):
        mem = peak_memory(TINY, tp=2, cp=1, pp=1, dp=8, micro_batch=1, microbatches=1,
                          schedule="1f1b", chunks=1, data_parallel="zero1", recompute="none",
                          ep=ep, etp=etp)
        assert mem.weights == WEIGHT_BYTES * (dense + expert // share)
        assert mem.optimizer == math.ceil(12 * dense / 8) + math.ceil(12 * (expert // share)
                                                                      / edp)


def test_pruned_search_keeps_the_best_with_etp():
    """The bounds stay lower bounds with an expert TP of its own: the pruned search (top 1)
    finds the configuration the exhaustive one ranks first; ETP 1 configurations are
    searched beside ETP 2 ones, EP up to the stage's 16 ranks."""
    net = load_topology("dgx-h100x2")
    space = SearchSpace(**FIXED, etp=(1, 2))
    every = plan(TINY, net, global_batch=8, space=space, top=0).result.configs
    best = plan(TINY, net, global_batch=8, space=space, top=1).result.configs[0]
    assert best.record == every[0].record
    pairs = {(e.config.etp, e.config.ep) for e in every}
    assert {(1, 8), (2, 4), (2, 8)} <= pairs and (2, 16) not in pairs


def _run(capsys, *argv):
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv,needle", [
    (["mixtral-8x7b", "--etp", "3"], "--etp 3: does not divide the experts' FFN size (14336)"),
    (["mixtral-8x7b", "--etp", "0"], "--etp '0': must be >= 1"),
    (["mixtral-8x7b", "--etp", "x"], "--etp 'x': not an integer"),
    (["llama2-7b", "--etp", "1"], "--etp 1: llama2-7b has no experts"),
])
def test_bad_etp_is_one_line_exit_2(capsys, argv, needle):
    code, out, err = _run(capsys, *argv, "--topology", "dgx-h100", "--global-batch", "8")
    assert code == 2 and needle in err and err.count("\n") == 1 and not out


def test_impossible_splits():
    """``etp x ep`` must divide a stage's ``tp cp dp`` ranks (Megatron-Core's rule) and an
    expert TP of its own needs Megatron-Core's order: one-line errors naming the values; in
    a search, listed values that do not divide are rejected with the reason."""
    with pytest.raises(SpecError, match=r"etp 4 x ep 8 = 32 does not divide a stage's "
                                        r"tp x cp x dp = 16 ranks"):
        _cfg(ep=8, etp=4)
    with pytest.raises(SpecError, match="etp 1: expert TP other than tp"):
        _cfg(ep=8, etp=1, order=LLAMA3_ORDER)
    with pytest.raises(SpecError, match="etp -1: must be >= 1"):
        _cfg(etp=-1)


def test_etp_rejections_in_json(capsys):
    """A listed ETP x EP that does not divide a stage's ranks is rejected with the reason;
    the JSON configs carry ``etp``."""
    code, out, _ = _run(capsys, "mixtral-8x7b", "--topology", "dgx-h100", "--global-batch",
                        "8", "--seq", "4096", "--tp", "2", "--cp", "1", "--pp", "2",
                        "--micro-batch", "1", "--data-parallel", "zero1", "--recompute", "full",
                        "--schedule", "1f1b", "--ep", "2,8", "--etp", "1,2", "--json")
    data = json.loads(out)
    assert code == 0 and {(c["etp"], c["ep"]) for c in data["configs"]} == {(1, 2), (2, 2)}
    assert any(r.get("etp") == 1 and r.get("ep") == 8
               and "etp x ep = 8 does not divide a stage's tp x cp x dp = 4 ranks" in r["reason"]
               for r in data["rejected"])


@pytest.mark.parametrize("kw", [dict(ep=8, etp=1), dict(ep=4, etp=1), dict(ep=2, etp=1),
                                dict(ep=4), dict(ep=2, cp=2, dp=4), dict(ep=4, order=LLAMA3_ORDER),
                                dict(ep=8, etp=1, pp=2, dp=4)])
def test_the_replay_lays_out_the_planners_expert_grid(kw):
    """The planner's configuration and the replay read one expert grid
    (:class:`~commsim.replay.layout.Parallel`, :attr:`PlanConfig.layout`): every EP group, the
    expert TP groups and the expert data-parallel groups, with expert TP ``etp`` or ``tp``,
    each kind a partition of the stage, and each rank in the expert data-parallel group of
    its own expert coordinates."""
    cfg = _cfg(**kw)
    par = Parallel(tp=cfg.tp, cp=cfg.cp, pp=cfg.pp, dp=cfg.dp, ep=cfg.ep, etp=cfg.etp,
                   order=cfg.order)
    assert par.expert_dp == cfg.expert_dp
    for p in range(cfg.pp):
        assert [tuple(g) for g in par.ep_groups(0, p)] == cfg.ep_groups(p)
        assert tuple(par.expert_dp_group(0, p, 0)) == cfg.expert_dp_group(p)
        assert tuple(par.etp_groups(p)[0]) == cfg.etp_group(p)
        stage = {r for r in range(cfg.world) if cfg.coords(r)[2] == p}
        for groups in ([g for et in range(par.etp) for g in par.ep_groups(et, p)],
                       par.etp_groups(p),
                       [par.expert_dp_group(et, p, e) for et in range(par.etp)
                        for e in range(par.ep)]):
            assert sorted(r for g in groups for r in g) == sorted(stage)  # a partition
        for r in stage:
            et, e = par.expert_coords(r)
            assert r in par.expert_dp_group(et, p, e)


@given(tp=st.sampled_from([1, 2, 4]), cp=st.sampled_from([1, 2]), pp=st.sampled_from([1, 2]),
       dp=st.sampled_from([1, 2, 3, 4, 6, 8]), data=st.data())
def test_every_expert_grid_is_the_planners(tp, cp, pp, dp, data):
    """Any expert TP and EP that Megatron-Core's rule allows (``etp ep`` dividing a stage's
    ``tp cp dp`` ranks): the replay's groups are the planner's, and each kind partitions
    every stage."""
    ranks = tp * cp * dp
    pairs = [(etp, ep) for etp in (1, 2, 4) for ep in range(1, ranks + 1)
             if ranks % (etp * ep) == 0]
    etp, ep = data.draw(st.sampled_from(pairs))
    cfg = PlanConfig(tp=tp, cp=cp, pp=pp, dp=dp, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="zero1", recompute="none", ep=ep, etp=etp,
                     order=MEGATRON_ORDER)
    par = Parallel(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, etp=etp, order=MEGATRON_ORDER)
    for p in range(pp):
        assert [tuple(g) for g in par.ep_groups(0, p)] == cfg.ep_groups(p)
        assert tuple(par.expert_dp_group(0, p, 0)) == cfg.expert_dp_group(p)
        assert tuple(par.etp_groups(p)[0]) == cfg.etp_group(p)
        stage = sorted(r for r in range(cfg.world) if cfg.coords(r)[2] == p)
        for groups in ([g for et in range(etp) for g in par.ep_groups(et, p)],
                       par.etp_groups(p),
                       [par.expert_dp_group(et, p, e) for et in range(etp)
                        for e in range(ep)]):
            assert sorted(r for g in groups for r in g) == stage


@pytest.mark.parametrize(("model", "tp", "ep", "pp"), [("qwen3-30b-a3b", 2, 2, 4),
                                                        ("mixtral-8x7b", 4, 4, 2)])
def test_replay_of_expert_tp_gives_the_planned_step(model, tp, ep, pp):
    """``--write-workload`` writes ``parallel.etp`` where it is not ``tp``, and the ``hybrid``
    replay lowers it on the MoE layers' own grid (the EP group across the attention's TP
    ranks, no expert TP collective with ETP 1): without data-parallel traffic (one replica),
    the planner's step to rounding."""
    out = plan(model, "dgx-h100", global_batch=8, seq=2048, top=1, engine="auto",
               space=SearchSpace(tp=(tp,), etp=(1,), ep=(ep,), pp=(pp,), micro_batch=(1,),
                                 schedule=(("1f1b", 1),), recompute=("none",),
                                 data_parallel=("zero1",)))
    best = out.result.configs[0]
    data = workload_dict(out.model, best.config, 8, out.stack)
    assert data["parallel"]["etp"] == 1 and data["parallel"]["dp"] == 1
    assert "etp" not in workload_dict(TINY, _cfg(), 64, DEFAULT)["parallel"]
    full = replay(replay_workload(data, "dgx-h100"), "dgx-h100")
    assert full.step_time_s == pytest.approx(best.record["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("dp", ["zero1", "fsdp"])
def test_replay_of_expert_tp_with_expert_data_parallel_traffic(dp):
    """TP 2, ETP 1, EP 4 on one host: the expert data-parallel groups (2 ranks, 4 apart)
    reduce (and, under FSDP, gather) the experts beside the dense replicas' traffic; the replay
    times every group in one DES, so it is at least the planner's step, and slower only by
    what the groups' traffic shares on each GPU's NVLink port (within 3%)."""
    out = plan("qwen3-30b-a3b", "dgx-h100", global_batch=8, seq=2048, top=1, engine="auto",
               space=SearchSpace(tp=(2,), etp=(1,), ep=(4,), pp=(1,), micro_batch=(1,),
                                 recompute=("none",), data_parallel=(dp,)))
    best = out.result.configs[0]
    spec = replay_workload(workload_dict(out.model, best.config, 8, out.stack), "dgx-h100")
    assert spec.parallel.expert_dp == 2
    planned = best.record["step_time_s"]
    assert planned * (1 - 1e-9) <= replay(spec, "dgx-h100").step_time_s <= planned * 1.03


@pytest.mark.parametrize("dp", ["ddp", "zero1", "fsdp"])
def test_one_replica_still_reduces_experts_over_the_tp_pair(dp):
    """TP 2, ETP 1, EP 1, one replica: no dense data-parallel group, but each expert is held
    whole by both TP ranks, which reduce (and under FSDP gather) it as an expert data-parallel
    pair; the replay issues exactly those collectives, and is the planner's step within 1%
    (their traffic beside the TP all-reduces), never below it."""
    out = plan("qwen3-30b-a3b", "dgx-h100", global_batch=8, seq=2048, top=1, engine="auto",
               space=SearchSpace(tp=(2,), etp=(1,), ep=(1,), pp=(4,), micro_batch=(1,),
                                 schedule=(("1f1b", 1),), recompute=("none",),
                                 data_parallel=(dp,)))
    best = out.result.configs[0]
    spec = replay_workload(workload_dict(out.model, best.config, 8, out.stack), "dgx-h100")
    assert spec.parallel.dp == 1 and spec.parallel.expert_dp == 2
    result = replay(spec, "dgx-h100")
    grads = [t for t in result.graph.tasks if t.phase == "gradient"]
    assert grads and all("experts" in t.name and len(t.ranks) == 2 for t in grads)
    planned = best.record["step_time_s"]
    assert planned * (1 - 1e-9) <= result.step_time_s <= planned * 1.01
