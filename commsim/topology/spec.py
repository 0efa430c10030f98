"""Topology specs: frozen, validated descriptions of a machine before it is built.

A spec holds SI values only (``latency_s``, ``bandwidth_Bps``); human units are parsed by
:mod:`commsim.topology.loader` at the file boundary. Every spec validates itself in
``__post_init__`` and raises :class:`~commsim.errors.SpecError` naming the offending field,
so a spec built from Python is as safe as one read from YAML.

>>> LinkSpec(latency_s=1e-6, bandwidth_Bps=1e11)
LinkSpec(latency_s=1e-06, bandwidth_Bps=100000000000.0, reduction_bandwidth_Bps=None)
>>> RingSpec(ranks=0, link=LinkSpec(latency_s=0.0, bandwidth_Bps=1.0))
Traceback (most recent call last):
...
commsim.errors.SpecError: ranks: must be a positive integer (got 0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from commsim.errors import SpecError, describe
from commsim.fields import positive_int, string
from commsim.topology.nccl_spec import NcclSpec

#: Most ranks a topology may have (:attr:`TopologySpec.max_ranks`, smaller for some kinds):
#: 8192 hosts of 8 GPUs, beyond today's largest training clusters.
MAX_RANKS = 65536


def _nonempty_str(value: object, path: str) -> str:
    return string(value, path)


def _real(value: object, path: str, *, positive: bool) -> float:
    """A finite real number, > 0 when ``positive`` else >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"{path}: must be a finite number (got {describe(value)})")
    if positive and value <= 0:
        raise SpecError(f"{path}: must be > 0 (got {describe(value)})")
    if value < 0:
        raise SpecError(f"{path}: must be >= 0 (got {describe(value)})")
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSpec:
    """One full-duplex cable or switch port: latency and bandwidth per direction.

    Parameters
    ----------
    latency_s : float
        Seconds, >= 0. For a switch port it is the device-to-device latency through the
        switch (each of the port's two hops carries half of it).
    bandwidth_Bps : float
        Bytes per second per direction, > 0.
    reduction_bandwidth_Bps : float or None
        Switch ports only: the switch reduces in-network (NVSwitch NVLS, InfiniBand SHARP),
        and a port carries this many bytes per second per direction while it does (the
        ``nvls``/``collnet`` algorithms). None: the switch cannot reduce.
    """

    latency_s: float
    bandwidth_Bps: float
    reduction_bandwidth_Bps: float | None = None

    def __post_init__(self) -> None:
        _real(self.latency_s, "latency_s", positive=False)
        _real(self.bandwidth_Bps, "bandwidth_Bps", positive=True)
        if self.reduction_bandwidth_Bps is not None:
            _real(self.reduction_bandwidth_Bps, "reduction_bandwidth_Bps", positive=True)

    def as_meta(self) -> dict[str, float]:
        """The link as plain data for ``Network.meta``."""
        out = {"latency_s": float(self.latency_s), "bandwidth_Bps": float(self.bandwidth_Bps)}
        if self.reduction_bandwidth_Bps is not None:
            out["reduction_bandwidth_Bps"] = float(self.reduction_bandwidth_Bps)
        return out


