"""Python builders for notebooks: one call per kind, unit strings or SI numbers, a Network back.

>>> net = hierarchical(2, 8, intra=("2us", "370GB/s"), inter={"latency": "5us",
...                    "bandwidth": "400Gbps"})
>>> latency_s, bandwidth_Bps = net.path_cost(0, 8)
>>> net.ranks, round(latency_s * 1e6, 9), bandwidth_Bps
(16, 5.0, 50000000000.0)
>>> ring(8, latency="1us", bandwidth="0GB/s")
Traceback (most recent call last):
...
commsim.errors.SpecError: bandwidth: must be > 0 (got '0GB/s')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from commsim.errors import SpecError, describe
from commsim.network import Network
from commsim.topology.build import build_network
from commsim.topology.loader import parse_link, spec_from_dict
from commsim.topology.spec import (
    FullyConnectedSpec,
    HierarchicalSpec,
    LinkSpec,
    RingSpec,
    SwitchSpec,
    TorusSpec,
)
from commsim.units import parse_time

#: A time or bandwidth: a unit string (``"2us"``, ``"100GB/s"``) or an SI number. Unlike a
#: YAML file (or a dict given to ``load_topology``), these Python calls take plain numbers as
#: seconds and bytes per second.
Quantity = str | float | int
#: A link: a LinkSpec, ``{"latency": ..., "bandwidth": ...}`` or ``(latency, bandwidth)``.
LinkLike = LinkSpec | Mapping[str, Quantity] | tuple[Quantity, Quantity]

#: The SI unit each Python-call field's plain number is in.
_SI_UNITS = {"latency": "s", "bandwidth": "B/s", "reduction_bandwidth": "B/s"}


def _si(value: object, unit: str) -> object:
    """A plain number as the unit string the YAML reader wants (``1e-06`` -> ``"1e-06s"``,
    exact); anything else unchanged, for the reader to judge."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value!r}{unit}"
    return value


def _si_link(data: Mapping[str, object]) -> dict[str, object]:
    """A link mapping with its plain numbers given their SI units."""
    return {k: _si(v, _SI_UNITS[k]) if k in _SI_UNITS else v for k, v in data.items()}


def as_link(value: LinkLike, path: str = "link") -> LinkSpec:
    """A :class:`LinkSpec` from any :data:`LinkLike`; SpecError naming ``path`` otherwise."""
    if isinstance(value, LinkSpec):
        return value
    if isinstance(value, Mapping):
        return parse_link(_si_link(value), path)
    if isinstance(value, tuple | list) and len(value) == 2:
        return parse_link(_si_link({"latency": value[0], "bandwidth": value[1]}), path)
    raise SpecError(
        f"{path}: must be a LinkSpec, {{latency, bandwidth}} or (latency, bandwidth) "
        f"(got {describe(value)})"
    )


def _one_link(
    kind: type[RingSpec | FullyConnectedSpec | SwitchSpec],
    ranks: int,
    latency: Quantity,
    bandwidth: Quantity,
    device: str,
    gamma: Quantity,
    name: str | None,
) -> Network:
    """A topology of one link class (ring, fully connected, switch) from a Python call."""
    link = as_link((latency, bandwidth), "")
    return build_network(
        kind(ranks=ranks, link=link, device=device, name=name,
             gamma_s_per_B=parse_time(gamma, "gamma"))
    )


def ring(
    ranks: int,
    *,
    latency: Quantity,
    bandwidth: Quantity,
    device: str = "gpu",
    gamma: Quantity = 0.0,
    name: str | None = None,
) -> Network:
    """Rank i cabled to rank (i+1) % ranks; ``bandwidth`` per direction, ``latency`` per hop."""
    return _one_link(RingSpec, ranks, latency, bandwidth, device, gamma, name)


def fully_connected(
    ranks: int,
    *,
    latency: Quantity,
    bandwidth: Quantity,
    device: str = "gpu",
    gamma: Quantity = 0.0,
    name: str | None = None,
) -> Network:
    """A dedicated link for every ordered pair of ranks."""
    return _one_link(FullyConnectedSpec, ranks, latency, bandwidth, device, gamma, name)


def switch(
    ranks: int,
    *,
    latency: Quantity,
    bandwidth: Quantity,
    device: str = "gpu",
    gamma: Quantity = 0.0,
    name: str | None = None,
) -> Network:
    """A star: each rank's port into one switch; ``latency`` is device -> switch -> device."""
    return _one_link(SwitchSpec, ranks, latency, bandwidth, device, gamma, name)


