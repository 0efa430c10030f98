"""Replica folding (commsim.replay.replicas): the step simulated from one block of data-parallel
replicas equals the full simulation, to 1e-9 relative on every metric and every rank; where a
replica is not an image of the others, the replay is the full one and says why."""

from __future__ import annotations

import math

import numpy as np
import pytest

from commsim.algorithms import build_schedule
from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.errors import SpecError
from commsim.plan import replay_workload
from commsim.replay import graph as graph_module
from commsim.replay import replay
from commsim.replay.layout import Parallel
from commsim.replay.replicas import Unfoldable, fold_network, fold_schedule
from commsim.topology import load_topology

REL = 1e-9
MODEL = dict(name="small", layers=4, hidden=1024, heads=8, kv_heads=8, ffn_hidden=4096,
             vocab=32000, seq=2048, mlp="swiglu", tied_embeddings=False)
MOE = dict(MODEL, moe=dict(experts=8, top_k=2, expert_ffn_hidden=1024))


def workload(parallel: dict[str, int], data_parallel: str, model: dict[str, object] = MODEL,
             **extra: object) -> dict[str, object]:
    dp = parallel["dp"]
    return dict(kind="hybrid", model=model, parallel=parallel, micro_batch=1,
                global_batch=2 * dp, data_parallel=data_parallel, recompute="none",
                stack="current", **extra)


def assert_same(folded: dict[str, object], full: dict[str, object]) -> None:
    """Every metric of the step and of every rank within REL (relative) of the full one's."""
    keys = ("step_time_s", "compute_time_s", "comm_time_s", "exposed_comm_s",
            "overlap_fraction", "idle_fraction", "wait_time_s", "peak_memory_bytes")
    for key in keys:
        assert math.isclose(folded[key], full[key], rel_tol=REL, abs_tol=1e-15), key  # type: ignore[arg-type]
    assert len(folded["per_rank"]) == len(full["per_rank"])  # type: ignore[arg-type]
    for mine, theirs in zip(folded["per_rank"], full["per_rank"], strict=True):  # type: ignore[call-overload]
        for key, value in theirs.items():
            assert math.isclose(mine[key], value, rel_tol=REL, abs_tol=1e-15), (key, mine["rank"])


#: (workload, topology, replicas simulated): FSDP, ZeRO-1, DDP; with and without PP, TP, CP;
#: MoE with expert-parallel groups across replicas, in Llama 3's and Megatron-Core's orders
CASES = [
    (workload(dict(tp=8, dp=4), "fsdp"), "dgx-h100x4", 1),
    (workload(dict(tp=2, pp=4, dp=4), "fsdp", pipeline=dict(schedule="1f1b")), "dgx-h100x4", 1),
    (workload(dict(tp=2, cp=2, pp=2, dp=8), "zero1",
              pipeline=dict(schedule="interleaved", chunks_per_stage=2)), "dgx-h100x8", 1),
    (workload(dict(tp=4, pp=2, dp=8), "ddp"), "dgx-h100x8", 1),
    (workload(dict(tp=4, dp=8), "ddp"), "dgx-h100x4", 2),  # two replicas a host
    (workload(dict(tp=4, dp=8, ep=2), "fsdp", MOE), "dgx-h100x4", 2),
    (workload(dict(tp=2, pp=2, dp=8, ep=2), "fsdp", MOE), "dgx-h100x4", 4),  # Megatron order
]


@pytest.mark.parametrize("data, topology, simulated", CASES,
                         ids=[f"{c[0]['data_parallel']}-{c[0]['parallel']}" for c in CASES])
def test_folded_replay_equals_the_full_one(data: dict[str, object], topology: str,
                                           simulated: int) -> None:
    spec = replay_workload(data, topology)
    folded, full = replay(spec, topology), replay(spec, topology, fold=False)
    assert folded.fold is not None and folded.fold.simulated == simulated
    assert folded.fold.replicas == spec.parallel.dp
    assert full.fold is None
    world = spec.parallel.world
    # only the simulated block's tasks (and the collectives spanning blocks) were built
    on_block = {r for t in folded.graph.tasks if t.kind.value == "compute" for r in t.ranks}
    assert len(on_block) == world * simulated // spec.parallel.dp
    assert len(folded.graph.tasks) < len(full.graph.tasks)
    assert_same(folded.to_dict(), full.to_dict())
    assert folded.to_dict()["replica_fold"] == {"replicas": spec.parallel.dp,
                                                "simulated": simulated}


def test_a_slow_rank_keeps_every_replica() -> None:
    data = workload(dict(tp=8, dp=4), "fsdp")
    spec = replay_workload(data, "dgx-h100x4")
    slow = replay(spec, "dgx-h100x4", what_if={"ranks": {9: {"compute": 1.5}}})
    assert slow.fold is not None and slow.fold.simulated == 4
    assert "compute factors" in slow.fold.reason
    assert slow.step_time_s > replay(spec, "dgx-h100x4").step_time_s
    # the same factor on every replica's image of the rank folds, and is the full step
    every = {r: {"compute": 1.5} for r in (1, 9, 17, 25)}
    both = [replay(spec, "dgx-h100x4", what_if={"ranks": every}, fold=f) for f in (True, False)]
    assert both[0].fold is not None and both[0].fold.simulated == 1
    assert_same(both[0].to_dict(), both[1].to_dict())


