"""Every topology kind builds the right devices, links, routes and path costs."""

from __future__ import annotations

import pickle

import pytest

from commsim.errors import SpecError
from commsim.network import Network
from commsim.topology import (
    HierarchicalSpec,
    LinkSpec,
    RingSpec,
    build_network,
    custom,
    fully_connected,
    hierarchical,
    load_topology,
    ring,
    switch,
    torus,
)

US = 1e-6


def hop_ends(net: Network, src_rank: int, dst_rank: int) -> list[tuple[int, int]]:
    """The (src device, dst device) of each hop of the route between two ranks."""
    return [(net.links[i].src, net.links[i].dst) for i in net.route(src_rank, dst_rank)]


def assert_valid_path(net: Network, src_rank: int, dst_rank: int) -> None:
    """The route is a chain of links from the source rank's device to the destination's."""
    here = net.rank_devices[src_rank]
    for src, dst in hop_ends(net, src_rank, dst_rank):
        assert src == here
        here = dst
    assert here == net.rank_devices[dst_rank]


@pytest.mark.parametrize(("ranks", "links"), [(1, 0), (2, 2), (3, 6), (8, 16)])
def test_ring_link_counts(ranks: int, links: int) -> None:
    """A ring of p ranks has p cables (2p directed links), one cable for p=2, none for p=1."""
    net = ring(ranks, latency="1us", bandwidth="100GB/s")
    assert net.ranks == ranks and len(net.devices) == ranks and len(net.links) == links
    assert net.host_of(0) is None


def test_ring_neighbours_and_costs() -> None:
    """Rank i is cabled to i+1 and i-1 (mod p); a k-hop path costs k latencies, full bandwidth."""
    net = ring(8, latency="1us", bandwidth="100GB/s")
    assert hop_ends(net, 0, 1) == [(0, 1)]
    assert hop_ends(net, 0, 7) == [(0, 7)]
    latency, bandwidth = net.path_cost(0, 3)
    assert latency == pytest.approx(3 * US) and bandwidth == 100e9
    assert net.path_cost(2, 2) == (0.0, float("inf"))


def test_ring_takes_shorter_way_and_ties_go_forward() -> None:
    """Ring routes take the shorter direction; half-way round (a tie) goes in the + direction."""
    net = ring(8, latency="1us", bandwidth="100GB/s")
    assert [d for _, d in hop_ends(net, 0, 4)] == [1, 2, 3, 4]
    assert [d for _, d in hop_ends(net, 0, 5)] == [7, 6, 5]
    assert [d for _, d in hop_ends(net, 6, 1)] == [7, 0, 1]


def test_fully_connected_has_a_link_per_ordered_pair() -> None:
    """p ranks get p(p-1) directed links and every route is the one dedicated link."""
    net = fully_connected(5, latency="2us", bandwidth="50GB/s")
    assert len(net.links) == 20
    assert {(link.src, link.dst) for link in net.links} == {
        (i, j) for i in range(5) for j in range(5) if i != j
    }
    for i in range(5):
        for j in range(5):
            if i != j:
                assert hop_ends(net, i, j) == [(i, j)]
                assert net.path_cost(i, j) == pytest.approx((2 * US, 50e9))


@pytest.mark.parametrize(
    ("dims", "cables"),
    [
        ((4, 4), 32),
        ((2, 3), 3 + 6),
        ((4, 1), 4),
        ((1,), 0),
        ((2,), 1),
        ((4, 4, 4), 192),
        ((2, 2, 2), 12),
    ],
)
def test_torus_cable_counts(dims: tuple[int, ...], cables: int) -> None:
    """A torus has a wrap-around cable per device and dimension (one per pair if size 2)."""
    net = torus(dims, latency="1us", bandwidth="45GB/s")
    assert net.ranks == len(net.devices)
    assert len(net.links) == 2 * cables


def test_torus_row_major_neighbours_and_wraparound() -> None:
    """Rank = row-major flat index: on 4x4, rank 0's neighbours are 1, 3, 4 and 12."""
    net = torus([4, 4], latency="1us", bandwidth="45GB/s")
    neighbours = {net.links[i].dst for i in net.out_links[0]}
    assert neighbours == {1, 3, 4, 12}
    assert net.meta["dims"] == (4, 4)
    assert hop_ends(net, 0, 12) == [(0, 12)]  # wrap-around along dimension 0


