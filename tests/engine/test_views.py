"""Transfers on views of a network's links (``commsim.engine.tasks.Routed``): alone they take
what the DES gives them on the view; sharing a link, each byte takes its share of the link's
capacity in proportion to ``bandwidth / view bandwidth``."""

from __future__ import annotations

import pytest

from commsim.collectives import Collective
from commsim.engine.des import simulate_des
from commsim.engine.tasks import Routed, simulate_items
from commsim.network import Link
from commsim.schedule import OpKind, Schedule, Transfer
from commsim.topology import switch


def _view(net, factor: float, latency: float = 1.0):
    links = tuple(Link(k.src, k.dst, k.latency_s * latency, k.bandwidth_Bps * factor, k.label)
                  for k in net.links)
    return net.rebuilt(links=links)


def test_a_routed_transfer_alone_is_the_des_on_its_view() -> None:
    """One routed transfer takes exactly the DES's time for it on the view network."""
    net = switch(4, latency="1us", bandwidth="10GB/s")
    view = _view(net, 0.5, latency=3.0)
    alone = simulate_items([Routed(0, 1, 0, 10**6, OpKind.COPY, (), 0)], net, [view])
    expected = simulate_des(
        Schedule(Collective.BROADCAST, "x", 4, 10**6, 0, 1,
                 (Transfer(0, 1, 0, 10**6, OpKind.COPY),)),
        view,
    )
    assert alone.end_s[0] == pytest.approx(expected.time_s, rel=1e-12)


def test_shared_link_is_shared_by_weight() -> None:
    """A full-bandwidth flow and a half-efficiency flow (view bandwidth x0.5) from one port:
    each byte of the second takes twice the capacity, so the first gets 2/3 of the port."""
    net = switch(3, latency=0, bandwidth="3GB/s")
    half = _view(net, 0.5)
    n = 3 * 10**9
    timing = simulate_items(
        [Transfer(0, 1, 0, n, OpKind.COPY), Routed(0, 2, 0, n // 2, OpKind.COPY, (), 0)],
        net, [half],
    )
    # rates r for both: 1*r + 2*r = 3e9 on port 0 -> r = 1e9 until the routed one (1.5e9 B)
    # drains at 1.5 s; the plain flow then has 1.5e9 B left at 3e9 B/s -> 2.0 s
    assert timing.end_s[1] == pytest.approx(1.5, rel=1e-12)
    assert timing.end_s[0] == pytest.approx(2.0, rel=1e-12)


def test_views_must_share_the_links() -> None:
    """A view with other links than the network is refused."""
    net = switch(3, latency=0, bandwidth="3GB/s")
    with pytest.raises(ValueError, match="other links"):
        simulate_items([], net, [switch(4, latency=0, bandwidth="1GB/s")])
