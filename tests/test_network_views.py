"""Views of a network (a protocol's scaled links, a reducing switch's ports) derive their links
lazily (DerivedLinks) and share the structure of the network they view: the same links as an
eager copy, the same routes, and what depends only on routes computed once."""

from __future__ import annotations

import pickle

import pytest

from commsim.nccl import NcclModel
from commsim.nccl_paths import link_classes
from commsim.nccl_tables import NcclConfig, hop_factor
from commsim.network import DerivedLinks, Link
from commsim.topology import load_topology


def _double(_: int, link: Link) -> Link:
    return Link(link.src, link.dst, 2 * link.latency_s, link.bandwidth_Bps, link.label)


def test_derived_links_equal_the_eager_copy() -> None:
    base = load_topology("dgx-h100x2").links
    eager = tuple(_double(i, link) for i, link in enumerate(base))
    lazy = DerivedLinks(base, _double)
    assert len(lazy) == len(eager)
    assert lazy[3] == eager[3] and lazy[-1] == eager[-1] and lazy[2:5] == eager[2:5]
    assert lazy == eager and eager == lazy and tuple(lazy) == eager
    assert hash(lazy) == hash(eager) and lazy.ends is base
    many = DerivedLinks(base, _double)  # reading most links makes them all at once
    assert [many[i] for i in range(len(base))] == list(eager)
    assert pickle.loads(pickle.dumps(DerivedLinks(base, _double))) == eager  # as a tuple


def test_views_pickle() -> None:
    """A network whose protocol views were made (kept with it) still pickles, for sweeps."""
    net = load_topology("dgx-h100x2")
    view = NcclModel.of(net).network_for(net.ranks, "ring", "LL")
    copy = pickle.loads(pickle.dumps(view))
    assert copy.links == view.links and copy.route(0, 9) == view.route(0, 9)
    assert pickle.loads(pickle.dumps(net)).route(0, 9) == net.route(0, 9)


def test_protocol_networks_scale_every_link_and_share_the_routes() -> None:
    net = load_topology("dgx-h100x4")
    model = NcclModel.of(net)
    ll, simple = (model.network_for(net.ranks, "double_binary_tree", p) for p in ("LL", "Simple"))
    assert isinstance(ll.links, DerivedLinks)
    assert ll.ends() is net.links and simple.ends() is net.links
    table, cls = NcclConfig.of(net).tables, link_classes(net)[0]
    for view, protocol in ((ll, "LL"), (simple, "Simple")):  # each link x its hop factor
        assert view.links[0].latency_s == pytest.approx(
            net.links[0].latency_s * hop_factor(table, cls, "tree", protocol, True))
    assert ll.route(0, 9) == simple.route(0, 9) == net.route(0, 9)
    assert ll._routes is simple._routes  # noqa: SLF001 - one route cache per group of ranks
    assert ll.structural("probe", lambda: 1) == 1 and simple.structural("probe", lambda: 2) == 1


def test_reducing_view_shares_structure_but_not_values() -> None:
    net = load_topology("dgx-h100x2+sharp")
    switches = frozenset(d for d in net.reduction_switches)
    view = net.reducing_view(switches)
    assert view.ends() is net.links and view._routes is net._routes  # noqa: SLF001
    ported = [i for i, link in enumerate(net.links) if link.src in switches or link.dst in switches]
    assert ported and all(view.links[i].bandwidth_Bps == net.devices[
        net.links[i].src if net.links[i].src in switches else net.links[i].dst].reduction_Bps
        for i in ported)
    assert view.derived("probe", lambda: 1) == 1 and net.derived("probe", lambda: 2) == 2


def test_other_ranks_get_their_own_structure() -> None:
    net = load_topology("dgx-h100x2")
    fewer = net.with_ranks(8)
    assert fewer._routes is not net._routes  # noqa: SLF001
    assert fewer.structural("probe", lambda: "a") == "a"
    assert net.structural("probe", lambda: "b") == "b"
