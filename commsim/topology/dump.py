"""Write a spec back as topology YAML (the inverse of :mod:`commsim.topology.loader`).

Times and bandwidths are written with units (``12.5us``, ``46GB/s``) at 9 significant digits,
so a dumped file loads back to the same network to within 1e-9 relative.

>>> from commsim.topology.loader import spec_from_dict
>>> spec = spec_from_dict({"kind": "switch", "ranks": 4,
...                        "link": {"latency": "2us", "bandwidth": "50GB/s"}})
>>> print(dump_yaml(spec), end="")
kind: switch
ranks: 4
link: {latency: 2us, bandwidth: 50GB/s}
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from commsim.errors import SpecError
from commsim.topology.nccl_spec import TIME_KEYS
from commsim.topology.spec import (
    CustomSpec,
    FlatSpec,
    HierarchicalSpec,
    LinkSpec,
    SharedSpec,
    TopologySpec,
    TorusSpec,
)


def format_time(seconds: float) -> str:
    """``1.25e-05`` -> ``'12.5us'`` (s, ms, us, ns or ps; 9 significant digits)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.9g}{unit}"
    return f"{seconds / 1e-12:.9g}ps" if seconds > 0 else "0s"


def format_bandwidth(bps: float) -> str:
    """``4.6e10`` -> ``'46GB/s'`` (GB = 1e9; 9 significant digits)."""
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.9g}{unit}"
    return f"{bps:.9g}B/s"


def _link(link: LinkSpec) -> dict[str, str]:
    out = {
        "latency": format_time(link.latency_s),
        "bandwidth": format_bandwidth(link.bandwidth_Bps),
    }
    if link.reduction_bandwidth_Bps is not None:
        out["reduction_bandwidth"] = format_bandwidth(link.reduction_bandwidth_Bps)
    return out


def spec_to_dict(spec: TopologySpec) -> dict[str, Any]:
    """The YAML mapping of ``spec``: ``kind``, the kind's keys, then the optional common keys
    that differ from their defaults."""
    data: dict[str, Any] = {"kind": spec.kind}
    if isinstance(spec, FlatSpec):
        data["ranks"] = spec.ranks
        data["link"] = _link(spec.link)
        if spec.device != "gpu":
            data["device"] = spec.device
    elif isinstance(spec, TorusSpec):
        data["dims"] = list(spec.dims)
        data["link"] = _link(spec.link)
        if spec.device != "tpu":
            data["device"] = spec.device
    elif isinstance(spec, HierarchicalSpec):
        data["nodes"] = spec.nodes
        data["gpus_per_node"] = spec.gpus_per_node
        data["intra"] = _link(spec.intra)
        data["inter"] = _link(spec.inter)
        if spec.gpu != "gpu":
            data["gpu"] = spec.gpu
    elif isinstance(spec, SharedSpec):
        data["ranks"] = spec.ranks
        data["link"] = _link(spec.link)
        if spec.medium_bandwidth_Bps is not None:
            data["medium"] = {"bandwidth": format_bandwidth(spec.medium_bandwidth_Bps)}
        if spec.latency_per_rank_s:
            data["latency_per_rank"] = format_time(spec.latency_per_rank_s)
        if spec.cores != 1:
            data["cores"] = spec.cores
        if spec.device != "cpu":
            data["device"] = spec.device
    elif isinstance(spec, CustomSpec):
        data["devices"] = [
            {"name": d.name, "kind": d.kind, **({"host": d.host} if d.host is not None else {})}
            for d in spec.devices
        ]
        data["links"] = [
            {
                "src": link.src,
                "dst": link.dst,
                "latency": format_time(link.latency_s),
                "bandwidth": format_bandwidth(link.bandwidth_Bps),
                **({} if link.duplex else {"duplex": False}),
            }
            for link in spec.links
        ]
        if spec.ranks:
            data["ranks"] = list(spec.ranks)
    else:
        raise SpecError(f"cannot write a topology of kind {spec.kind!r}")
    if spec.name is not None:
        data["name"] = spec.name
    if spec.description:
        data["description"] = spec.description
    if spec.gamma_s_per_B:
        data["gamma"] = format_time(spec.gamma_s_per_B)
    if spec.algorithms:
        data["algorithms"] = dict(spec.algorithms)
    if spec.nccl is not None:
        nccl = spec.nccl.as_meta()
        for key in TIME_KEYS:
            if key in nccl:
                nccl[key] = format_time(float(nccl[key]))  # type: ignore[arg-type]
        data["nccl"] = nccl
    if spec.device_info:
        data["device"] = json.loads(spec.device_info)
    if spec.sources:
        data["sources"] = list(spec.sources)
    return data


def _scalar(value: object) -> str:
    """One YAML scalar (quoted only when needed), on one line."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, allow_unicode=True)
    return text.removesuffix("\n...\n").strip()


def _flow(mapping: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in mapping.items()) + "}"


def dump_yaml(spec: TopologySpec) -> str:
    """``spec`` as a YAML document that :func:`commsim.topology.load_topology` reads back:
    block style at the top level, links and devices as one-line flow mappings."""
    lines = []
    for key, value in spec_to_dict(spec).items():
        if isinstance(value, dict) and key == "algorithms":
            lines.append(f"{key}:")
            lines.extend(f"  {k}: {_scalar(v)}" for k, v in value.items())
        elif isinstance(value, dict):
            lines.append(f"{key}: {_flow(value)}")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{key}:")
            lines.extend(f"  - {_flow(item)}" for item in value)
        elif isinstance(value, list) and key == "sources":
            lines.append(f"{key}:")
            lines.extend(f"  - {_scalar(item)}" for item in value)
        elif isinstance(value, list):
            lines.append(f"{key}: [{', '.join(_scalar(v) for v in value)}]")
        else:
            lines.append(f"{key}: {_scalar(value)}")
    return "\n".join(lines) + "\n"
