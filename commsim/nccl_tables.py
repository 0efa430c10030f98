"""NCCL's tuning constants, per release where they changed, and the other fixed costs of the
measured floor (what nccl-tests' timing loop adds).

Sources (facts, not code): NVIDIA/nccl ``src/graph/tuning.cc`` (``baseLat``, ``hwLat``,
``treeCorrectionFactor``) as of the releases named below (its bandwidth caps:
:mod:`commsim.nccl_caps`);
``src/include/comm.h``/``device.h`` (``NCCL_*_THREAD_THRESHOLD``, ``NCCL_*_MAX_NTHREADS``)
and ``src/enqueue.cc`` (the per-call channel count); NVIDIA/nccl-tests ``src/common.cu``
(the timing loop) and nccl-tests issue #123 (the host cost per GPU a thread drives).

>>> tables("2.19").base_us["tree"]["LL"], tables("2.12").base_us["ring"]["LL"]
(6.8, 3.6)
>>> tables("2.19").hop_us["net"]["ring"]["Simple"], tables("2.17").hop_us["net"]["ring"]["Simple"]
(14.0, 9.6)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol as TypingProtocol
from typing import TypeVar

from commsim.algorithms.ring import MAX_CHAIN_CHUNKS
from commsim.network import Network
from commsim.topology.nccl_spec import parse_nccl_version as parse_version

#: Link classes NCCL's tuner tells apart (``NCCL_HW_NVLINK``, ``NCCL_HW_PCI``, ``NCCL_HW_NET``).
LINK_CLASSES = ("nvlink", "pcie", "net")

Table = dict[str, dict[str, float]]


@dataclass(frozen=True, slots=True)
class Tables:
    """The constants of one NCCL release: launch (base) latency per algorithm family and
    protocol, and per-hop latency per link class, family and protocol, in microseconds."""

    release: str
    base_us: Table
    hop_us: dict[str, Table]


def _fam(tree: tuple[float, float, float], ring: tuple[float, float, float],
         nvls: float = 0.0, collnet: float = 0.0) -> Table:
    names = ("LL", "LL128", "Simple")
    return {
        "tree": dict(zip(names, tree, strict=True)),
        "ring": dict(zip(names, ring, strict=True)),
        "nvls": {"Simple": nvls},
        "collnet": {"Simple": collnet},
    }


#: tuning.cc of NCCL 2.7.5 (NVIDIA/nccl commit 01afd20: Tree/Ring/CollNet, no NVLS). NVLS
#: and CollNet then had no hop latency of their own; CollNet's row is its Simple one.
_V2_7 = Tables(
    "2.7",
    base_us=_fam((4.4, 4.4, 0.0), (3.6, 10.0, 8.4)),
    hop_us={
        "nvlink": _fam((0.52, 1.2, 28.0), (0.47, 1.9, 3.4), collnet=4.0),
        "pcie": _fam((1.0, 1.9, 28.0), (1.0, 2.5, 5.7), collnet=5.5),
        "net": _fam((5.0, 8.5, 50.0), (2.7, 4.0, 9.6), collnet=10.7),
    },
)
#: tuning.cc of NCCL 2.8.3 (commit 920dbe5): 2.7.5's, but the network tree Simple hop 28 us;
#: the ring's hops as read again in 2.17.1 (used up to 2.17).
_V2_8 = Tables(
    "2.8",
    base_us=_V2_7.base_us,
    hop_us={**_V2_7.hop_us, "net": _fam((5.0, 8.5, 28.0), (2.7, 4.0, 9.6), collnet=10.7)},
)
#: tuning.cc as read in NCCL 2.19.x and 2.20.3 (commit b647562), from 2.18.1 on (the network
#: ring Simple hop 14 us): NVLS and NVLS tree added; CollNet split in Direct/Chain, the Chain
#: row used, as commsim's collnet is NCCL's chain.
_V2_18 = Tables(
    "2.18",
    base_us=_fam((6.8, 14.0, 0.0), (6.6, 14.0, 8.4)),
    hop_us={
        "nvlink": _fam((0.6, 1.25, 28.0), (0.6, 1.9, 3.4), nvls=23.0, collnet=2.8),
        "pcie": _fam((1.0, 1.9, 28.0), (1.0, 2.5, 5.7), collnet=2.8),
        "net": _fam((5.0, 8.5, 28.0), (2.7, 4.0, 14.0), nvls=18.0, collnet=30.0),
    },
)
#: tuning.cc of NCCL 2.21.5 (commit ab2b89c): NVLS's NVLink hop 25 us.
_V2_21 = Tables(
    "2.21",
    base_us=_V2_18.base_us,
    hop_us={**_V2_18.hop_us,
            "nvlink": _fam((0.6, 1.25, 28.0), (0.6, 1.9, 3.4), nvls=25.0, collnet=2.8)},
)
#: tuning.cc of NCCL 2.23.4 (commit a6979c9) to 2.28: the tree's Simple hop 4 us on NVLink and
#: PCIe, 14 us on the network, and its Simple launch 8.4 us.
_V2_23 = Tables(
    "2.23",
    base_us=_fam((6.8, 14.0, 8.4), (6.6, 14.0, 8.4)),
    hop_us={
        "nvlink": _fam((0.6, 1.25, 4.0), (0.6, 1.9, 3.4), nvls=25.0, collnet=2.8),
        "pcie": _fam((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), collnet=2.8),
        "net": _fam((5.0, 8.5, 14.0), (2.7, 4.0, 14.0), nvls=18.0, collnet=30.0),
    },
)
#: Known tables, oldest first, each that of the release named (read at NVIDIA/nccl's release
#: commits, the release from its ``makefiles/version.mk``). A release between two keys uses the
#: older key's table: between two releases read, the constants did not change where both
#: agree, and where they differ the release a constant changed in is not pinned down.
VERSIONS: tuple[Tables, ...] = (_V2_7, _V2_8, _V2_18, _V2_21, _V2_23)
#: The release assumed where a topology names none.
DEFAULT_VERSION = "2.19"


class Released(TypingProtocol):
    """Anything read at one NCCL release."""

    @property
    def release(self) -> str: ...


ReleasedT = TypeVar("ReleasedT", bound=Released)


def newest_read(entries: Sequence[ReleasedT], wanted: tuple[int, ...],
                key: Callable[[str], tuple[int, ...]] = parse_version) -> ReleasedT:
    """The newest of ``entries`` (oldest first) whose release, as ``key`` reads it, is not
    after ``wanted``; the oldest for anything older."""
    chosen = entries[0]
    for entry in entries:
        if key(entry.release) <= wanted:
            chosen = entry
    return chosen


def tables(version: str = DEFAULT_VERSION) -> Tables:
    """The constants NCCL ``version`` runs with (the newest known table not after it; 2.7's
    for anything older)."""
    return newest_read(VERSIONS, parse_version(version))


#: How a ring's latency across nodes is charged, per release (tuning.cc): before 2.18.1 an LL
#: intra-node hop x 1.8; from 2.18.1 each intra-node step at least a network overhead
#: (``getNetOverhead``: 2 us on AMD hosts, 1 us on others, x3 under Simple); from 2.23.4 with
#: one GPU per node the network hop as the tree's (``ppn == 1``). An all-reduce's inter-node
#: steps are ``2 (nodes - 1)`` in 2.7.5, 2.8.3 and from 2.23.4, ``2 nodes`` in between (read
#: in 2.20.3 and in a source of the 2.9-2.11 era).
LL_INTRA_X18_UNTIL = (2, 18)
NET_OVERHEAD_FROM = (2, 18)
NET_OVERHEAD_US = {"amd": 2.0, "other": 1.0}
PPN1_TREE_NET_FROM = (2, 23)
RING_ALL_REDUCE_2N = ((2, 9), (2, 23))


def net_overhead_s(version: str, cpu: str | None, protocol: str) -> float:
    """The least an intra-node step of a multi-node ring costs (0 before 2.18).

    >>> net_overhead_s("2.18", "amd", "Simple"), net_overhead_s("2.17", "amd", "LL")
    (6e-06, 0.0)
    """
    if parse_version(version) < NET_OVERHEAD_FROM:
        return 0.0
    us = NET_OVERHEAD_US["amd" if cpu == "amd" else "other"]
    return us * (3 if protocol == "Simple" else 1) * 1e-6


def ring_inter_steps(version: str, all_reduce: bool, nodes: int) -> int:
    """The steps of a ring across ``nodes`` nodes NCCL's tuner charges the network hop on.

    >>> [ring_inter_steps(v, True, 2) for v in ("2.8", "2.19", "2.23")]
    [2, 4, 2]
    >>> ring_inter_steps("2.19", False, 2)
    1
    """
    if nodes < 2:
        return 0
    if not all_reduce:
        return nodes - 1
    low, high = RING_ALL_REDUCE_2N
    return 2 * nodes if low <= parse_version(version) < high else 2 * (nodes - 1)


#: NCCL's per-call channel and thread choice (enqueue.cc): the per-thread work below which it
#: runs fewer channels (comm.h ``NCCL_LL_THREAD_THRESHOLD`` 8, ``NCCL_LL128_THREAD_THRESHOLD``
#: 8, ``NCCL_SIMPLE_THREAD_THRESHOLD`` 64; the ring's LL threshold is multiplied by the rank
#: count, tuning.cc), and the most threads per channel (``NCCL_LL_MAX_NTHREADS`` 512,
#: ``NCCL_LL128_MAX_NTHREADS`` 640, ``NCCL_SIMPLE_MAX_NTHREADS`` 512).
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}

#: Bytes one channel moves per Simple pipeline step (``stepSize``: the 4 MiB Simple buffer
#: over ``NCCL_STEPS`` = 8). A chain (broadcast, reduce) forwards a Simple step only once it
#: has arrived whole.
SIMPLE_STEP_BYTES = 512 * 1024

#: NCCL's NVLS tree chunk (enqueue.cc): from 2.21 (read in 2.21.5 and on master) it starts at
#: ``NCCL_NVLS_CHUNKSIZE`` (nvls.cc: 128 KiB by default), 64 KiB from 4 nodes; before (read in
#: the 2.18-2.19 line, where NVLS's own chunk is a fixed 128 KiB) at the 512 KiB Simple step.
#: A release between takes the older rule.
NVLS_TREE_CHUNK_FROM = (2, 21)
NVLS_CHUNK_BYTES = 128 * 1024


def nvls_tree_loop_bytes(nbytes: int, channels: int, heads: int, nodes: int,
                         version: str = DEFAULT_VERSION) -> int:
    """The bytes of one loop of NCCL's NVLS tree running an all-reduce of ``nbytes``
    (enqueue.cc, its chunk size and ``nLoops``): each of ``channels x heads`` (channel, head)
    pairs moves one chunk per loop, so the call takes ``ceil(nbytes / loop)`` loops. The chunk
    starts as :data:`NVLS_TREE_CHUNK_FROM` says, then drops to 256 KiB while the call is
    under 32 loops of it, 128 KiB under 16, 64 KiB under 4, 32 KiB under 1.

    >>> sizes = [n << 20 for n in (1, 4, 8, 16, 64, 1024, 4096)]
    >>> [-(-n // nvls_tree_loop_bytes(n, 16, 8, 2, "2.21")) for n in sizes]
    [1, 1, 1, 2, 4, 64, 256]
    >>> [-(-n // nvls_tree_loop_bytes(n, 16, 8, 2, "2.18")) for n in sizes]
    [1, 1, 1, 2, 4, 32, 64]
    """
    ops = channels * heads
    if parse_version(version) >= NVLS_TREE_CHUNK_FROM:
        chunk = NVLS_CHUNK_BYTES if nodes < 4 else min(NVLS_CHUNK_BYTES, 65536)
    else:
        chunk = SIMPLE_STEP_BYTES
    for times, smaller in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
        if nbytes < times * ops * chunk and chunk > smaller:
            chunk = smaller
    return ops * chunk


#: nccl-tests' timing loop (``src/common.cu``, ``BenchTime``): it enqueues ``iters`` calls
#: back to back, synchronizes once, and divides the wall time by ``iters``; with ``-g N`` one
#: host thread issues the call to N GPUs in a group. A call's time is then the larger of what
#: the host spends issuing it and what the GPUs spend running it. The host's cost per GPU it
#: drives: ~4 us (nccl-tests issue #123, DGX A100, ring on one channel, ``-g 2..8`` in one
#: thread: 10 -> 33.7 us, +3.9 us per GPU while NCCL's device latency grows 1.2 us per GPU).
HOST_LAUNCH_US = 4.0


def active_channels(nbytes: int, ranks: int, family: str, protocol: str,
                    channels: int) -> tuple[int, int]:
    """(channels, threads per channel) NCCL runs a call of ``nbytes`` with (enqueue.cc):
    starting from all ``channels`` and the protocol's most threads, one channel less while
    ``nbytes < channels x threads x threshold``, then half the threads (while a multiple of
    128). The ring's LL threshold is x ``ranks`` (tuning.cc); NVLS and CollNet keep theirs.

    >>> [active_channels(n, 8, "ring", "Simple", 16) for n in (64 * 1024, 1 << 20)]
    [(2, 512), (16, 512)]
    """
    threads = MAX_THREADS[protocol]
    if family in ("nvls", "collnet"):
        return channels, threads
    threshold = THREAD_THRESHOLD[protocol] * (ranks if (family, protocol) == ("ring", "LL")
                                              else 1)
    nc = channels
    while nbytes < nc * threads * threshold:
        if nc >= 2:
            nc -= 1
        elif threads % 128 == 0:
            threads //= 2
        else:
            break
    return nc, threads


#: The most transfers a chain's pieces may make (``(ranks - 1) x pieces``): a simulation
#: budget, not NCCL's; a chain of many ranks still gets commsim's ``max(64, 4 (ranks - 1))``.
CHAIN_TRANSFERS = 16_384


def chain_chunks(nbytes: int, ranks: int, protocol: str, nc: int) -> int:
    """Pieces of a pipelined chain (broadcast, reduce) on ``nc`` channels, as fine as NCCL
    forwards them: a Simple step (512 KiB per channel) moves on only once whole, so never
    more pieces than NCCL's steps; LL and LL128 forward each line as its flag lands (a
    stream), so as many pieces as commsim affords. At most :data:`CHAIN_TRANSFERS`
    transfers, never fewer than commsim's ring chains allow (``max(64, 4 (ranks - 1))``).
    Each piece's hop latency is scaled by :func:`chain_latency_scale`.

    >>> chain_chunks(1 << 20, 8, "LL128", 16), chain_chunks(64 << 20, 8, "Simple", 16)
    (2340, 8)
    """
    limit = max(MAX_CHAIN_CHUNKS, 4 * (ranks - 1), CHAIN_TRANSFERS // max(ranks - 1, 1))
    if protocol != "Simple":
        return max(1, min(limit, nbytes))
    return max(1, min(limit, -(-nbytes // (nc * SIMPLE_STEP_BYTES))))


def chain_latency_scale(ranks: int, pieces: int) -> float:
    """What a chain of ``pieces`` pieces over ``ranks`` ranks scales each hop's latency by so
    that the chain pays it once per hop, as NCCL does: it keeps ``NCCL_STEPS`` (8) steps of a
    channel in flight, and its tuner charges a ring's latency as its steps x ``hwLat``, not
    per piece. commsim's chain pays a hop's latency with every piece (``(pieces + ranks - 2)``
    times in turn); NCCL's ``ranks - 1``.

    >>> chain_latency_scale(8, 1), chain_latency_scale(8, 8)
    (1.0, 0.5)
    """
    return (ranks - 1) / max(pieces + ranks - 2, 1)


@dataclass(frozen=True, slots=True)
class Floor:
    """The fixed cost of one call, in seconds, as named parts that add up to :attr:`total_s`
    (the time of the call at the smallest size): ``base`` (tuning.cc baseLat), ``overhead``
    (what the machine's GPUs spend per call beyond NCCL's model: the ``nccl:`` block's
    ``overhead``, 0 unless calibrated), ``hops`` (its schedule's latency on the protocol
    network: hwLat per link class), ``host`` (the host's issue time the device does not hide:
    nccl-tests' loop, ``gpus_per_thread`` x ``host_per_gpu`` (:data:`HOST_LAUNCH_US` by
    default) beyond the device's time)."""

    base_s: float
    overhead_s: float
    hops_s: float
    host_s: float

    @property
    def parts(self) -> dict[str, float]:
        """Every part by name."""
        return {"base": self.base_s, "overhead": self.overhead_s, "hops": self.hops_s,
                "host": self.host_s}

    @property
    def total_s(self) -> float:
        """The sum of the parts."""
        return self.base_s + self.overhead_s + self.hops_s + self.host_s


#: What NCCL's tree delivers of its modelled bandwidth at medium sizes (tuning.cc
#: ``treeCorrectionFactor``: "trees are not perfectly sticking to the model for medium sizes"),
#: per protocol, indexed by ``log2(bytes / 64)`` (64 B, 128 B, ...); 1 beyond the row. As of
#: NCCL 2.7.5 (commit 01afd20, 64 B to 128 MiB) and 2.20.3 (commit b647562, to 256 MiB);
#: a release between uses the older row, as :func:`tables` does.
TREE_CORRECTION: dict[str, dict[str, tuple[float, ...]]] = {
    "2.7": {
        "LL": (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1),
        "LL128": (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9,
                  1),
        "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7,
                   .8, .9),
    },
    "2.20": {
        "LL": (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1),
        "LL128": (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
                  1, 1),
        "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
                   .8, .9, .9),
    },
}


def tree_correction(version: str, protocol: str, nbytes: int) -> float:
    """The fraction of its modelled bandwidth NCCL's tree moves a call of ``nbytes`` at
    (:data:`TREE_CORRECTION` of the newest release not after ``version``).

    >>> [tree_correction("2.19", "LL128", n) for n in (4 << 10, 1 << 20, 1 << 30)]
    [0.8, 0.6, 1.0]
    >>> [tree_correction(version, "LL128", 8 << 20) for version in ("2.19", "2.20")]
    [0.7, 0.9]
    """
    wanted = parse_version(version)
    release = min(TREE_CORRECTION, key=parse_version)
    for key in TREE_CORRECTION:
        if parse_version(key) <= wanted and parse_version(key) > parse_version(release):
            release = key
    row = TREE_CORRECTION[release][protocol]
    index = max(nbytes >> 6, 1).bit_length() - 1
    return float(row[index]) if index < len(row) else 1.0


#: The release from which tuning.cc's ring plateau is x1.4 on sm80 and newer (read in 2.18.1;
#: x1.9 before sm80), above 64 bytes per channel and rank; before it (as of 2.7.5) x1.9 from
#: ``ranks / 16 x 64 KiB`` bytes, whatever the GPU.
PLATEAU_BY_ARCH_FROM = (2, 18)


def ring_plateau(version: str, arch: str | None, nbytes: int, ranks: int,
                 channels: int) -> float:
    """What NCCL's tuner multiplies a ring Simple all_reduce's latency by across nodes
    ("plateau effect of ring", tuning.cc ``ncclTopoGetAlgoTime``): x1.9, from 2.18 x1.4 on
    Ampere and newer; 1 below its size threshold. Commsim scales the ring's hop latencies.

    >>> [ring_plateau(v, "ampere", 1 << 20, 16, 16) for v in ("2.17", "2.18")]
    [1.9, 1.4]
    >>> ring_plateau("2.17", "ampere", 1024, 16, 16)
    1.0
    """
    if parse_version(version) < PLATEAU_BY_ARCH_FROM:
        return 1.9 if nbytes >= ranks / 16 * 65536 else 1.0
    if nbytes // (channels * ranks) < 64:
        return 1.0
    return 1.9 if arch in (None, "volta") else 1.4


def hop_factor(table: Tables, link_class: str, family: str, protocol: str,
               multi_node: bool, one_per_node: bool = False) -> float:
    """How ``protocol`` scales the latency of a ``link_class`` hop for ``family``: tuning.cc's
    ``hwLat`` over that class's ring LL ``hwLat`` (a topology's latency is read as the ring LL
    hop); NVLS and CollNet hop as ring Simple. Across nodes, before 2.18 LL's intra-node hops
    x 1.8 (tuning.cc: LL flags cross PCIe to the NIC's proxy); from 2.23, with one GPU per
    node (``one_per_node``), every algorithm's network hop is the tree's."""
    row = table.hop_us[link_class]
    fam = "ring" if family in ("nvls", "collnet") else family
    release = parse_version(table.release)
    if link_class == "net" and one_per_node and release >= PPN1_TREE_NET_FROM:
        fam = "tree"
    factor = row[fam][protocol] / row["ring"]["LL"]
    if multi_node and protocol == "LL" and link_class != "net" and release < LL_INTRA_X18_UNTIL:
        factor *= 1.8
    return factor


@dataclass(frozen=True, slots=True)
class NcclConfig:
    """The ``nccl:`` block of a topology as the model reads it (defaults where absent)."""

    arch: str | None = None
    channels: int = 16
    version: str = DEFAULT_VERSION
    gpus_per_thread: int = 1
    cpu: str | None = None
    nic_path: str | None = None
    host_per_gpu_s: float = HOST_LAUNCH_US * 1e-6
    overhead_s: float = 0.0

    @classmethod
    def of(cls, network: Network) -> NcclConfig:
        """The configuration of ``network`` (all defaults without an ``nccl`` block)."""
        return cls.from_meta(network.meta.get("nccl"))

    @classmethod
    def from_meta(cls, nccl: object) -> NcclConfig:
        """The configuration an ``nccl`` block's meta describes (``NcclSpec.as_meta``; all
        defaults where it is no mapping): a key it leaves out has the model's value."""
        if not isinstance(nccl, dict):
            return cls()
        return cls(
            arch=str(nccl["arch"]) if "arch" in nccl else None,
            channels=int(nccl.get("channels", 16)),
            version=str(nccl.get("version", DEFAULT_VERSION)),
            gpus_per_thread=int(nccl.get("gpus_per_thread", 1)),
            cpu=str(nccl["cpu"]) if nccl.get("cpu") is not None else None,
            nic_path=str(nccl["nic_path"]) if nccl.get("nic_path") is not None else None,
            host_per_gpu_s=float(nccl.get("host_per_gpu", HOST_LAUNCH_US * 1e-6)),
            overhead_s=float(nccl.get("overhead", 0.0)),
        )

    @property
    def tables(self) -> Tables:
        """The constants of this NCCL release."""
        return tables(self.version)


@dataclass(frozen=True, slots=True)
class Protocol:
    """One NCCL protocol: its name and bandwidth factor. (Its per-hop latencies are per link
    class, algorithm family and NCCL release: :func:`hop_factor`.)"""

    name: str
    bandwidth: float


#: Bandwidth factors: LL carries 8 bytes of data per 16-byte line, LL128 120 of every 128,
#: Simple all of it (tuning.cc's LL128 factor 0.92; LL's data half, which NCCL's tuner charges
#: from 2.21: before it, :func:`~commsim.nccl_caps.bandwidth_factor`'s lower figures).
PROTOCOLS = (Protocol("LL", 0.5), Protocol("LL128", 0.92), Protocol("Simple", 1.0))
PROTOCOL_NAMES = tuple(p.name for p in PROTOCOLS)
