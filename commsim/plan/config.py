"""One training configuration the planner considers: the parallel layout and its settings.

Ranks are laid out in one of two orders (``order``, TP fastest in both):

* ``tp-cp-pp-dp`` (the default; Llama 3's ``[TP, CP, PP, DP]``, as the ``hybrid`` workload lays
  them out): rank ``t + tp (c + cp (p + pp d))``, a replica's stages next to each other;
* ``tp-cp-ep-dp-pp`` (Megatron-Core's default ``order`` of ``initialize_model_parallel``,
  ``megatron/core/parallel_state.py``; the planner's order for mixtures of experts): rank
  ``t + tp (c + cp (d + dp p))``, the pipeline outermost, so that the data-parallel replicas
  of a stage sit next to each other.

Stages hold ``layers / pp`` layers each, or ``stage_layers`` (first stage first;
:mod:`commsim.replay.stages`).

Expert parallelism (``ep``, mixtures of experts) is carved out of the data-parallel ranks. In
Megatron-Core's order it is *folded* as Megatron-Core folds it (MoE Parallel Folding, arXiv
2504.14960; ``parallel_state.py`` builds the expert ranks with the same order over
``tp-ep-dp-pp``, expert TP = TP): the ``cp dp`` ranks of a stage that share a TP rank,
numbered ``j = c + cp d``, form EP groups of ``ep`` consecutive ``j``, so with TP 1 and EP 8
on 8-GPU hosts an EP group is one host. In the Llama 3 order, replicas ``d`` with the same
``d // ep`` form an EP group (CP rank by CP rank). Either way the ``dp cp / ep`` ranks holding
the same experts are the expert data-parallel group, over which expert gradients are reduced
and their optimizer state sharded.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.errors import SpecError
from commsim.replay.layout import (
    LLAMA3_ORDER,
    MEGATRON_ORDER,
    ORDERS,
    layout_coords,
    layout_rank,
)
from commsim.replay.stages import even_split, split_label, vstage_layers

SCHEDULES = ("1f1b", "gpipe", "interleaved")


def rank_order(has_experts: bool) -> str:
    """The planner's order: Megatron-Core's for a mixture of experts (whose MoE layer and
    expert placement are Megatron-Core's, :mod:`commsim.plan.moe_layer`), Llama 3's
    otherwise (the ``hybrid`` replay's, which ``tests/plan/test_reduced.py`` checks)."""
    return MEGATRON_ORDER if has_experts else LLAMA3_ORDER


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanConfig:
    """Group sizes, micro-batch, pipeline schedule (``chunks`` per stage), data parallelism
    (``ddp``, ``zero1``, ``zero2``, ``fsdp``) and recompute (``none``, ``selective``,
    ``full``); ``stage_layers``: each stage's layers when they differ (empty: equal
    stages); ``order``: how ranks are laid out (see the module docstring)."""

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
    order: str = LLAMA3_ORDER

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise SpecError(f"order: {self.order!r} is not one of {', '.join(ORDERS)}")

    @property
    def megatron(self) -> bool:
        return self.order == MEGATRON_ORDER

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def rank(self, t: int, c: int, p: int, d: int) -> int:
        """Global rank of TP rank ``t``, CP rank ``c``, stage ``p``, replica ``d``."""
        return layout_rank(self.order, self.tp, self.cp, self.pp, self.dp, t=t, c=c, p=p, d=d)

    def coords(self, rank: int) -> tuple[int, int, int, int]:
        """``(t, c, p, d)`` of global ``rank`` (the inverse of :meth:`rank`)."""
        return layout_coords(self.order, self.tp, self.cp, self.pp, self.dp, rank)

    def tp_group(self, p: int, d: int) -> tuple[int, ...]:
        return tuple(self.rank(t, 0, p, d) for t in range(self.tp))

    def cp_group(self, p: int, d: int) -> tuple[int, ...]:
        return tuple(self.rank(0, c, p, d) for c in range(self.cp))

    def dp_group(self, p: int) -> tuple[int, ...]:
        """The ranks holding TP rank 0's parameters of stage ``p`` (all replicas, CP ranks)."""
        return tuple(self.rank(0, c, p, d) for d in range(self.dp) for c in range(self.cp))

    def _folded(self, p: int, j: int) -> int:
        """TP rank 0's rank of folded index ``j = c + cp d`` in stage ``p``."""
        return self.rank(0, j % self.cp, p, j // self.cp)

    def ep_group(self, p: int, d: int) -> tuple[int, ...]:
        """TP rank 0's expert-parallel group in stage ``p`` holding replica ``d``'s CP rank 0."""
        if self.megatron:
            first = self.cp * d - self.cp * d % self.ep
            return tuple(self._folded(p, j) for j in range(first, first + self.ep))
        first = d - d % self.ep
        return tuple(self.rank(0, 0, p, e) for e in range(first, first + self.ep))

    def ep_groups(self, p: int) -> list[tuple[int, ...]]:
        """Every expert-parallel group of TP rank 0 in stage ``p``."""
        if self.megatron:
            return [tuple(self._folded(p, j) for j in range(first, first + self.ep))
                    for first in range(0, self.cp * self.dp, self.ep)]
        return [tuple(self.rank(0, c, p, e) for e in range(first, first + self.ep))
                for first in range(0, self.dp, self.ep) for c in range(self.cp)]

    def expert_dp_group(self, p: int) -> tuple[int, ...]:
        """The ranks holding TP rank 0's experts of EP rank 0 in stage ``p``."""
        if self.megatron:
            return tuple(self._folded(p, j) for j in range(0, self.cp * self.dp, self.ep))
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
            **({"order": self.order} if self.megatron else {}),
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

