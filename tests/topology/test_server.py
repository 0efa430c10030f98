"""``kind: server``: the compact form (per-pair NVLink, NVSwitch, PCIe tree, shared NICs)
builds exactly the network of the equivalent hand-written ``custom`` file."""

from __future__ import annotations

import pytest

import commsim
from commsim.errors import SpecError
from commsim.topology import load_topology
from commsim.topology.presets import preset_spec

NV = {"latency": "0.6us", "bandwidth": "20GB/s"}
PCIE = {"latency": "0.5us", "bandwidth": "12GB/s"}
NIC = {"latency": "2us", "bandwidth": "10GB/s"}

#: Two hosts of 4 GPUs: NVLink pairs (0-1 doubled, 2-3), two PCIe switches under one socket,
#: one NIC per PCIe switch shared by its two GPUs.
COMPACT = {
    "kind": "server", "nodes": 2, "gpus": 4,
    "nvlink": {"link": NV, "pairs": [[0, 1, 2], [2, 3]]},
    "pcie": {"link": PCIE, "switches": [[0, 1], [2, 3]]},
    "nics": {"link": NIC, "gpus": [[0, 1], [2, 3]]},
}


def _host(n: int) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    p = f"n{n}."
    devices: list[dict[str, object]] = [{"name": f"{p}gpu{g}", "host": n} for g in range(4)]
    devices += [{"name": f"{p}pcie0", "kind": "switch", "host": n},
                {"name": f"{p}pcie1", "kind": "switch", "host": n},
                {"name": f"{p}cpu0", "kind": "cpu", "host": n},
                {"name": f"{p}nic0", "kind": "nic", "host": n},
                {"name": f"{p}nic1", "kind": "nic", "host": n}]
    links = [
        {"src": f"{p}gpu0", "dst": f"{p}gpu1", "latency": "0.6us", "bandwidth": "40GB/s"},
        {"src": f"{p}gpu2", "dst": f"{p}gpu3", "latency": "0.6us", "bandwidth": "20GB/s"},
        *({"src": f"{p}gpu{g}", "dst": f"{p}pcie{g // 2}", **PCIE} for g in range(4)),
        *({"src": f"{p}pcie{s}", "dst": f"{p}cpu0", **PCIE} for s in range(2)),
        *({"src": f"{p}pcie{s}", "dst": f"{p}nic{s}", "latency": 0, "bandwidth": "10GB/s"}
          for s in range(2)),
    ]
    return devices, links


def hand_written() -> dict[str, object]:
    """The custom file one writes by hand for COMPACT (devices and links in its order)."""
    (d0, l0), (d1, l1) = _host(0), _host(1)
    nics = [{"src": f"n{n}.nic{k}", "dst": "fabric", "latency": "1us", "bandwidth": "10GB/s"}
            for n in (0, 1) for k in (0, 1)]
    return {
        "kind": "custom",
        "devices": [*d0, *d1, {"name": "fabric", "kind": "switch"}],
        "links": [*l0, *l1, *nics],
        "ranks": [f"n{n}.gpu{g}" for n in (0, 1) for g in range(4)],
    }


def test_compact_form_builds_the_hand_written_network() -> None:
    """Same devices, links (each cable both ways, same order, latency and bandwidth), ranks
    and hosts; and the same times for NCCL's collectives."""
    compact = load_topology({**COMPACT, "nccl": {"arch": "volta"}})
    custom = load_topology({**hand_written(), "nccl": {"arch": "volta"}})
    assert compact.devices == custom.devices
    assert [(k.src, k.dst, k.bandwidth_Bps) for k in compact.links] == \
        [(k.src, k.dst, k.bandwidth_Bps) for k in custom.links]
    latencies = [k.latency_s for k in custom.links]
    assert [k.latency_s for k in compact.links] == pytest.approx(latencies)
    assert compact.rank_devices == custom.rank_devices
    for size in ("8B", "1MiB", "256MiB"):
        a = commsim.simulate("all_reduce", compact, size).time_s
        b = commsim.simulate("all_reduce", custom, size).time_s
        assert a == pytest.approx(b, rel=1e-12)


def test_compact_form_is_short() -> None:
    """The DGX-1 preset: 16 NVLink pairs, 4 PCIe switches and 4 shared NICs expand to 66
    links; its xN suffix gives N such servers on a fabric."""
    net = load_topology("dgx1-v100")
    assert net.ranks == 8 and len(net.links) == 66
    two = load_topology("dgx1-v100x2")
    assert two.ranks == 16 and {two.host_of(r) for r in range(16)} == {0, 1}
    assert "[x2]" in preset_spec("dgx1-v100x2").description


