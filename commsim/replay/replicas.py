"""Replica symmetry: simulate one block of data-parallel replicas and get every replica's step.

A step whose replicas are images of one another is simulated exactly from its first *block*
(replicas ``0..B-1``) when a rank permutation ``shift`` (replica ``d`` -> ``d + B`` mod
``dp``, each rank keeping its place in its replica) is a symmetry of the whole problem:

* of the network: ``shift`` moves whole hosts (every host's ranks lie in one block), and the
  device map it induces (a host's other devices follow their host, in order; devices of no host
  stay) maps every link onto a link of the same latency and bandwidth, on the network and on
  every view a transfer runs on; every route a transfer takes maps onto the route of the image
  transfer, and crosses links of some block only, never two of one orbit;
* of the step: the graph builds each block alike (the builder's job), compute factors are the
  same on a rank and its image, and each collective spanning blocks uses a schedule that
  ``shift`` maps onto itself, checked on its transfers (:func:`fold_schedule`).

Then every task, transfer and link of block ``m`` behaves as its image in block 0, so the
simulation keeps block 0's tasks, and of each spanning collective the transfers leaving block 0;
a dependency on a transfer of another block becomes one on its image in block 0 (the
*representative* of its orbit), and each link a transfer crosses becomes its image in block
0's hosts (:class:`FoldedRouter`): a transfer from block 0 into block 1 loads block 0's
NIC-out and, standing in for the transfer from the last block into block 0, block 0's NIC-in.
Each folded link so carries, at every instant, what each of its real images carries, and the
step is the full simulation's. Where a condition fails, :class:`Unfoldable` says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from commsim.network import Network, Router
from commsim.schedule import Columns


class Unfoldable(Exception):
    """The replicas are not images of one another; the message says where."""


@dataclass(frozen=True, slots=True)
class FoldReport:
    """How many ``replicas`` a replay had and how many it ``simulated`` (all: not folded,
    for ``reason``)."""

    replicas: int
    simulated: int
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"replicas": self.replicas, "simulated": self.simulated}
        if self.reason:
            out["reason"] = self.reason
        return out

    def describe(self) -> str:
        """``16 -> 1``, or why not folded."""
        if self.reason:
            return f"no ({self.reason})"
        return f"{self.replicas} -> {self.simulated}"


@dataclass(frozen=True, slots=True)
class FoldedRouter:
    """A router whose routes cross, instead of each link, its image in block 0 (``rep``)."""

    base: Router
    rep: tuple[int, ...]

    def __call__(self, network: Network, src: int, dst: int) -> tuple[int, ...]:
        path = tuple(self.rep[link] for link in self.base(network, src, dst))
        if min(path, default=0) < 0 or len(set(path)) != len(path):
            raise Unfoldable("a route crosses a link of no block, or two images of one link")
        return path


@dataclass(frozen=True, slots=True, eq=False)
class ReplicaFold:
    """A checked symmetry of a network's ranks (see the module docstring).

    ``shift`` maps each rank to its image (ranks beyond the step's stay), ``block`` gives each
    rank's block (-1 beyond the step), ``device_image`` each device's image, ``link_image``
    each link's and ``link_rep`` its image in block 0 (-1: a link of no block)."""

    replicas: int
    blocks: int
    shift: np.ndarray
    block: np.ndarray
    device_image: np.ndarray
    link_image: np.ndarray
    link_rep: np.ndarray
    #: the ranks of block 0
    home: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", frozenset(np.flatnonzero(self.block == 0).tolist()))

    @property
    def simulated(self) -> int:
        """Replicas simulated (one block)."""
        return self.replicas // self.blocks

    def images(self) -> list[int]:
        """Each rank's image in block 0 (itself there, and beyond the step)."""
        return to_block0(np.argsort(self.shift), self.block).tolist()

    def spans(self, ranks: Sequence[int]) -> bool:
        """Whether a task on ``ranks`` spans blocks (False: it lies in block 0)."""
        if all(rank in self.home for rank in ranks):
            return False
        blocks = self.block[np.asarray(ranks, dtype=np.int64)]
        if (blocks == 0).all():
            return False
        if not (blocks == 0).any() or (blocks < 0).any():
            raise Unfoldable(f"a task on ranks {tuple(ranks)[:8]} is not block 0's")
        return True

    def folded(self, network: Network) -> Network:
        """``network`` (or a view of its links) with every route crossing block 0's images
        (the caller checks that the links it is timed on are alike, :func:`check_links`)."""
        return Network(network.name, network.devices, network.links, network.rank_devices,
                       network.gamma_s_per_B, FoldedRouter(network.router,
                                                           tuple(self.link_rep.tolist())),
                       dict(network.meta))

    def check_routes(self, network: Network, src: np.ndarray, dst: np.ndarray) -> None:
        """Unfoldable unless every route ``src[k] -> dst[k]`` (ranks) and its images are
        images of one another under ``shift`` and fold onto distinct links of block 0."""
        switches = np.asarray(network.reduction_switches, dtype=np.int64)
        endpoint = np.full(len(self.device_image), -1, dtype=np.int64)
        endpoint[switches] = network.ranks + np.arange(len(switches))
        shift = np.concatenate([self.shift, endpoint[self.device_image[switches]]])
        if (shift < 0).any():
            raise Unfoldable("a reducing switch's image does not reduce")
        width = len(shift)
        for pair in np.unique(src * width + dst).tolist():
            a, b = divmod(pair, width)
            path = np.asarray(network.route(a, b), dtype=np.int64)
            rep = self.link_rep[path]
            if (rep < 0).any() or len(np.unique(rep)) != len(rep):
                raise Unfoldable(f"the route {a} -> {b} crosses a link of no block, or two "
                                 "images of one link")
            for _ in range(self.blocks - 1):
                a, b = int(shift[a]), int(shift[b])
                path = self.link_image[path]
                if not np.array_equal(network.route(a, b), path):
                    raise Unfoldable(f"the route {a} -> {b} is not its replica's image")


def to_block0(back: np.ndarray, block: np.ndarray) -> np.ndarray:
    """Each element's image in block 0: the inverse shift ``back`` (a permutation) applied
    ``block`` times (none where ``block`` is 0 or negative)."""
    out, left = np.arange(len(back)), block.copy()
    while (left > 0).any():
        on = left > 0
        out[on] = back[out[on]]
        left[on] -= 1
    return out


def check_links(network: Network, image: np.ndarray) -> None:
    """Unfoldable unless each link's image has its latency and bandwidth (on the network, and
    on the view of a collective spanning blocks; a view of block 0's group need not be: the
    images of its transfers run on their own group's view)."""
    at = np.arange(len(image), dtype=np.int64)
    values = network.link_values(at)
    for column in (values.latency_s, values.bandwidth_Bps):
        if not np.array_equal(column, column[image]):
            bad = int(np.flatnonzero(column != column[image])[0])
            raise Unfoldable(f"link {bad} of {network.name!r} differs from its image's")


def fold_network(network: Network, shift: Sequence[int], block: Sequence[int],
                 replicas: int) -> ReplicaFold:
    """The symmetry ``shift`` of ``network``'s first ``len(shift)`` ranks, with each rank's
    ``block`` (0..blocks-1), checked on the network (Unfoldable where it fails)."""
    world = len(shift)
    shift_all = np.arange(network.ranks, dtype=np.int64)
    shift_all[:world] = shift
    block_all = np.full(network.ranks, -1, dtype=np.int64)
    block_all[:world] = block
    blocks = int(block_all.max()) + 1
    if not np.array_equal(block_all[shift_all][:world], (block_all[:world] + 1) % blocks):
        raise Unfoldable("the shift does not move each block onto the next")
    devices = _device_map(network, shift_all, block_all)
    ends = network.end_columns()
    count = len(ends.src)
    key = ends.src * len(devices) + ends.dst
    order = np.lexsort((np.arange(count), key))
    sorted_key = key[order]
    ordinal = np.empty(count, dtype=np.int64)
    ordinal[order] = np.arange(count) - np.searchsorted(sorted_key, sorted_key)
    target = devices[ends.src] * len(devices) + devices[ends.dst]
    at = np.minimum(np.searchsorted(sorted_key, target) + ordinal, count - 1)
    image = order[at]
    if not (np.array_equal(key[image], target) and len(np.unique(image)) == count):
        raise Unfoldable(f"the replicas' hosts are not wired alike in {network.name!r}")
    check_links(network, image)
    device_block = _device_blocks(network, block_all)
    ends_block = np.stack([device_block[ends.src], device_block[ends.dst]])
    link_block = ends_block.max(axis=0)
    link_block[(ends_block.min(axis=0) >= 0) & (ends_block[0] != ends_block[1])] = -1
    rep = to_block0(np.argsort(image), link_block)
    rep[link_block < 0] = -1
    return ReplicaFold(replicas, blocks, shift_all, block_all, devices, image, rep)


def _device_blocks(network: Network, block: np.ndarray) -> np.ndarray:
    """The block of each device: its host's (-1: no host, or a host of no step rank)."""
    host = network.device_hosts()
    host_block = np.full(int(host.max(initial=-1)) + 1, -1, dtype=np.int64)
    ranks = network.rank_device_array()
    on = block >= 0
    host_block[host[ranks[on]]] = block[on]
    return np.where(host >= 0, host_block[np.maximum(host, 0)], -1)


def _device_map(network: Network, shift: np.ndarray, block: np.ndarray) -> np.ndarray:
    """The device permutation ``shift`` induces (Unfoldable: a host split between blocks, or
    hosts not alike)."""
    cols = network.device_columns()
    host, ranks = cols.host, network.rank_device_array()
    if (host[ranks] < 0).any():
        raise Unfoldable(f"topology {network.name!r} has ranks on no host")
    hosts = int(host.max()) + 1
    rank_host = host[ranks]
    per_host = np.full(hosts, -2, dtype=np.int64)
    for h, b in zip(rank_host.tolist(), block.tolist(), strict=True):
        if per_host[h] not in (-2, b):
            raise Unfoldable(f"host {h} of {network.name!r} holds ranks of two replica blocks")
        per_host[h] = b
    host_map = np.arange(hosts)
    host_map[rank_host] = host[ranks[shift]]
    devices = np.full(len(host), -1, dtype=np.int64)
    devices[ranks] = ranks[shift]
    # a host's devices that hold no rank follow their host, in order
    free = np.ones(len(host), dtype=bool)
    free[ranks] = False
    for h in range(hosts):
        mine = np.flatnonzero(free & (host == h))
        theirs = np.flatnonzero(free & (host == host_map[h]))
        if len(mine) != len(theirs):
            raise Unfoldable(f"hosts {h} and {int(host_map[h])} of {network.name!r} differ")
        devices[mine] = theirs
    nohost = host < 0
    devices[nohost] = np.flatnonzero(nohost)
    whole = (np.array_equal(devices[ranks], ranks[shift])
             and np.array_equal(host_map[rank_host], host[ranks[shift]]))
    if not whole or len(np.unique(devices)) != len(devices) or len(np.unique(host_map)) != hosts:
        raise Unfoldable(f"the replicas do not map onto whole hosts of {network.name!r}")
    same = (np.array_equal(cols.kind, cols.kind[devices])
            and np.array_equal(cols.reduction_Bps, cols.reduction_Bps[devices], equal_nan=True))
    if not same:
        raise Unfoldable(f"the replicas' devices in {network.name!r} differ")
    return devices


def fold_schedule(fold: ReplicaFold, cols: Columns,
                  group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A collective's schedule (group ranks ``0..g-1``, on global ranks ``group``) folded:
    the transfers kept (those leaving block 0, in a topological order) and, for every
    transfer, the position among them of its orbit's representative.

    Unfoldable unless ``shift`` maps the group onto itself and the schedule onto itself:
    the ``k``-th transfer from ``a`` to ``b`` onto the ``k``-th from ``shift(a)`` to
    ``shift(b)``, of the same bytes and operation, dependencies onto dependencies."""
    p, n = len(group), len(cols)
    if n and max(int(cols.src.max()), int(cols.dst.max())) >= p:
        raise Unfoldable("a collective across replicas reduces in the network")
    where = np.full(len(fold.shift), -1, dtype=np.int64)
    where[group] = np.arange(p)
    rho = where[fold.shift[group]]
    if (rho < 0).any():
        raise Unfoldable(f"the group {tuple(group.tolist())[:8]}... is not its own image")
    pair = cols.src * p + cols.dst
    order = np.lexsort((np.arange(n), pair))
    sorted_pair = pair[order]
    ordinal = np.empty(n, dtype=np.int64)
    ordinal[order] = np.arange(n) - np.searchsorted(sorted_pair, sorted_pair)
    target = rho[cols.src] * p + rho[cols.dst]
    image = order[np.minimum(np.searchsorted(sorted_pair, target) + ordinal, max(n - 1, 0))]
    counts = np.diff(cols.dep_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    alike = (n == 0 or (np.array_equal(pair[image], target)
                        and np.array_equal(cols.nbytes[image], cols.nbytes)
                        and np.array_equal(cols.reduce[image], cols.reduce)
                        and len(np.unique(image)) == n
                        and np.array_equal(np.unique(owner * n + cols.dep_idx),
                                           np.unique(image[owner] * n + image[cols.dep_idx]))))
    if not alike:
        raise Unfoldable("a collective across replicas uses a schedule its replicas do not "
                         "share (not a ring in replica order)")
    block = fold.block[group[cols.src]]
    rep = to_block0(np.argsort(image), block)
    kept = np.flatnonzero(block == 0)
    depth = cols.depths()  # the images of a dependency are as deep: a topological order
    kept = kept[np.lexsort((kept, depth[kept]))]
    position = np.full(n, -1, dtype=np.int64)
    position[kept] = np.arange(len(kept))
    return kept, position[rep]
