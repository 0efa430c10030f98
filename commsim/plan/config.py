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
Megatron-Core's order the MoE layers have a grid of their own over a stage's ``tp cp dp`` ranks,
``etp x ep x edp`` (MoE Parallel Folding, arXiv 2504.14960; ``parallel_state.py`` builds the
expert ranks with a ``RankGenerator(tp=expert_tensor_parallel_size, ep=..., dp=world //
(etp ep pp), pp=pp, cp=1)`` in the same order, i.e. ``tp-ep-dp-pp``, and raises unless
``etp ep pp`` divides the world): a stage's local rank ``r = et + etp (e + ep ed)``, so expert
TP groups are ``etp`` consecutive ranks, an EP group the ``ep`` ranks ``etp`` apart with the
same ``et`` and ``ed``, and the expert data-parallel group the ``edp = tp cp dp / (etp ep)``
ranks ``etp ep`` apart. Expert TP (``etp``) defaults to the attention's (``etp = tp``,
Megatron-Core's default): the EP groups are then ``ep`` consecutive ``j = c + cp d`` of the
ranks sharing a TP rank, so with TP 1 and EP 8 on 8-GPU hosts an EP group is one host; with
``etp < tp`` an EP group spans the attention's TP ranks (ETP 1, TP 2, EP 4: two replicas' TP
groups). In the Llama 3 order (expert TP = TP only), replicas ``d`` with the same ``d // ep``
form an EP group (CP rank by CP rank). Either way the ranks holding the same experts are the
expert data-parallel group, over which expert gradients are reduced and their optimizer state
sharded.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.errors import SpecError
from commsim.replay.layout import (
    LLAMA3_ORDER,
    MEGATRON_ORDER,
    ORDERS,
    Parallel,
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
    ``full``, ``moe``); ``stage_layers``: each stage's layers when they differ (empty: equal
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
    etp: int = 0  #: expert tensor parallelism; 0: the attention's (``tp``)

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise SpecError(f"order: {self.order!r} is not one of {', '.join(ORDERS)}")
        if self.etp == 0:
            object.__setattr__(self, "etp", self.tp)
        elif self.etp != self.tp:
            self._check_etp()

    def _check_etp(self) -> None:
        """Megatron-Core's rule for an expert TP of its own (see the module docstring)."""
        if self.etp < 1:
            raise SpecError(f"etp {self.etp}: must be >= 1")
        if not self.megatron:
            raise SpecError(f"etp {self.etp}: expert TP other than tp ({self.tp}) needs "
                            f"Megatron-Core's order ({MEGATRON_ORDER})")
        if (self.tp * self.cp * self.dp) % (self.etp * self.ep):
            raise SpecError(f"etp {self.etp} x ep {self.ep} = {self.etp * self.ep} does not "
                            f"divide a stage's tp x cp x dp = {self.tp * self.cp * self.dp} "
                            "ranks")

    @property
    def megatron(self) -> bool:
        return self.order == MEGATRON_ORDER

    @property
    def expert_dp(self) -> int:
        """The expert data-parallel size ``tp cp dp / (etp ep)``."""
        return self.layout.expert_dp

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

    @property
    def layout(self) -> Parallel:
        """The layout's groups: the replay's :class:`~commsim.replay.layout.Parallel`, one
        code of the expert grid for the planner and the replay."""
        return Parallel(tp=self.tp, cp=self.cp, pp=self.pp, dp=self.dp, ep=self.ep,
                        etp=self.etp, order=self.order)

    def ep_group(self, p: int, d: int) -> tuple[int, ...]:
        """The expert-parallel group in stage ``p`` holding replica ``d``'s TP and CP rank 0."""
        layout, rank = self.layout, self.rank(0, 0, p, d)
        return next(tuple(g) for g in layout.ep_groups(layout.expert_coords(rank)[0], p)
                    if rank in g)

    def ep_groups(self, p: int) -> list[tuple[int, ...]]:
        """Every expert-parallel group of expert TP rank 0 (TP rank 0) in stage ``p``."""
        return [tuple(g) for g in self.layout.ep_groups(0, p)]

    def etp_group(self, p: int) -> tuple[int, ...]:
        """Stage ``p``'s first expert TP group (its first TP group where ``etp = tp``)."""
        return tuple(self.layout.etp_groups(p)[0])

    def expert_dp_group(self, p: int) -> tuple[int, ...]:
        """The ranks holding the experts of expert TP rank 0 and EP rank 0 in stage ``p``."""
        return tuple(self.layout.expert_dp_group(0, p, 0))

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
            "etp": self.etp,
            **({"stage_layers": list(self.stage_layers)} if self.stage_layers else {}),
            **({"order": self.order} if self.megatron else {}),
        }

    def label(self) -> str:
        """``tp8 cp1 pp16[7,8*14,7] dp8 mb1 1f1b fsdp none``: the stages' layers shown only
        when they differ (runs of equal stages as ``n*count``); ``ep8`` after ``dp`` when
        ``ep > 1``, then ``etp1`` when expert TP is not ``tp``."""
        pp = f"pp{self.pp}"
        if self.stage_layers:
            pp += f"[{split_label(self.stage_layers)}]"
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        ep += f" etp{self.etp}" if self.etp != self.tp else ""
        return (
            f"tp{self.tp} cp{self.cp} {pp} dp{self.dp}{ep} mb{self.micro_batch} "
            f"{self.schedule_label} {self.data_parallel} {self.recompute}"
        )

