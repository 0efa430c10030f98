"""The structure of NCCL's bandwidth caps (commsim.nccl_caps): the release selects them, each
protocol's tree cap is built from the Simple one as tuning.cc builds it, the composed tree
never beats its cap, and one GPU per node never speeds a tree up. No test here checks a
constant against a measurement."""

from __future__ import annotations

import pytest

import commsim
from commsim.algorithms.calls import make_call
from commsim.collectives import Collective
from commsim.errors import SpecError
from commsim.nccl import NcclModel, with_nccl
from commsim.nccl_caps import (
    LL128_ARCH_FROM,
    NIC_PATH_ORDER,
    P2C_FROM,
    RELEASES,
    TREE_LL128_ONE_NODE,
    TREE_LL_FACTOR,
    bandwidth_factor,
    caps,
    ll128_cap,
    ll128_enabled,
    ll_max_bw,
    release_key,
    tree_cap_Bps,
)
from commsim.nccl_tables import PROTOCOLS
from commsim.topology import load_topology
from commsim.topology.dump import dump_yaml
from commsim.topology.loader import parse_yaml, spec_from_dict

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
    bytes at the release's tree cap (x its medium-size correction); LL128 before the release
    that runs it on Blackwell is refused in one line."""
    net = load_topology({"kind": "hierarchical", "nodes": 4, "gpus_per_node": 8,
                         "intra": {"latency": "0.6us", "bandwidth": "900GB/s"},
                         "inter": {"latency": "2.7us", "bandwidth": "400GB/s"},
                         "nccl": {"arch": "blackwell", "channels": 16, "version": version}})
    model = NcclModel.of(net)
    if protocol == "LL128" and not ll128_enabled(version, "blackwell", None, True):
        with pytest.raises(SpecError, match="no all_reduce algorithm with protocol LL128"):
            commsim.simulate("all_reduce", net, 1 << 20,
                             algorithm="hierarchical_pipelined", protocol=protocol)
        return
    for nbytes in (1 << 20, 64 << 20, 1 << 30):
        time_s = commsim.simulate("all_reduce", net, nbytes, algorithm="hierarchical_pipelined",
                                  protocol=protocol).time_s
        cap = tree_cap_Bps(version, "blackwell", 4, protocol, 16) * model.tree_scale(
            "tree", protocol, nbytes)
        bus = nbytes * Collective.ALL_REDUCE.busbw_factor(32)
        assert time_s >= bus / cap * (1 - 1e-9)  # at the cap, to float rounding


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


def test_the_nic_path_is_validated_and_kept() -> None:
    """``nccl.nic_path`` takes NCCL's path types only (a one-line error naming the value
    otherwise) and survives a dump and reload."""
    data = {"kind": "switch", "ranks": 4, "link": {"latency": "1us", "bandwidth": "1GB/s"},
            "nccl": {"nic_path": "P2C"}}
    spec = spec_from_dict(data)
    assert spec.nccl is not None and spec.nccl.nic_path == "p2c"
    assert spec_from_dict(parse_yaml(dump_yaml(spec), "dump")).nccl == spec.nccl
    with pytest.raises(SpecError, match=r"nccl.nic_path: unknown path type 'c2c'") as err:
        spec_from_dict({**data, "nccl": {"nic_path": "c2c"}})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("arch", ARCHS)
def test_ll128_follows_the_gpu_release_and_path_to_the_nic(arch: str) -> None:
    """LL128 never runs on a GPU before the release that whitelists it; on one node the
    path to the NIC does not matter; across nodes a nearer path never loses LL128 that a
    farther one has, and a path through the CPU's host bridge never has it."""
    for version in VERSIONS + ("2.26.2", "2.27.5", "2.14", "2.24"):
        whitelisted = release_key(version) >= LL128_ARCH_FROM[arch]
        for path in NIC_PATH_ORDER:
            assert ll128_enabled(version, arch, path, False) == whitelisted
        # p2c aside (typed phb before NCCL knew it), nearer paths keep what farther ones have
        plain = [p for p in NIC_PATH_ORDER if p != "p2c"]
        across = [ll128_enabled(version, arch, path, True) for path in plain]
        assert across == sorted(across, reverse=True)
        assert not across[plain.index("phb")]
        assert ll128_enabled(version, arch, None, True) == across[plain.index("pxb")]
        p2c = ll128_enabled(version, arch, "p2c", True)
        assert p2c == (across[plain.index("pxn")] and release_key(version) >= P2C_FROM)
    assert ll128_enabled("2.7", None, "sys", True)


def test_a_grace_hopper_pair_runs_ll128_across_nodes_once_nccl_types_its_path_p2c() -> None:
    """NCCL's candidates on two GH200 nodes: no LL128 before 2.27.5 (the GPU-to-NIC path is
    typed ``phb``), LL128 from it (``p2c``); on one node LL128 either way."""
    def protocols(preset: str, version: str) -> set[str]:
        net = with_nccl(load_topology(preset), version=version)
        calls = NcclModel.of(net).candidates(make_call("all_reduce", net, 1 << 20))
        return {protocol for _, protocol in calls}

    for version, expected in (("2.26.2", False), ("2.27.5", True)):
        assert ("LL128" in protocols("alps-gh200x2", version)) == expected
        assert "LL128" in protocols("alps-gh200", version)
