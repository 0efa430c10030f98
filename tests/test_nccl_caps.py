"""The structure of NCCL's bandwidth caps (commsim.nccl_caps): the release selects them, each
protocol's tree cap is built from the Simple one as tuning.cc builds it, the composed tree
never beats its cap, and one GPU per node never speeds a tree up. No test here checks a
constant against a measurement."""

from __future__ import annotations

import pytest

import commsim
from commsim.collectives import Collective
from commsim.nccl import NcclModel
from commsim.nccl_caps import (
    RELEASES,
    TREE_LL128_ONE_NODE,
    TREE_LL_FACTOR,
    bandwidth_factor,
    caps,
    ll128_cap,
    ll_max_bw,
    release_key,
    tree_cap_Bps,
)
from commsim.nccl_tables import PROTOCOLS
from commsim.topology import load_topology

ARCHS = ("volta", "ampere", "hopper", "blackwell")
VERSIONS = ("2.7", "2.8", "2.12", "2.15", "2.17", "2.18.1", "2.18", "2.21", "2.23", "2.25",
            "2.28.3", "2.29")


def test_the_release_selects_the_caps() -> None:
    """Releases are kept oldest first; a release takes the newest read not after it, a
    release without its patch the newest of its minor series, anything older 2.7.5's."""
    keys = [release_key(entry.release) for entry in RELEASES]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for entry in RELEASES:
        assert caps(entry.release) is entry
    assert caps("2.4") is RELEASES[0]
    assert caps("2.99") is RELEASES[-1]
    assert caps("2.18.2").release == "2.18.1"
    assert caps("2.18").release == "2.18.3"
    assert release_key("2.28") > release_key("2.28.7")
    for entry in RELEASES:
        rows = [entry.tree_ll128, entry.ring_ll128] + ([entry.tree] if entry.tree else [])
        assert all(set(row) == set(ARCHS) for row in rows)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("nodes", [2, 3, 16])
def test_each_protocols_tree_cap_is_built_from_the_simple_one(version: str, arch: str,
                                                             nodes: int) -> None:
    """LL: the Simple cap x 1/3.8, at most llMaxBw; LL128: x its factor, at most channels x
    its per-channel cap; one GPU per node: all x the release's factor (never above 1); more
    channels never lower a cap."""
    simple = tree_cap_Bps(version, arch, nodes, "Simple", 16)
    ll = tree_cap_Bps(version, arch, nodes, "LL", 16, "amd")
    ll128 = tree_cap_Bps(version, arch, nodes, "LL128", 16)
    entry = caps(version)
    assert ll == pytest.approx(min(simple * TREE_LL_FACTOR,
                                   ll_max_bw(version, arch, "amd", nodes) * 1e9))
    if entry.tree is not None:
        assert ll128 == pytest.approx(min(simple * entry.tree_ll128_across,
                                          16e9 * ll128_cap(version, arch, "tree", nodes,
                                                           "all_reduce")))
        assert simple <= tree_cap_Bps(version, arch, nodes, "Simple", 32)
    for protocol in ("LL", "LL128", "Simple"):
        alone = tree_cap_Bps(version, arch, nodes, protocol, 16, one_per_node=True)
        assert alone == pytest.approx(
            tree_cap_Bps(version, arch, nodes, protocol, 16) * entry.tree_one_per_node)
        assert entry.tree_one_per_node <= 1.0
    assert tree_cap_Bps(version, None, nodes, "Simple", 16) == float("inf")


def test_tree_bandwidth_factors_follow_the_release() -> None:
    """A tree's link factor is the release's efficiency, x 1/3.8 under LL, x 7/9 on one node
    or the release's factor across nodes under LL128, x the one-GPU-per-node factor."""
    ll, ll128, simple = PROTOCOLS
    for version in VERSIONS:
        entry = caps(version)
        assert bandwidth_factor(version, "tree", simple, True, True) == entry.tree_efficiency
        assert bandwidth_factor(version, "tree", ll, True, True) == pytest.approx(
            entry.tree_efficiency * TREE_LL_FACTOR)
        assert bandwidth_factor(version, "tree", ll128, False, True) == pytest.approx(
            entry.tree_efficiency * TREE_LL128_ONE_NODE)
        assert bandwidth_factor(version, "tree", ll128, True, True) == pytest.approx(
            entry.tree_efficiency * entry.tree_ll128_across)
        assert bandwidth_factor(version, "tree", simple, True, True, True) == pytest.approx(
            entry.tree_efficiency * entry.tree_one_per_node)
        assert bandwidth_factor(version, "ring", ll128, True, True, True) == \
            entry.ring_ll128_one_per_node


@pytest.mark.parametrize("version", ["2.7", "2.12", "2.19", "2.26", "2.28"])
@pytest.mark.parametrize("protocol", ["LL", "LL128", "Simple"])
def test_the_composed_tree_never_beats_its_cap(version: str, protocol: str) -> None:
    """NCCL's tree across 4 hosts of 8 Blackwell GPUs: at any size, no faster than its bus
    bytes at the release's tree cap (x its medium-size correction)."""
    net = load_topology({"kind": "hierarchical", "nodes": 4, "gpus_per_node": 8,
                         "intra": {"latency": "0.6us", "bandwidth": "900GB/s"},
                         "inter": {"latency": "2.7us", "bandwidth": "400GB/s"},
                         "nccl": {"arch": "blackwell", "channels": 16, "version": version}})
    model = NcclModel.of(net)
    for nbytes in (1 << 20, 64 << 20, 1 << 30):
        time_s = commsim.simulate("all_reduce", net, nbytes, algorithm="hierarchical_pipelined",
                                  protocol=protocol).time_s
        cap = tree_cap_Bps(version, "blackwell", 4, protocol, 16) * model._tree_scale(
            "tree", protocol, nbytes)
        bus = nbytes * Collective.ALL_REDUCE.busbw_factor(32)
        assert time_s >= bus / cap


def test_one_gpu_per_node_never_speeds_a_tree_up() -> None:
    """From 2.18.3 NCCL's tree with one GPU per node (pattern TREE) moves x 0.85: the same
    two hosts' tree all-reduce is slower with one GPU per node than before 2.18.3."""
    times = {}
    for version in ("2.18.1", "2.18.3"):
        net = load_topology({"kind": "hierarchical", "nodes": 2, "gpus_per_node": 1,
                             "intra": {"latency": "0.6us", "bandwidth": "200GB/s"},
                             "inter": {"latency": "2.7us", "bandwidth": "25GB/s"},
                             "nccl": {"arch": "hopper", "channels": 4, "version": version}})
        times[version] = commsim.simulate("all_reduce", net, 256 << 20,
                                          algorithm="double_binary_tree",
                                          protocol="Simple").time_s
    assert times["2.18.3"] > times["2.18.1"]
