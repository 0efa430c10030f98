"""Read topology YAML (a file or an already-parsed dict) into a validated spec, strictly.

Unknown keys, missing keys, wrong types and malformed units are errors naming the field path
(``links[3].bandwidth: must be > 0 (got '0GB/s')``) and, for files, the file. Fields are read
by :mod:`commsim.fields`: latencies and bandwidths need a unit (``2us``, ``100GB/s``; ``0``
needs none), counts (``ranks``, ``nodes``, ``dims``, ...) are plain integers.

>>> spec = spec_from_dict({"kind": "ring", "ranks": 4,
...                        "link": {"latency": "1us", "bandwidth": "100GB/s"}})
>>> spec.ranks, spec.link.bandwidth_Bps
(4, 100000000000.0)
>>> spec_from_dict({"kind": "ring", "ranks": 4, "link": {"latency": "1us", "bandwith": 1}})
Traceback (most recent call last):
...
commsim.errors.SpecError: link.bandwith: unknown key (allowed: bandwidth, latency)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from commsim import fields
from commsim.errors import SpecError, describe
from commsim.topology import server
from commsim.topology.nccl_spec import TIME_KEYS, NcclSpec
from commsim.topology.preset_files import with_base
from commsim.topology.spec import (
    CustomLinkSpec,
    CustomSpec,
    DeviceSpec,
    FullyConnectedSpec,
    HierarchicalSpec,
    LinkSpec,
    RingSpec,
    SharedSpec,
    SwitchSpec,
    TopologySpec,
    TorusSpec,
)
from commsim.yamlfile import one_document, read_text

#: Optional keys every kind accepts.
COMMON_KEYS = ("name", "description", "sources", "gamma", "algorithms", "nccl", "device")


def parse_link(value: object, path: str = "link", *, switch_port: bool = False) -> LinkSpec:
    """``{latency, bandwidth}`` (unit strings or SI numbers) -> :class:`LinkSpec`; a switch
    port (``switch_port``) may add ``reduction_bandwidth`` (the switch reduces in-network).

    ``path`` names the field in error messages (``link.bandwidth: must be > 0, got 0``).
    """
    data = fields.mapping(value, path or "link")
    fields.check_keys(
        data, ("latency", "bandwidth"), ("reduction_bandwidth",) if switch_port else (), path
    )
    prefix = f"{path}." if path else ""
    reduction = None
    if "reduction_bandwidth" in data:
        reduction = fields.bandwidth(data["reduction_bandwidth"], f"{prefix}reduction_bandwidth")
    return LinkSpec(
        latency_s=fields.time(data["latency"], f"{prefix}latency"),
        bandwidth_Bps=fields.bandwidth(data["bandwidth"], f"{prefix}bandwidth"),
        reduction_bandwidth_Bps=reduction,
    )


def _common(data: Mapping[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if data.get("name") is not None:
        out["name"] = str(fields.string(data["name"], "name"))
    if "description" in data:
        description = data["description"]
        if not isinstance(description, str):
            raise SpecError(f"description: must be a string (got {describe(description)})")
        out["description"] = " ".join(description.split())
    if "sources" in data:
        sources = fields.sequence(data["sources"], "sources")
        out["sources"] = tuple(fields.string(s, f"sources[{i}]") for i, s in enumerate(sources))
    if "gamma" in data:
        out["gamma_s_per_B"] = fields.time(data["gamma"], "gamma")
    if "algorithms" in data:
        out["algorithms"] = _algorithms(data["algorithms"])
    if "nccl" in data:
        nccl = fields.mapping(data["nccl"], "nccl")
        fields.check_keys(nccl, (), ("arch", "channels", "version", "gpus_per_thread", "cpu",
                                     "nic_path", *TIME_KEYS), "nccl")
        default = NcclSpec()
        out["nccl"] = NcclSpec(
            arch=fields.string(nccl["arch"], "nccl.arch").lower()
            if "arch" in nccl
            else default.arch,
            channels=fields.positive_int(nccl["channels"], "nccl.channels")
            if "channels" in nccl
            else default.channels,
            version=str(nccl["version"]) if "version" in nccl else default.version,
            gpus_per_thread=fields.positive_int(nccl["gpus_per_thread"],
                                                "nccl.gpus_per_thread")
            if "gpus_per_thread" in nccl
            else default.gpus_per_thread,
            cpu=fields.string(nccl["cpu"], "nccl.cpu").lower() if "cpu" in nccl else None,
            nic_path=fields.string(nccl["nic_path"], "nccl.nic_path").lower()
            if "nic_path" in nccl else None,
            host_per_gpu_s=fields.time(nccl["host_per_gpu"], "nccl.host_per_gpu")
            if "host_per_gpu" in nccl else None,
            overhead_s=fields.time(nccl["overhead"], "nccl.overhead")
            if "overhead" in nccl else 0.0,
        )
    return out


def _algorithms(value: object) -> tuple[tuple[str, str], ...]:
    """``{all_reduce: ring, bcast: binomial_tree}`` -> canonical (collective, algorithm) pairs,
    sorted by collective; the spec checks that each algorithm can run its collective."""
    from commsim.algorithms import get_algorithm
    from commsim.collectives import parse_collective

    data = fields.mapping(value, "algorithms")
    pairs: dict[str, str] = {}
    for key, name in data.items():
        try:
            collective = parse_collective(key).value
        except SpecError as exc:
            raise SpecError(f"algorithms: {exc}") from None
        if collective in pairs:
            raise SpecError(f"algorithms.{key}: {collective} is listed twice")
        text = fields.string(name, f"algorithms.{key}")
        try:
            pairs[collective] = get_algorithm(text).name
        except SpecError as exc:
            raise SpecError(f"algorithms.{key}: {exc}") from None
    return tuple(sorted(pairs.items()))


def _flat(cls: type[RingSpec | FullyConnectedSpec | SwitchSpec]) -> _KindParser:
    def parse(data: Mapping[Any, Any], common: dict[str, Any]) -> TopologySpec:
        extra: dict[str, Any] = (
            {"device": fields.string(data["device"], "device")} if "device" in data else {}
        )
        return cls(
            ranks=fields.positive_int(data["ranks"], "ranks"),
            link=parse_link(data["link"], "link", switch_port=cls is SwitchSpec),
            **extra,
            **common,
        )

    return parse


def _shared(data: Mapping[Any, Any], common: dict[str, Any]) -> TopologySpec:
    extra: dict[str, Any] = {}
    if "device" in data:
        extra["device"] = fields.string(data["device"], "device")
    if "medium" in data:
        medium = fields.mapping(data["medium"], "medium")
        fields.check_keys(medium, ("bandwidth",), (), "medium")
        extra["medium_bandwidth_Bps"] = fields.bandwidth(medium["bandwidth"], "medium.bandwidth")
    if "latency_per_rank" in data:
        extra["latency_per_rank_s"] = fields.time(data["latency_per_rank"], "latency_per_rank")
    if "cores" in data:
        extra["cores"] = fields.positive_int(data["cores"], "cores")
    return SharedSpec(
        ranks=fields.positive_int(data["ranks"], "ranks"),
        link=parse_link(data["link"], "link"),
        **extra,
        **common,
    )


def _torus(data: Mapping[Any, Any], common: dict[str, Any]) -> TopologySpec:
    dims = data["dims"]
    if not isinstance(dims, list) or not dims:
        raise SpecError(
            f"dims: must be a non-empty list of positive integers (got {describe(dims)})"
        )
    extra: dict[str, Any] = (
        {"device": fields.string(data["device"], "device")} if "device" in data else {}
    )
    return TorusSpec(
        dims=tuple(fields.positive_int(size, f"dims[{i}]") for i, size in enumerate(dims)),
        link=parse_link(data["link"], "link"),
        **extra,
        **common,
    )


def _hierarchical(data: Mapping[Any, Any], common: dict[str, Any]) -> TopologySpec:
    extra: dict[str, Any] = {"gpu": fields.string(data["gpu"], "gpu")} if "gpu" in data else {}
    return HierarchicalSpec(
        nodes=fields.positive_int(data["nodes"], "nodes"),
        gpus_per_node=fields.positive_int(data["gpus_per_node"], "gpus_per_node"),
        intra=parse_link(data["intra"], "intra", switch_port=True),
        inter=parse_link(data["inter"], "inter", switch_port=True),
        **extra,
        **common,
    )


def _custom_device(value: object, path: str) -> DeviceSpec:
    data = fields.mapping(value, path)
    fields.check_keys(data, ("name",), ("kind", "host"), path)
    host = data.get("host")
    if host is not None and (isinstance(host, bool) or not isinstance(host, int) or host < 0):
        raise SpecError(f"{path}.host: must be an integer >= 0 (got {describe(host)})")
    return DeviceSpec(
        name=fields.string(data["name"], f"{path}.name"),
        kind=fields.string(data.get("kind", "gpu"), f"{path}.kind"),
        host=host,
    )


def _custom_link(value: object, path: str) -> CustomLinkSpec:
    data = fields.mapping(value, path)
    fields.check_keys(data, ("src", "dst", "latency", "bandwidth"), ("duplex",), path)
    duplex = fields.boolean(data.get("duplex", True), f"{path}.duplex")
    src, dst = fields.string(data["src"], f"{path}.src"), fields.string(data["dst"], f"{path}.dst")
    if src == dst:
        raise SpecError(f"{path}.dst: a link cannot join {src!r} to itself")
    return CustomLinkSpec(
        src=src,
        dst=dst,
        latency_s=fields.time(data["latency"], f"{path}.latency"),
        bandwidth_Bps=fields.bandwidth(data["bandwidth"], f"{path}.bandwidth"),
        duplex=duplex,
    )


def _custom(data: Mapping[Any, Any], common: dict[str, Any]) -> TopologySpec:
    devices = fields.sequence(data["devices"], "devices")
    links = fields.sequence(data["links"], "links")
    ranks = fields.sequence(data["ranks"], "ranks") if "ranks" in data else []
    return CustomSpec(
        devices=tuple(_custom_device(d, f"devices[{i}]") for i, d in enumerate(devices)),
        links=tuple(_custom_link(link, f"links[{i}]") for i, link in enumerate(links)),
        ranks=tuple(fields.string(r, f"ranks[{i}]") for i, r in enumerate(ranks)),
        **common,
    )


def _server(data: Mapping[Any, Any], common: dict[str, Any]) -> TopologySpec:
    """``kind: server``, expanded to the equivalent ``custom`` (:mod:`.server`)."""
    return _custom(server.expand_server(data), common)


_KindParser = Callable[[Mapping[Any, Any], dict[str, Any]], TopologySpec]

#: kind -> (required keys, optional keys, parser)
KINDS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...], _KindParser]] = MappingProxyType(
    {
        "ring": (("ranks", "link"), ("device",), _flat(RingSpec)),
        "fully_connected": (("ranks", "link"), ("device",), _flat(FullyConnectedSpec)),
        "torus": (("dims", "link"), ("device",), _torus),
        "hierarchical": (("nodes", "gpus_per_node", "intra", "inter"), ("gpu",), _hierarchical),
        "switch": (("ranks", "link"), ("device",), _flat(SwitchSpec)),
        "custom": (("devices", "links"), ("ranks",), _custom),
        "server": (server.REQUIRED, server.OPTIONAL, _server),
        "shared": (
            ("ranks", "link"),
            ("medium", "latency_per_rank", "cores", "device"),
            _shared,
        ),
    }
)


def spec_from_dict(data: object, source: str = "") -> TopologySpec:
    """Validate parsed YAML ``data`` into a spec; errors are prefixed with ``source`` if given.

    Parameters
    ----------
    data : object
        A mapping with a ``kind`` key, as ``yaml.safe_load`` returns it.
    source : str
        Where ``data`` came from (a file name), prefixed to every error message.
    """
    try:
        return _spec(data)
    except SpecError as exc:
        if source:
            raise SpecError(f"{source}: {exc}") from None
        raise


def _spec(data: object) -> TopologySpec:
    data = with_base(data)
    if not isinstance(data, Mapping):
        raise SpecError(f"a topology must be a mapping with a 'kind' key (got {describe(data)})")
    known = ", ".join(sorted(KINDS))
    if "kind" not in data:
        raise SpecError(f"kind: missing required key (one of: {known})")
    kind = data["kind"]
    if not isinstance(kind, str) or kind not in KINDS:
        raise SpecError(f"kind: unknown topology kind (got {describe(kind)}; known: {known})")
    required, optional, parse = KINDS[kind]
    fields.check_keys(data, required, ("kind", *COMMON_KEYS, *optional), "", f" for kind {kind!r}")
    info = ""
    if isinstance(data.get("device"), Mapping):  # the accelerator's block, not a kind's name
        info = _device_info(data["device"])
        data = {k: v for k, v in data.items() if k != "device"}
    elif "device" in data and "device" not in optional:
        got = describe(data["device"])
        raise SpecError(f"device: must be a mapping (the accelerator) (got {got})")
    common = _common(data)
    if info:
        common["device_info"] = info
    return parse(data, common)


def _device_info(value: Mapping[Any, Any]) -> str:
    """A ``device:`` block (the accelerator: memory, peak FLOP/s, efficiency curve, sources)
    kept verbatim as canonical JSON; :mod:`commsim.plan.device` gives it meaning."""
    import json

    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise SpecError("device: must hold plain YAML scalars, lists and mappings") from None


def parse_yaml(text: str, source: str) -> object:
    """The single YAML document in ``text``; one-line SpecError naming ``source`` otherwise."""
    return one_document(text, source, "topology")


def read_spec_file(path: str | Path) -> TopologySpec:
    """Read and validate one topology YAML file.

    Raises
    ------
    SpecError
        One line naming the file: missing/unreadable file, invalid YAML, several documents,
        a non-mapping document, or any field error (with its field path).
    """
    source = str(path)
    return spec_from_dict(parse_yaml(read_text(path, "topology"), source), source)
