"""A mixture of experts' all-to-alls overlapped with compute, as the software that trains the
large ones runs them (``Stack.moe_overlap``; docs/planning.md).

* ``none`` (Megatron-Core's default): every dispatch and combine waits on the compute stream
  (:func:`commsim.plan.blocks.layer_blocks`).
* ``ep-overlap``: Megatron-Core's ``--overlap-moe-expert-parallel-comm`` ("combined 1F1B",
  ``megatron/core/pipeline_parallel/combined_1f1b.py``; its MoE README and its developer
  guide's "Combined 1F1B" page): the forward of one micro-batch and the backward of another
  run together, layer by layer, the forward's all-to-alls hidden under the backward's
  attention and MLP compute and the other way round. Megatron-Core runs it without pipelining
  and in its interleaved schedule (with one more warm-up forward); the planner runs those
  orders and pairs each steady-state step's forward and backward
  (:func:`commsim.replay.pipeline.combined_steps`); the warm-up and cool-down ops run alone.
  The replay weaves each pair's layers instead (:mod:`commsim.replay.hybrid_graph`).
* ``dualpipe``: the DeepSeek-V3 report's DualPipe (arXiv 2412.19437, Section 3.2.1, and
  ``dualpipe/dualpipe.py`` of deepseek-ai/DualPipe): each of the ``PP`` ranks holds stage
  ``r`` and stage ``PP - 1 - r``, micro-batches enter from both ends, and in the steady state
  every forward chunk runs with a backward chunk, attention and MLP compute hiding dispatch,
  combine and the pipeline sends. Its bubble is the report's Table 2:
  ``(PP/2 - 1)(F&B + B - 3W)`` (1F1B's is ``(PP - 1)(F + B)``), so a step of ``k``
  micro-batches is ``k F&B + (PP/2 - 1)(F&B + B - 3W)`` (:func:`evaluate_dualpipe`), with
  ``F``, ``B`` a stage's forward and backward chunk, ``W`` the backward's weight-gradient
  part and ``F&B`` the pair. It needs an even ``PP`` and an even number of micro-batches of
  at least ``2 PP`` (``DualPipe.step``'s assertions), and the planner's has no FSDP (the
  report's data parallelism is ZeRO-1; an FSDP gather per layer has no place in the closed
  form).

**A pair** (:func:`paired_blocks`): the two ops' compute ``C`` (seconds on the whole
device) against their all-to-alls ``a`` on the network. While the all-to-alls run, their
kernels hold ``comm_sms`` of the device's ``sms`` SMs (the report's 20 of 132, Section
3.2.2), so the compute they overlap runs at ``s = 1 - comm_sms/sms`` of its rate: the pair's
compute stretches to ``C + a comm_sms/sms``, at most ``C / s``
(:func:`~commsim.plan.interference.charge`, the one rule of every overlapped collective's
cost to compute). The two ops' layers then run woven as the replay runs them
(:func:`~commsim.replay.hybrid_blocks.handovers`: Megatron-Core's forward attention | backward
combine | backward experts | forward dispatch | forward experts | backward dispatch |
backward attention | forward combine), one compute stream and one stream per kind of group,
each block after its op's block before it: an all-to-all (or a TP or CP collective) is hidden
while the other op's compute outlasts it, and what it holds up of the compute stream stays
exposed (:func:`_woven`). Without any wait that is ``C + a comm_sms/sms``. DualPipe's
chunk pair is woven alike: the report divides each chunk into the same four components
(attention, dispatch, MLP, combine; Section 3.2.1, Figure 4).

>>> from commsim.plan.blocks import MoEStage, PipelineCosts
>>> m = MoEStage(1.0, 0.0, 1.0, 0.0, 2.0, 0.5, 0.0)  # experts: 1 s forward, 2 s backward
>>> c = PipelineCosts(schedule="1f1b", pp=1, chunks=1, microbatches=2, layers_per_chunk=1,
...                   attn_fwd=1.0, mlp_fwd=0.0, attn_bwd=2.0, mlp_bwd=0.0, tp_ar=(0.0,),
...                   cp_gather=(0.0,), cp_rs=(0.0,), moe=(m,))
>>> f, b = paired_blocks(c, 0, 0.25)  # C = 6 s, a = 4 x 0.5 s: 6 + 2 x 0.25 = 6.5 s,
... # every all-to-all hidden under the other op's compute
>>> sum(x for _, x in f + b)
6.5
>>> f, b = paired_blocks(c, 0, 0.0)  # nothing taken: the compute hides the all-to-alls
>>> sum(x for _, x in f + b)
6.0
"""

from __future__ import annotations

from functools import lru_cache

from commsim.plan.blocks import Block, PipelineCosts, PipelineTiming, layer_blocks
from commsim.plan.config import PlanConfig
from commsim.plan.interference import charge
from commsim.plan.stack import Stack
from commsim.replay.hybrid_blocks import handovers


