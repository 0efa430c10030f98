"""Shared fixtures of the replay tests: small uniform topologies with exact binary numbers.

Latency ``2**-20`` s (about 1 us) and bandwidth ``2**30`` B/s (about 1 GB/s) by default:
powers of two, so that simulated times are exact sums in binary floating point.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from commsim.network import Network
from commsim.topology import load_topology

ALPHA = 2.0**-20
BETA = 2.0**30


def _fully_connected(ranks: int, latency: float = ALPHA, bandwidth: float = BETA) -> Network:
    return load_topology(
        {
            "kind": "fully_connected",
            "ranks": ranks,
            "link": {"latency": f"{latency!r}s", "bandwidth": f"{bandwidth!r}B/s"},
        }
    )


@pytest.fixture
def fully_connected() -> Callable[..., Network]:
    """``fully_connected(ranks, latency=2**-20, bandwidth=2**30)``: a dedicated link per ordered
    pair of ranks, so no two pairs contend."""
    return _fully_connected
