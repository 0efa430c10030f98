"""Megatron-Core's combined 1F1B (``--moe-overlap ep-overlap``) as the pipeline and the replay run
it: its orders (one more warm-up forward), its pairs, their emission, the memory they hold, and
the replay's woven pairs against the planner's."""

from __future__ import annotations

import pytest

from commsim.errors import SpecError
from commsim.plan import SearchSpace, plan, replay_workload, workload_dict
from commsim.plan.memory import held_layers
from commsim.plan.stack import Stack
from commsim.replay import replay
from commsim.replay.hybrid_blocks import handovers
from commsim.replay.pipeline import (
    BACKWARD,
    FORWARD,
    PipeOp,
    combined_steps,
    emit_pipeline,
    stage_orders,
)

SHAPES = [("1f1b", 1, k, 1) for k in (1, 2, 5)] + [("gpipe", 1, 4, 1)] + [
    ("interleaved", p, k, v) for p in (2, 3, 4) for k in (p, 2 * p, 3 * p) for v in (2, 3)]


@pytest.mark.parametrize(("schedule", "pp", "k", "v"), SHAPES)
def test_combined_orders_emit_every_pair_once_without_deadlock(schedule, pp, k, v):
    """Every combined step is a forward and then a backward of different micro-batches; the
    orders, their pairs added together, emit every op once (no deadlock: each step's halves
    are independent, Megatron's reason for the extra warm-up forward)."""
    shape = dict(stages=pp, microbatches=k, chunks=v)
    orders = stage_orders(schedule, **shape, combined=True)
    steps = combined_steps(schedule, **shape)
    for order, at in zip(orders, steps, strict=True):
        assert sorted(map(str, order)) == sorted(
            map(str, stage_orders(schedule, **shape)[0]))
        for i in at:
            f, b = order[i], order[i + 1]
            assert (f.kind, b.kind) == (FORWARD, BACKWARD)
            assert f.microbatch != b.microbatch
    added: list[PipeOp] = []

    def run_op(d: int, op: PipeOp, deps: list[int]) -> list[int]:
        added.append(op)
        return [len(added)]

    def run_pair(d, f, b, fdeps, bdeps):
        return run_op(d, f, fdeps), run_op(d, b, bdeps)

    done = emit_pipeline(orders, chunks=v, run_op=run_op, transfer=lambda s, d, op, x: x,
                         pairs=steps, run_pair=run_pair)
    assert len(done) == len(added) == 2 * pp * k * v
    if pp == 1 and k > 1:
        assert steps[0] == frozenset(range(1, 2 * k - 2, 2))  # F0, (F1 B0), ..., B(k-1)


def test_the_extra_warm_up_forward_and_where_there_is_none():
    """Interleaved: one more warm-up forward per stage than the plain schedule (Megatron-LM
    schedules.py); a plain pipeline of several stages has no combined schedule (same order,
    no pairs)."""
    plain = stage_orders("interleaved", stages=4, microbatches=8, chunks=2)
    combined = stage_orders("interleaved", stages=4, microbatches=8, chunks=2, combined=True)
    for p, c in zip(plain, combined, strict=True):
        warm = next(i for i, op in enumerate(p) if op.kind == BACKWARD) - 1
        assert next(i for i, op in enumerate(c) if op.kind == BACKWARD) - 1 == warm + 1
    assert stage_orders("1f1b", stages=4, microbatches=8, combined=True) == stage_orders(
        "1f1b", stages=4, microbatches=8)
    assert combined_steps("1f1b", stages=4, microbatches=8) == [frozenset()] * 4


def test_a_combined_step_holds_one_more_micro_batch():
    """Without pipelining a combined step's forward starts before its backward frees: two
    micro-batches of activations, not one; interleaved: the extra warm-up one."""
    assert held_layers("1f1b", 1, 4, (3,), 0) == 3
    assert held_layers("1f1b", 1, 4, (3,), 0, combined=True) == 6
    for stage in range(4):
        assert held_layers("interleaved", 4, 8, (2, 2), stage, combined=True) == \
            held_layers("interleaved", 4, 8, (2, 2), stage) + 2


def _replayed(overlap: str, **space):
    out = plan("qwen3-30b-a3b", "dgx-h100", global_batch=16, seq=2048, top=1, engine="auto",
               stack=Stack(moe_overlap=overlap),
               space=SearchSpace(micro_batch=(1,), recompute=("none",),
                                 data_parallel=("zero1",), **space))
    best = out.result.configs[0]
    data = workload_dict(out.model, best.config, 16, out.stack)
    return best.record["step_time_s"], replay(replay_workload(data, "dgx-h100"), "dgx-h100")


@pytest.mark.parametrize(("space", "within"), [
    (dict(tp=(1,), ep=(8,), pp=(1,), schedule=(("1f1b", 1),)), 0.01),
    (dict(tp=(2,), ep=(2,), pp=(2,), schedule=(("interleaved", 2),)), 0.03),
])
def test_the_replay_weaves_each_pair(space, within):
    """``commsim replay`` of an ``ep-overlap`` workload runs each combined step's two halves
    woven on one compute and one all-to-all stream: the all-to-alls overlap compute (more of
    the step's communication is hidden than with ``none``), the step is shorter, and it is
    the planner's woven pair: within 1% without pipelining (the planner weaves the same
    blocks at the same hand-overs, with no contention between collectives), within 3% in an
    interleaved pipeline (there the DES also overlaps an op's tail with the next op's)."""
    planned, woven = _replayed("ep-overlap", **space)
    _, alone = _replayed("none", **space)
    assert woven.step_time_s < alone.step_time_s
    assert woven.overlap_fraction > alone.overlap_fraction
    assert woven.step_time_s == pytest.approx(planned, rel=within)


def test_a_pair_hands_over_twice_per_moe_layer_and_once_per_dense_one():
    """Megatron-Core's layer pair in four parts: the forward hands the compute stream over
    after its router (before the dispatch) and after its experts; the backward after its
    experts' backward (before the dispatch's) and after its attention; a dense layer, which
    has no all-to-all, once, at its end."""
    forward = ["compute", "tp", "compute", "ep", "compute", "tp", "ep"]
    backward = ["ep", "compute", "tp", "ep", "compute", "cp", "tp"]
    assert handovers(forward) == {2, 4}
    assert handovers(backward) == {1, 4}
    assert handovers(["compute", "tp", "compute", "tp"]) == {2}
    assert handovers(["cp", "tp"]) == frozenset()


def test_dualpipe_is_still_refused_on_replay():
    out = plan("qwen3-30b-a3b", "dgx-h100", global_batch=16, seq=2048, top=1,
               stack=Stack(moe_overlap="dualpipe"),
               space=SearchSpace(tp=(1,), ep=(4,), pp=(2,), micro_batch=(1,),
                                 recompute=("none",), data_parallel=("zero1",),
                                 schedule=(("1f1b", 1),)))
    data = workload_dict(out.model, out.result.configs[0].config, 16, out.stack)
    with pytest.raises(SpecError, match="dualpipe is planned"):
        replay_workload(data, "dgx-h100")