def paired_blocks(costs: PipelineCosts, stage: int,
                  share: float) -> tuple[tuple[Block, ...], tuple[Block, ...]]:
    """The forward and backward layer of ``stage`` when they run as a pair (see the module
    docstring; ``share``: the SMs the all-to-alls hold, over the device's): each op's compute
    stretched by its part of ``a share`` (at most to ``C / s``), then what of each op's
    collectives the woven pair leaves exposed (:func:`_woven`), per kind of group, where the
    op's first collective of that kind was."""
    ops = tuple(tuple(layer_blocks(costs, stage, forward)) for forward in (True, False))
    total = sum(x for b in ops for s, x in b if s == "compute")
    a2a = sum(x for b in ops for s, x in b if s == "ep")
    scale = 1.0 + charge(a2a, share, total) / total if total else 1.0
    exposed = _woven(ops, scale, _layers(costs, stage))
    out = []
    for blocks, waits in zip(ops, exposed, strict=True):
        kept: list[Block] = []
        left = dict(waits)
        for stream, x in blocks:
            if stream == "compute":
                kept.append((stream, x * scale))
            elif left.get(stream):
                kept.append((stream, left.pop(stream)))
        out.append(tuple(kept))
    return out[0], out[1]


def _layers(c: PipelineCosts, stage: int) -> float:
    """The layers a chunk of ``stage`` holds (their mean over its chunks; at least 1)."""
    if not c.chunk_layers:
        return max(1.0, c.layers_per_chunk)
    sizes = [c.chunk_layers[v * c.pp + stage] for v in range(c.chunks)]
    return max(1.0, sum(sizes) / len(sizes))


#: Layers woven exactly; a longer chunk grows by the last of them (the woven pair is
#: periodic layer by layer once the first layer's start has passed).
_WOVEN = 4


@lru_cache(maxsize=4096)
def _woven(ops: tuple[tuple[Block, ...], ...], scale: float,
           layers: float) -> tuple[tuple[Block, ...], ...]:
    """Per op of a pair, the seconds per layer its collectives hold up the compute stream,
    per kind of group, when ``layers`` layers of the two ops run woven as the replay runs a
    combined step (:func:`~commsim.replay.hybrid_blocks.handovers`): in turn, each op's
    blocks up to its next hand-over, each block after the op's block before it and after
    the blocks issued before it on its stream (the compute stream, or one stream per kind
    of group), compute stretched by ``scale``. The compute stream idles while an op's
    compute waits on its collective, charged to that collective's kind, and after its last
    compute until the later op ends, charged to the kind that op ended with. With the
    stretched compute, the sum is the pair's time (no contention between them: each
    collective's time is the planner's)."""
    n = int(min(layers, _WOVEN))
    out = _weave_exposure(ops, scale, n)
    if layers > n:  # the last woven layer's, for each layer beyond
        before = _weave_exposure(ops, scale, n - 1)
        for waits, prev in zip(out, before, strict=True):
            for stream in waits:
                waits[stream] += (layers - n) * (waits[stream] - prev.get(stream, 0.0))
    return tuple(tuple((s, max(0.0, x) / layers) for s, x in waits.items()) for waits in out)