#: DDP over 8 replicas of 8 GPUs, in the replay's own description (its ``algorithms:`` key)
PLAIN = dict(kind="hybrid", model=dict(layers=4, hidden=1024, heads=8, seq=2048, vocab=32000),
             parallel=dict(tp=4, pp=2, dp=8), micro_batch=1, global_batch=16,
             data_parallel="ddp", compute=dict(flops="989TFLOP/s", efficiency=0.5))


def test_a_tree_across_replicas_is_not_folded() -> None:
    data = PLAIN
    ring = replay({**data, "algorithms": {"all_reduce": "ring"}}, "dgx-h100x8")
    assert ring.fold is not None and ring.fold.simulated == 1
    result = replay({**data, "algorithms": {"all_reduce": "binomial_tree"}}, "dgx-h100x8")
    assert result.fold is not None and result.fold.simulated == 8
    assert "schedule" in result.fold.reason
    assert result.to_dict()["replica_fold"]["reason"] == result.fold.reason  # type: ignore[index]


def test_hosts_that_differ_are_not_folded() -> None:
    data = workload(dict(tp=8, dp=4), "fsdp")
    spec = replay_workload(data, "dgx-h100x4")
    what_if = {"links": {"gpu17->fabric": {"bandwidth": 0.5}}}
    result = replay(spec, "dgx-h100x4", what_if=what_if)
    assert result.fold is not None and result.fold.simulated == 4
    assert "differs from its image" in result.fold.reason
    # the same change on every host's image of the link folds
    every = {"links": {f"gpu{g}->fabric": {"bandwidth": 0.5} for g in (1, 9, 17, 25)}}
    both = [replay(spec, "dgx-h100x4", what_if=every, fold=f) for f in (True, False)]
    assert both[0].fold is not None and both[0].fold.simulated == 1
    assert_same(both[0].to_dict(), both[1].to_dict())


def test_replicas_sharing_a_host_fold_by_whole_hosts_or_not_at_all() -> None:
    net = load_topology("dgx-h100")
    par = Parallel(tp=2, dp=4)
    for replicas in par.fold_blocks():
        with pytest.raises(Unfoldable, match="two replica blocks"):
            fold_network(net, *par.replica_shift(replicas), par.dp)
    spec = replay_workload(workload(dict(tp=2, dp=4), "fsdp"), "dgx-h100")
    result = replay(spec, "dgx-h100")
    assert result.fold is not None and result.fold.simulated == 4 and result.fold.reason


def test_the_ring_is_its_own_image_and_the_tree_is_not() -> None:
    net = load_topology("dgx-h100x4")
    par = Parallel(tp=8, dp=4)
    fold = fold_network(net, *par.replica_shift(1), par.dp)
    group = np.array([par.rank(0, 0, 0, d) for d in range(4)], dtype=np.int64)
    ring = build_schedule(Call(collective=Collective.ALL_GATHER, ranks=4, nbytes=4096),
                          "ring").columns
    kept, rep = fold_schedule(fold, ring, group)
    assert (ring.src[kept] == 0).all() and len(kept) == len(ring) // 4
    assert sorted(set(rep.tolist())) == list(range(len(kept)))
    tree = build_schedule(Call(collective=Collective.ALL_REDUCE, ranks=4, nbytes=4096),
                          "binomial_tree").columns
    with pytest.raises(Unfoldable, match="schedule"):
        fold_schedule(fold, tree, group)


def test_the_task_limit_counts_the_simulated_block(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = replay_workload(workload(dict(tp=8, dp=4), "fsdp"), "dgx-h100x4")
    folded = replay(spec, "dgx-h100x4")
    full_tasks = len(replay(spec, "dgx-h100x4", fold=False).graph.tasks)
    computes = sum(t.kind.value == "compute" for t in folded.graph.tasks)
    monkeypatch.setattr(graph_module, "MAX_TASKS", (computes + full_tasks) // 2)
    assert replay(spec, "dgx-h100x4").fold.simulated == 1  # type: ignore[union-attr]
    with pytest.raises(SpecError, match="more than"):
        replay(spec, "dgx-h100x4", fold=False)


def test_a_failed_nic_folds_only_when_every_replica_lost_its_image() -> None:
    spec = replay_workload(workload(dict(tp=8, dp=4), "fsdp"), "dgx-h100x4")

    def failed(gpus: tuple[int, ...]) -> dict[str, object]:
        return {"links": {label: {"failed": True} for g in gpus
                          for label in (f"gpu{g}->fabric", f"fabric->gpu{g}")}}

    one = replay(spec, "dgx-h100x4", what_if=failed((9,)))
    assert one.fold is not None and one.fold.simulated == 4 and "wired" in one.fold.reason
    every = [replay(spec, "dgx-h100x4", what_if=failed((1, 9, 17, 25)), fold=f)
             for f in (True, False)]
    assert every[0].fold is not None and every[0].fold.simulated == 1
    assert_same(every[0].to_dict(), every[1].to_dict())


def test_a_step_too_big_unfolded_says_why_it_was_not_folded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ring = replay({**PLAIN, "algorithms": {"all_reduce": "ring"}}, "dgx-h100x8")
    monkeypatch.setattr(graph_module, "MAX_TASKS", len(ring.graph.tasks) + 1)
    with pytest.raises(SpecError, match="replicas not folded: .*schedule"):
        replay({**PLAIN, "algorithms": {"all_reduce": "binomial_tree"}}, "dgx-h100x8")
