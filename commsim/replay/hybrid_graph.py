"""Lower a :class:`~commsim.replay.hybrid.HybridSpec` to a step graph (see :mod:`.hybrid`).

Pipeline stages are the "devices" of :func:`~commsim.replay.pipeline.emit_pipeline`; a stage's
op is run for every rank of the stage (all replicas, CP and TP ranks), and the lists of tasks
passed between ops are aligned with :attr:`HybridGraphBuilder.stage_ranks`, so each rank's op
waits only for its own counterpart on the neighbouring stage. A layer is lowered block by block
(:func:`~commsim.replay.hybrid_blocks.layer_blocks`) over every rank of its stage: a compute
block on each rank, a collective block over each group of its kind (TP, CP, or the
expert-parallel group, which spans replicas).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Protocol

from commsim.network import Network
from commsim.replay.ddp import DEFAULT_BUCKET_BYTES
from commsim.replay.graph import GraphBuilder, StepGraph, check_tasks
from commsim.replay.hybrid_blocks import BlockTimes, handovers, layer_blocks
from commsim.replay.layout import Parallel
from commsim.replay.pipeline import (
    FORWARD,
    PipeOp,
    combined_steps,
    emit_pipeline,
    stage_orders,
)
from commsim.replay.replicas import ReplicaFold, Unfoldable, fold_network
from commsim.replay.stages import vstage_layers
from commsim.replay.transformer import Model


class HybridSpec(Protocol):
    """What the lowering reads of a :class:`commsim.replay.hybrid.HybridSpec` (declared here,
    so that this module, which the spec's ``graph`` calls, does not import the spec's module)."""

    @property
    def model(self) -> Model: ...
    @property
    def parallel(self) -> Parallel: ...
    @property
    def micro_batch(self) -> int: ...
    @property
    def schedule(self) -> str: ...
    @property
    def chunks_per_stage(self) -> int: ...
    @property
    def data_parallel(self) -> str: ...
    @property
    def bytes_per_param(self) -> int: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def microbatches(self) -> int: ...
    @property
    def split(self) -> tuple[int, ...]: ...
    def block_times(self) -> BlockTimes: ...
    def layer_params(self, layer: int) -> int: ...
    def layers_of(self, stage: int) -> list[int]: ...
    def static_bytes(self, stage: int) -> int: ...


_Chain = Generator[None, None, dict[int, list[int]]]


def _weave(chains: list[_Chain]) -> list[dict[int, list[int]]]:
    """Advance each generator of :meth:`HybridGraphBuilder._chain` one step in turn until all
    have ended (one alone: run it out); their values."""
    done: list[dict[int, list[int]] | None] = [None] * len(chains)
    while any(d is None for d in done):
        for i, chain in enumerate(chains):
            if done[i] is None:
                try:
                    next(chain)
                except StopIteration as stop:
                    done[i] = stop.value
    return [d for d in done if d is not None]


def replica_fold(par: Parallel, network: Network) -> ReplicaFold:
    """The replica symmetry of the fewest replicas per block that ``network`` allows
    (:mod:`.replicas`; Unfoldable where none)."""
    reason = Unfoldable("one data-parallel replica" if par.dp == 1 else
                        f"{par.dp} replicas do not split into blocks of whole expert groups")
    for replicas in par.fold_blocks():
        try:
            return fold_network(network, *par.replica_shift(replicas), par.dp)
        except Unfoldable as exc:
            reason = exc
    raise reason


class HybridGraphBuilder:
    """Lowers a :class:`HybridSpec` to a step graph (one instance per graph).

    With ``replicas`` (a divisor of ``dp``) it builds the tasks of replicas ``0..replicas-1``
    only, and the collectives spanning more (data-parallel, expert data-parallel) with those
    replicas' deps: block 0 of the step for a replica fold (:mod:`.replicas`)."""

    def __init__(self, spec: HybridSpec, replicas: int | None = None) -> None:
        self.spec = spec
        self.par = par = spec.parallel
        self.b = GraphBuilder(spec.parallel.world)
        self.t = t = spec.block_times()
        self.replicas = par.dp if replicas is None else replicas
        self.stage_ranks = [
            [par.rank(tt, c, p, d) for d in range(self.replicas) for c in range(par.cp)
             for tt in range(par.tp)]
            for p in range(par.pp)
        ]
        self.built = {r for ranks in self.stage_ranks for r in ranks}
        self.send_bytes = t.tp_bytes // par.tp
        self.k = spec.microbatches
        # FSDP: (stage, t) -> first-forward-done tasks per layer in order of first use
        self.first_use: dict[tuple[int, int], list[list[int]]] = {}
        self.gathers: dict[tuple[int, int], int | None] = {}  # (layer, t) -> all-gather
        self.expert_gathers: dict[tuple[int, int, int], int] = {}  # (layer, et, e) -> task
        self._owned: dict[tuple[int, int], list[tuple[int, int, list[int], list[int]]]] = {}
        self.buckets = {p: self._buckets(p) for p in range(par.pp)}
        self.vstages = vstage_layers(spec.split, spec.chunks_per_stage)
        self.last_op: dict[int, list[int]] = {}  # rank -> its stage's last op's end
        self.blocked: dict[tuple[int, ...], list[int]] = {}  # an op's output -> its sends

    # groups (lists of global ranks)
    def _groups(self, kind: str, stage: int) -> list[list[int]]:
        """Every group of ``kind`` (``tp``, ``cp``, ``ep``, ``etp``) among ``stage``'s
        ranks."""
        par, rank = self.par, self.par.rank
        if kind == "tp":
            return [[rank(t, c, stage, d) for t in range(par.tp)]
                    for d in range(self.replicas) for c in range(par.cp)]
        if kind == "cp":
            return [[rank(t, c, stage, d) for c in range(par.cp)]
                    for d in range(self.replicas) for t in range(par.tp)]
        groups = (par.ep_groups(et, stage) for et in range(par.etp)) if kind == "ep" else (
            [par.etp_groups(stage)])
        return [g for gs in groups for g in gs if self.built.issuperset(g)]

    def _dp_group(self, t: int, p: int) -> list[int]:
        return [self.par.rank(t, c, p, d) for d in range(self.par.dp) for c in range(self.par.cp)]

    def _expert_params(self, layer: int) -> int:
        m = self.t.moe
        return m.expert_params[layer] if m is not None else 0

    def _buckets(self, stage: int) -> dict[int, tuple[int, int]]:
        """DDP/ZeRO: layer closing a bucket -> (bucket index, bytes), in backward order."""
        out: dict[int, tuple[int, int]] = {}
        held = 0
        order = list(reversed(self.spec.layers_of(stage)))
        for i, layer in enumerate(order):
            held += self.spec.layer_params(layer) * self.spec.bytes_per_param
            if held >= DEFAULT_BUCKET_BYTES or i == len(order) - 1:
                out[layer] = (len(out), held)
                held = 0
        return out

    def compute_tasks(self) -> int:
        """The compute tasks alone of the step (at most as many as the graph's tasks): every
        rank of a stage runs each layer's compute blocks, forward and backward, per
        micro-batch."""
        cp = self.par.cp > 1
        per_layer = [sum(b.kind == "compute" for forward in (True, False)
                         for b in layer_blocks(self.t, layer, forward, cp))
                     for layer in range(self.spec.model.layers)]
        return sum(len(self.stage_ranks[p]) * self.k
                   * sum(per_layer[layer] for layer in self.spec.layers_of(p))
                   for p in range(self.par.pp))

    def build(self) -> StepGraph:
        spec, par = self.spec, self.par
        # refuse a step too big to time before building a million tasks of it (seconds)
        check_tasks(self.compute_tasks(), "ranks x micro-batches x layers",
                    f"{len(self.built)} x {self.k} x {spec.model.layers}")
        combined = bool(self.t.combined_stretch)  # Megatron-Core's combined 1F1B
        shape = dict(stages=par.pp, microbatches=self.k, chunks=spec.chunks_per_stage)
        emit_pipeline(
            stage_orders(spec.schedule, **shape, combined=combined),
            chunks=spec.chunks_per_stage, run_op=self._run_op, transfer=self._transfer,
            pairs=combined_steps(spec.schedule, **shape) if combined else (),
            run_pair=self._run_pair,
        )
        static = [0] * par.world
        for p in range(par.pp):
            self._final(p)
            for r in self.stage_ranks[p]:
                static[r] = spec.static_bytes(p)
                if self.t.optimizer_s:
                    self.b.compute(r, self.t.optimizer_s[p], name="optimizer step",
                                   phase="optimizer", deps=self.b.stream_tails(r))
        return self.b.build(static)

    def _sends(self, src: int, dst: int, forward: bool, microbatch: int,
               deps: list[int]) -> list[int]:
        what = "act" if forward else "grad"
        return [
            self.b.send(s, t, self.send_bytes, deps=(dep,), name=f"{what} mb{microbatch}",
                        phase="p2p")
            for s, t, dep in zip(self.stage_ranks[src], self.stage_ranks[dst], deps, strict=True)
        ]

    def _transfer(self, src: int, dst: int, op: PipeOp, deps: list[int]) -> list[int]:
        if not self.t.p2p_blocking:
            return self._sends(src, dst, op.kind == FORWARD, op.microbatch, deps)
        sends = dict(zip(self.stage_ranks[dst], self.blocked.pop(tuple(deps)), strict=True))
        for group in self._groups("tp", dst):  # Megatron-LM 2021: 1/t sent, then all-gathered
            if len(group) > 1:
                gathered = self.b.collective(
                    group, "all_gather", self.t.tp_bytes, algorithm=self.spec.algorithm,
                    name=f"recv allgather mb{op.microbatch}", phase="p2p",
                    deps=[sends[r] for r in group], stream="")
                sends.update(dict.fromkeys(group, gathered))
        return [sends[r] for r in self.stage_ranks[dst]]

    def _block_on_send(self, stage: int, vstage: int, op: PipeOp, out: list[int]) -> None:
        """A blocking send (Megatron-LM 2021): ``op``'s output leaves now, and the stage's
        compute stream waits for it."""
        forward = op.kind == FORWARD
        if not (vstage < self._last_vstage if forward
                else vstage > 0):
            return
        dst = (stage + (1 if forward else -1)) % self.par.pp
        sends = self._sends(stage, dst, forward, op.microbatch, out)
        self.blocked[tuple(out)] = sends
        for r, send in zip(self.stage_ranks[stage], sends, strict=True):
            self.last_op[r] = [self.b.compute(r, 0.0, name=f"wait send mb{op.microbatch}",
                                              phase="p2p", deps=[send])]

    def _run_op(self, stage: int, op: PipeOp, deps: list[int]) -> list[int]:
        done = self._begin(stage, op, deps)
        return self._end(stage, op, _weave([self._chain(stage, op, done, 1.0)])[0])

    def _run_pair(self, stage: int, fop: PipeOp, bop: PipeOp, fdeps: list[int],
                  bdeps: list[int]) -> tuple[list[int], list[int]]:
        """A combined step: ``fop``'s and ``bop``'s layers woven part by part
        (:func:`~.hybrid_blocks.handovers`), each one's compute added after the other's
        (forward first), so each one's all-to-alls run under the other's compute, as
        Megatron-Core's combined 1F1B schedules them; their
        compute stretched by what the all-to-alls' SMs take (``BlockTimes.combined_stretch``)."""
        stretch = self.t.combined_stretch[stage]
        fdone, bdone = _weave([self._chain(stage, op, self._begin(stage, op, deps), stretch)
                               for op, deps in ((fop, fdeps), (bop, bdeps))])
        return self._end(stage, fop, fdone), self._end(stage, bop, bdone)

    def _begin(self, stage: int, op: PipeOp, deps: list[int]) -> dict[int, list[int]]:
        """What comes before ``op``'s layers: an empty chunk's kernel, the loss's backward."""
        vstage = op.chunk * self.par.pp + stage
        ranks = self.stage_ranks[stage]
        done = {r: ([deps[i]] if deps else []) for i, r in enumerate(ranks)}
        phase = "forward" if op.kind == FORWARD else "backward"
        tag = f" mb{op.microbatch}"
        if not self.vstages[vstage]:  # a chunk of only the embedding or the loss
            for r in ranks:
                done[r] = [self.b.compute(r, 0.0, name=f"chunk{op.chunk} (no layers){tag}",
                                          phase=phase, deps=done[r])]
        if op.kind != FORWARD and vstage == self._last_vstage:
            for r in ranks:
                done[r] = [self.b.compute(r, self.t.logits_bwd, name="logits bwd" + tag,
                                          phase=phase, deps=done[r])]
        return done

    def _chain(self, stage: int, op: PipeOp, done: dict[int, list[int]],
               stretch: float) -> _Chain:
        """``op``'s layers, yielding where it hands the compute stream over (:meth:`_layer`)."""
        layers = self.vstages[op.chunk * self.par.pp + stage]
        for layer in layers if op.kind == FORWARD else reversed(layers):
            done = yield from self._layer(stage, layer, op, done, stretch)
        return done

    def _end(self, stage: int, op: PipeOp, done: dict[int, list[int]]) -> list[int]:
        """What comes after ``op``'s layers (the loss), and its output: one task per rank."""
        vstage = op.chunk * self.par.pp + stage
        ranks = self.stage_ranks[stage]
        if op.kind == FORWARD and vstage == self._last_vstage:
            for r in ranks:
                done[r] = [self.b.compute(r, self.t.logits_fwd, name=f"logits mb{op.microbatch}",
                                          phase="forward", deps=done[r])]
        for r in ranks:
            self.last_op[r] = done[r]
        out = [done[r][0] for r in ranks]  # after a layer, one task per rank marks it done
        if self.t.p2p_blocking and self.par.pp > 1:
            self._block_on_send(stage, vstage, op, out)
        return out

    @property
    def _last_vstage(self) -> int:
        return self.par.pp * self.spec.chunks_per_stage - 1

    def _layer(
        self, stage: int, layer: int, op: PipeOp, done: dict[int, list[int]], stretch: float
    ) -> _Chain:
        """``layer``'s blocks for ``op`` on every rank of ``stage``, yielding after each
        compute block of :func:`~.hybrid_blocks.handovers` (a combined step weaves two of
        these); returns each rank's last tasks."""
        spec, par, b = self.spec, self.par, self.b
        forward = op.kind == FORWARD
        phase = "forward" if forward else "backward"
        name = f"{'fwd' if forward else 'bwd'} L{layer} mb{op.microbatch}"
        fsdp = spec.data_parallel == "fsdp"
        sharded = fsdp and par.dp * par.cp > 1
        blocks = layer_blocks(self.t, layer, forward, par.cp > 1)
        computes = [i for i, blk in enumerate(blocks) if blk.kind == "compute"]
        points = handovers([blk.kind for blk in blocks])
        weights = spec.layer_params(layer) * spec.bytes_per_param
        act = self.t.activation_bytes
        prev = {r: list(done[r]) for r in self.stage_ranks[stage]}
        for i, blk in enumerate(blocks):
            if blk.kind == "compute":
                for r in prev:
                    extra: list[int] = []
                    if i == computes[0] and fsdp and forward and op.microbatch == 0:
                        extra = self._gather(stage, layer, r)
                    start = weights if sharded and i == computes[0] and not forward and (
                        op.microbatch == 0) else 0
                    prev[r] = [b.compute(r, blk.amount * stretch, name=f"{name} {blk.label}",
                                         phase=phase, deps=prev[r] + extra, mem_start=start,
                                         mem_end=(act if forward else -act)
                                         if i == computes[-1] else 0)]
                if i in points:
                    yield
                continue
            legs = self.t.moe.legs if self.t.moe is not None and blk.kind == "ep" else {}
            for group in self._groups(blk.kind, stage):
                if len(group) == 1:
                    continue
                parts = legs.get((tuple(group), int(blk.amount)),
                                 ((tuple(group), int(blk.amount), 0),))
                tasks = [b.collective(list(ranks), blk.collective, nbytes,
                                      algorithm=spec.algorithm, name=f"{name} {blk.label}",
                                      phase=phase, deps=[x for r in ranks for x in prev[r]],
                                      stream=blk.kind + (f" #{lane + 1}" if lane else ""))
                         for ranks, nbytes, lane in parts]
                for r in group:
                    prev[r] = list(tasks)
        if forward and op.microbatch == 0 and fsdp:
            self._note_first_use(stage, prev)
        if not forward and op.microbatch == self.k - 1:
            self._reduce(stage, layer, prev)
            charge = self.t.overlap_s[stage].get(layer, 0.0) if self.t.overlap_s else 0.0
            if charge:  # what the reductions just issued cost the compute they overlap
                for r in prev:
                    prev[r] = [b.compute(r, charge, name=f"{name} overlap cost", phase=phase,
                                         deps=prev[r])]
        return prev

    def _note_first_use(self, stage: int, out: dict[int, list[int]]) -> None:
        """FSDP: a layer's first forward is done; its tasks, per TP rank, gate the gathers."""
        par = self.par
        for t in range(par.tp):
            self.first_use.setdefault((stage, t), []).append(
                [
                    x
                    for d in range(self.replicas)
                    for c in range(par.cp)
                    for x in out[par.rank(t, c, stage, d)]
                ]
            )

    def _gather(self, stage: int, layer: int, rank: int) -> list[int]:
        """FSDP: the all-gather of ``layer``'s shard for ``rank``'s TP rank (then of its
        experts', over its expert data-parallel group), issued one layer ahead (none when the
        DP x CP group is one rank: nothing is sharded)."""
        par = self.par
        if par.dp * par.cp == par.expert_dp == 1:
            return []
        t = par.coords(rank)[0]
        for owner in range(t + 1):  # the rank's expert group may be a lower TP rank's
            if (layer, owner) not in self.gathers:
                self._issue_gathers(stage, layer, owner)
        expert = self.expert_gathers.get((layer, *par.expert_coords(rank)))
        return [x for x in (self.gathers[(layer, t)], expert) if x is not None]

    def _issue_gathers(self, stage: int, layer: int, t: int) -> None:
        """FSDP: ``layer``'s all-gather for TP rank ``t`` (if its DP x CP group has more than
        one rank), then its experts' over the expert data-parallel groups ``t`` issues
        (:meth:`_expert_groups`), each after its members' use two layers back."""
        par = self.par
        used = {tt: self.first_use.get((stage, tt), []) for tt in range(par.tp)}
        deps = {tt: u[-2] if len(u) >= 2 else [] for tt, u in used.items()}
        bpp = self.spec.bytes_per_param
        weights = self.spec.layer_params(layer) * bpp
        self.gathers[(layer, t)] = self.b.collective(
            self._dp_group(t, stage), "all_gather", weights, algorithm=self.spec.algorithm,
            name=f"allgather L{layer}", phase="forward", deps=deps[t], stream="dp_gather",
            mem_start=weights) if par.dp * par.cp > 1 else None
        experts = self._expert_params(layer) * bpp
        for et, e, group, tps in self._expert_groups(stage, t) if experts else ():
            task = self._expert_collective(group, "all_gather", experts,
                                           f"allgather experts L{layer}", "forward",
                                           [x for tt in tps for x in deps[tt]], "dp_gather")
            if task is not None:
                self.expert_gathers[(layer, et, e)] = task

    def _expert_groups(self, stage: int, t: int) -> list[tuple[int, int, list[int], list[int]]]:
        """``(et, e, group, TP ranks)`` of the expert data-parallel groups of ``stage`` whose
        members' lowest TP rank is ``t`` (with ``etp = tp``: those of expert TP rank ``t``),
        the TP ranks their members hold: they are issued with TP rank ``t``'s data-parallel
        collectives, after those members' work."""
        if (stage, t) in self._owned:
            return self._owned[(stage, t)]
        par = self.par
        out = self._owned[(stage, t)] = []
        for et in range(par.etp):
            for e in range(par.ep):
                group = par.expert_dp_group(et, stage, e)
                tps = sorted({par.coords(r)[0] for r in group})
                if tps[0] == t:
                    out.append((et, e, group, tps))
        return out

    def _expert_collective(self, group: list[int], collective: str, nbytes: int, name: str,
                           phase: str, deps: list[int], stream: str) -> int | None:
        """``collective`` over an expert data-parallel ``group`` (None: a group of one
        rank)."""
        if len(group) == 1:
            return None
        return self.b.collective(group, collective, nbytes, algorithm=self.spec.algorithm,
                                 name=name, phase=phase, deps=deps, stream=stream)

    def _grad(self, nbytes: int) -> int:
        """Bytes of a reduction of ``nbytes`` of weights (gradients in ``grad_bytes``)."""
        return nbytes * self.t.grad_bytes // self.spec.bytes_per_param

    def _reduce(self, stage: int, layer: int, out: dict[int, list[int]]) -> None:
        """After a layer's last backward: FSDP reduce-scatter, or a closing DDP (ZeRO) bucket
        when the reduction overlaps the backward; then its experts' over their groups."""
        spec, par = self.spec, self.par
        weights = spec.layer_params(layer) * spec.bytes_per_param
        fsdp = spec.data_parallel == "fsdp"
        coll = "all_reduce" if spec.data_parallel == "ddp" else "reduce_scatter"
        if not (fsdp or self.t.grad_overlap):
            return
        groups = {t: self._dp_group(t, stage) for t in range(par.tp)}
        ready = {t: [x for r in g if r in self.built for x in out[r]] for t, g in groups.items()}
        for t, group in groups.items():
            deps = ready[t]
            if len(group) > 1 and fsdp:
                self.b.collective(group, "reduce_scatter", self._grad(weights),
                                  algorithm=spec.algorithm, name=f"reducescatter L{layer}",
                                  phase="gradient", deps=deps, stream="dp", mem_end=-weights)
            elif len(group) > 1 and not fsdp and layer in self.buckets[stage]:
                bucket, nbytes = self.buckets[stage][layer]
                self.b.collective(group, coll, self._grad(nbytes), algorithm=spec.algorithm,
                                  name=f"{coll.replace('_', '')} bucket{bucket}",
                                  phase="gradient", deps=deps, stream="dp")
            experts = self._expert_params(layer) * spec.bytes_per_param
            for _, _, egroup, tps in self._expert_groups(stage, t) if experts else ():
                self._expert_collective(egroup, coll, self._grad(experts),
                                        f"{coll.replace('_', '')} experts L{layer}",
                                        "gradient", [x for tt in tps for x in ready[tt]], "dp")

    def _final(self, stage: int) -> None:
        """After the stage's last op and reduction: without overlap, DDP's (ZeRO's) one
        reduction of the whole gradient; ZeRO's all-gather of the updated weights."""
        spec, par = self.spec, self.par
        dp = spec.data_parallel
        if dp == "fsdp" or par.dp * par.cp == par.expert_dp == 1:
            return
        coll = "all_reduce" if dp == "ddp" else "reduce_scatter"
        bpp = spec.bytes_per_param
        mine = spec.layers_of(stage)
        dense = sum(spec.layer_params(i) for i in mine) * bpp
        experts = sum(self._expert_params(i) for i in mine) * bpp
        groups = {t: self._dp_group(t, stage) for t in range(par.tp)}
        ready = {t: [x for r in g if r in self.built for x in self.last_op[r]]
                 for t, g in groups.items()}
        for t, group in groups.items():
            deps = ready[t]
            steps = [] if self.t.grad_overlap else [(coll, self._grad(dense), experts and
                                                     self._grad(experts))]
            if dp != "ddp":
                steps.append(("all_gather", dense, experts))
            for collective, nbytes, expert_bytes in steps:
                if len(group) > 1:
                    self.b.collective(group, collective, nbytes, algorithm=spec.algorithm,
                                      name=f"{collective.replace('_', '')} stage{stage}",
                                      phase="gradient", deps=deps, stream="dp")
                for _, _, egroup, tps in self._expert_groups(stage, t) if expert_bytes else ():
                    self._expert_collective(egroup, collective, expert_bytes,
                                            f"{collective.replace('_', '')} experts "
                                            f"stage{stage}", "gradient",
                                            [x for tt in tps for x in ready[tt]], "dp")