def _balanced(points: list[frozenset[int]]) -> list[frozenset[int]]:
    """The hand-overs of ops that hand over unequally often per layer (a backward that runs
    the forward again first, under DualPipe with full or MoE recompute) thinned to the
    fewest, evenly, each op's last kept: the two advance a layer per layer (Megatron-Core's
    combined 1F1B, which refuses those recomputes, hands over equally)."""
    fewest = min(len(p) for p in points)
    out = []
    for p in points:
        ordered = sorted(p)
        if fewest and len(ordered) > fewest:
            p = frozenset(ordered[len(ordered) * (i + 1) // fewest - 1] for i in range(fewest))
        out.append(p)
    return out


def _weave_exposure(ops: tuple[tuple[Block, ...], ...], scale: float,
                    layers: int) -> list[dict[str, float]]:
    """:func:`_woven` for a whole number of layers, in seconds over all of them."""
    points = _balanced([handovers([s for s, _ in blocks]) for blocks in ops])
    free: dict[str, float] = {}
    ready = [0.0] * len(ops)
    after: list[str | None] = [None] * len(ops)  # the collective an op's next block waits on
    waits: list[dict[str, float]] = [{} for _ in ops]
    cursor = [0] * len(ops)
    size = [len(blocks) * layers for blocks in ops]
    while any(c < n for c, n in zip(cursor, size, strict=True)):
        for i, blocks in enumerate(ops):
            while cursor[i] < size[i]:
                j = cursor[i] % len(blocks)
                cursor[i] += 1
                stream, x = blocks[j]
                at = free.get(stream, 0.0)
                if stream == "compute":
                    x *= scale
                    kind = after[i]
                    if kind is not None and ready[i] > at:
                        waits[i][kind] = waits[i].get(kind, 0.0) + ready[i] - at
                ready[i] = free[stream] = max(ready[i], at) + x
                after[i] = None if stream == "compute" else stream
                if j in points[i]:
                    break
    last = max(range(len(ops)), key=lambda i: ready[i])
    tail, kind = ready[last] - free.get("compute", 0.0), after[last]
    if kind is not None and tail > 0:
        waits[last][kind] = waits[last].get(kind, 0.0) + tail
    return waits


def recompute_unfit(recompute: str, stack: Stack) -> str | None:
    """Why ``recompute`` cannot run under ``stack.moe_overlap`` (None: it can): Megatron-Core
    refuses full recomputation and the recompute of the MoE layers with combined 1F1B
    (``TransformerConfig``'s checks of ``overlap_moe_expert_parallel_comm``: "disable full
    recomputation ...", "disable moe in recompute_modules ...": a recomputed dispatch has no
    place in the layer pair)."""
    if stack.moe_overlap == "ep-overlap" and recompute in ("full", "moe"):
        return (f"--moe-overlap ep-overlap: Megatron-Core's combined 1F1B runs without "
                f"{recompute} recompute (recompute {recompute})")
    return None


def unfit(cfg: PlanConfig, microbatches: int, stack: Stack) -> str | None:
    """Why ``cfg`` cannot run under ``stack.moe_overlap`` (None: it can): combined 1F1B
    without full or MoE recompute (:func:`recompute_unfit`); DualPipe needs a plain (not
    interleaved) pipeline of an even ``PP``, and an even number of micro-batches of at least
    ``2 PP``; the planner's DualPipe has no FSDP (the report's is ZeRO-1)."""
    if stack.moe_overlap != "dualpipe":
        return recompute_unfit(cfg.recompute, stack)
    if cfg.pp < 2 or cfg.pp % 2 or cfg.schedule != "1f1b":
        return (f"--moe-overlap dualpipe: needs an even pipeline of 1f1b stages "
                f"(pp {cfg.pp}, {cfg.schedule_label})")
    if cfg.data_parallel == "fsdp":  # its per-layer gathers have no place in the closed form
        return "--moe-overlap dualpipe: modelled with ddp, zero1 and zero2 only (not fsdp)"
    if microbatches % 2 or microbatches < 2 * cfg.pp:
        return (f"--moe-overlap dualpipe: needs an even number of micro-batches, at least "
                f"2 x pp = {2 * cfg.pp} (got {microbatches})")
    return None


def _chunk(c: PipelineCosts, stage: int) -> tuple[float, float, float, float, float, float]:
    """(F, B, W, F&B, its compute, its exposed communication) of ``stage``'s chunk for one
    micro-batch: its layers, and the output layer on the last stage."""
    n = c.chunk_layers[stage] if c.chunk_layers else c.layers_per_chunk
    k = c.factor(stage)
    logits = (c.logits_fwd + c.logits_bwd) * k if stage == c.pp - 1 else 0.0
    fwd, bwd = (sum(x for _, x in layer_blocks(c, stage, f)) for f in (True, False))
    bwd_compute = sum(x for s, x in layer_blocks(c, stage, False) if s == "compute")
    pf, pb = c.paired[stage]
    comp = sum(x for s, x in (*pf, *pb) if s == "compute")
    pair = sum(x for _, x in (*pf, *pb))
    # W: the weight-gradient GEMMs, as many FLOPs as the input-gradient ones (half the
    # backward's compute; the attention core and element-wise work, which have no weight
    # gradient, make it an upper bound, and the bubble a lower one)
    w = (n * bwd_compute + (c.logits_bwd * k if stage == c.pp - 1 else 0.0)) / 2
    return (n * fwd + logits / 2, n * bwd + logits / 2, w, n * pair + logits,
            n * comp + logits, n * (pair - comp))


def evaluate_dualpipe(c: PipelineCosts) -> PipelineTiming:
    """The step of a DualPipe pipeline (see the module docstring): per rank, the mean of its
    two stages' chunks, ``k F&B + (PP/2 - 1)(F&B + B - 3W)``, then its stages' last gradient
    reductions, ZeRO's all-gather and optimizer steps; the slowest rank's."""
    k, pp = c.microbatches, c.pp
    chunks = [_chunk(c, p) for p in range(pp)]
    steps, compute, exposed = [], [], []
    for r in range(pp):
        both = (r, pp - 1 - r)
        _, b, w, fb, comp, comm = (sum(chunks[p][i] for p in both) / 2 for i in range(6))
        tail = sum(_tail(c, p) for p in both)
        opt = sum(c.optimizer[p] * c.factor(p) for p in both) if c.optimizer else 0.0
        steps.append(k * fb + (pp // 2 - 1) * (fb + b - 3 * w) + tail + opt)
        compute.append(k * comp + opt)
        exposed.append(k * comm + tail)
    return PipelineTiming(max(steps), tuple(compute), tuple(exposed))


def _tail(c: PipelineCosts, stage: int) -> float:
    """What a stage's data parallelism leaves after its last backward: the reduction issued
    after its first layer's backward (the last one issued) and the ``final`` one."""
    first = sum(c.chunk_layers[:stage]) if c.chunk_layers else stage * c.layers_per_chunk
    last = c.reduce[stage].get(first, 0.0) if c.reduce else 0.0
    return last + (c.final[stage] if c.final else 0.0)
