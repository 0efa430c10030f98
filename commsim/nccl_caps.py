"""NCCL's bandwidth caps and protocol factors, per release: the "model refinements" of
``src/graph/tuning.cc`` (``ncclTopoTuneModel``), which bound the bus bandwidth each
(algorithm, protocol) reaches. commsim times a call at those bounds.

Each :class:`Caps` is one release's, read at NVIDIA/nccl's release commits (the release from
``makefiles/version.mk`` at the same commit; 2.28.3 in the fork zhanglin496/nccl-2.28.3-1):
2.7.5 (01afd20), 2.8.3 (920dbe5), 2.10.3 (7e51592), 2.15.1 (da8152e), 2.17.1 (5d3ab08),
2.18.1 (d97a32f), 2.18.3 (ea38312), 2.20.3 (b647562), 2.23.4 (a6979c9), 2.25.1 (80f6bda),
2.26.2 (f44ac75), 2.28.7 (ae7aed1), 2.29.2 (ebd1e92). A release between two read uses the
older one; releases are told apart down to the patch, a release named without one being the
newest of its minor series read (``2.18`` has 2.18.3's caps, ``2.18.1`` 2.18.1's). Each
row is the one NCCL picks for that GPU generation in that release: before a generation had a
row of its own, NCCL's index fell on another's (the Volta row for anything but Ampere until
2.14, Hopper's for Blackwell from 2.17 until 2.23).

>>> caps("2.26").tree["blackwell"], caps("2.28").tree["blackwell"]
((77.4, 82.8, 72.0), (70.0, 42.8, 24.0))
>>> caps("2.18.1").tree["hopper"][2], caps("2.18").tree["hopper"][2]
(33.0, 36.0)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from commsim.nccl_tables import Protocol, newest_read
from commsim.topology.nccl_spec import NCCL_NIC_PATHS, parse_nccl_version

#: Per-channel bus bandwidth caps in GB/s for one node, two nodes, and more.
Row = tuple[float, float, float]


def _each(value: float) -> Row:
    return (value, value, value)


def _archs(volta: Row, ampere: Row, hopper: Row, blackwell: Row) -> dict[str, Row]:
    return {"volta": volta, "ampere": ampere, "hopper": hopper, "blackwell": blackwell}


@dataclass(frozen=True, slots=True)
class Caps:
    """One release's bandwidth rules (GB/s). ``tree``: ``perChMaxTreeBws`` (None: 2.7.5's
    whole-bus ``maxTreeBw``); ``tree_ll128``, ``ring_ll128``: the LL128 per-channel caps
    (all_reduce's, where ``ll128_by_collective`` names the others' before 2.10);
    ``tree_efficiency``: the tree's ``busBw x``; ``tree_ll128_across``: the tree's LL128 factor
    across nodes (7/9 on one); ``ring_ll128_one_per_node``: the ring's LL128 factor with one GPU
    per node (0.92 with more); ``tree_one_per_node``: the tree's factor with one GPU per node
    (its graph's pattern ``TREE``: all NIC traffic through one GPU); ``bus``: a bus bandwidth
    cap on every algorithm; ``ll_one_node``: ``llMaxBws`` on one node (none before 2.8)."""

    release: str
    tree_efficiency: float
    tree_ll128_across: float
    tree: dict[str, Row] | None
    tree_ll128: dict[str, Row]
    ring_ll128: dict[str, Row]
    ll_one_node: dict[str, float] | None
    ring_ll128_one_per_node: float = 0.7
    tree_one_per_node: float = 1.0
    bus: dict[str, float] = field(default_factory=dict)
    ll128_by_collective: dict[str, float] = field(default_factory=dict)


_V2_7 = Caps(
    "2.7.5", tree_efficiency=0.9, tree_ll128_across=0.915, tree=None,
    tree_ll128=_archs(*[_each(16.7 * 7 / 9)] * 4), ring_ll128=_archs(*[_each(16.7)] * 4),
    ll_one_node=None, bus={"ampere": 235.0},
    ll128_by_collective={"broadcast": 18.8, "reduce": 12.0, "all_gather": 18.3,
                         "reduce_scatter": 15.2})
_V2_8 = replace(
    _V2_7, release="2.8.3", tree_efficiency=0.92,
    tree=_archs((26.5, 18.5, 10.0), (24.0, 22.5, 16.0), (26.5, 18.5, 10.0), (26.5, 18.5, 10.0)),
    tree_ll128=_archs(*[_each(16.9)] * 4), ring_ll128=_archs(*[_each(16.9)] * 4),
    ll_one_node={"volta": 39.0, "ampere": 87.7, "hopper": 39.0, "blackwell": 39.0})
_V2_10 = replace(
    _V2_8, release="2.10.3", tree_ll128_across=120 / 128,
    tree=_archs((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (26.5, 18.5, 10.0), (26.5, 18.5, 10.0)),
    tree_ll128=_archs(*[_each(20.0)] * 4), ring_ll128=_archs(*[_each(20.0)] * 4),
    ll128_by_collective={})
# 2.15.1: Hopper's tree row (a copy of Ampere's); its llMaxBws were not read (2.10's taken).
_V2_15 = replace(
    _V2_10, release="2.15.1",
    tree=_archs((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (24.0, 23.6, 17.8), (26.5, 18.5, 10.0)))
_LL128_V2_17 = _archs(_each(20.0), _each(20.0), _each(36.7), _each(36.7))
_V2_17 = replace(
    _V2_15, release="2.17.1",
    tree=_archs((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 33.0), (38.7, 41.4, 33.0)),
    tree_ll128=_LL128_V2_17, ring_ll128=_LL128_V2_17,
    ll_one_node={"volta": 39.0, "ampere": 87.7, "hopper": 87.7, "blackwell": 87.7},
    bus={"ampere": 235.0, "hopper": 370.0})
_V2_18 = replace(_V2_17, release="2.18.1", bus={})
_V2_18_3 = replace(
    _V2_18, release="2.18.3",
    tree=_archs((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (38.7, 41.4, 36.0)),
    tree_ll128=_archs(_each(20.0), _each(20.0), (36.7, 36.7, 29.0), (36.7, 36.7, 29.0)),
    tree_one_per_node=0.85)
_V2_21 = replace(
    _V2_18_3, release="2.21.5",
    ll_one_node={"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 141.0})
_V2_23 = replace(_V2_21, release="2.23.4", ring_ll128_one_per_node=0.92)
_V2_25 = replace(
    _V2_23, release="2.25.1",
    tree={**_V2_23.tree, "blackwell": (2 * 38.7, 2 * 41.4, 2 * 36.0)},  # type: ignore[dict-item]
    tree_ll128={**_V2_23.tree_ll128, "blackwell": (2 * 36.7, 2 * 36.7, 2 * 29.0)},
    ring_ll128={**_V2_23.ring_ll128, "blackwell": _each(2 * 36.7)},
    ll_one_node={"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0})
_V2_28 = replace(
    _V2_25, release="2.28.3",
    tree={**_V2_25.tree, "blackwell": (70.0, 42.8, 24.0)},  # type: ignore[dict-item]
    tree_ll128={**_V2_25.tree_ll128, "blackwell": (55.6, 31.67, 20.0)})
_V2_28_7 = replace(_V2_28, release="2.28.7",
                   ring_ll128={**_V2_28.ring_ll128, "blackwell": (2 * 36.7, 34.6, 2 * 36.7)})
_V2_29 = replace(_V2_28_7, release="2.29.2",
                 ring_ll128={**_V2_28.ring_ll128, "blackwell": (34.5, 34.6, 34.5)})

#: Known releases, oldest first (2.21.5's and 2.23.4's differ from their predecessors only in
#: the rules named there: the LL cap of Hopper and Blackwell on one node, the ring's LL128 with
#: one GPU per node).
RELEASES: tuple[Caps, ...] = (_V2_7, _V2_8, _V2_10, _V2_15, _V2_17, _V2_18, _V2_18_3, _V2_21,
                              _V2_23, _V2_25, _V2_28, _V2_28_7, _V2_29)

#: 2.7.5's ``maxTreeBw`` (GB/s, the whole bus): (more than two nodes, Ampere under LL128).
MAX_TREE_BW_2_7 = {(False, False): 110.0, (False, True): 130.0,
                   (True, False): 80.0, (True, True): 105.0}
#: ``llMaxBws`` across nodes, by the hosts' CPU (from 2.8.3): (two nodes, more).
LL_MAX_BW_ACROSS = {"amd": (22.5, 19.0), "other": (39.0, 20.4)}
#: The tree's LL factor (on top of its efficiency).
TREE_LL_FACTOR = 1 / 3.8
#: The tree's LL128 factor on one node.
TREE_LL128_ONE_NODE = 7 / 9


#: The patch number a release named without one is read as: the last of its minor series.
ANY_PATCH = 1_000


def release_key(version: str) -> tuple[int, int, int]:
    """``version`` as (major, minor, patch), the patch :data:`ANY_PATCH` where not given.

    >>> release_key("2.18.3"), release_key("2.19")
    ((2, 18, 3), (2, 19, 1000))
    """
    major, minor = parse_nccl_version(version)
    parts = str(version).split(".")
    digits = parts[2].split("+")[0] if len(parts) > 2 else ""
    return major, minor, int(digits) if digits.isdigit() else ANY_PATCH


@functools.lru_cache(maxsize=64)
def caps(version: str) -> Caps:
    """The bandwidth rules NCCL ``version`` runs with (the newest release read not after it;
    2.7.5's for anything older)."""
    return newest_read(RELEASES, release_key(version), release_key)


def _index(nodes: int) -> int:
    return 0 if nodes <= 1 else 1 if nodes == 2 else 2


def ll_max_bw(version: str, arch: str, cpu: str | None, nodes: int) -> float:
    """NCCL's LL bus bandwidth cap in GB/s (``llMaxBws``; inf before 2.8): on one node by GPU
    generation, across nodes by the hosts' CPU.

    >>> ll_max_bw("2.20", "hopper", None, 1), ll_max_bw("2.21", "hopper", None, 1)
    (87.7, 141.0)
    >>> ll_max_bw("2.23", "hopper", "amd", 2), ll_max_bw("2.23", "hopper", "intel", 4)
    (22.5, 20.4)
    """
    rows = caps(version).ll_one_node
    if rows is None:
        return float("inf")
    if nodes > 1:
        return LL_MAX_BW_ACROSS["amd" if cpu == "amd" else "other"][0 if nodes == 2 else 1]
    return rows[arch]


def ll128_cap(version: str, arch: str, family: str, nodes: int, collective: str) -> float:
    """NCCL's LL128 bus bandwidth cap per channel in GB/s for ``family`` (ring or tree).

    >>> ll128_cap("2.19", "hopper", "tree", 4, "all_reduce"), ll128_cap("2.7", "ampere",
    ...     "ring", 1, "reduce")
    (29.0, 12.0)
    """
    entry = caps(version)
    if family == "tree":
        return entry.tree_ll128[arch][_index(nodes)]
    by_collective = entry.ll128_by_collective.get(collective)
    return by_collective if by_collective is not None else entry.ring_ll128[arch][_index(nodes)]


def bus_cap(version: str, arch: str | None) -> float:
    """A bus bandwidth cap NCCL's tuner puts on every algorithm of ``arch`` in GB/s (Ampere
    235 until 2.17, Hopper 370 in 2.17; inf elsewhere)."""
    return caps(version).bus.get(arch or "", float("inf"))


#: When NCCL first runs LL128 by default on each GPU generation (tuning.cc, its
#: compute-capability whitelist: Volta and Ampere from the first release read, Hopper from
#: 2.15.1, Blackwell from 2.25.1).
LL128_ARCH_FROM = {"volta": (2, 0, 0), "ampere": (2, 0, 0), "hopper": (2, 15, 1),
                   "blackwell": (2, 25, 1)}
#: Across nodes NCCL runs LL128 only where a GPU's path to its NIC is at most ``pxb``, or, on
#: Hopper and newer from 2.17.1, at most ``pxn`` (tuning.cc ``typeInter``).
LL128_PXN_FROM = (2, 17, 1)
#: NCCL's path types from a GPU to its NIC, nearest first: those a topology states
#: (:data:`~commsim.topology.nccl_spec.NCCL_NIC_PATHS`) with ``pxn``, a NIC reached through another
#: GPU, after ``p2c``; ``None`` (not stated) reads as ``pxb``.
_AFTER_P2C = NCCL_NIC_PATHS.index("p2c") + 1
NIC_PATH_ORDER = (*NCCL_NIC_PATHS[:_AFTER_P2C], "pxn", *NCCL_NIC_PATHS[_AFTER_P2C:])
#: The release NCCL first types a path over NVLink-C2C to the CPU and on to its PCIe NIC as
#: ``p2c`` (topo.h, paths.cc; read in 2.27.5, not in 2.26.2); before it such a path is ``phb``.
P2C_FROM = (2, 27, 5)


def ll128_enabled(version: str, arch: str | None, nic_path: str | None,
                  multi_node: bool) -> bool:
    """Whether NCCL runs LL128 by default for ``arch`` (NVLink inside the hosts assumed, as
    tuning.cc also asks): the GPU generation is on the release's whitelist and, across nodes,
    the path from a GPU to its NIC is near enough (:data:`LL128_PXN_FROM`, :data:`P2C_FROM`).

    >>> [ll128_enabled(v, "hopper", "p2c", True) for v in ("2.26.2", "2.27.5")]
    [False, True]
    """
    if arch is None:
        return True
    release = release_key(version)
    if release < LL128_ARCH_FROM[arch]:
        return False
    if not multi_node:
        return True
    path = nic_path or "pxb"
    if path == "p2c" and release < P2C_FROM:
        path = "phb"
    limit = "pxn" if arch in ("hopper", "blackwell") and release >= LL128_PXN_FROM else "pxb"
    return NIC_PATH_ORDER.index(path) <= NIC_PATH_ORDER.index(limit)


def tree_cap_Bps(version: str, arch: str | None, nodes: int, protocol: str, channels: int,
                 cpu: str | None = None, one_per_node: bool = False) -> float:
    """The bus bandwidth NCCL's tuner lets its tree reach under ``protocol`` (bytes/s; inf
    without an arch): ``channels x perChMaxTreeBws`` (2.7.5: ``maxTreeBw``), LL's x 1/3.8 and
    at most ``llMaxBw``, LL128's x its factor and at most ``channels x`` its own cap; all x
    the release's ``tree_one_per_node`` with one GPU per node.

    >>> tree_cap_Bps("2.7", "ampere", 16, "Simple", 16) / 1e9
    80.0
    >>> round(tree_cap_Bps("2.28", "blackwell", 4, "LL128", 16) / 1e9, 1)
    320.0
    """
    if arch is None:
        return float("inf")
    entry = caps(version)
    if entry.tree is None:
        simple = MAX_TREE_BW_2_7[(nodes > 2, arch == "ampere" and protocol == "LL128")]
    else:
        simple = channels * entry.tree[arch][_index(nodes)]
    cap = min(simple, bus_cap(version, arch))
    if protocol == "LL":
        cap = min(cap * TREE_LL_FACTOR, ll_max_bw(version, arch, cpu, nodes))
    elif protocol == "LL128":
        factor = TREE_LL128_ONE_NODE if nodes <= 1 else entry.tree_ll128_across
        cap = min(cap * factor, channels * ll128_cap(version, arch, "tree", nodes, "all_reduce"))
    return cap * (entry.tree_one_per_node if one_per_node else 1.0) * 1e9


#: LL's bus bandwidth as a fraction of the links' (tuning.cc's "model refinements", releases
#: 2.8 to 2.20): the ring's ``1/4`` for all_reduce and reduce or across nodes, else ``1/3``.
#: From 2.21.5 the ring's is ``1/2``. LL carries 8 bytes of data per 16-byte line; the rest is
#: what its per-line flags and polling cost in NCCL's own measurements.
LL_RING_FACTOR = {"reducing or multi-node": 1 / 4, "other": 1 / 3}
#: The release from which tuning.cc charges the ring's LL ``1/2``.
LL_HALF_FROM = (2, 21)


def bandwidth_factor(version: str, family: str, protocol: Protocol, multi_node: bool,
                     reducing: bool, one_per_node: bool = False) -> float:
    """What ``protocol`` makes of a link's bandwidth for ``family`` (before the bus caps):
    rings LL per the release (:data:`LL_RING_FACTOR`), LL128 and Simple their :class:`Protocol`
    factor (LL128 with one GPU per node the release's ``ring_ll128_one_per_node``); trees the
    release's ``tree_efficiency``, LL x 1/3.8, LL128 x 7/9 on one node or the release's factor
    across nodes, all x ``tree_one_per_node`` with one GPU per node. ``reducing``: an
    all_reduce or reduce.

    >>> from commsim.nccl_tables import PROTOCOLS
    >>> ll = PROTOCOLS[0]
    >>> [bandwidth_factor(v, "ring", ll, False, True) for v in ("2.20", "2.21")]
    [0.25, 0.5]
    """
    entry = caps(version)
    if family == "tree":
        factor = entry.tree_efficiency
        if protocol.name == "LL":
            factor *= TREE_LL_FACTOR
        elif protocol.name == "LL128":
            factor *= entry.tree_ll128_across if multi_node else TREE_LL128_ONE_NODE
        return factor * (entry.tree_one_per_node if one_per_node else 1.0)
    if protocol.name == "LL128" and one_per_node:
        return entry.ring_ll128_one_per_node
    if protocol.name != "LL":
        return protocol.bandwidth
    if parse_nccl_version(version) >= LL_HALF_FROM:
        return protocol.bandwidth
    return LL_RING_FACTOR["reducing or multi-node" if multi_node or reducing else "other"]
