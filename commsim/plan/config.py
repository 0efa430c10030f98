"""One training configuration the planner considers: the parallel layout and its settings.

Ranks are laid out as the ``hybrid`` workload lays them out (Llama 3's ``[TP, CP, PP, DP]``
order, TP fastest): rank ``t + tp (c + cp (p + pp d))``. Stages hold ``layers / pp`` layers
each, or ``stage_layers`` (first stage first; :mod:`commsim.replay.stages`). Expert parallelism
(``ep``, mixtures of experts) is taken from the data-parallel replicas, as Megatron-Core places
it (its order ``tp-cp-ep-dp-pp``: EP next to CP inside DP): replicas ``d`` with the same
``d // ep`` form an expert-parallel group, and the ``dp cp / ep`` ranks with the same
``d % ep`` (every CP rank) hold the same experts: the expert data-parallel group, over which
expert gradients are reduced and their optimizer state sharded.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.replay.stages import even_split, split_label, vstage_layers

SCHEDULES = ("1f1b", "gpipe", "interleaved")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanConfig:
    """Group sizes, micro-batch, pipeline schedule (``chunks`` per stage), data parallelism
    (``ddp``, ``zero1``, ``zero2``, ``fsdp``) and recompute (``none``, ``selective``,
    ``full``); ``stage_layers``: each stage's layers when they differ (empty: equal
    stages)."""

    tp: int
    cp: int
    pp: int
    dp: int
    micro_batch: int
    schedule: str
    chunks: int
    data_parallel: str
    recompute: str
    ep: int = 1
    stage_layers: tuple[int, ...] = ()

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def rank(self, t: int, c: int, p: int, d: int) -> int:
        """Global rank of TP rank ``t``, CP rank ``c``, stage ``p``, replica ``d``."""
        return t + self.tp * (c + self.cp * (p + self.pp * d))

    def tp_group(self, p: int, d: int) -> tuple[int, ...]:
        return tuple(self.rank(t, 0, p, d) for t in range(self.tp))

    def cp_group(self, p: int, d: int) -> tuple[int, ...]:
        return tuple(self.rank(0, c, p, d) for c in range(self.cp))

    def dp_group(self, p: int) -> tuple[int, ...]:
        """The ranks holding TP rank 0's parameters of stage ``p`` (all replicas, CP ranks)."""
        return tuple(self.rank(0, c, p, d) for d in range(self.dp) for c in range(self.cp))

    def ep_group(self, p: int, d: int) -> tuple[int, ...]:
        """TP rank 0's expert-parallel group in stage ``p`` of replica ``d``."""
        first = d - d % self.ep
        return tuple(self.rank(0, 0, p, e) for e in range(first, first + self.ep))

    def expert_dp_group(self, p: int) -> tuple[int, ...]:
        """The ranks holding TP rank 0's experts of EP rank 0 in stage ``p``."""
        return tuple(self.rank(0, c, p, d) for d in range(0, self.dp, self.ep)
                     for c in range(self.cp))
    def split(self, layers: int) -> tuple[int, ...]:
        """Layers per stage, first stage first, of a model of ``layers`` layers."""
        return self.stage_layers or even_split(layers, self.pp)

    def vstages(self, layers: int) -> list[range]:
        """The global layers of each virtual stage (chunk ``c`` of stage ``p``: ``c pp + p``)."""
        return vstage_layers(self.split(layers), self.chunks)

    @property
    def schedule_label(self) -> str:
        return f"interleaved:{self.chunks}" if self.schedule == "interleaved" else self.schedule

    def axes(self) -> dict[str, object]:
        """The configuration as the JSON keys of ``commsim plan``."""
        return {
            "tp": self.tp,
            "cp": self.cp,
            "pp": self.pp,
            "dp": self.dp,
            "micro_batch": self.micro_batch,
            "schedule": self.schedule,
            "chunks_per_stage": self.chunks,
            "data_parallel": self.data_parallel,
            "recompute": self.recompute,
            "ep": self.ep,
            **({"stage_layers": list(self.stage_layers)} if self.stage_layers else {}),
        }

    def label(self) -> str:
        """``tp8 cp1 pp16[7,8*14,7] dp8 mb1 1f1b fsdp none``: the stages' layers shown only
        when they differ (runs of equal stages as ``n*count``); ``ep8`` after ``dp`` when
        ``ep > 1``."""
        pp = f"pp{self.pp}"
        if self.stage_layers:
            pp += f"[{split_label(self.stage_layers)}]"
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        return (
            f"tp{self.tp} cp{self.cp} {pp} dp{self.dp}{ep} mb{self.micro_batch} "
            f"{self.schedule_label} {self.data_parallel} {self.recompute}"
        )

