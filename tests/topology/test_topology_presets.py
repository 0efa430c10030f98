"""Shipped presets load, name their sources, match the contract, and scale with ``xN``."""

from __future__ import annotations

import pytest

from commsim.errors import SpecError
from commsim.network import Network
from commsim.topology import (
    HierarchicalSpec,
    list_presets,
    load_topology,
    preset_names,
    preset_spec,
)

CONTRACT_PRESETS = {
    "dgx2-v100": 16,
    "dgx-a100": 8,
    "dgx-h100": 8,
    "hgx-h800": 8,
    "pcie-gen4-8gpu": 8,
    "tpu-v5e-256": 256,
    "tpu-v4-64": 64,
}
GPU_SERVERS = ("dgx2-v100", "dgx-a100", "dgx-h100", "hgx-h800")


def test_contract_presets_exist_with_their_rank_counts() -> None:
    """Every preset the contract names exists and has the contract's number of devices."""
    assert set(CONTRACT_PRESETS) <= set(preset_names())
    for name, ranks in CONTRACT_PRESETS.items():
        net = load_topology(name)
        assert net.ranks == ranks and net.name == name


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads_and_names_sources(name: str) -> None:
    """Each preset builds, has a description and at least one source string, and its routes
    are valid paths between every pair of ranks (checked from rank 0 and back)."""
    net = load_topology(name)
    assert net.meta["description"]
    assert net.meta["sources"] and all(isinstance(s, str) and s for s in net.meta["sources"])
    for rank in range(net.ranks):
        for a, b in ((0, rank), (rank, 0)):
            here = net.rank_devices[a]
            for link_id in net.route(a, b):
                assert net.links[link_id].src == here
                here = net.links[link_id].dst
            assert here == net.rank_devices[b]


def test_list_presets_describes_each_preset() -> None:
    """list_presets() gives name, kind, ranks, description and sources for every preset."""
    infos = {info.name: info for info in list_presets()}
    assert sorted(infos) == preset_names()
    assert infos["dgx-h100"].kind == "hierarchical" and infos["dgx-h100"].ranks == 8
    assert infos["tpu-v4-64"].kind == "torus" and infos["tpu-v4-64"].ranks == 64
    assert all(info.description and info.sources for info in infos.values())


def test_gpu_server_presets_are_single_node_hierarchical() -> None:
    """GPU server presets are kind hierarchical with nodes: 1 (one host for all GPUs)."""
    for name in GPU_SERVERS:
        spec = preset_spec(name)
        assert isinstance(spec, HierarchicalSpec) and spec.nodes == 1
        net = load_topology(name)
        assert {net.host_of(r) for r in range(net.ranks)} == {0}


def test_tpu_presets_are_the_contract_tori() -> None:
    """tpu-v5e-256 is a 16x16 torus and tpu-v4-64 a 4x4x4 torus, 45 GB/s ICI links."""
    assert load_topology("tpu-v5e-256").meta["dims"] == (16, 16)
    net = load_topology("tpu-v4-64")
    assert net.meta["dims"] == (4, 4, 4)
    assert net.path_cost(0, 1) == pytest.approx((1e-6, 45e9))


def test_preset_bandwidths_aim_at_nccl_busbw() -> None:
    """Intra-node port bandwidths are the NCCL ring busbw targets (235 GB/s on 8 A100,
    370 GB/s on 8 H100), below line rate, and inter-node paths go through the NIC."""
    assert load_topology("dgx-a100").path_cost(0, 7)[1] == pytest.approx(235e9)
    assert load_topology("dgx-h100").path_cost(0, 7)[1] == pytest.approx(370e9)
    h800 = load_topology("hgx-h800").path_cost(0, 7)[1]
    assert h800 < 200e9  # below NVLink4-at-400-GB/s-aggregate line rate
    latency, bandwidth = load_topology("dgx-h100x2").path_cost(0, 8)
    assert latency == pytest.approx(2.7e-6) and bandwidth == pytest.approx(46e9)  # NCCL NET hop


def test_pcie_preset_models_switches_and_sockets() -> None:
    """The PCIe preset has 4 PCIe switches and 2 CPUs; paths get longer across the tree."""
    net = load_topology("pcie-gen4-8gpu")
    kinds = [d.kind for d in net.devices]
    assert kinds.count("gpu") == 8 and kinds.count("switch") == 4 and kinds.count("cpu") == 2
    same_switch, same_socket, cross_socket = (net.path_cost(0, r) for r in (1, 2, 4))
    assert same_switch[0] < same_socket[0] < cross_socket[0]
    assert cross_socket[1] < same_switch[1]


def test_xn_suffix_builds_n_nodes() -> None:
    """``dgx-h100x16`` is 16 DGX H100 nodes: 128 GPUs, hosts filled in order, fabric between."""
    net = load_topology("dgx-h100x16")
    assert net.ranks == 128 and net.name == "dgx-h100x16"
    assert net.meta["nodes"] == 16 and net.meta["gpus_per_node"] == 8
    assert [net.host_of(r) for r in (0, 7, 8, 127)] == [0, 0, 1, 15]
    assert load_topology("dgx-a100x1").ranks == 8
    assert load_topology("dgx2-v100x2").ranks == 32


def test_with_ranks_on_a_multi_node_preset() -> None:
    """Using fewer ranks keeps the first R GPUs, filling nodes in order."""
    net = load_topology("dgx-h100x4", ranks=12)
    assert net.ranks == 12
    assert [net.host_of(r) for r in range(12)] == [0] * 8 + [1] * 4
    with pytest.raises(SpecError, match="exceeds the 8 ranks"):
        load_topology("dgx-h100", ranks=9)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("dgx-h100x0", "bad node-count suffix 'x0'"),
        ("dgx-h100x-2", "bad node-count suffix 'x-2'"),
        ("dgx-h100xfour", "bad node-count suffix 'xfour'"),
        ("tpu-v4-64x2", "the xN suffix needs a hierarchical GPU preset"),
        ("tpu-v5e-256x4", "the xN suffix needs a hierarchical GPU preset"),
        ("pcie-gen4-8gpux2", "the xN suffix needs a hierarchical GPU preset"),
        ("dgx-h200", "unknown topology 'dgx-h200' (not a preset or a file; presets: "),
    ],
)
def test_bad_preset_names(name: str, message: str) -> None:
    """Bad suffixes, xN on non-hierarchical presets and unknown names are clear errors."""
    with pytest.raises(SpecError) as info:
        load_topology(name)
    assert message in str(info.value)


def test_load_topology_passes_networks_through() -> None:
    """A Network is returned as is (or cut to ``ranks``)."""
    net = load_topology("dgx-a100")
    assert load_topology(net) is net
    assert isinstance(load_topology(net, ranks=4), Network)
    assert load_topology(net, ranks=4).ranks == 4
