"""Butterflies on topologies whose routes share links: the closed form counts the sharing.

On a ring or torus, recursive doubling's and Rabenseifner's step at distance ``d`` sends every
rank's message ``d`` hops, so ``d`` messages cross each link of a direction at once; the DES
shares the link max-min fairly and each message moves at a ``1/d`` share. The closed form's
step hop takes the busiest link's equal share (``PairCosts.concurrent_hop``), so on
power-of-two rank counts, where every step's messages move alike, it equals the DES; and
``auto`` ranking by closed forms (beyond the DES's ranking size) no longer picks a butterfly
that the DES then finds slower than the ring.
"""

from __future__ import annotations

import pytest

from commsim.algorithms import build_schedule
from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.engine.analytic import predict
from commsim.engine.des import simulate_des
from commsim.network import Network
from commsim.topology import ring, switch, torus

REL = 1e-9
CASES = [
    ("recursive_doubling", Collective.ALL_REDUCE),
    ("recursive_doubling", Collective.ALL_GATHER),
    ("rabenseifner", Collective.ALL_REDUCE),
    ("rabenseifner", Collective.REDUCE_SCATTER),
]
NETWORKS = [
    ring(16, latency="1us", bandwidth="100GB/s"),
    ring(32, latency="1us", bandwidth="100GB/s"),
    torus((4, 4), latency="1us", bandwidth="100GB/s"),
]


@pytest.mark.parametrize("network", NETWORKS, ids=lambda n: f"{n.name}-{n.ranks}")
@pytest.mark.parametrize(("algorithm", "collective"), CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("nbytes", [4096, 2**24])
def test_closed_form_equals_des_where_steps_share_links(
    network: Network, algorithm: str, collective: Collective, nbytes: int
) -> None:
    call = Call(collective=collective, ranks=network.ranks, nbytes=nbytes)
    des = simulate_des(build_schedule(call, algorithm), network).time_s
    assert predict(call, network, algorithm) == pytest.approx(des, rel=REL)


def test_sharing_is_counted() -> None:
    """On a 32-rank ring the 16-hop step of a 1 MiB recursive doubling takes 16 messages per
    link: the closed form is far above the uncontended one a switch gives."""
    call = Call(collective=Collective.ALL_REDUCE, ranks=32, nbytes=2**20)
    shared = predict(call, ring(32, latency="1us", bandwidth="100GB/s"), "recursive_doubling")
    alone = predict(call, switch(32, latency="1us", bandwidth="100GB/s"), "recursive_doubling")
    assert shared > 3 * alone
