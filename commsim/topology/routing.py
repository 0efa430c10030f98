"""Routers of the parametric topologies: O(path length), no graph search.

Each router is a small frozen dataclass whose instances are callables with the
:data:`commsim.network.Router` signature ``(network, src_device, dst_device) -> link ids``.
Being module-level classes, they pickle with the :class:`~commsim.network.Network` (for
parallel sweeps). They rely on the link layout their builder in
:mod:`commsim.topology.build` produces, documented on each class.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commsim.network import Network, shortest_path_router


@dataclass(frozen=True, slots=True)
class TorusRouter:
    """Dimension-ordered routing on a torus (a ring is a 1-D torus).

    Dimension 0 is corrected first, then 1, and so on; along each dimension the route takes
    the shorter way round, and on a tie (an even size, half-way) the ``+`` direction.
    ``table[device][2*d]`` is the link from ``device`` to its ``+`` neighbour along ``d``,
    ``table[device][2*d+1]`` to its ``-`` neighbour (-1 where none: a size-1 dimension).
    """

    dims: tuple[int, ...]
    strides: tuple[int, ...]
    table: tuple[tuple[int, ...], ...]

    def __call__(self, network: Network, src: int, dst: int) -> tuple[int, ...]:
        path: list[int] = []
        links = network.links
        here = src
        for d, size in enumerate(self.dims):
            stride = self.strides[d]
            delta = ((dst // stride) % size - (src // stride) % size) % size
            if delta == 0:
                continue
            slot, hops = (2 * d, delta) if delta <= size - delta else (2 * d + 1, size - delta)
            for _ in range(hops):
                link = self.table[here][slot]
                path.append(link)
                here = links[link].dst
        return tuple(path)

    def paths(self, network: Network, src: np.ndarray,
              dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each route ``src[k] -> dst[k]``'s length and their links, concatenated in pair
        order, each route in hop order, as :meth:`__call__` walks them one by one."""
        table = network.structural("torus_table", lambda: np.array(self.table, dtype=np.int64))
        ends = network.end_columns().dst
        moves = []  # per dimension: (slot, hops) of every pair
        for d, size in enumerate(self.dims):
            stride = self.strides[d]
            delta = ((dst // stride) % size - (src // stride) % size) % size
            forward = delta <= size - delta
            moves.append((np.where(forward, 2 * d, 2 * d + 1),
                          np.where(forward, delta, size - delta)))
        length = sum(hops for _, hops in moves)
        start = np.cumsum(length) - length
        out = np.empty(int(length.sum()), dtype=np.int64)
        here, done = src.copy(), np.zeros_like(src)
        for slot, hops in moves:
            for step in range(int(hops.max(initial=0))):
                on = np.flatnonzero(hops > step)
                link = table[here[on], slot[on]]
                out[start[on] + done[on]] = link
                done[on] += 1
                here[on] = ends[link]
        return length, out

@dataclass(frozen=True, slots=True)
class FullMeshRouter:
    """One hop on the dedicated link; link ``i -> j`` has index ``i*(n-1) + j - (j > i)``."""

    devices: int

    def __call__(self, network: Network, src: int, dst: int) -> tuple[int, ...]:
        if src == dst:
            return ()
        return (src * (self.devices - 1) + dst - (dst > src),)


@dataclass(frozen=True, slots=True)
class StarRouter:
    """Up one port and down another: device ``i``'s port is links ``2i`` (up), ``2i+1`` (down).

    Devices ``0 .. devices-1`` are the endpoints; anything else (the switch) is routed by
    :func:`~commsim.network.shortest_path_router`.
    """

    devices: int

    def __call__(self, network: Network, src: int, dst: int) -> tuple[int, ...]:
        if src == dst:
            return ()
        if src < self.devices and dst < self.devices:
            return (2 * src, 2 * dst + 1)
        if dst == self.devices and src < self.devices:  # up into the switch (in-network ops)
            return (2 * src,)
        if src == self.devices and dst < self.devices:
            return (2 * dst + 1,)
        return shortest_path_router(network, src, dst)


@dataclass(frozen=True, slots=True)
class HierarchicalRouter:
    """Same host: GPU -> node switch -> GPU; other hosts: GPU -> fabric -> GPU (own NIC).

    GPU ``g``'s links are ``4g`` (to its node switch), ``4g+1`` (from it), ``4g+2`` (to the
    fabric) and ``4g+3`` (from it). GPUs are devices ``0 .. gpus-1``; paths to or from a switch
    fall back to :func:`~commsim.network.shortest_path_router`.
    """

    gpus: int
    gpus_per_node: int

    def _host(self, device: int) -> int:
        """A device's host: GPUs node-major, then a switch per node (the fabric's is none of
        the GPUs')."""
        return device // self.gpus_per_node if device < self.gpus else device - self.gpus

    def __call__(self, network: Network, src: int, dst: int) -> tuple[int, ...]:
        if src == dst:
            return ()
        same = self._host(src) == self._host(dst)
        if src < self.gpus and dst < self.gpus:
            return (4 * src, 4 * dst + 1) if same else (4 * src + 2, 4 * dst + 3)
        # A GPU and a switch (in-network reduction): one port hop. Node switches are devices
        # gpus .. gpus+nodes-1 (in host order), the fabric is the last device.
        fabric = len(network.devices) - 1
        if src < self.gpus:
            if dst == fabric:
                return (4 * src + 2,)
            if same:
                return (4 * src,)
        elif dst < self.gpus:
            if src == fabric:
                return (4 * dst + 3,)
            if same:
                return (4 * dst + 1,)
        return shortest_path_router(network, src, dst)

    def paths(self, network: Network, src: np.ndarray,
              dst: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Each route ``src[k] -> dst[k]``'s length (GPU to GPU: two hops, none to itself)
        and their links, concatenated, as :meth:`__call__` finds them one by one; None for
        pairs with a switch."""
        if ((src >= self.gpus) | (dst >= self.gpus)).any():
            return None
        moves = src != dst
        src, dst = src[moves], dst[moves]
        other = np.where(src // self.gpus_per_node == dst // self.gpus_per_node, 0, 2)
        return 2 * moves, np.stack([4 * src + other, 4 * dst + 1 + other], axis=1).ravel()


@dataclass(frozen=True, slots=True)
class SharedRouter:
    """Every path of a ``shared`` host crosses the medium of the ranks in use.

    With ``P`` rank devices, rank ``i``'s port is links ``2i`` (into the medium) and ``2i+1``
    (out of it); then, for every rank count ``q`` in ``1..P``, link ``2P + 2(q-1)`` is the
    medium (its bandwidth) and ``2P + 2(q-1) + 1`` the message latency among ``q`` running
    ranks (a pure delay, no bandwidth limit). ``q`` is the rank count of the network asked
    (:meth:`~commsim.network.Network.with_ranks` keeps the links and this router), so a topology
    fitted on 4 ranks times a 2-rank run with the 2-rank latency. A transfer ``i -> j`` crosses
    ``(port i in, medium, latency, port j out)``; a local copy ``i -> i`` crosses ``(port i in,
    medium)``: it competes for the medium but has no message latency.
    """

    devices: int

    def __call__(self, network: Network, src: int, dst: int) -> tuple[int, ...]:
        count = self.devices
        if src < count and dst < count:
            medium = 2 * count + 2 * (len(network.rank_devices) - 1)
            if src == dst:
                return (2 * src, medium)
            return (2 * src, medium, medium + 1, 2 * dst + 1)
        return shortest_path_router(network, src, dst)
