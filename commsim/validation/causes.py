"""The causes ``validate --diagnose`` tries (:mod:`commsim.validation.diagnose`): each a
named fault with a one-line explanation and a builder of its what-ifs from the machine's own
links and where the log's ranks ran on it, or the reason it does not apply. The figures each
uses and their sources are beside them; docs/validation.md ("Diagnosis of a slow log") tabulates
them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from commsim.collectives import Collective
from commsim.network import Network
from commsim.topology.degrade import link_labels
from commsim.validation.measurements import Measurement
from commsim.validation.validate import placed_hosts

#: One TCP stream of NCCL's socket transport: NCCL's docs (NCCL_SOCKET_NTHREADS: "for generic
#: 100G networks, this value can be manually set to 4", one socket a thread by default) put one
#: stream at about a quarter of 100 Gb/s.
SOCKET_BPS = 25e9 / 8
#: What bounds NCCL's socket transport, two readings of its source (net_socket.cc; a NIC
#: neither AWS's nor GCP's; a connection, its own TCP socket, per channel and peer): ``thread``,
#: one stream a GPU (2.28's default: no helper thread, the GPU's proxy thread moves every
#: connection's data); ``channel``, one stream a channel crossing the NIC (releases that start
#: one helper thread a connection by default). No latency is added: the plugin reports none
#: (``latency = 0``, "not set") and NCCL's tuner gives every network the same hop latency
#: (tuning.cc).
SOCKET_LEVELS = ("thread", "channel")
#: nccl-tests issue #123's host issue time per GPU (commsim.nccl_tables.HOST_LAUNCH_US), in s.
HOST_LAUNCH_S = 4e-6



@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """The healthy network and where the log's ranks run on it: each rank's host and device
    (the placement :func:`validate` uses)."""

    network: Network
    rank_hosts: tuple[int, ...]
    rank_devices: tuple[int, ...]
    collectives: frozenset[Collective]

    @property
    def hosts(self) -> list[int]:
        return sorted(set(self.rank_hosts))


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One faulty machine: its cause, severity ``level`` ("" for one level) and what-if."""

    cause: str
    level: str
    what_if: dict[str, Any]


