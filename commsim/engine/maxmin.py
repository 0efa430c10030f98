"""Max-min fair rates by progressive filling, for the discrete-event engines.

:func:`fill` (flows as objects on per-link maps, the event loop's) and :func:`fill_arrays`
(flows as numpy incidence pairs, the batched engine's) fill level by level with the same
arithmetic: the smallest fair share ``spare / unfixed`` of all links is every unfixed flow's
rate on the links that have it, and a link that had ``k`` of those flows keeps
``max(spare - k * share, 0)``. It sees only counts and shares, never the order of links or
flows, so flows alike by construction (the same counts on their links) get the same rate to
the bit and drain at one instant, and filling several components at once gives each what
filling it alone does. ``tests/engine/test_batched.py`` checks the two agree to the bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np


class Flow(Protocol):
    """What a filling reads of a flow: its transfer, links and (views only) link weights."""

    @property
    def index(self) -> int: ...

    @property
    def links(self) -> tuple[int, ...]: ...

    @property
    def weights(self) -> dict[int, float] | None: ...


def fill(
    flows: Sequence[Flow],
    links: list[int],
    capacity: list[float],
    on_link: Sequence[Mapping[int, Flow]],
) -> dict[int, float]:
    """Max-min fair rates of a component's ``flows`` (by transfer index), level by level (the
    module docstring); ``on_link[link]``: the flows on each of ``links``."""
    spare = {link: capacity[link] for link in links}
    unfixed = {link: len(on_link[link]) for link in links if on_link[link]}
    rates: dict[int, float] = {}
    while unfixed:
        share = min(spare[link] / count for link, count in unfixed.items())
        fixed: dict[int, int] = {}
        for link in [link for link, count in unfixed.items() if spare[link] / count == share]:
            for flow in on_link[link].values():
                if flow.index in rates:
                    continue
                rates[flow.index] = share
                for other in flow.links:
                    fixed[other] = fixed.get(other, 0) + 1
        for link, k in fixed.items():
            spare[link] = max(spare[link] - k * share, 0.0)  # clamp float rounding
            left = unfixed[link] - k
            if left:
                unfixed[link] = left
            else:
                del unfixed[link]
    return rates


def fill_weighted(
    flows: Sequence[Flow],
    links: list[int],
    capacity: list[float],
    on_link: Sequence[Mapping[int, Flow]],
) -> dict[int, float]:
    """Progressive filling where a flow's byte/s takes ``weights[link]`` of a link's capacity:
    every unfixed flow rises at the same rate until a link is full (:func:`fill` with
    weights 1)."""
    spare = {link: capacity[link] for link in links}
    load = dict.fromkeys(links, 0.0)
    unfixed = dict.fromkeys(links, 0)
    for link in links:
        for flow in on_link[link].values():
            load[link] += flow.weights[link] if flow.weights is not None else 1.0
            unfixed[link] += 1
    rates: dict[int, float] = {}
    while len(rates) < len(flows):
        share, bottleneck = min(
            (spare[link] / load[link], link) for link, count in unfixed.items() if count
        )
        for flow in on_link[bottleneck].values():
            if flow.index in rates:
                continue
            rates[flow.index] = share
            for link in flow.links:
                weight = flow.weights[link] if flow.weights is not None else 1.0
                spare[link] = max(spare[link] - share * weight, 0.0)  # clamp float rounding
                load[link] -= weight
                unfixed[link] -= 1
    return rates


def fill_arrays(inc_flow: np.ndarray, inc_link: np.ndarray, flows: int,
                capacity: np.ndarray) -> np.ndarray:
    """:func:`fill` of ``flows`` flows given as incidence pairs ``(inc_flow[k], inc_link[k])``
    (a flow once per link it crosses; links index ``capacity``): one numpy pass per level."""
    import numpy as np

    spare = capacity.astype(np.float64)
    unfixed = np.bincount(inc_link, minlength=len(spare)).astype(np.float64)
    rates = np.zeros(flows)
    while inc_flow.size:
        live = np.flatnonzero(unfixed)
        shares = spare[live] / unfixed[live]
        share = shares.min()
        bottleneck = np.zeros(len(spare), dtype=bool)
        bottleneck[live[shares == share]] = True
        fixed = np.zeros(flows, dtype=bool)
        fixed[inc_flow[bottleneck[inc_link]]] = True
        rates[fixed] = share
        now = fixed[inc_flow]
        k = np.bincount(inc_link[now], minlength=len(spare)).astype(np.float64)
        hit = np.flatnonzero(k)
        spare[hit] = np.maximum(spare[hit] - k[hit] * share, 0.0)  # clamp float rounding
        unfixed[hit] -= k[hit]
        inc_flow, inc_link = inc_flow[~now], inc_link[~now]
    return rates
