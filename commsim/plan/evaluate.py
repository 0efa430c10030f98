"""Time one training step of one pipeline exactly, without simulating every rank.

The ``hybrid`` replay lowers a step to tasks on every rank and simulates them together. For
the planner's search that is too slow, and most of it is repeated: the data-parallel replicas
and the TP (and CP) ranks of a stage run the same tasks at the same times. This module times
the *one* pipeline of a replica, one rank per stage, with every collective's duration given
(:class:`~commsim.plan.blocks.PipelineCosts`, timed once per shape by
:mod:`commsim.plan.timing`; each layer's blocks, :mod:`commsim.plan.blocks`), and follows the
replay's rules task for task:

* a rank has a compute stream and one stream per kind of communication (``tp``, ``cp``, the
  FSDP ``gather`` and the gradient ``dp`` stream); a task starts when the previous task of its
  stream and its data dependencies have ended;
* each layer's forward is ``[CP all-gather] attention [TP all-reduce] MLP [TP all-reduce]``;
  its backward ``[recompute] MLP [TP all-reduce] attention [CP reduce-scatter] [TP
  all-reduce]``; the next op's first compute waits only for the previous compute (its input
  arrives by a send, or, on the last virtual stage, is the op's own forward);
* pipeline ops run in :func:`~commsim.replay.pipeline.stage_orders`' order as
  :func:`~commsim.replay.pipeline.emit_pipeline`, the replay's own driver, adds them (its
  order and dependencies recorded once per schedule shape, then replayed), and activations
  cross stage boundaries as sends of the boundary's uncontended time;
* FSDP gathers each layer before its first forward, one layer ahead; gradients are reduced
  after a layer's last backward (FSDP per layer, DDP/ZeRO per 25 MiB bucket), ZeRO-1/2
  all-gather the updated weights after the last reduction;
* PyTorch's FSDP (``fsdp_reshard``, :mod:`commsim.plan.stack`) instead gathers each layer in
  every micro-batch's forward (issued when the layer two before has run: the rate limiter's
  two in flight) and again in its backward (issued when the layer after it starts its
  backward: ``BACKWARD_PRE``, one unit ahead), and reduce-scatters each layer's gradient
  after every backward; all three share one stream in issue order, so the next unit's
  all-gather waits behind the last unit's reduce-scatter as on the shared links;
* beyond the replay (which has no optimizer and sends asynchronously): each stage ends with
  its optimizer step once all its streams are done, and a blocking stack (Megatron-LM 2021)
  holds a stage's compute stream during each of its sends;
* under a what-if's slow ranks and jitter, a stage's compute takes its ``compute_factor``
  times as long: the slowest of its ranks over every replica, since its TP and CP collectives
  and the data-parallel reduction wait for their slowest member (:mod:`commsim.plan.costs`).

Once every stream has been used in an op, the rest of the op is a serial chain, so an op of
``n`` layers costs one exact layer and a multiplication (``_run_layers``). What this cannot
see is contention between different groups' traffic on shared links (a DP reduction and a
pipeline send through the same NIC), which the replay simulates: docs/planning.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from commsim.plan.blocks import Block, PipelineCosts, PipelineTiming, layer_blocks
from commsim.replay.pipeline import (
    FORWARD,
    PipeOp,
    combined_steps,
    emit_pipeline,
    stage_orders,
)


@dataclass(slots=True)
class _Stage:
    free: dict[str, float]
    blocks: tuple[_Program, _Program]  # forward, backward
    paired: tuple[_Program, _Program] | None = None  # when run with an op of the other kind
    used: list[float] = field(default_factory=list)  # FSDP: first-forward ends, in order
    compute_s: float = 0.0
    chain_comm_s: float = 0.0
    last_op_end: float = 0.0


def _run(st: _Stage, stream: str, ready: float, seconds: float) -> float:
    end = max(ready, st.free.get(stream, 0.0)) + seconds
    st.free[stream] = end
    if stream == "compute":
        st.compute_s += seconds
    elif stream in ("tp", "cp", "ep"):
        st.chain_comm_s += seconds
    return end


@dataclass(frozen=True, slots=True)
class _Program:
    """A layer's blocks compiled for :func:`_run_layers`: the layer is a max-plus chain, in
    which only a stream's first block can wait for the stream (its later ones follow blocks
    that ended after it). With ``P_i`` the seconds of blocks ``0..i``, block ``i`` ends at
    ``P_i + max(ready, max(free[s] - P_first(s)-1 for streams first used by i))``."""

    blocks: list[Block]
    total: float  #: seconds of the whole layer
    #: (stream, seconds before its first block, its first index), in first-use order
    firsts: tuple[tuple[str, float, int], ...]
    #: (stream, seconds through its last block, its last index), in last-use order
    lasts: tuple[tuple[str, float, int], ...]
    compute_s: float
    comm_s: float

    @classmethod
    def of(cls, blocks: list[Block]) -> _Program:
        before: list[float] = []
        through: list[float] = []
        total = 0.0
        for _, seconds in blocks:
            before.append(total)
            total += seconds
            through.append(total)
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for i, (stream, _) in enumerate(blocks):
            first.setdefault(stream, i)
            last[stream] = i
        compute = sum(x for stream, x in blocks if stream == "compute")
        return cls(
            blocks, total,
            tuple((st, before[i], i) for st, i in sorted(first.items(), key=lambda x: x[1])),
            tuple((st, through[i], i) for st, i in sorted(last.items(), key=lambda x: x[1])),
            compute, total - compute,
        )


def _run_layers(st: _Stage, prog: _Program, ready: float, n: int,
                extra: Sequence[float] = ()) -> float:
    """Run ``n`` layers of ``prog`` from ``ready``; ``extra[i]``: when layer ``i``'s first
    compute may start at the earliest (an FSDP gather). Returns when the last layer ends."""
    if extra:
        for i in range(n):
            first = True
            for stream, seconds in prog.blocks:
                start = ready
                if stream == "compute" and first:
                    start, first = max(ready, extra[i]), False
                ready = _run(st, stream, start, seconds)
        return ready
    free = st.free
    st.compute_s += n * prog.compute_s
    st.chain_comm_s += n * prog.comm_s
    best = ready
    if n > 1:  # every stream is used in the first layer: the rest is a serial chain
        for stream, before, _ in prog.firsts:
            wait = free.get(stream, 0.0) - before
            if wait > best:
                best = wait
        end = best + n * prog.total
        for stream, through, _ in prog.lasts:
            free[stream] = end - (prog.total - through)
        return end
    k, firsts = 0, prog.firsts
    ends: list[tuple[str, float]] = []
    for stream, through, last in prog.lasts:
        while k < len(firsts) and firsts[k][2] <= last:
            wait = free.get(firsts[k][0], 0.0) - firsts[k][1]
            if wait > best:
                best = wait
            k += 1
        ends.append((stream, through + best))
    for stream, t in ends:
        free[stream] = t
    return prog.total + best


class _Evaluator:
    def __init__(self, costs: PipelineCosts) -> None:
        c = self.c = costs
        self.stages = [
            _Stage({}, (_Program.of(layer_blocks(c, p, True)),
                        _Program.of(layer_blocks(c, p, False))),
                   (_Program.of(list(c.paired[p][0])), _Program.of(list(c.paired[p][1])))
                   if c.paired and c.moe_overlap == "ep-overlap" else None)
            for p in range(c.pp)
        ]
        #: Megatron-Core's combined 1F1B: its orders and pairs (:func:`_paired_ops`)
        self.combined = self.stages[0].paired is not None
        self.pairs = (_paired_ops(c.schedule, c.pp, c.microbatches, c.chunks)
                      if self.combined else frozenset())
        self.end: list[float] = []
        self.last_vstage = c.pp * c.chunks - 1
        count = c.pp * c.chunks
        self.sizes = c.chunk_layers or (c.layers_per_chunk,) * count
        #: per virtual stage, its first global layer and its first index among its stage's
        self.starts = [sum(self.sizes[:v]) for v in range(count)]
        self.offsets = [sum(self.sizes[ch * c.pp + v % c.pp] for ch in range(v // c.pp))
                        for v in range(count)]

    def run_op(self, stage: int, op: PipeOp, dep: int) -> None:
        """Run ``op`` on ``stage`` after step ``dep`` of the trace (-1: nothing)."""
        c, st = self.c, self.stages[stage]
        ready = self.end[dep] if dep >= 0 else 0.0
        vstage = op.chunk * c.pp + stage
        forward = op.kind == FORWARD
        n = self.sizes[vstage]
        if not forward and vstage == self.last_vstage and c.logits_bwd:
            ready = _run(st, "compute", ready, c.logits_bwd * c.factor(stage))
        pair = st.paired if (stage, op) in self.pairs else None
        blocks = (st.blocks if pair is None else pair)[0 if forward else 1]
        gathers = c.gather[stage] if c.gather else ()
        if n == 0:  # the embedding or the loss alone: an empty kernel on the compute stream
            ready = _run(st, "compute", ready, 0.0)
        elif c.fsdp_reshard and gathers:
            ready = self._resharded(st, stage, blocks, ready, self.offsets[vstage], n,
                                    None if forward else self.starts[vstage])
        elif forward and op.microbatch == 0 and gathers:
            ready = self._first_forward(st, blocks, ready, gathers, self.offsets[vstage], n)
        elif not forward and op.microbatch == c.microbatches - 1 and c.overlap \
                and c.overlap[stage]:
            ready = self._charged(st, stage, vstage, blocks, ready)
        else:
            ready = _run_layers(st, blocks, ready, n)
            if not forward and op.microbatch == c.microbatches - 1 and c.reduce:
                self._reduce(st, stage, vstage, ready, blocks.total)
        if forward and vstage == self.last_vstage and c.logits_fwd:
            ready = _run(st, "compute", ready, c.logits_fwd * c.factor(stage))
        st.last_op_end = max(st.last_op_end, ready)
        self.end.append(ready)
        if c.p2p_blocking and (vstage < self.last_vstage if forward else vstage > 0):
            self._block_on_send(st, stage, (stage + (1 if forward else -1)) % c.pp, ready)

    def _block_on_send(self, st: _Stage, stage: int, dst: int, ready: float) -> None:
        """A blocking send (Megatron-LM 2021): the stage's compute stream waits for it."""
        seconds = self.c.send.get((stage, dst), 0.0)
        st.free["compute"] = max(st.free.get("compute", 0.0), ready + seconds)
        st.chain_comm_s += seconds
        st.last_op_end = max(st.last_op_end, ready + seconds)

    def _first_forward(self, st: _Stage, blocks: _Program, ready: float,
                       gathers: Sequence[float], first: int, n: int) -> float:
        """Micro-batch 0's forward under FSDP: layer by layer, each after its all-gather,
        which is issued when the layer two before has finished its first forward."""
        for j in range(first, first + n):
            issue = st.used[j - 2] if j >= 2 else 0.0
            gathered = _run(st, "gather", issue, gathers[j])
            ready = _run_layers(st, blocks, ready, 1, (gathered,))
            st.used.append(ready)
        return ready

    def _resharded(self, st: _Stage, stage: int, blocks: _Program, ready: float, first: int,
                   n: int, lo: int | None) -> float:
        """An op under PyTorch's FSDP, layer by layer on the shared ``gather`` stream:
        forward (``lo`` None), each layer's all-gather issued when the layer two before has
        ended; backward (``lo``: the op's first global layer), in reverse, each layer's
        all-gather issued when the layer after it starts, its reduce-scatter after it."""
        gathers = self.c.gather[stage]
        if lo is None:  # the first two are issued ahead (the CPU runs ahead of the GPU)
            ends: list[float] = []
            for i, j in enumerate(range(first, first + n)):
                gathered = _run(st, "gather", ends[i - 2] if i >= 2 else 0.0, gathers[j])
                ready = _run_layers(st, blocks, ready, 1, (gathered,))
                ends.append(ready)
            return ready
        reduce = self.c.reduce[stage]
        after = _run(st, "gather", ready, gathers[first + n - 1])
        for i in reversed(range(n)):
            gathered = after
            if i:  # the next layer's gather, issued as this layer's backward starts
                start = max(ready, gathered, st.free.get("compute", 0.0))
                after = _run(st, "gather", start, gathers[first + i - 1])
            ready = _run_layers(st, blocks, ready, 1, (gathered,))
            _run(st, "gather", ready, reduce.get(lo + i, 0.0))
        return ready

    def _reduce(self, st: _Stage, stage: int, vstage: int, end: float, per: float) -> None:
        """Micro-batch k-1's backward: each layer's reduction after its backward (layer ``i``
        of the op, in backward order, ends ``(n - 1 - i) per`` before the op)."""
        n = self.sizes[vstage]
        lo = self.starts[vstage]
        reduce = self.c.reduce[stage]
        for i, layer in enumerate(reversed(range(lo, lo + n))):
            if layer in reduce:
                done = end - (n - 1 - i) * per
                st.free["dp"] = max(done, st.free.get("dp", 0.0)) + reduce[layer]

    def _charged(self, st: _Stage, stage: int, vstage: int, prog: _Program,
                 ready: float) -> float:
        """Micro-batch k-1's backward with ``overlap`` charges: each reduction issued as its
        layer ends, its charge on the compute stream right after that layer."""
        n, lo = self.sizes[vstage], self.starts[vstage]
        reduce, charges = self.c.reduce[stage], self.c.overlap[stage]
        run = 0
        for layer in reversed(range(lo, lo + n)):
            run += 1
            if layer in reduce:
                ready = _run_layers(st, prog, ready, run)
                run = 0
                st.free["dp"] = max(ready, st.free.get("dp", 0.0)) + reduce[layer]
                if charges.get(layer):  # a compute task, as slow as the stage's compute
                    ready = _run(st, "compute", ready, charges[layer] * self.c.factor(stage))
        return _run_layers(st, prog, ready, run) if run else ready

    def timing(self) -> PipelineTiming:
        c = self.c
        for p, st in enumerate(self.stages):
            if c.final and c.final[p]:  # after the last reduction and the last backward
                st.free["dp"] = max(st.free.get("dp", 0.0), st.last_op_end) + c.final[p]
        exposed = tuple(
            st.chain_comm_s + max(0.0, max(st.free.values(), default=0.0) - st.last_op_end)
            for st in self.stages
        )
        for p, st in enumerate(self.stages):
            if c.optimizer and c.optimizer[p]:  # once the stage's every stream is done
                done = max(max(st.free.values(), default=0.0), st.last_op_end)
                _run(st, "compute", done, c.optimizer[p] * c.factor(p))
        step = max(max(st.free.values(), default=0.0) for st in self.stages)
        step = max([step, *self.end])
        return PipelineTiming(step, tuple(st.compute_s for st in self.stages), exposed)


