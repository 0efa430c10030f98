"""Presets and the one entry point that turns any topology reference into a Network.

Presets are the YAML files of the ``commsim.presets`` package (the ``topologies/`` folder);
their name is the file stem. A hierarchical (GPU server) preset takes an ``xN`` suffix: N such
servers joined by the preset's fabric (``dgx-h100x16`` is 16 x 8 = 128 GPUs).

>>> load_topology("dgx-h100x16").ranks
128
>>> load_topology("no-such-machine")
Traceback (most recent call last):
...
commsim.errors.SpecError: unknown topology 'no-such-machine' (not a preset or a file; presets: ...)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from commsim.errors import SpecError
from commsim.gcpause import paused_gc
from commsim.network import Network
from commsim.topology import server
from commsim.topology.build import build_network
from commsim.topology.loader import read_spec_file, spec_from_dict
from commsim.topology.preset_files import preset_data, preset_file_names
from commsim.topology.spec import HierarchicalSpec, TopologySpec

#: What ``load_topology`` accepts.
TopologyRef = Network | TopologySpec | str | Path | Mapping[str, object]


@dataclass(frozen=True, slots=True, kw_only=True)
class PresetInfo:
    """One line of ``commsim topologies``: a preset's name, kind, rank count and provenance."""

    name: str
    kind: str
    ranks: int
    description: str
    sources: tuple[str, ...]


def preset_names() -> list[str]:
    """Names of the shipped presets, sorted (without ``xN`` variants)."""
    return list(preset_file_names())


def _split_suffix(name: str, names: list[str]) -> tuple[str, str] | None:
    """``("dgx-h100", "16")`` for ``"dgx-h100x16"``: the longest preset followed by ``x``."""
    for base in sorted(names, key=len, reverse=True):
        if name.startswith(base + "x"):
            return base, name[len(base) + 1 :]
    return None


# NOTE: specs are frozen, so each preset's is built once per process (its file is parsed once:
# :func:`~commsim.topology.preset_files.preset_data`).
@functools.cache
def _read_preset(name: str) -> TopologySpec:
    spec = spec_from_dict(preset_data(name), f"preset {name!r}")
    return dataclasses.replace(spec, name=name)


#: ``+OPTION`` suffixes of GPU presets: each turns on a feature the fabric may have.
PRESET_OPTIONS = {
    "sharp": "InfiniBand SHARP: the fabric switch reduces in-network (the collnet algorithm)",
}
#: A SHARP port's share of the NIC bandwidth while the switch reduces: NCCL's tuner counts
#: CollNet at 0.9 of the network bus bandwidth (src/graph/tuning.cc, ``busBw *= .9``).
SHARP_EFFICIENCY = 0.9


def _split_options(name: str) -> tuple[str, list[str]]:
    """``("dgx-h100x12", ["sharp"])`` for ``"dgx-h100x12+sharp"``."""
    base, *options = name.split("+")
    return base, options


def preset_spec(name: str) -> TopologySpec:
    """The spec of preset ``name``, which may carry an ``xN`` node-count suffix and ``+OPTION``
    suffixes (:data:`PRESET_OPTIONS`).

    Raises
    ------
    SpecError
        Unknown preset, a malformed suffix, N < 1, or a suffix on a non-hierarchical preset.
    """
    base, options = _split_options(name)
    if options:
        spec = _preset_spec(base)
        for option in options:
            if option not in PRESET_OPTIONS:
                raise SpecError(
                    f"topology {name!r}: unknown option '+{option}' "
                    f"(known: {', '.join('+' + o for o in PRESET_OPTIONS)})"
                )
            if not isinstance(spec, HierarchicalSpec):
                raise SpecError(f"topology {name!r}: +{option} needs a multi-node GPU preset")
            inter = dataclasses.replace(
                spec.inter, reduction_bandwidth_Bps=spec.inter.bandwidth_Bps * SHARP_EFFICIENCY
            )
            spec = dataclasses.replace(spec, inter=inter)
        return dataclasses.replace(spec, name=name)
    return _preset_spec(name)


