"""The search's memos (its compute bounds and memory per the fields each reads, the groups per
layout) give exactly what each configuration computed on its own gives."""

from __future__ import annotations

import numpy as np
import pytest

from commsim.plan.bounds import slow_bound, split_bound, step_bound
from commsim.plan.device import network_device
from commsim.plan.groups import ep_groups, group
from commsim.plan.memory import peak_memory
from commsim.plan.models import catalogue_model
from commsim.plan.search import PlanResult, SearchSpace, enumerate_candidates
from commsim.plan.stack import Stack
from commsim.topology import load_topology

#: (model, preset, global batch, pipeline depths, expert TP): dense and MoE, equal and uneven
#: stages, expert TP the attention's or its own
CASES = [("llama3-8b", "dgx-h100x2", 32, None, None),
         ("qwen3-30b-a3b", "dgx-h100x2", 32, None, None),
         ("qwen3-30b-a3b", "dgx-h100x2", 32, None, (1, 2)),
         ("deepseek-v3", "dgx-h100x4", 32, (8,), None)]


@pytest.mark.parametrize("slow", [False, True])
@pytest.mark.parametrize("name,preset,batch,pp,etp", CASES)
def test_memoised_candidates_are_each_computed_alone(name, preset, batch, pp, etp, slow):
    """Every configuration of a search (healthy, or with one slow GPU): its bound is the bound
    computed for it alone (step_bound, slow_bound or split_bound), its memory the memory sized
    without a memo, its groups its PlanConfig's own."""
    model = catalogue_model(name)
    network = load_topology(preset)
    device, stack = network_device(network, None), Stack()
    factors = None
    if slow:
        factors = np.ones(network.ranks)
        factors[3] = 1.25
    cands = enumerate_candidates(model, device, gpus=network.ranks, global_batch=batch,
                                 space=SearchSpace(pp=pp, etp=etp), result=PlanResult(),
                                 stack=stack, factors=factors)
    assert len(cands) > 100
    assert any(c.config.etp != c.config.tp for c in cands) == (etp is not None)
    for c in cands:
        cfg, k = c.config, c.microbatches
        if cfg.stage_layers:
            want = split_bound(model, device, cfg, k, stack, c.factors or (1.0,) * cfg.pp)
            assert (c.bound_s, c.stage_bounds) == (max(want), want)
        elif slow:
            want = slow_bound(model, device, cfg, k, stack, c.factors)
            assert (c.bound_s, c.stage_bounds) == (max(want), want)
        else:
            assert c.bound_s == step_bound(model, device, cfg, k, stack)
        assert c.memory == peak_memory(
            model, tp=cfg.tp, cp=cfg.cp, pp=cfg.pp, dp=cfg.dp, micro_batch=cfg.micro_batch,
            microbatches=k, schedule=cfg.schedule, chunks=cfg.chunks,
            data_parallel=cfg.data_parallel, recompute=cfg.recompute, stack=stack, ep=cfg.ep,
            stage_layers=cfg.stage_layers, etp=cfg.etp)
        p = cfg.pp - 1
        assert group(cfg, "tp_group", p, cfg.dp - 1) == cfg.tp_group(p, cfg.dp - 1)
        assert group(cfg, "cp_group", p, 0) == cfg.cp_group(p, 0)
        assert group(cfg, "dp_group", p) == cfg.dp_group(p)
        assert group(cfg, "ep_group", 0, cfg.dp - 1) == cfg.ep_group(0, cfg.dp - 1)
        assert group(cfg, "expert_dp_group", p) == cfg.expert_dp_group(p)
        assert group(cfg, "etp_group", p) == cfg.etp_group(p)
        assert list(ep_groups(cfg, p)) == cfg.ep_groups(p)