def shared(
    ranks: int,
    *,
    latency: Quantity,
    bandwidth: Quantity,
    medium: Quantity | None = None,
    latency_per_rank: Quantity = 0.0,
    cores: int = 1,
    device: str = "cpu",
    gamma: Quantity = 0.0,
    algorithms: Mapping[str, str] | None = None,
    name: str | None = None,
) -> Network:
    """Processes on one host sharing one medium (see ``docs/topologies.md``, kind ``shared``).

    >>> net = shared(4, latency="100us", bandwidth="2GB/s", latency_per_rank="50us", cores=2)
    >>> [round(net.with_ranks(q).path_cost(0, 1)[0] * 1e6, 6) for q in (2, 3, 4)]
    [100.0, 150.0, 200.0]
    """
    data: dict[str, Any] = {
        "kind": "shared",
        "ranks": ranks,
        "link": _si_link({"latency": latency, "bandwidth": bandwidth}),
        "latency_per_rank": _si(latency_per_rank, "s"),
        "cores": cores,
        "device": device,
        "gamma": _si(gamma, "s"),
    }
    if medium is not None:
        data["medium"] = {"bandwidth": _si(medium, "B/s")}
    if algorithms:
        data["algorithms"] = dict(algorithms)
    if name is not None:
        data["name"] = name
    return build_network(spec_from_dict(data))


def torus(
    dims: Sequence[int],
    *,
    latency: Quantity,
    bandwidth: Quantity,
    device: str = "tpu",
    gamma: Quantity = 0.0,
    name: str | None = None,
) -> Network:
    """Wrap-around cables along each dimension; ranks in row-major order of coordinates.

    >>> torus([4, 4, 4], latency="1us", bandwidth="45GB/s").path_cost(0, 63)
    (3e-06, 45000000000.0)
    """
    # a non-sequence is passed through for TorusSpec to reject with a field-named error
    shape: Any = tuple(dims) if isinstance(dims, Sequence) and not isinstance(dims, str) else dims
    link = as_link((latency, bandwidth), "")
    return build_network(
        TorusSpec(
            dims=shape,
            link=link,
            device=device,
            name=name,
            gamma_s_per_B=parse_time(gamma, "gamma"),
        )
    )


def hierarchical(
    nodes: int,
    gpus_per_node: int,
    *,
    intra: LinkLike,
    inter: LinkLike,
    gpu: str = "gpu",
    gamma: Quantity = 0.0,
    name: str | None = None,
) -> Network:
    """``nodes`` servers of ``gpus_per_node`` GPUs; ``intra`` per-GPU switch port, ``inter`` NIC.

    Both latencies are GPU-to-GPU through the switch (each directed hop carries half).
    """
    return build_network(
        HierarchicalSpec(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            intra=as_link(intra, "intra"),
            inter=as_link(inter, "inter"),
            gpu=gpu,
            name=name,
            gamma_s_per_B=parse_time(gamma, "gamma"),
        )
    )


def custom(
    devices: Sequence[Mapping[str, object]],
    links: Sequence[Mapping[str, object]],
    ranks: Sequence[str] | None = None,
    *,
    gamma: Quantity = 0.0,
    name: str | None = None,
) -> Network:
    """Explicit devices (``{name, kind, host}``) and links (``{src, dst, latency, bandwidth,
    duplex}``), as in a ``kind: custom`` YAML file; shortest-path routing.

    >>> net = custom([{"name": "a"}, {"name": "sw", "kind": "switch"}, {"name": "b"}],
    ...              [{"src": "a", "dst": "sw", "latency": "1us", "bandwidth": "10GB/s"},
    ...               {"src": "sw", "dst": "b", "latency": "1us", "bandwidth": "20GB/s"}])
    >>> net.ranks, net.path_cost(0, 1)
    (2, (2e-06, 10000000000.0))
    """
    data: dict[str, object] = {
        "kind": "custom",
        "devices": list(devices),
        "links": [_si_link(link) if isinstance(link, Mapping) else link for link in links],
        "gamma": _si(gamma, "s"),
    }
    if ranks is not None:
        data["ranks"] = list(ranks)
    if name is not None:
        data["name"] = name
    return build_network(spec_from_dict(data))
