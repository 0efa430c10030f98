"""Where each rank sits in a parallel layout: the rank orders of the ``hybrid`` replay and of
the planner, in one place.

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
