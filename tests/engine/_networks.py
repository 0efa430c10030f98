"""The small networks the engine tests time schedules on: one of each topology kind."""

from __future__ import annotations

from commsim.network import Network
from commsim.topology import fully_connected, hierarchical, ring, shared, switch, torus


def small_networks(torus_latency: str = "0us", with_shared: bool = False) -> list[Network]:
    """Five kinds, one hierarchical machine on a rank subset (10 of 12), and with
    ``with_shared`` a host whose ranks share one link; the torus's hops take
    ``torus_latency`` (zero latency: transfers that start and end at one instant)."""
    networks = [
        fully_connected(5, latency="1us", bandwidth="100GB/s", gamma=1e-12),
        ring(6, latency="1us", bandwidth="100GB/s"),
        switch(7, latency="1us", bandwidth="100GB/s", gamma=3e-12),
        torus([2, 3, 2], latency=torus_latency, bandwidth="45GB/s"),
        hierarchical(3, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s")),
        hierarchical(3, 4, intra=("2us", "450GB/s"), inter=("5us", "50GB/s")).with_ranks(10),
    ]
    return networks + ([shared(4, latency="1us", bandwidth="10GB/s")] if with_shared else [])