def test_torus_dimension_ordered_route() -> None:
    """Dimension 0 is corrected first, then dimension 1; the route is minimal."""
    net = torus([4, 4], latency="1us", bandwidth="45GB/s")
    # from (0,0) to (2,3): dimension 0 +2 (tie -> +), then dimension 1 -1 (wrap)
    assert [d for _, d in hop_ends(net, 0, 11)] == [4, 8, 11]
    latency, bandwidth = net.path_cost(0, 11)
    assert latency == pytest.approx(3 * US) and bandwidth == 45e9


def test_switch_star_costs_one_port_latency() -> None:
    """A star: device -> switch -> device costs the port latency, each hop half of it."""
    net = switch(4, latency="2us", bandwidth="25GB/s")
    assert len(net.devices) == 5 and len(net.links) == 8
    assert net.devices[4].kind == "switch"
    path = net.route(1, 3)
    assert [net.links[i].latency_s for i in path] == pytest.approx([1 * US, 1 * US])
    assert hop_ends(net, 1, 3) == [(1, 4), (4, 3)]
    assert net.path_cost(1, 3) == pytest.approx((2 * US, 25e9))


def make_hierarchical() -> Network:
    """2 nodes x 4 GPUs with intra 2us/450GB/s and inter 6us/50GB/s."""
    return hierarchical(2, 4, intra=("2us", "450GB/s"), inter=("6us", "50GB/s"))


