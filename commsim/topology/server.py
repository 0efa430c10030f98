"""``kind: server``: GPU servers described by what the hardware is, expanded to ``custom``.

A server file names per-pair NVLink (``nvlink.pairs``: ``[gpu, gpu, links]``) or an NVSwitch
(``nvswitch``: each GPU's port into it), the PCIe tree
(GPUs under each PCIe switch, switches under each CPU socket) and the NICs with the GPUs that
share each, instead of listing every cable. :func:`expand_server` turns it into the
equivalent ``kind: custom`` mapping, so it builds exactly the network of that hand-written
file (devices and links in a fixed order, see docs/topologies.md):

>>> data = {"kind": "server", "gpus": 2, "nvlink": {"link": {"latency": "0.6us",
...         "bandwidth": "25GB/s"}, "pairs": [[0, 1, 2]]}}
>>> custom = expand_server(data)
>>> [d["name"] for d in custom["devices"]], custom["links"][0]["bandwidth"]
(['gpu0', 'gpu1'], '50000000000.0B/s')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from commsim import fields
from commsim.errors import SpecError

#: Keys of ``kind: server`` (besides the common ones).
REQUIRED = ("gpus",)
OPTIONAL = ("nodes", "nvlink", "nvswitch", "pcie", "nics")
#: Most GPUs per server and hosts per file (a server is a box, not a cluster of thousands).
MAX_GPUS, MAX_NODES = 64, 1024


def _link(value: object, path: str) -> tuple[float, float]:
    """``{latency, bandwidth}`` -> (seconds, bytes/s), errors naming ``path``."""
    data = fields.mapping(value, path)
    fields.check_keys(data, ("latency", "bandwidth"), (), path)
    latency = fields.time(data["latency"], f"{path}.latency")
    bandwidth = fields.bandwidth(data["bandwidth"], f"{path}.bandwidth")
    if bandwidth <= 0:
        raise SpecError(f"{path}.bandwidth: must be > 0 (got {data['bandwidth']!r})")
    return latency, bandwidth


def _cable(src: str, dst: str, latency: float, bandwidth: float,
           duplex: bool = True) -> dict[str, object]:
    cable: dict[str, object] = {"src": src, "dst": dst, "latency": f"{latency!r}s",
                                "bandwidth": f"{bandwidth!r}B/s"}
    return cable if duplex else {**cable, "duplex": False}


def _join(lower: tuple[str, str], upper: tuple[str, str], latency: float,
          bandwidth: float) -> list[dict[str, object]]:
    """The cable between a device and the one above it in the PCIe tree, each given as its
    ``(up, down)`` halves (one device twice where it forwards peer to peer; a PCIe switch
    without P2P is two): one duplex cable between whole devices, else the way up (``lower``'s
    up half into ``upper``'s) and the way down (``upper``'s down half into ``lower``'s) as
    two directed links."""
    if lower[0] == lower[1] and upper[0] == upper[1]:
        return [_cable(lower[0], upper[0], latency, bandwidth)]
    return [_cable(lower[0], upper[0], latency, bandwidth, duplex=False),
            _cable(upper[1], lower[1], latency, bandwidth, duplex=False)]


def _index(value: object, size: int, path: str, what: str) -> int:
    index = fields.nonnegative_int(value, path)
    if index >= size:
        raise SpecError(f"{path}: no {what} {index} (0..{size - 1})")
    return index


def _groups(value: object, size: int, path: str, what: str) -> list[list[int]]:
    """A list of groups of indices below ``size`` (``[[0, 1], [2, 3]]``), each index in at
    most one group."""
    groups, seen = [], set()
    for i, group in enumerate(fields.sequence(value, path)):
        members = [_index(m, size, f"{path}[{i}][{j}]", what)
                   for j, m in enumerate(fields.sequence(group, f"{path}[{i}]"))]
        for j, m in enumerate(members):
            if m in seen:
                raise SpecError(f"{path}[{i}][{j}]: {what} {m} is in two groups")
            seen.add(m)
        if not members:
            raise SpecError(f"{path}[{i}]: an empty group")
        groups.append(members)
    return groups


def _nvlink(data: Mapping[Any, Any], gpus: int) -> list[tuple[int, int, int]]:
    fields.check_keys(data, ("link", "pairs"), (), "nvlink")
    pairs, seen = [], set()
    for i, pair in enumerate(fields.sequence(data["pairs"], "nvlink.pairs")):
        path = f"nvlink.pairs[{i}]"
        items = fields.sequence(pair, path)
        if len(items) not in (2, 3):
            raise SpecError(f"{path}: expected [gpu, gpu] or [gpu, gpu, links] (got {pair!r})")
        a, b = (_index(items[k], gpus, f"{path}[{k}]", "GPU") for k in (0, 1))
        links = fields.positive_int(items[2], f"{path}[2]") if len(items) == 3 else 1
        if a == b or (min(a, b), max(a, b)) in seen:
            raise SpecError(f"{path}: GPU {a} to GPU {b} is no new pair")
        seen.add((min(a, b), max(a, b)))
        pairs.append((a, b, links))
    return pairs


def expand_server(data: Mapping[Any, Any]) -> dict[str, Any]:
    """The ``kind: custom`` mapping equivalent to the server description ``data``."""
    gpus = fields.positive_int(data["gpus"], "gpus")
    nodes = fields.positive_int(data.get("nodes", 1), "nodes")
    if gpus > MAX_GPUS or nodes > MAX_NODES:
        raise SpecError(f"gpus/nodes: at most {MAX_GPUS} GPUs and {MAX_NODES} nodes "
                        f"(got {gpus}, {nodes})")
    nvlink = fields.mapping(data["nvlink"], "nvlink") if "nvlink" in data else None
    pairs = _nvlink(nvlink, gpus) if nvlink is not None else []
    nv = _link(nvlink["link"], "nvlink.link") if nvlink is not None else (0.0, 1.0)
    switch = _link(data["nvswitch"], "nvswitch") if "nvswitch" in data else None
    pcie = fields.mapping(data["pcie"], "pcie") if "pcie" in data else None
    if pcie is not None:
        fields.check_keys(pcie, ("link", "switches"), ("sockets", "socket_link", "p2p"), "pcie")
    nics = fields.mapping(data["nics"], "nics") if "nics" in data else None
    if nics is not None:
        fields.check_keys(nics, ("link", "gpus"), (), "nics")
    elif nodes > 1:
        raise SpecError("nics: several nodes need NICs (nics: {link, gpus: [[...], ...]})")
    devices: list[dict[str, Any]] = []
    links: list[dict[str, object]] = []
    for node in range(nodes):
        prefix = f"n{node}." if nodes > 1 else ""
        devices += [{"name": f"{prefix}gpu{g}", "kind": "gpu", "host": node}
                    for g in range(gpus)]
        for a, b, count in pairs:
            links.append(_cable(f"{prefix}gpu{a}", f"{prefix}gpu{b}", nv[0], nv[1] * count))
        if switch is not None:
            devices.append({"name": f"nvswitch{node}", "kind": "switch", "host": node})
            links += [_cable(f"{prefix}gpu{g}", f"nvswitch{node}", switch[0] / 2, switch[1])
                      for g in range(gpus)]
        switch_of = _pcie(pcie, gpus, node, prefix, devices, links) if pcie else {}
        if nics is not None:
            _nics(nics, gpus, node, prefix, switch_of, devices, links)
    ranks = [d["name"] for d in devices if d["kind"] == "gpu"]
    if nodes > 1:
        devices.append({"name": "fabric", "kind": "switch"})
        nic_lat, nic_bw = _link(nics["link"], "nics.link") if nics else (0.0, 1.0)
        links += [_cable(d["name"], "fabric", nic_lat / 2, nic_bw)
                  for d in devices if d["kind"] == "nic"]
    common = {k: v for k, v in data.items() if k not in (*REQUIRED, *OPTIONAL, "kind")}
    return {**common, "kind": "custom", "devices": devices, "links": links, "ranks": ranks}


def _pcie(pcie: Mapping[Any, Any], gpus: int, node: int, prefix: str,
          devices: list[dict[str, Any]], links: list[dict[str, object]]
          ) -> dict[int, tuple[str, str]]:
    """The PCIe tree of one host: each GPU's port into its switch, each switch's uplink into
    its socket, the sockets joined pairwise. Returns each GPU's switch as its ``(up, down)``
    halves: one device twice, or two devices with ``p2p: false``."""
    latency, bandwidth = _link(pcie["link"], "pcie.link")
    switches = _groups(pcie["switches"], gpus, "pcie.switches", "GPU")
    sockets = (_groups(pcie["sockets"], len(switches), "pcie.sockets", "switch")
               if "sockets" in pcie else [list(range(len(switches)))])
    socket_of = {s: k for k, group in enumerate(sockets) for s in group}
    if len(socket_of) != len(switches):
        raise SpecError("pcie.sockets: every PCIe switch must be under one socket")
    p2p = fields.boolean(pcie.get("p2p", True), "pcie.p2p")
    switch_of: dict[int, tuple[str, str]] = {}
    ports: list[tuple[str, str]] = []
    for s, group in enumerate(switches):
        name = f"{prefix}pcie{s}"
        # without P2P the switch forwards nothing from GPU to GPU: what goes up from a GPU
        # reaches the socket (host memory) before it comes down to another
        halves = (name, name) if p2p else (f"{name}.up", f"{name}.down")
        devices += [{"name": half, "kind": "switch", "host": node}
                    for half in dict.fromkeys(halves)]
        ports.append(halves)
        for g in group:
            switch_of[g] = halves
            gpu = f"{prefix}gpu{g}"
            links += _join((gpu, gpu), halves, latency, bandwidth)
    devices += [{"name": f"{prefix}cpu{k}", "kind": "cpu", "host": node}
                for k in range(len(sockets))]
    for s, halves in enumerate(ports):
        cpu = f"{prefix}cpu{socket_of[s]}"
        links += _join(halves, (cpu, cpu), latency, bandwidth)
    if len(sockets) > 1:
        if "socket_link" not in pcie:
            raise SpecError("pcie.socket_link: several sockets need the link between them")
        s_lat, s_bw = _link(pcie["socket_link"], "pcie.socket_link")
        links += [_cable(f"{prefix}cpu{a}", f"{prefix}cpu{b}", s_lat, s_bw)
                  for a in range(len(sockets)) for b in range(a + 1, len(sockets))]
    return switch_of


def _nics(nics: Mapping[Any, Any], gpus: int, node: int, prefix: str,
          switch_of: dict[int, tuple[str, str]], devices: list[dict[str, Any]],
          links: list[dict[str, object]]) -> None:
    """Each NIC of one host, attached to the PCIe switch its GPUs share (without P2P as a GPU
    is: its traffic to and from the GPUs goes through host memory), or else to each of its
    GPUs directly (no latency: the NIC's own port carries it, see :func:`expand_server`)."""
    bandwidth = _link(nics["link"], "nics.link")[1]
    for k, group in enumerate(_groups(nics["gpus"], gpus, "nics.gpus", "GPU")):
        name = f"{prefix}nic{k}"
        devices.append({"name": name, "kind": "nic", "host": node})
        shared = {switch_of.get(g) for g in group}
        switch = next(iter(shared))
        if len(shared) == 1 and switch is not None:
            links += ([_cable(switch[0], name, 0.0, bandwidth)] if switch[0] == switch[1]
                      else _join((name, name), switch, 0.0, bandwidth))
        else:
            links += [_cable(f"{prefix}gpu{g}", name, 0.0, bandwidth) for g in group]


def with_nodes(data: Mapping[Any, Any], count: int, note: str) -> dict[str, Any]:
    """``data`` with ``count`` times its nodes (a preset's ``xN`` suffix), ``note`` appended
    to its description."""
    nodes = fields.positive_int(data.get("nodes", 1), "nodes") * count
    description = f"{data.get('description', '')} {note}".strip()
    return {**data, "nodes": nodes, "description": description}
