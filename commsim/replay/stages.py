"""Pipeline stages of unequal size: how many layers each stage, and each of its model chunks,
holds, and which ones.

A split is a tuple of layer counts, first stage first. Megatron-LM splits the layers evenly
unless told otherwise, and offers three ways to do otherwise (``megatron/core/transformer/
transformer_config.py``, ``TransformerConfig.__post_init__``, "Uneven PP"):

* ``--decoder-first-pipeline-num-layers F`` / ``--decoder-last-pipeline-num-layers L``: the
  first and the last stage hold ``F`` and ``L`` layers (each > 0), the middle stages share the
  rest equally (it must divide); with ``V`` virtual stages, ``F``, ``L`` and the middle
  stages' counts must be multiples of ``V``;
* ``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-pipeline-split``:
  the embedding and the loss each count as one layer, so with ``layers + 2`` a multiple of
  ``pp`` (and, interleaved, of ``pp V``) the first and the last stage hold one layer fewer,
  taken from the first stage's first model chunk and the last stage's last one. Llama 3 405B's
  126 layers over 16 stages are that layout ("The Llama 3 Herd of Models", 2024, Section
  3.3.2: one layer fewer on the first and the last stage, so that the first model chunk holds
  only the embedding and the last only the output layer and the loss);
* ``--pipeline-model-parallel-layout``: any list of layers per (virtual) stage.

So any split with a layer or more per stage runs (the layout option), and a stage's layers
split over its ``V`` model chunks as :func:`chunk_layers` says (the first two options'
rules). Global layers are numbered in virtual-stage order, chunk ``c`` of stage ``p`` being
virtual stage ``c pp + p`` (Megatron-LM's interleaving).

>>> chunk_layers((7, 8, 8, 7), 4)
((1, 2, 2, 2), (2, 2, 2, 2), (2, 2, 2, 2), (2, 2, 2, 1))
>>> [list(r) for r in vstage_layers((2, 3), 1)]
[[0, 1], [2, 3, 4]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from commsim.errors import SpecError


def even_split(layers: int, pp: int) -> tuple[int, ...]:
    """``layers / pp`` layers per stage (``pp`` must divide them)."""
    return (layers // pp,) * pp


def is_even(split: Sequence[int]) -> bool:
    """Whether every stage holds the same number of layers."""
    return len(set(split)) <= 1


def split_label(split: tuple[int, ...]) -> str:
    """A split with runs of equal stages as ``n*count``.

    >>> split_label((7, 8, 8, 8, 7)), split_label((3, 4))
    ('7,8*3,7', '3,4')
    """
    parts: list[str] = []
    i = 0
    while i < len(split):
        j = i
        while j < len(split) and split[j] == split[i]:
            j += 1
        parts.append(str(split[i]) if j - i == 1 else f"{split[i]}*{j - i}")
        i = j
    return ",".join(parts)


def check_split(split: Sequence[int], layers: int, pp: int, what: str) -> tuple[int, ...]:
    """``split`` if it has ``pp`` entries, each a whole number >= 1, summing to ``layers``;
    a SpecError naming ``what`` and the value otherwise."""
    shown = split_label(tuple(split))
    for n in split:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise SpecError(f"{what} {shown}: every stage needs a whole number of layers >= 1, "
                            f"got {n!r}")
    if len(split) != pp:
        raise SpecError(f"{what} {shown}: {len(split)} stages, but pp is {pp}")
    if sum(split) != layers:
        raise SpecError(f"{what} {shown}: sums to {sum(split)} layers, the model has {layers}")
    return tuple(split)


def _stage_chunks(n: int, chunks: int, stage: int, pp: int) -> tuple[int, ...] | None:
    if n % chunks == 0:
        return (n // chunks,) * chunks
    if (n + 1) % chunks or pp < 2 or stage not in (0, pp - 1):
        return None
    per = (n + 1) // chunks
    if stage == 0:  # the embedding takes the place of a layer in the first chunk
        return (per - 1,) + (per,) * (chunks - 1)
    return (per,) * (chunks - 1) + (per - 1,)  # the loss takes a layer's place in the last


def chunk_layers(split: Sequence[int], chunks: int) -> tuple[tuple[int, ...], ...]:
    """Per stage, the layers of each of its ``chunks`` model chunks: equal when they divide
    the stage's; on the first (last) stage, one fewer in the first (last) chunk when the
    stage's layers plus one divide, the embedding (the loss) counted as a layer; otherwise a
    SpecError (Megatron-LM places no such split without an explicit layout)."""
    pp = len(split)
    out = []
    for stage, n in enumerate(split):
        per = _stage_chunks(n, chunks, stage, pp)
        if per is None:
            raise SpecError(
                f"interleaved:{chunks}: stage {stage}'s {n} layers do not split into {chunks} "
                f"model chunks (a multiple of {chunks}, or one fewer on the first or the last "
                "stage, where the embedding or the loss counts as a layer)")
        out.append(per)
    return tuple(out)


def vstage_layers(split: Sequence[int], chunks: int) -> list[range]:
    """The global layers of each virtual stage (chunk ``c`` of stage ``p`` is ``c pp + p``)."""
    per = chunk_layers(split, chunks)
    pp = len(split)
    out: list[range] = []
    start = 0
    for v in range(pp * chunks):
        n = per[v % pp][v // pp]
        out.append(range(start, start + n))
        start += n
    return out


def stage_layer_ids(split: Sequence[int], chunks: int, stage: int) -> list[int]:
    """The global layers of ``stage`` in forward order, chunk by chunk."""
    ranges = vstage_layers(split, chunks)
    pp = len(split)
    return [i for c in range(chunks) for i in ranges[c * pp + stage]]


def search_split(layers: int, pp: int, layer_s: float, last_s: float) -> tuple[int, ...]:
    """The split with lighter (or equal) first and last stages, ``F, M, ..., M, L`` with
    ``F, L <= M`` as Megatron-LM's first/last-stage options place them, whose slowest stage is
    fastest: a stage of ``n`` layers takes ``n layer_s``, the last ``last_s`` more (its output
    layer and loss). Ties go to the lighter first stage (it holds the most activations under
    1F1B), then to the lighter middle stages. ``M`` grows from ``ceil(layers / pp)`` only while the
    middle stages alone are faster than the best split found: a bounded search.

    >>> search_split(126, 16, 1.0, 0.7)
    (7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7)
    >>> search_split(10, 3, 1.0, 1.5)  # the output layer weighs half a layer
    (4, 4, 2)
    """
    if layers < pp:
        raise SpecError(f"--pp {pp}: more stages than the model's {layers} layers")
    if pp == 1:
        return (layers,)
    best: tuple[float, int, int] | None = None
    split: tuple[int, ...] = ()
    if pp == 2:
        for first in range(1, layers):
            key = (max(first * layer_s, (layers - first) * layer_s + last_s), first, 0)
            if best is None or key < best:
                best, split = key, (first, layers - first)
        return split
    middle = math.ceil(layers / pp)
    while (pp - 2) * middle + 2 <= layers:
        if best is not None and middle * layer_s > best[0]:
            break
        rest = layers - (pp - 2) * middle
        for first in range(max(1, rest - middle), min(middle, rest - 1) + 1):
            last = rest - first
            key = (max(first * layer_s, middle * layer_s, last * layer_s + last_s), first,
                   middle)
            if best is None or key < best:
                best, split = key, (first,) + (middle,) * (pp - 2) + (last,)
        middle += 1
    return split
