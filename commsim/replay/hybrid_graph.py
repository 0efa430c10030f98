"""Lower a :class:`~commsim.replay.hybrid.HybridSpec` to a step graph (see :mod:`.hybrid`).

Pipeline stages are the "devices" of :func:`~commsim.replay.pipeline.emit_pipeline`; a stage's
op is run for every rank of the stage (all replicas, CP and TP ranks), and the lists of tasks
passed between ops are aligned with :attr:`HybridGraphBuilder.stage_ranks`, so each rank's op
waits only for its own counterpart on the neighbouring stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from commsim.replay import fields
from commsim.replay.ddp import DEFAULT_BUCKET_BYTES
from commsim.replay.graph import GraphBuilder, StepGraph
from commsim.replay.pipeline import FORWARD, PipeOp, emit_pipeline, stage_orders
from commsim.replay.stages import vstage_layers
from commsim.replay.tensor import tp_layer
from commsim.replay.transformer import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallel:
    """Group sizes: tensor, context, pipeline and data parallel."""

    tp: int = 1
    cp: int = 1
    pp: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "cp", "pp", "dp"):
            fields.positive_int(getattr(self, name), f"parallel.{name}")

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def rank(self, t: int, c: int, p: int, d: int) -> int:
        """Global rank of TP rank ``t``, CP rank ``c``, stage ``p``, replica ``d``."""
        return t + self.tp * (c + self.cp * (p + self.pp * d))


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
    def recompute(self) -> str: ...
    @property
    def bytes_per_param(self) -> int: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def microbatches(self) -> int: ...
    @property
    def layers_per_chunk(self) -> int: ...
    @property
    def split(self) -> tuple[int, ...]: ...
    def layer_times(self) -> tuple[float, float]: ...
    def logits_time(self) -> float: ...
    def layer_params(self, layer: int) -> int: ...
    def layers_of(self, stage: int) -> list[int]: ...
    def static_bytes(self, stage: int) -> int: ...


class HybridGraphBuilder:
    """Lowers a :class:`HybridSpec` to a step graph (one instance per graph)."""

    def __init__(self, spec: HybridSpec) -> None:
        self.spec = spec
        self.par = spec.parallel
        self.b = GraphBuilder(spec.parallel.world)
        par, m = self.par, spec.model
        self.stage_ranks = [
            [
                par.rank(t, c, p, d)
                for d in range(par.dp)
                for c in range(par.cp)
                for t in range(par.tp)
            ]
            for p in range(par.pp)
        ]
        s_local = m.seq // par.cp
        bpp = spec.bytes_per_param
        self.tp_bytes = spec.micro_batch * s_local * m.hidden * bpp
        self.cp_bytes = 2 * spec.micro_batch * m.seq * m.hidden * bpp // par.tp
        self.send_bytes = self.tp_bytes // par.tp
        self.act_bytes = m.layer_activation_bytes(
            spec.micro_batch, par.tp, par.cp, spec.recompute == "full"
        )
        self.forward_s, self.backward_s = spec.layer_times()
        self.logits_s = spec.logits_time()
        self.k = spec.microbatches
        # FSDP: (stage, t) -> first-forward-done tasks per layer in order of first use
        self.first_use: dict[tuple[int, int], list[list[int]]] = {}
        self.gathers: dict[tuple[int, int], int] = {}  # (layer, t) -> all-gather task
        self.buckets = {p: self._buckets(p) for p in range(par.pp)}
        self.vstages = vstage_layers(spec.split, spec.chunks_per_stage)

    # groups (lists of global ranks)
    def _tp_group(self, c: int, p: int, d: int) -> list[int]:
        return [self.par.rank(t, c, p, d) for t in range(self.par.tp)]

    def _cp_group(self, t: int, p: int, d: int) -> list[int]:
        return [self.par.rank(t, c, p, d) for c in range(self.par.cp)]

    def _dp_group(self, t: int, p: int) -> list[int]:
        return [self.par.rank(t, c, p, d) for d in range(self.par.dp) for c in range(self.par.cp)]

    def _buckets(self, stage: int) -> dict[int, tuple[int, int]]:
        """DDP: layer closing a bucket -> (bucket index, bytes), in backward order."""
        out: dict[int, tuple[int, int]] = {}
        held = 0
        order = list(reversed(self.spec.layers_of(stage)))
        for i, layer in enumerate(order):
            held += self.spec.layer_params(layer) * self.spec.bytes_per_param
            if held >= DEFAULT_BUCKET_BYTES or i == len(order) - 1:
                out[layer] = (len(out), held)
                held = 0
        return out

    def build(self) -> StepGraph:
        spec, par = self.spec, self.par
        orders = stage_orders(
            spec.schedule, stages=par.pp, microbatches=self.k, chunks=spec.chunks_per_stage
        )
        emit_pipeline(
            orders, chunks=spec.chunks_per_stage, run_op=self._run_op, transfer=self._transfer
        )
        static = [0] * par.world
        for p in range(par.pp):
            for r in self.stage_ranks[p]:
                static[r] = spec.static_bytes(p)
        return self.b.build(static)

    def _transfer(self, src: int, dst: int, op: PipeOp, deps: list[int]) -> list[int]:
        what = "act" if op.kind == FORWARD else "grad"
        return [
            self.b.send(
                s, t, self.send_bytes, deps=(dep,), name=f"{what} mb{op.microbatch}", phase="p2p"
            )
            for s, t, dep in zip(self.stage_ranks[src], self.stage_ranks[dst], deps, strict=True)
        ]

    def _run_op(self, stage: int, op: PipeOp, deps: list[int]) -> list[int]:
        spec, par = self.spec, self.par
        vstage = op.chunk * par.pp + stage
        layers = list(self.vstages[vstage])
        ranks = self.stage_ranks[stage]
        done = {r: ([deps[i]] if deps else []) for i, r in enumerate(ranks)}
        forward = op.kind == FORWARD
        last_stage = vstage == par.pp * spec.chunks_per_stage - 1
        tag = f" mb{op.microbatch}"
        if not layers:  # a chunk of only the embedding or the loss: an empty kernel
            phase = "forward" if forward else "backward"
            for r in ranks:
                done[r] = [self.b.compute(r, 0.0, name=f"chunk{op.chunk} (no layers){tag}",
                                          phase=phase, deps=done[r])]
        if not forward and last_stage:
            for r in ranks:
                done[r] = [
                    self.b.compute(
                        r,
                        2 * self.logits_s,
                        name="logits bwd" + tag,
                        phase="backward",
                        deps=done[r],
                    )
                ]
        for layer in layers if forward else reversed(layers):
            done = self._layer(stage, layer, op, done)
        if forward and last_stage:
            for r in ranks:
                done[r] = [
                    self.b.compute(
                        r, self.logits_s, name="logits" + tag, phase="forward", deps=done[r]
                    )
                ]
        return [done[r][0] for r in ranks]  # after a layer, one task per rank marks it done

    def _layer(
        self, stage: int, layer: int, op: PipeOp, done: dict[int, list[int]]
    ) -> dict[int, list[int]]:
        spec, par, b = self.spec, self.par, self.b
        forward = op.kind == FORWARD
        phase = "forward" if forward else "backward"
        name = f"{'fwd' if forward else 'bwd'} L{layer} mb{op.microbatch}"
        time_s = self.forward_s if forward else self.backward_s
        fsdp = spec.data_parallel == "fsdp"
        sharded = fsdp and par.dp * par.cp > 1
        first_fwd = forward and op.microbatch == 0
        first_bwd = not forward and op.microbatch == 0
        weights = spec.layer_params(layer) * spec.bytes_per_param
        out: dict[int, list[int]] = {}
        for d in range(par.dp):
            cp_tasks: dict[int, int] = {}
            if par.cp > 1 and forward:
                cp_deps = [
                    [x for r in self._cp_group(t, stage, d) for x in done[r]] for t in range(par.tp)
                ]
                cp_tasks = dict(enumerate(self._cp(stage, d, "all_gather", name, phase, cp_deps)))
            for c in range(par.cp):
                group = self._tp_group(c, stage, d)

                def extra_deps(
                    block: str, t: int, cp_tasks: dict[int, int] = cp_tasks
                ) -> list[int]:
                    extra = [cp_tasks[t]] if block == "attn" and t in cp_tasks else []
                    if fsdp and first_fwd and block == "attn":  # the forward's first block
                        extra.extend(self._gather(stage, layer, t))
                    return extra

                def after_compute(block: str, halves: list[int], d: int = d) -> list[int]:
                    if forward or block != "attn" or par.cp == 1:
                        return halves
                    deps = [[h] for h in halves]
                    return self._cp(stage, d, "reduce_scatter", name, phase, deps)

                prev = tp_layer(
                    b,
                    group,
                    time_s,
                    self.tp_bytes,
                    algorithm=spec.algorithm,
                    name=name,
                    phase=phase,
                    deps={r: done[r] for r in group},
                    mem_start=weights if sharded and first_bwd else 0,
                    mem_end=self.act_bytes if forward else -self.act_bytes,
                    extra_deps=extra_deps,
                    after_compute=after_compute,
                )
                out.update(prev)
        if first_fwd and fsdp:
            self._note_first_use(stage, out)
        if not forward and op.microbatch == self.k - 1:
            self._reduce(stage, layer, out)
        return out

    def _cp(
        self, stage: int, d: int, collective: str, name: str, phase: str, deps: list[list[int]]
    ) -> list[int]:
        """Context parallelism: the K/V ``collective`` (``all_gather`` forward,
        ``reduce_scatter`` backward) of every TP rank's CP group of replica ``d``."""
        what = collective.replace("_", "")
        return [
            self.b.collective(
                self._cp_group(t, stage, d),
                collective,
                self.cp_bytes,
                algorithm=self.spec.algorithm,
                name=f"{name} kv {what}",
                phase=phase,
                deps=deps[t],
                stream="cp",
            )
            for t in range(self.par.tp)
        ]

    def _note_first_use(self, stage: int, out: dict[int, list[int]]) -> None:
        """FSDP: a layer's first forward is done; its tasks, per TP rank, gate the gathers."""
        par = self.par
        for t in range(par.tp):
            self.first_use.setdefault((stage, t), []).append(
                [
                    x
                    for d in range(par.dp)
                    for c in range(par.cp)
                    for x in out[par.rank(t, c, stage, d)]
                ]
            )

    def _gather(self, stage: int, layer: int, t: int) -> list[int]:
        """FSDP: the all-gather of ``layer``'s shard for TP rank ``t``, issued one layer ahead
        (none when the DP x CP group is one rank: nothing is sharded)."""
        if self.par.dp * self.par.cp == 1:
            return []
        key = (layer, t)
        if key not in self.gathers:
            used = self.first_use.get((stage, t), [])
            deps = used[-2] if len(used) >= 2 else []
            weights = self.spec.layer_params(layer) * self.spec.bytes_per_param
            self.gathers[key] = self.b.collective(
                self._dp_group(t, stage),
                "all_gather",
                weights,
                algorithm=self.spec.algorithm,
                name=f"allgather L{layer}",
                phase="forward",
                deps=deps,
                stream="dp_gather",
                mem_start=weights,
            )
        return [self.gathers[key]]

    def _reduce(self, stage: int, layer: int, out: dict[int, list[int]]) -> None:
        """After a layer's last backward: FSDP reduce-scatter, or a closing DDP bucket."""
        spec, par = self.spec, self.par
        weights = spec.layer_params(layer) * spec.bytes_per_param
        for t in range(par.tp):
            group = self._dp_group(t, stage)
            deps = [x for r in group for x in out[r]]
            if len(group) == 1:
                continue
            if spec.data_parallel == "fsdp":
                self.b.collective(
                    group,
                    "reduce_scatter",
                    weights,
                    algorithm=spec.algorithm,
                    name=f"reducescatter L{layer}",
                    phase="gradient",
                    deps=deps,
                    stream="dp",
                    mem_end=-weights,
                )
            elif layer in self.buckets[stage]:
                bucket, nbytes = self.buckets[stage][layer]
                self.b.collective(
                    group,
                    "all_reduce",
                    nbytes,
                    algorithm=spec.algorithm,
                    name=f"allreduce bucket{bucket}",
                    phase="gradient",
                    deps=deps,
                    stream="dp",
                )