def test_nvswitch_server_matches_the_hierarchical_kind() -> None:
    """A server of GPUs on an NVSwitch with a NIC each is the hierarchical kind's machine:
    the same GPU-to-GPU latency and bandwidth within and across hosts."""
    server = load_topology({"kind": "server", "nodes": 2, "gpus": 4,
                            "nvswitch": {"latency": "1us", "bandwidth": "100GB/s"},
                            "nics": {"link": {"latency": "5us", "bandwidth": "10GB/s"},
                                     "gpus": [[0], [1], [2], [3]]}})
    hierarchical = load_topology({"kind": "hierarchical", "nodes": 2, "gpus_per_node": 4,
                                  "intra": {"latency": "1us", "bandwidth": "100GB/s"},
                                  "inter": {"latency": "5us", "bandwidth": "10GB/s"}})
    for a, b in ((0, 3), (1, 6)):
        assert server.path_cost(a, b) == pytest.approx(hierarchical.path_cost(a, b))


def _through(net: commsim.Network, a: int, b: int) -> list[str]:
    """The devices the route from rank ``a`` to rank ``b`` passes, ends excluded."""
    return [net.devices[net.links[i].dst].name for i in net.route(a, b)][:-1]


def test_without_p2p_gpus_meet_only_in_host_memory() -> None:
    """``pcie.p2p: false`` (NCCL's SHM transport): GPU to GPU, and GPU to NIC, goes up into
    the socket and down again; the two directions between GPUs of one switch share its
    uplink both ways, those between sockets share no PCIe link. With P2P the switch
    forwards."""
    pcie = {"link": PCIE, "switches": [[0, 1], [2, 3]], "sockets": [[0], [1]],
            "socket_link": {"latency": "0.5us", "bandwidth": "10GB/s"}}
    plain = {k: v for k, v in COMPACT.items() if k != "nvlink"}  # PCIe only
    net = load_topology({**plain, "pcie": {**pcie, "p2p": False}})
    assert _through(net, 0, 1) == ["n0.pcie0.up", "n0.cpu0", "n0.pcie0.down"]
    assert _through(net, 0, 2) == ["n0.pcie0.up", "n0.cpu0", "n0.cpu1", "n0.pcie1.down"]
    assert _through(net, 0, 4)[:3] == ["n0.pcie0.up", "n0.cpu0", "n0.pcie0.down"]
    up_to = {net.devices[k.dst].kind for k in net.links if net.devices[k.src].name.endswith(".up")}
    assert up_to == {"cpu"}
    assert set(net.route(0, 1)) & set(net.route(1, 0))
    assert not set(net.route(0, 2)) & set(net.route(2, 0))
    assert _through(load_topology({**plain, "pcie": pcie}), 0, 1) == ["n0.pcie0"]


@pytest.mark.parametrize(("switches", "sockets", "ratio"), [
    ([[0, 1]], [[0]], 2.0), ([[0], [1]], [[0], [1]], 1.0)])
def test_without_p2p_a_ring_both_ways_shares_the_uplink(
        switches: list[list[int]], sockets: list[list[int]], ratio: float) -> None:
    """Two GPUs without P2P under one switch: a 2-rank all-reduce (each GPU sends as much
    as a broadcast moves, both directions at once) takes twice a broadcast's time, the
    uplink carrying both directions; under two sockets, as long as one."""
    pcie = {"link": PCIE, "switches": switches, "sockets": sockets, "p2p": False,
            "socket_link": PCIE}
    net = load_topology({"kind": "server", "gpus": 2, "pcie": pcie,
                         "nccl": {"arch": "ampere", "channels": 2}})
    reduce_all = commsim.simulate("all_reduce", net, "1GiB").time_s
    broadcast = commsim.simulate("broadcast", net, "1GiB").time_s
    assert reduce_all / broadcast == pytest.approx(ratio, rel=0.02)


@pytest.mark.parametrize(("change", "message"), [
    ({"nvlink": {"link": NV, "pairs": [[0, 9]]}}, r"nvlink.pairs\[0\]\[1\]: no GPU 9"),
    ({"nvlink": {"link": NV, "pairs": [[0, 1], [1, 0]]}}, r"nvlink.pairs\[1\]: GPU 1 to GPU 0"),
    ({"nics": {"link": NIC, "gpus": [[0, 1], [1, 2]]}}, r"nics.gpus\[1\]\[0\]: GPU 1 is in two"),
    ({"nics": None}, "nics"),
    ({"pcie": {"link": PCIE, "switches": [[0, 1], [2, 3]], "sockets": [[0], [1]]}},
     "pcie.socket_link"),
    ({"gpus": 0}, "gpus"),
    ({"pcie": {"link": PCIE, "switches": [[0, 1], [2, 3]], "p2p": "maybe"}}, "pcie.p2p"),
    ({"nvlink": {"link": {"latency": "1us", "bandwidth": 5}, "pairs": []}},
     "nvlink.link.bandwidth"),
])
def test_bad_server_files_name_the_field(change: dict[str, object], message: str) -> None:
    data = {**COMPACT, **change}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(SpecError, match=message):
        load_topology(data)