def test_hierarchical_devices_and_links() -> None:
    """GPUs node-major, one NVSwitch per node, one fabric; each GPU has a port and a NIC cable."""
    net = make_hierarchical()
    assert net.ranks == 8
    assert len(net.devices) == 8 + 2 + 1 and len(net.links) == 8 * 4
    assert [net.host_of(r) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [d.name for d in net.devices[8:]] == ["nvswitch0", "nvswitch1", "fabric"]
    assert all(d.kind == "switch" for d in net.devices[8:])
    assert net.meta["kind"] == "hierarchical"
    assert net.meta["nodes"] == 2 and net.meta["gpus_per_node"] == 4
    assert net.meta["intra"] == pytest.approx({"latency_s": 2 * US, "bandwidth_Bps": 450e9})


def test_hierarchical_intra_path_is_intra_latency() -> None:
    """Same node: GPU -> node switch -> GPU; latency = intra latency (two halves), intra bw."""
    net = make_hierarchical()
    assert hop_ends(net, 1, 2) == [(1, 8), (8, 2)]
    assert [net.links[i].latency_s for i in net.route(1, 2)] == pytest.approx([1 * US, 1 * US])
    assert net.path_cost(1, 2) == pytest.approx((2 * US, 450e9))
    assert hop_ends(net, 5, 6) == [(5, 9), (9, 6)]


def test_hierarchical_inter_path_is_inter_latency() -> None:
    """Other node: GPU -> fabric -> GPU through each GPU's own NIC; inter latency, inter bw."""
    net = make_hierarchical()
    assert hop_ends(net, 1, 6) == [(1, 10), (10, 6)]
    assert net.path_cost(1, 6) == pytest.approx((6 * US, 50e9))


def test_hierarchical_routes_match_shortest_paths() -> None:
    """The O(1) router gives valid two-hop paths between every pair of GPUs."""
    net = make_hierarchical()
    for a in range(8):
        for b in range(8):
            assert_valid_path(net, a, b)
            assert len(net.route(a, b)) == (0 if a == b else 2)


def test_with_ranks_fills_nodes_in_order() -> None:
    """with_ranks(R) keeps the first R GPUs, node-major; more than exist is an error."""
    net = make_hierarchical().with_ranks(6)
    assert net.ranks == 6
    assert [net.host_of(r) for r in range(6)] == [0, 0, 0, 0, 1, 1]
    assert net.path_cost(3, 5) == pytest.approx((6 * US, 50e9))
    with pytest.raises(SpecError, match="exceeds"):
        make_hierarchical().with_ranks(9)


def test_custom_narrowest_hop_and_latency_sum() -> None:
    """A custom path costs the sum of its hops' latencies and its narrowest hop's bandwidth."""
    net = custom(
        [{"name": "a"}, {"name": "sw", "kind": "switch"}, {"name": "b", "host": 3}],
        [
            {"src": "a", "dst": "sw", "latency": "1us", "bandwidth": "10GB/s"},
            {"src": "sw", "dst": "b", "latency": "3us", "bandwidth": "40GB/s"},
        ],
    )
    assert net.ranks == 2  # the switch is not a rank by default
    assert net.path_cost(0, 1) == pytest.approx((4 * US, 10e9))
    assert net.path_cost(1, 0) == pytest.approx((4 * US, 10e9))
    assert net.host_of(1) == 3 and net.host_of(0) is None


def test_custom_simplex_link_and_explicit_ranks() -> None:
    """``duplex: false`` adds one direction only; ``ranks`` lists rank devices in order."""
    net = custom(
        [{"name": "a"}, {"name": "b"}, {"name": "c"}],
        [
            {"src": "a", "dst": "b", "latency": 0, "bandwidth": 1e9, "duplex": False},
            {"src": "b", "dst": "c", "latency": 0, "bandwidth": 1e9, "duplex": False},
            {"src": "c", "dst": "a", "latency": 0, "bandwidth": 1e9, "duplex": False},
        ],
        ranks=["c", "a", "b"],
    )
    assert len(net.links) == 3
    assert net.rank_devices == (2, 0, 1)
    assert len(net.route(1, 0)) == 2  # a -> b -> c: only forward links exist


def test_custom_disconnected_ranks_are_an_error() -> None:
    """A custom topology whose ranks cannot all reach each other is rejected at build time."""
    with pytest.raises(SpecError, match="no path from 'a' \\(rank 0\\) to 'c' \\(rank 2\\)"):
        custom(
            [{"name": "a"}, {"name": "b"}, {"name": "c"}],
            [{"src": "a", "dst": "b", "latency": "1us", "bandwidth": "1GB/s"}],
        )
    with pytest.raises(SpecError, match="no path from 'b' \\(rank 1\\) to 'a' \\(rank 0\\)"):
        custom(
            [{"name": "a"}, {"name": "b"}],
            [{"src": "a", "dst": "b", "latency": 0, "bandwidth": 1, "duplex": False}],
        )


def test_gamma_and_name_reach_the_network() -> None:
    """``gamma`` becomes Network.gamma_s_per_B and ``name`` the network's name."""
    net = ring(4, latency=1e-6, bandwidth=1e9, gamma="1ns", name="my-ring")
    assert net.gamma_s_per_B == pytest.approx(1e-9) and net.name == "my-ring"
    assert ring(4, latency=0, bandwidth=1).name == "ring-4"


def test_networks_pickle_with_their_routers() -> None:
    """Built networks (routers included) pickle, for parallel sweeps, and route the same."""
    for net in (
        make_hierarchical(),
        torus([3, 4], latency=1e-6, bandwidth=1e9),
        fully_connected(4, latency=0, bandwidth=1),
        switch(3, latency=0, bandwidth=1),
        load_topology("pcie-gen4-8gpu"),
    ):
        copy = pickle.loads(pickle.dumps(net))
        assert all(copy.route(0, r) == net.route(0, r) for r in range(net.ranks))


def test_specs_validate_in_post_init() -> None:
    """Specs built in Python are validated like YAML: bad values raise SpecError naming them."""
    link = LinkSpec(latency_s=1e-6, bandwidth_Bps=1e9)
    with pytest.raises(SpecError, match=r"bandwidth_Bps: must be > 0 \(got 0\)"):
        LinkSpec(latency_s=0.0, bandwidth_Bps=0)
    with pytest.raises(SpecError, match="latency_s: must be >= 0"):
        LinkSpec(latency_s=-1.0, bandwidth_Bps=1.0)
    with pytest.raises(SpecError, match=r"ranks: must be a positive integer \(got True\)"):
        RingSpec(ranks=True, link=link)
    with pytest.raises(SpecError, match=r"gpus_per_node: must be a positive integer \(got 0\)"):
        HierarchicalSpec(nodes=1, gpus_per_node=0, intra=link, inter=link)
    with pytest.raises(SpecError, match="gamma: must be >= 0"):
        RingSpec(ranks=2, link=link, gamma_s_per_B=-1.0)
    net = build_network(RingSpec(ranks=3, link=link))
    assert net.ranks == 3


def test_constructor_errors_name_the_argument() -> None:
    """Builder functions raise SpecError naming the bad argument and its value."""
    with pytest.raises(SpecError, match=r"bandwidth: must be > 0 \(got '0GB/s'\)"):
        ring(4, latency="1us", bandwidth="0GB/s")
    with pytest.raises(SpecError, match="latency: unknown time unit 'parsecs'"):
        switch(4, latency="10 parsecs", bandwidth="1GB/s")
    with pytest.raises(SpecError, match=r"dims\[1\]: must be a positive integer \(got 0\)"):
        torus([4, 0], latency="1us", bandwidth="1GB/s")
    with pytest.raises(SpecError, match="intra: must be a LinkSpec"):
        hierarchical(1, 8, intra="fast", inter=("5us", "50GB/s"))  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="inter.bandwidth: must be > 0"):
        hierarchical(1, 8, intra=("1us", "1GB/s"), inter={"latency": "1us", "bandwidth": 0})