def _preset_spec(name: str) -> TopologySpec:
    names = preset_names()
    if name in names:
        return _read_preset(name)
    split = _split_suffix(name, names)
    if split is None:
        raise SpecError(f"unknown preset {name!r} (presets: {', '.join(names)})")
    base, count = split
    if not count.isdigit() or int(count) < 1:
        raise SpecError(
            f"topology {name!r}: bad node-count suffix 'x{count}' "
            f"(want xN with N >= 1, e.g. {base}x4)"
        )
    spec = _read_preset(base)
    data = preset_data(base)
    if isinstance(data, dict) and data.get("kind") == "server":  # N such servers
        more = server.with_nodes(data, int(count), f"[x{count}]")
        return dataclasses.replace(spec_from_dict(more, f"topology {name!r}"), name=name)
    if not isinstance(spec, HierarchicalSpec):
        raise SpecError(
            f"topology {name!r}: the xN suffix needs a hierarchical GPU preset, "
            f"and {base!r} is a {spec.kind} topology"
        )
    nodes = spec.nodes * int(count)
    try:
        return dataclasses.replace(
            spec,
            name=name,
            nodes=nodes,
            description=f"{spec.description} [x{count}: {nodes} nodes]".strip(),
        )
    except SpecError as exc:  # too many ranks for the kind
        raise SpecError(f"topology {name!r}: {exc}") from None


def list_presets() -> list[PresetInfo]:
    """Every preset with its kind, rank count, description and sources (for the CLI listing)."""
    infos = []
    for name in preset_names():
        spec = _read_preset(name)
        infos.append(
            PresetInfo(
                name=name,
                kind=spec.kind,
                ranks=spec.num_ranks,
                description=spec.description,
                sources=spec.sources,
            )
        )
    return infos


def topology_spec(ref: TopologySpec | str | Path | Mapping[str, object]) -> TopologySpec:
    """Resolve a preset name (``xN`` allowed), a YAML file path or parsed YAML to a spec.

    A string is a preset if it names one (possibly with ``xN``), else a file path.
    """
    if isinstance(ref, TopologySpec):
        return ref
    if isinstance(ref, Mapping):
        return spec_from_dict(ref)
    if isinstance(ref, str | Path):
        names = preset_names()
        if isinstance(ref, str) and _is_preset(ref):
            return preset_spec(ref)
        path = Path(ref)
        if path.is_file():
            spec = read_spec_file(path)
            return spec if spec.name else dataclasses.replace(spec, name=path.stem)
        raise SpecError(
            f"unknown topology {str(ref)!r} (not a preset or a file; presets: {', '.join(names)})"
        )
    raise SpecError(
        f"a topology must be a preset name, a YAML file, a dict or a Network, got {ref!r}"
    )


def load_topology(ref: TopologyRef, *, ranks: int | None = None) -> Network:
    """The :class:`~commsim.network.Network` for a preset, a YAML file, a dict or a Network.

    Parameters
    ----------
    ref : Network, TopologySpec, str, Path or mapping
        ``"dgx-h100"``, ``"dgx-h100x4"``, ``"topo.yaml"``, ``Path("topo.yaml")``, parsed YAML
        (``{"kind": "ring", ...}``), a spec, or a Network (returned as is).
    ranks : int, optional
        Keep only the first ``ranks`` ranks (filling hosts in order); more than the topology
        has is an error.

    Raises
    ------
    SpecError
        One line naming the unknown topology, the file, or the field path and value.

    Examples
    --------
    >>> net = load_topology({"kind": "torus", "dims": [4, 4],
    ...                      "link": {"latency": "1us", "bandwidth": "45GB/s"}})
    >>> net.ranks, len(net.links)
    (16, 64)
    >>> load_topology("dgx-a100x2", ranks=12).ranks
    12
    """
    if isinstance(ref, Network):
        network = ref
    elif isinstance(ref, str) and _is_preset(ref):
        network = _preset_network(ref)
    else:
        network = _build(topology_spec(ref))
    return network if ranks is None else network.with_ranks(ranks)


#: Networks of presets with at most this many ranks are kept (see :func:`_preset_network`).
CACHED_PRESET_RANKS = 8192


def _is_preset(name: str) -> bool:
    names = preset_names()
    name = _split_options(name)[0]
    return name in names or _split_suffix(name, names) is not None


# NOTE: a preset's network is immutable (frozen, built from package data), so the few last
# used are kept and shared: a sweep naming its topology by preset then builds it once and
# reuses its cached routes and pair costs, 5-10x more predictions per second
# (benchmarks/sweep_throughput.py). Networks above CACHED_PRESET_RANKS are rebuilt each time
# rather than kept alive (hundreds of MB at 65,536 ranks).
@functools.lru_cache(maxsize=8)
def _cached_preset_network(name: str) -> Network:
    return _build(preset_spec(name))


def _preset_network(name: str) -> Network:
    spec = preset_spec(name)
    if spec.num_ranks <= CACHED_PRESET_RANKS:
        return _cached_preset_network(name)
    return _build(spec)


def _build(spec: TopologySpec) -> Network:
    with paused_gc():  # 65,536 GPUs are 74k devices and 262k links (commsim.gcpause)
        return build_network(spec)