#: A cause's variants for a machine, or the reason it does not apply.
Builder = Callable[[Machine], "tuple[Variant, ...] | str"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cause:
    """A named fault: a one-line explanation and how to build its variants."""

    name: str
    explanation: str
    build: Builder = field(repr=False)


# -- the machine's parts ---------------------------------------------------------------------
def _kinds(net: Network) -> tuple[list[str], list[int]]:
    hosts = net.device_hosts().tolist()
    return [str(d.kind) for d in net.devices], [int(h) for h in hosts]


def _ends(net: Network) -> list[tuple[int, int, str]]:
    ends = net.end_columns()
    return list(zip(ends.src.tolist(), ends.dst.tolist(), link_labels(net), strict=True))


def _nic_links(m: Machine) -> dict[int, list[tuple[int, list[str]]]]:
    """Per host of the log, its NICs: (the host-side device, the labels of both directions
    of its link to the fabric), in device order. A NIC link joins a device of a host to one
    of no host (the fabric)."""
    _, hosts = _kinds(m.network)
    used = set(m.hosts)
    nics: dict[int, dict[int, list[str]]] = {}
    for src, dst, label in _ends(m.network):
        for near, far in ((src, dst), (dst, src)):
            if hosts[near] >= 0 and hosts[far] < 0 and hosts[near] in used:
                nics.setdefault(hosts[near], {}).setdefault(near, []).append(label)
    return {h: sorted(d.items()) for h, d in sorted(nics.items())}


def _links(labels: Sequence[str], change: dict[str, object]) -> dict[str, Any]:
    return {"links": {label: dict(change) for label in labels}}


# -- the causes ------------------------------------------------------------------------------
def _p2p_off(m: Machine) -> tuple[Variant, ...] | str:
    kinds, hosts = _kinds(m.network)
    if len(m.rank_hosts) == len(set(m.rank_hosts)):
        return "one GPU per host: no traffic between the GPUs of a host"
    shared = {h for h in m.rank_hosts if m.rank_hosts.count(h) > 1}
    if not all(any(k == "cpu" and hosts[i] == h for i, k in enumerate(kinds)) for h in shared):
        return "no CPU device (host memory) on the hosts of the log"
    net = m.network
    pairs = [(a, b) for a in m.rank_devices for b in m.rank_devices
             if a != b and hosts[a] == hosts[b]]
    if all(any(kinds[net.links[k].dst] == "cpu" for k in net.router(net, a, b))
           for a, b in pairs):
        return "the GPUs already exchange through host memory (the preset has no P2P)"
    return (Variant(cause="p2p-off", level="", what_if={"nccl": {"p2p": False}}),)


def _nvlink_unused(m: Machine) -> tuple[Variant, ...] | str:
    kinds, hosts = _kinds(m.network)
    names = [d.name for d in m.network.devices]
    used = set(m.rank_devices)

    def nvlink(a: int, b: int) -> bool:
        ends = (a, b)
        return (all(kinds[e] == "gpu" for e in ends) and a in used and b in used) or any(
            "nvswitch" in names[e] and hosts[e] >= 0 for e in ends)

    labels = [label for src, dst, label in _ends(m.network) if nvlink(src, dst)]
    if not labels:
        return "no NVLink between the log's GPUs"
    if not any("pcie" in names[d] for d in range(len(names))):
        return "no PCIe path between GPUs to fall back to"
    return (Variant(cause="nvlink-unused", level="", what_if=_links(labels, {"failed": True})),)


def _fewer_nics(m: Machine) -> tuple[Variant, ...] | str:
    nics = _nic_links(m)
    if len(nics) < 2:
        return "the log's ranks are on one host"
    if min(len(n) for n in nics.values()) < 2:
        return "one NIC per host"
    odd = [label for host in nics.values() for k, (_, ls) in enumerate(host) if k % 2
           for label in ls]
    rest = [label for host in nics.values() for _, ls in host[1:] for label in ls]
    variants = [Variant(cause="fewer-nics", level="half", what_if=_links(odd, {"failed": True}))]
    if len(rest) > len(odd):
        variants.append(Variant(cause="fewer-nics", level="one",
                                what_if=_links(rest, {"failed": True})))
    return tuple(variants)


def _all_nic_labels(m: Machine) -> list[str] | str:
    nics = _nic_links(m)
    if len(nics) < 2:
        return "the log's ranks are on one host"
    return [label for host in nics.values() for _, ls in host for label in ls]


def _slow_nics(m: Machine) -> tuple[Variant, ...] | str:
    labels = _all_nic_labels(m)
    if isinstance(labels, str):
        return labels
    return tuple(Variant(cause="slow-nics", level=f"1/{d}",
                         what_if=_links(labels, {"bandwidth": 1 / d})) for d in (2, 4))


def _socket(m: Machine) -> tuple[Variant, ...] | str:
    nics = _nic_links(m)
    if len(nics) < 2:
        return "the log's ranks are on one host"
    index = {label: i for i, label in enumerate(link_labels(m.network))}
    nccl = m.network.meta.get("nccl")
    channels = int(nccl.get("channels", 1)) if isinstance(nccl, dict) else 1
    variants = []
    for level in SOCKET_LEVELS:
        links: dict[str, Any] = {}
        for host, host_nics in nics.items():
            gpus = m.rank_hosts.count(host)
            in_use = max(1, min(len(host_nics), gpus))
            streams = (max(1, gpus // in_use) if level == "thread"
                       else max(1, channels // in_use))
            labels = [label for _, ls in host_nics for label in ls]
            at = np.asarray([index[label] for label in labels], dtype=np.int64)
            rates = m.network.link_values(at).bandwidth_Bps.tolist()
            for label, rate in zip(labels, rates, strict=True):
                cap = streams * SOCKET_BPS
                if rate > cap:
                    links[label] = {"bandwidth": f"{cap * 8 / 1e9:g}Gbps"}
        if links:
            variants.append(Variant(cause="socket", level=level, what_if={"links": links}))
    return tuple(variants) or "every NIC is already at most one socket stream's rate"


def _nvls_off(m: Machine) -> tuple[Variant, ...] | str:
    hosts = m.network.device_hosts()
    if not any(hosts[s] >= 0 for s in m.network.reduction_switches):
        return "no NVSwitch that reduces (NVLS)"
    if Collective.ALL_REDUCE not in m.collectives:
        return "NVLS serves all_reduce only, and the log has none"
    return (Variant(cause="nvls-off", level="", what_if={"nccl": {"nvls": False}}),)


def _host_launch(m: Machine) -> tuple[Variant, ...] | str:
    if not isinstance(m.network.meta.get("nccl"), dict):
        return "the topology does not run NCCL's model (no nccl: block)"
    return tuple(Variant(cause="host-launch", level=f"{k}x",
                         what_if={"nccl": {"host_per_gpu": f"{HOST_LAUNCH_S * k * 1e6:g}us"}})
                 for k in (2, 4))


CAUSES: tuple[Cause, ...] = (
    Cause(name="p2p-off", build=_p2p_off,
          explanation="no GPU peer-to-peer: the GPUs of a host exchange through host memory"),
    Cause(name="nvlink-unused", build=_nvlink_unused,
          explanation="NVLink not used: GPU-to-GPU traffic over PCIe"),
    Cause(name="fewer-nics", build=_fewer_nics,
          explanation="fewer NICs in use: half of every host's, or one"),
    Cause(name="slow-nics", build=_slow_nics,
          explanation="the NICs deliver 1/2 or 1/4 of their rate"),
    Cause(name="socket", build=_socket,
          explanation=("NCCL's socket transport, not RDMA (no network plugin): 25 Gb/s a GPU "
                       "(thread) or a channel (channel)")),
    Cause(name="nvls-off", build=_nvls_off,
          explanation="NVLink SHARP off: the NVSwitch no longer reduces"),
    Cause(name="host-launch", build=_host_launch,
          explanation="the host issues each call slower: 2x or 4x 4 us per GPU"),
)


# -- a log's machine and the causes that apply --------------------------------------------
def machine_of(network: Network, rows: Sequence[Measurement], hosts: Sequence[int] | None,
               placement: str) -> Machine:
    """Where the rows' ranks run on ``network``, as :func:`validate` places them."""
    most = max(r.ranks for r in rows)
    place = placed_hosts(hosts, placement)
    placed = network.on_hosts(place) if place is not None and len(place) == most else None
    if placed is None:
        placed = network.with_ranks(min(most, network.ranks))
    rank_hosts = placed.rank_hosts() or (0,) * placed.ranks
    return Machine(network=network, rank_hosts=tuple(rank_hosts),
                   rank_devices=tuple(placed.rank_devices),
                   collectives=frozenset(r.collective for r in rows))


def variants_of(machine: Machine) -> tuple[tuple[Variant, ...], tuple[tuple[str, str], ...]]:
    """Every cause's variants for ``machine``, and the causes skipped with the reason."""
    variants: list[Variant] = []
    skipped: list[tuple[str, str]] = []
    for cause in CAUSES:
        built = cause.build(machine)
        if isinstance(built, str):
            skipped.append((cause.name, built))
        else:
            variants.extend(built)
    return tuple(variants), tuple(skipped)