def _check_link(value: object, path: str) -> None:
    if not isinstance(value, LinkSpec):
        raise SpecError(f"{path}: must be a LinkSpec (got {describe(value)})")


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologySpec:
    """Fields every topology kind accepts.

    Parameters
    ----------
    name : str or None
        Display name of the built network (default: derived from kind and size).
    description : str
        One line for ``commsim topologies``.
    sources : tuple of str
        Where the latency/bandwidth figures come from.
    gamma_s_per_B : float
        Seconds per byte reduced (0: reduction arithmetic is free).
    algorithms : tuple of (str, str)
        ``(collective, algorithm)`` pairs: the algorithm ``auto`` uses for that collective on
        this machine (e.g. gloo's fixed choices); collectives not listed are ranked as usual.
    nccl : NcclSpec or None
        The machine runs NCCL: collectives get NCCL's protocols, launch latencies and
        algorithm choice (:mod:`commsim.nccl`).
    device_info : str
        The YAML ``device:`` block (the accelerator, for ``commsim plan``) as canonical JSON;
        empty when the file has none. Built networks carry it parsed as ``meta["device"]``.
    """

    kind: ClassVar[str] = ""
    #: Most ranks this kind may have (a larger machine would not fit in memory or time).
    max_ranks: ClassVar[int] = MAX_RANKS
    name: str | None = None
    description: str = ""
    sources: tuple[str, ...] = ()
    gamma_s_per_B: float = 0.0
    algorithms: tuple[tuple[str, str], ...] = ()
    nccl: NcclSpec | None = None
    device_info: str = ""

    @property
    def num_ranks(self) -> int:
        """How many ranks the built network has."""
        raise NotImplementedError

    def _check_ranks(self) -> None:
        """SpecError when the spec has more ranks than its kind supports."""
        if self.num_ranks > self.max_ranks:
            raise SpecError(
                f"ranks: a {self.kind} topology has at most {self.max_ranks} ranks "
                f"(got {self.num_ranks})"
            )


def _check_common(spec: TopologySpec) -> None:
    # NOTE: a plain function, not super().__post_init__(): zero-argument super() breaks in
    # slotted dataclasses on Python 3.11.
    if spec.name is not None:
        _nonempty_str(spec.name, "name")
    if not isinstance(spec.description, str):
        raise SpecError(f"description: must be a string (got {describe(spec.description)})")
    if not isinstance(spec.sources, tuple):
        raise SpecError(f"sources: must be a tuple of strings (got {describe(spec.sources)})")
    for i, source in enumerate(spec.sources):
        _nonempty_str(source, f"sources[{i}]")
    _real(spec.gamma_s_per_B, "gamma", positive=False)
    _check_algorithms(spec.algorithms)
    if spec.nccl is not None and not isinstance(spec.nccl, NcclSpec):
        raise SpecError(f"nccl: must be an NcclSpec (got {describe(spec.nccl)})")


