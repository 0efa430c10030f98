"""The presets of the alltoall logs' machines (issue 40) are the machines their comments
describe: rank counts, the links between GPUs and through the NICs, the NCCL block."""

from __future__ import annotations

import itertools

import pytest

from commsim.topology import load_topology


def test_mi355x_is_an_xgmi_full_mesh_with_a_nic_per_gpu() -> None:
    """8 MI355X, one direct xGMI link per pair at RCCL's 48 GB/s and NCCL's 0.6 us NVLink hop;
    two nodes cross the 400 Gb/s AI NICs at 0.92 x 50 GB/s."""
    net = load_topology("mi355x-ainic")
    assert net.ranks == 8
    for a, b in itertools.combinations(range(8), 2):
        assert len(net.route(a, b)) == 1
        assert net.path_cost(a, b) == pytest.approx((0.6e-6, 48e9))
    two = load_topology("mi355x-ainicx2")
    assert two.ranks == 16 and {two.host_of(r) for r in range(16)} == {0, 1}
    assert two.path_cost(0, 8) == pytest.approx((2.7e-6, 46e9))
    assert two.meta["nccl"] == {"arch": "hopper", "channels": 16, "version": "2.27",
                                "gpus_per_thread": 1}


def test_rtx6000d_is_pcie_gen5_under_four_switches() -> None:
    """8 RTX 6000D, two per ConnectX-8 switch, two switches per socket, every PCIe hop 44 GB/s
    (NCCL's Gen5 x16 48 x 0.92); the paths lengthen across the tree; across nodes the GPU's
    own PCIe link is the narrowest hop, the NIC 46 GB/s."""
    net = load_topology("rtx6000d-cx8")
    assert net.ranks == 8 and "nvswitch0" not in {d.name for d in net.devices}
    same_switch, same_socket, cross_socket = (net.path_cost(0, r) for r in (1, 2, 4))
    assert same_switch == pytest.approx((1.0e-6, 44e9))
    assert same_switch[0] < same_socket[0] < cross_socket[0]
    two = load_topology("rtx6000d-cx8x2")
    assert two.ranks == 16
    nic_links = [link for link in two.links if "nic" in two.devices[link.src].name
                 and two.devices[link.dst].name == "fabric"]
    assert len(nic_links) == 16 and {link.bandwidth_Bps for link in nic_links} == {46e9}
    assert two.path_cost(0, 8)[1] == pytest.approx(44e9)
    assert two.meta["nccl"] == {"arch": "blackwell", "channels": 2, "version": "2.30",
                                "gpus_per_thread": 1}


def test_h20_vm_is_two_nvswitch_gpus_with_a_nic_each() -> None:
    """A VM of 2 H20: NVSwitch port as dgx-h100 (0.6 us, 370 GB/s), one 400 Gb/s NIC per GPU
    (46 GB/s); two VMs are the log's 4 ranks on 2 hosts."""
    net = load_topology("h20-vm2-roce")
    assert net.ranks == 2 and net.path_cost(0, 1) == pytest.approx((0.6e-6, 370e9))
    two = load_topology("h20-vm2-rocex2")
    assert two.ranks == 4 and [two.host_of(r) for r in range(4)] == [0, 0, 1, 1]
    assert two.path_cost(0, 2) == pytest.approx((2.7e-6, 46e9))
    assert two.path_cost(1, 3) == pytest.approx((2.7e-6, 46e9))
