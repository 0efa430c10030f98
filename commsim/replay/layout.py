"""Where each rank sits in a parallel layout: the rank orders of the ``hybrid`` replay and of
the planner, and their groups (:class:`Parallel`, the MoE layers' expert grid among them), in
one place.

Two orders, TP fastest in both:

* ``tp-cp-pp-dp`` (Llama 3's ``[TP, CP, PP, DP]``): rank ``t + tp (c + cp (p + pp d))``, a
  replica's stages next to each other;
* ``tp-cp-ep-dp-pp`` (Megatron-Core's default ``order`` of ``initialize_model_parallel``,
  ``megatron/core/parallel_state.py``): rank ``t + tp (c + cp (d + dp p))``, the pipeline
  outermost, so that the data-parallel replicas of a stage sit next to each other (and an
  expert-parallel group folded over them is one host's when it fits).

>>> layout_rank(MEGATRON_ORDER, 2, 1, 4, 8, t=1, c=0, p=1, d=3)
23
>>> layout_coords(MEGATRON_ORDER, 2, 1, 4, 8, 23)
(1, 0, 1, 3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commsim.errors import SpecError
from commsim.replay import fields

LLAMA3_ORDER = "tp-cp-pp-dp"
MEGATRON_ORDER = "tp-cp-ep-dp-pp"
ORDERS = (LLAMA3_ORDER, MEGATRON_ORDER)


def layout_rank(order: str, tp: int, cp: int, pp: int, dp: int, *, t: int, c: int, p: int,
                d: int) -> int:
    """Global rank of TP rank ``t``, CP rank ``c``, stage ``p``, replica ``d`` in ``order``."""
    if order == MEGATRON_ORDER:
        return t + tp * (c + cp * (d + dp * p))
    return t + tp * (c + cp * (p + pp * d))


def layout_coords(order: str, tp: int, cp: int, pp: int, dp: int,
                  rank: int) -> tuple[int, int, int, int]:
    """``(t, c, p, d)`` of global ``rank`` in ``order`` (the inverse of :func:`layout_rank`)."""
    t, rest = rank % tp, rank // tp
    c, rest = rest % cp, rest // cp
    if order == MEGATRON_ORDER:
        return t, c, rest // dp, rest % dp
    return t, c, rest % pp, rest // pp


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallel:
    """Group sizes: tensor, context, pipeline and data parallel; the expert-parallel size and
    the expert TP (``etp``, 0: ``tp``); the rank ``order``.

    The MoE layers' grid (:mod:`commsim.plan.config` says why): in Megatron-Core's order a
    stage's local rank ``r = et + etp (e + ep ed)`` (expert TP rank ``et``, EP rank ``e``,
    expert data-parallel rank ``ed``), so with ``etp = tp`` an EP group is ``ep`` consecutive
    ``j = c + cp d`` of a stage's TP rank; in Llama 3's order (``etp = tp`` only) the replicas
    ``d`` with the same ``d // ep``."""

    tp: int = 1
    cp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    etp: int = 0
    order: str = ORDERS[0]

    def __post_init__(self) -> None:
        for name in ("tp", "cp", "pp", "dp", "ep"):
            fields.positive_int(getattr(self, name), f"parallel.{name}")
        if self.order not in ORDERS:
            raise SpecError(f"parallel.order: must be one of {', '.join(ORDERS)} (got "
                            f"{self.order!r})")
        if self.etp == 0:
            object.__setattr__(self, "etp", self.tp)
        fields.positive_int(self.etp, "parallel.etp")
        if self.etp != self.tp and not self.megatron:
            raise SpecError(f"parallel.etp: {self.etp} (expert TP other than tp {self.tp}) "
                            f"needs order {MEGATRON_ORDER}")
        if self.etp != self.tp:
            ranks, what, size = self.tp * self.cp * self.dp, "tp x cp x dp", self.etp * self.ep
            if ranks % size:
                raise SpecError(f"parallel.etp: etp x ep = {size} does not divide the {ranks} "
                                f"ranks of a stage ({what})")
            return
        ranks = self.cp * self.dp if self.megatron else self.dp
        if ranks % self.ep:
            raise SpecError(f"parallel.ep: {self.ep} does not divide the {ranks} ranks it is "
                            f"carved from ({'cp x dp' if self.megatron else 'dp'})")

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def megatron(self) -> bool:
        return self.order == MEGATRON_ORDER

    @property
    def expert_dp(self) -> int:
        """The expert data-parallel size, ``tp cp dp / (etp ep)``."""
        return self.tp * self.cp * self.dp // (self.etp * self.ep)

    def rank(self, t: int, c: int, p: int, d: int) -> int:
        """Global rank of TP rank ``t``, CP rank ``c``, stage ``p``, replica ``d``."""
        return layout_rank(self.order, self.tp, self.cp, self.pp, self.dp, t=t, c=c, p=p, d=d)

    def coords(self, rank: int) -> tuple[int, int, int, int]:
        """``(t, c, p, d)`` of ``rank``."""
        return layout_coords(self.order, self.tp, self.cp, self.pp, self.dp, rank)

    def fold_blocks(self) -> list[int]:
        """Replica counts ``B < dp`` (divisors of ``dp``, smallest first) whose blocks of
        replicas hold whole expert-parallel groups and shift onto each other with the
        expert data-parallel groups: candidates of a replica fold."""
        if self.megatron:  # B replicas are B tp cp consecutive local ranks: whole EP groups
            span = self.etp * self.ep
            unit = span // math.gcd(span, self.tp * self.cp)
        else:
            unit = self.ep
        return [b for b in range(1, self.dp) if self.dp % b == 0 and b % unit == 0]

    def replica_shift(self, replicas: int) -> tuple[list[int], list[int]]:
        """Each rank's image under the shift of replicas by ``replicas`` (``d`` -> ``d +
        replicas`` mod ``dp``), and its block (``d // replicas``)."""
        shift, block = [], []
        for rank in range(self.world):
            t, c, p, d = self.coords(rank)
            shift.append(self.rank(t, c, p, (d + replicas) % self.dp))
            block.append(d // replicas)
        return shift, block

    def _expert(self, p: int, et: int, e: int, ed: int) -> int:
        """Megatron-Core's order: the rank of expert TP rank ``et``, EP rank ``e`` and expert
        data-parallel rank ``ed`` in stage ``p`` (the pipeline outermost: a stage's ranks
        start at ``p tp cp dp``; in closed form, as this runs for every rank of every
        group the planner times)."""
        return p * self.tp * self.cp * self.dp + et + self.etp * (e + self.ep * ed)

    def expert_coords(self, rank: int) -> tuple[int, int]:
        """``(et, e)``: the expert TP rank and EP rank of ``rank``."""
        t, c, p, d = self.coords(rank)
        if not self.megatron:
            return t, d % self.ep
        local = rank - self.rank(0, 0, p, 0)
        return local % self.etp, local // self.etp % self.ep

    def ep_groups(self, et: int, p: int) -> list[list[int]]:
        """The expert-parallel groups of expert TP rank ``et`` in stage ``p``."""
        if self.megatron:
            return [[self._expert(p, et, e, ed) for e in range(self.ep)]
                    for ed in range(self.expert_dp)]
        return [[self.rank(et, c, p, d) for d in range(f, f + self.ep)]
                for f in range(0, self.dp, self.ep) for c in range(self.cp)]

    def etp_groups(self, p: int) -> list[list[int]]:
        """Stage ``p``'s expert TP groups (its TP groups where ``etp = tp``)."""
        if self.etp == self.tp:
            return [[self.rank(t, c, p, d) for t in range(self.tp)]
                    for d in range(self.dp) for c in range(self.cp)]
        return [[self._expert(p, et, e, ed) for et in range(self.etp)]
                for ed in range(self.expert_dp) for e in range(self.ep)]

    def expert_dp_group(self, et: int, p: int, e: int) -> list[int]:
        """The ranks holding the experts of expert TP rank ``et``, EP rank ``e`` of stage
        ``p``."""
        if self.megatron:
            return [self._expert(p, et, e, ed) for ed in range(self.expert_dp)]
        return [self.rank(et, c, p, d) for d in range(e, self.dp, self.ep)
                for c in range(self.cp)]