def evaluate_pipeline(costs: PipelineCosts) -> PipelineTiming:
    """The step of the pipeline ``costs`` describes (see the module docstring)."""
    ev = _Evaluator(costs)
    end, send, run_op = ev.end, costs.send, ev.run_op
    for stage, op, src, dep in _trace(costs.schedule, costs.pp, costs.microbatches,
                                      costs.chunks, ev.combined):
        if op is None:  # a transfer from ``src`` to ``stage``
            gather = costs.recv_gather[stage] if costs.recv_gather else 0.0
            end.append(end[dep] + send.get((src, stage), 0.0) + gather)
        else:
            run_op(stage, op, dep)
    return ev.timing()


#: One step of :func:`_trace`: (stage, op or None for a transfer, source stage, the step it
#: waits for or -1).
_Event = tuple[int, PipeOp | None, int, int]


@lru_cache(maxsize=256)
def _trace(schedule: str, pp: int, k: int, v: int, combined: bool = False) -> tuple[_Event, ...]:
    """The order in which :func:`~commsim.replay.pipeline.emit_pipeline`, the replay's own
    driver, adds a schedule's ops and transfers, and what each waits for: pure data, recorded
    once per shape, so that evaluating a pipeline is one pass over it (``combined``: as
    Megatron-Core's combined 1F1B orders and pairs them, a pair's forward first)."""
    events: list[_Event] = []

    def transfer(src: int, dst: int, op: PipeOp, deps: list[int]) -> list[int]:
        events.append((dst, None, src, deps[0]))
        return [len(events) - 1]

    def run_op(stage: int, op: PipeOp, deps: list[int]) -> list[int]:
        events.append((stage, op, stage, deps[0] if deps else -1))
        return [len(events) - 1]

    def run_pair(stage: int, f: PipeOp, b: PipeOp, fdeps: list[int],
                 bdeps: list[int]) -> tuple[list[int], list[int]]:
        return run_op(stage, f, fdeps), run_op(stage, b, bdeps)

    orders = stage_orders(schedule, stages=pp, microbatches=k, chunks=v, combined=combined)
    pairs = combined_steps(schedule, stages=pp, microbatches=k, chunks=v) if combined else ()
    emit_pipeline(orders, chunks=v, run_op=run_op, transfer=transfer, pairs=pairs,
                  run_pair=run_pair)
    return tuple(events)


@lru_cache(maxsize=256)
def _paired_ops(schedule: str, pp: int, k: int, v: int) -> frozenset[tuple[int, PipeOp]]:
    """The ``(stage, op)`` that Megatron-Core's combined 1F1B runs in pairs
    (:func:`~commsim.replay.pipeline.combined_steps`: each steady-state step's forward and
    backward, of different micro-batches; none in a pipeline of several stages without
    interleaving)."""
    orders = stage_orders(schedule, stages=pp, microbatches=k, chunks=v, combined=True)
    steps = combined_steps(schedule, stages=pp, microbatches=k, chunks=v)
    return frozenset((stage, order[i + j]) for stage, order in enumerate(orders)
                     for i in steps[stage] for j in (0, 1))