def _check_algorithms(pairs: object) -> None:
    """``algorithms``: (collective, algorithm) pairs, each collective once, the algorithm
    registered and able to run it."""
    from commsim.algorithms import get_algorithm
    from commsim.collectives import Collective

    if not isinstance(pairs, tuple):
        raise SpecError(
            f"algorithms: must be a tuple of (collective, algorithm) (got {describe(pairs)})"
        )
    seen: set[str] = set()
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise SpecError(
                f"algorithms: entries must be (collective, algorithm) (got {describe(pair)})"
            )
        collective, name = pair
        known = ", ".join(c.value for c in Collective)
        if collective not in {c.value for c in Collective}:
            raise SpecError(f"algorithms: unknown collective {collective!r} (known: {known})")
        if collective in seen:
            raise SpecError(f"algorithms.{collective}: listed twice")
        seen.add(collective)
        algorithm = get_algorithm(_nonempty_str(name, f"algorithms.{collective}"))
        if Collective(collective) not in algorithm.collectives:
            can = ", ".join(sorted(c.value for c in algorithm.collectives))
            raise SpecError(
                f"algorithms.{collective}: algorithm {algorithm.name!r} cannot run "
                f"{collective} (it runs: {can})"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class FlatSpec(TopologySpec):
    """Shared fields of the flat kinds: ``ranks`` devices of kind ``device``, one ``link``."""

    ranks: int
    link: LinkSpec
    device: str = "gpu"

    def __post_init__(self) -> None:
        _check_common(self)
        positive_int(self.ranks, "ranks")
        _check_link(self.link, "link")
        _nonempty_str(self.device, "device")
        self._check_ranks()

    @property
    def num_ranks(self) -> int:
        return self.ranks


@dataclass(frozen=True, slots=True, kw_only=True)
class RingSpec(FlatSpec):
    """``ranks`` devices, rank i cabled to rank (i+1) % ranks (one cable for 2, none for 1)."""

    kind: ClassVar[str] = "ring"


@dataclass(frozen=True, slots=True, kw_only=True)
class FullyConnectedSpec(FlatSpec):
    """``ranks`` devices with a dedicated cable between every pair (a link per ordered pair)."""

    kind: ClassVar[str] = "fully_connected"
    max_ranks: ClassVar[int] = 1024  # a link per ordered pair: a million links


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchSpec(FlatSpec):
    """``ranks`` devices, each with one port cable into a single switch (a star)."""

    kind: ClassVar[str] = "switch"


#: Most ranks a ``shared`` topology may have: its network holds a medium per rank count.
MAX_SHARED_RANKS = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedSpec(TopologySpec):
    """``ranks`` processes on one host, every byte they move crossing one shared medium.

    Models a CPU host where the "network" is the host itself: loopback transfers and local
    memory copies are both work of the same cores and memory, so they share one bandwidth
    however many ranks take part, and a message's latency grows with the processes that
    compete for the cores.

    Parameters
    ----------
    ranks : int
        Processes (ranks), at most :data:`MAX_SHARED_RANKS`.
    link : LinkSpec
        One rank's port: ``bandwidth`` is the most one transfer (or local copy) of that rank
        can move per second; ``latency`` is a message's latency when one rank is running.
    medium_bandwidth_Bps : float or None
        What all transfers and local copies share, bytes per second (None: ``link``'s).
    latency_per_rank_s : float
        Added to a message's latency for every rank in use beyond ``cores``: with ``q`` ranks
        running, a message takes ``latency + max(q - cores, 0) * latency_per_rank`` to arrive
        (more processes than cores: each wake-up waits for a core).
    cores : int
        Ranks that run without competing for a core (the host's cores).
    device : str
        Kind of the rank devices.
    """

    kind: ClassVar[str] = "shared"
    max_ranks: ClassVar[int] = MAX_SHARED_RANKS
    ranks: int
    link: LinkSpec
    medium_bandwidth_Bps: float | None = None
    latency_per_rank_s: float = 0.0
    cores: int = 1
    device: str = "cpu"

    def __post_init__(self) -> None:
        _check_common(self)
        positive_int(self.ranks, "ranks")
        positive_int(self.cores, "cores")
        self._check_ranks()
        _check_link(self.link, "link")
        if self.medium_bandwidth_Bps is not None:
            _real(self.medium_bandwidth_Bps, "medium.bandwidth", positive=True)
        _real(self.latency_per_rank_s, "latency_per_rank", positive=False)
        _nonempty_str(self.device, "device")

    @property
    def num_ranks(self) -> int:
        return self.ranks

    @property
    def medium_Bps(self) -> float:
        """The medium's bandwidth (the port's when not given)."""
        if self.medium_bandwidth_Bps is None:
            return self.link.bandwidth_Bps
        return self.medium_bandwidth_Bps

    def latency_at(self, ranks_in_use: int) -> float:
        """A message's latency when ``ranks_in_use`` ranks are running."""
        return self.link.latency_s + max(ranks_in_use - self.cores, 0) * self.latency_per_rank_s


@dataclass(frozen=True, slots=True, kw_only=True)
class TorusSpec(TopologySpec):
    """Devices on a grid ``dims`` (row-major ranks) with wrap-around cables along each axis."""

    kind: ClassVar[str] = "torus"
    dims: tuple[int, ...]
    link: LinkSpec
    device: str = "tpu"

    def __post_init__(self) -> None:
        _check_common(self)
        if not isinstance(self.dims, tuple) or not self.dims:
            raise SpecError(
                f"dims: must be a non-empty list of positive integers (got {describe(self.dims)})"
            )
        for i, size in enumerate(self.dims):
            positive_int(size, f"dims[{i}]")
        _check_link(self.link, "link")
        _nonempty_str(self.device, "device")
        self._check_ranks()

    @property
    def num_ranks(self) -> int:
        return math.prod(self.dims)


@dataclass(frozen=True, slots=True, kw_only=True)
class HierarchicalSpec(TopologySpec):
    """``nodes`` servers of ``gpus_per_node`` GPUs: NVSwitch-style node switch plus a fabric.

    ``intra`` is each GPU's port into its node's switch, ``inter`` each GPU's NIC into the
    cluster fabric; both latencies are device-to-device through the switch.
    """

    kind: ClassVar[str] = "hierarchical"
    nodes: int
    gpus_per_node: int
    intra: LinkSpec
    inter: LinkSpec
    gpu: str = "gpu"

    def __post_init__(self) -> None:
        _check_common(self)
        positive_int(self.nodes, "nodes")
        positive_int(self.gpus_per_node, "gpus_per_node")
        _check_link(self.intra, "intra")
        _check_link(self.inter, "inter")
        _nonempty_str(self.gpu, "gpu")
        self._check_ranks()

    @property
    def num_ranks(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSpec:
    """A device of a custom topology: unique ``name``, ``kind`` (gpu/tpu/cpu/switch), ``host``."""

    name: str
    kind: str = "gpu"
    host: int | None = None

    def __post_init__(self) -> None:
        _nonempty_str(self.name, "name")
        _nonempty_str(self.kind, "kind")
        if self.host is not None and (
            isinstance(self.host, bool) or not isinstance(self.host, int) or self.host < 0
        ):
            raise SpecError(f"host: must be an integer >= 0 (got {describe(self.host)})")


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomLinkSpec:
    """A cable ``src -> dst`` (device names); ``duplex`` adds the reverse link too.

    Custom links are literal hops: ``latency_s`` is this hop's own latency.
    """

    src: str
    dst: str
    latency_s: float
    bandwidth_Bps: float
    duplex: bool = True

    def __post_init__(self) -> None:
        _nonempty_str(self.src, "src")
        _nonempty_str(self.dst, "dst")
        if self.src == self.dst:
            raise SpecError(f"dst: a link cannot join {self.src!r} to itself")
        _real(self.latency_s, "latency", positive=False)
        _real(self.bandwidth_Bps, "bandwidth", positive=True)
        if not isinstance(self.duplex, bool):
            raise SpecError(f"duplex: must be true or false (got {describe(self.duplex)})")


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomSpec(TopologySpec):
    """Explicit devices and links; ``ranks`` names the rank devices in order.

    An empty ``ranks`` means every non-switch device, in device order.
    """

    kind: ClassVar[str] = "custom"
    devices: tuple[DeviceSpec, ...]
    links: tuple[CustomLinkSpec, ...]
    ranks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_common(self)
        if not isinstance(self.devices, tuple) or not self.devices:
            raise SpecError("devices: must be a non-empty list of devices")
        names: set[str] = set()
        for i, device in enumerate(self.devices):
            if not isinstance(device, DeviceSpec):
                raise SpecError(f"devices[{i}]: must be a DeviceSpec (got {describe(device)})")
            if device.name in names:
                raise SpecError(f"devices[{i}].name: duplicate device name {device.name!r}")
            names.add(device.name)
        if not isinstance(self.links, tuple):
            raise SpecError(f"links: must be a list of links (got {describe(self.links)})")
        for i, link in enumerate(self.links):
            if not isinstance(link, CustomLinkSpec):
                raise SpecError(f"links[{i}]: must be a CustomLinkSpec (got {describe(link)})")
            for end in ("src", "dst"):
                if getattr(link, end) not in names:
                    raise SpecError(f"links[{i}].{end}: unknown device {getattr(link, end)!r}")
        if not isinstance(self.ranks, tuple):
            raise SpecError(f"ranks: must be a list of device names (got {describe(self.ranks)})")
        seen: set[str] = set()
        for i, rank in enumerate(self.ranks):
            if rank not in names:
                raise SpecError(f"ranks[{i}]: unknown device {rank!r}")
            if rank in seen:
                raise SpecError(f"ranks[{i}]: device {rank!r} listed twice")
            seen.add(rank)
        if not self.rank_names:
            raise SpecError("ranks: no ranks (every device is a switch; list ranks explicitly)")
        self._check_ranks()

    @property
    def rank_names(self) -> tuple[str, ...]:
        """The rank devices' names in rank order (explicit or the default)."""
        if self.ranks:
            return self.ranks
        return tuple(d.name for d in self.devices if d.kind != "switch")

    @property
    def num_ranks(self) -> int:
        return len(self.rank_names)
