"""NCCL's tree across hosts (``hierarchical_pipelined``) as a schedule the DES times.

The schedule (:mod:`commsim.algorithms.pipelined`) is the hierarchical all-reduce cut into
pieces that follow one another, so the host rings of one piece run while the rails of an
earlier one cross the network. It runs on one network that is each phase's protocol network
where that phase runs (:func:`tree_network`): the links the rails cross as the rails' view
(one rank per host, its share of a NIC, the channels a rail's bytes run on), every other link
as the host phase's view (one host's channels and hop latencies), both with NCCL's tree
correction; a rail relayed over NVLink to its NIC's GPU pays those NVLinks' own latency, not a
protocol hop (:func:`tree_network`). Each host ring follows NCCL's ring inside a host
(:func:`host_rings`). Its hop latencies are scaled so that a piece's depth of them is paid once in
all, as NCCL keeps its steps in flight (:func:`~commsim.nccl_tables.chain_latency_scale`'s
rule). Where NCCL's tree cap (:func:`~commsim.nccl_caps.tree_cap_Bps`) is slower than the
simulated schedule, the call runs paced at the cap: the same schedule on its network with every
link ``f`` times slower (latency x ``f``, bandwidth / ``f``), ``f`` the cap's time over the
simulated one, so its transfers end at the cap's time.

The composed estimate of the same call (:meth:`~commsim.nccl_composed.ComposedTimer.
hierarchical`: each phase timed alone, ``max(A, B) + min(A0, B0)``) is its closed form, the
answer under ``--engine analytic`` and beyond :data:`MAX_TREE_TRANSFERS` (or
:data:`MAX_TREE_DEPENDENCIES`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from commsim.algorithms.base import Call
from commsim.algorithms.hierarchical_rows import hierarchical_columns
from commsim.algorithms.innetwork import COLLNET, NVLS, endpoints, network_for
from commsim.algorithms.innetwork_columns import collnet_columns, nvls_tree_columns
from commsim.algorithms.pipelined import MAX_PIECES, chained
from commsim.algorithms.pipelined import NAME as PIPELINED
from commsim.algorithms.plan import pipeline_chunks
from commsim.collectives import Collective
from commsim.engine.batched import BatchedSimulation
from commsim.engine.des import Timing, simulate_des
from commsim.engine.evaluate import Evaluation
from commsim.engine.exact import time_schedule
from commsim.links import DerivedLinks, LinkColumns, link_values
from commsim.nccl_caps import tree_cap_Bps
from commsim.nccl_paths import LINK_CLASSES, link_class_codes
from commsim.nccl_tables import Protocol, active_channels
from commsim.network import Network
from commsim.schedule import Columns, Schedule

if TYPE_CHECKING:
    from commsim.nccl_composed import PhaseNetworks

#: The most transfers the DES simulates of a pipelined schedule. Its pieces contend on the
#: links they share; pieces of one size run in the batched engine (:func:`simulate`), a few
#: numpy passes per instant. Measured on two busy cores (load 2-3), the simulation alone: 8
#: pieces of the tree on 2 x 72 GB200 at 256 MiB (165,888 transfers, about 25,000 instants)
#: in 5-8 s, 64 pieces of it (1.3 million) in 358 s; 64 pieces of the tree on 8 x 8 V100 at
#: 64 MiB (81,920) in 3.6 s (12 s in the event loop). So hosts of 72 GPUs pipeline their 8
#: pieces, and 64 x 8 H100 (13,312 transfers a piece of the tree, 70,000 of NVLS) are refused
#: at 256 MiB without a piece built.
MAX_TREE_TRANSFERS = 200_000
#: The most dependencies it simulates: NVLS across hosts waits for every rank's first phase
#: (16 x 8 H100: over a million a piece of 5,120 transfers). 16 pieces (17.0 million) took
#: 1.6-2.7 s batched (6.6-12 s in the event loop) and the whole command 0.74 GB of memory.
MAX_TREE_DEPENDENCIES = 20_000_000
#: The fewest pieces (where the size has that many, :func:`pieces_wanted`) that pipeline the
#: phases well enough to stand for NCCL's stream of chunks: 8 pieces of a 2 x 8 H100 tree at
#: 256 MiB took 1.05 x the composed estimate, 4 pieces 1.15 x. A call that affords fewer is
#: timed by its composed estimate.
MIN_PIECES = 8


def pieces_wanted(nbytes: int, ranks: int) -> int:
    """One piece per 512 KiB, at most :data:`~commsim.algorithms.pipelined.MAX_PIECES`, none
    of less than a byte per rank."""
    return max(1, min(pipeline_chunks(nbytes, MAX_PIECES), nbytes // max(ranks, 1)))


def columns_of(call: Call, name: str, groups: list[list[int]]) -> Callable[[int], Columns]:
    """One piece of ``name`` (NCCL's tree, NVLS or CollNet across the hosts ``groups``) of
    ``call``, as a function of its bytes."""
    if name == PIPELINED:
        return lambda size: hierarchical_columns(groups, size, 1, True)
    if name == NVLS:
        assert call.host_switches is not None
        switches = [call.host_switches[g[0]] for g in groups]
        return lambda size: nvls_tree_columns(groups, size, switches)
    fabric = call.fabric_switch
    assert fabric is not None
    return lambda size: collnet_columns(groups, size, 1, fabric)


def pipelined_schedule(call: Call, name: str, groups: list[list[int]]) -> Schedule | None:
    """The schedule of ``name`` for ``call`` in as many of the :func:`pieces_wanted` as
    :data:`MAX_TREE_TRANSFERS` and :data:`MAX_TREE_DEPENDENCIES` afford; None where that is
    fewer than :data:`MIN_PIECES` (or the pieces wanted) or where hosts share a switch
    (NVLS)."""
    ranks = call.ranks
    # transfers a piece has per rank, about (165,888 of 2 x 72 GB200's 8 pieces: 170,496 here)
    per_rank = 2 * len(groups[0]) + 2 * (len(groups) - 1) + 2
    want = pieces_wanted(call.nbytes, ranks)
    fewest = min(want, MIN_PIECES)
    if ranks * per_rank * fewest > 2 * MAX_TREE_TRANSFERS:
        return None  # far too large: not even a piece is built
    if name == NVLS and call.host_switches is not None and len(
            {call.host_switches[g[0]] for g in groups}) < len(groups):
        return None
    make = columns_of(call, name, groups)
    # the largest piece that may be cut (every piece has its transfers; smaller ones may have
    # fewer, where a part of a part has no byte)
    piece = make(max(call.nbytes // fewest, ranks))
    afford = min(MAX_TREE_TRANSFERS // max(len(piece), 1),
                 MAX_TREE_DEPENDENCIES // max(len(piece.dep_idx), 1))
    if afford < fewest:
        return None
    pieces = want if afford >= want else even_pieces(call.nbytes, fewest, afford)
    return chained(name, groups, call.nbytes, pieces, make,
                   0 if name == PIPELINED else endpoints(call))


def even_pieces(nbytes: int, fewest: int, most: int) -> int:
    """The most pieces from ``fewest`` to ``most`` that cut ``nbytes`` into pieces of one
    size (else ``most``), where the budget affords fewer than wanted: pieces a byte apart would
    end apart, and every transfer of theirs would be an instant of its own in the DES (9
    pieces of 2 x 72 GB200 at 256 MiB took 17 s in the event loop, 8 pieces 5.3 s)."""
    for pieces in range(most, fewest - 1, -1):
        if nbytes % pieces == 0:
            return pieces
    return most


def evaluate_tree(model: PhaseNetworks, call: Call, name: str,
                  protocol: Protocol) -> Evaluation | None:
    """``call`` run by ``name`` (NCCL's tree, NVLS or CollNet across hosts) under
    ``protocol`` as its pipelined schedule, simulated; NCCL's tree paced at its tree cap where
    that is slower (see the module docstring). Launch latency not included. None where the
    schedule is beyond the DES's budget (:func:`pipelined_schedule`)."""
    groups = host_rings(model, call.ranks)
    schedule = pipelined_schedule(call, name, groups)
    if schedule is None:
        return None
    net = network_for(call, tree_network(model, schedule, protocol), name)
    timing = time_schedule(schedule, net, None, simulate)
    if name == PIPELINED:
        groups, config = model.hosts(call.ranks), model.config
        cap = tree_cap_Bps(config.version, config.arch, len(groups), protocol.name,
                           config.channels, config.cpu, len(groups[0]) == 1
                           ) * model.tree_scale("tree", protocol.name, call.nbytes)
        capped = call.nbytes * Collective.ALL_REDUCE.busbw_factor(call.ranks) / cap
        if timing.time_s < capped:
            net = paced(net, capped / timing.time_s)
            timing = time_schedule(schedule, net, None, simulate)
    return Evaluation(timing.time_s, schedule.chunks, net, schedule, timing)


def simulate(schedule: Schedule, network: Network) -> Timing:
    """The DES's timing of a pipelined schedule: instant by instant in numpy (the batched
    engine, the same answer to the bit) where its pieces are of one size, so the transfers
    alike in every host and piece end at one instant: 16 pieces of NVLS on 16 x 8 H100 at
    256 MiB in 2.7 s there against 12 s in the event loop, whose Python lists of their 17
    million dependencies are most of that; 8 pieces of the tree on 2 x 72 GB200 in 5.1 s
    against 5.3 s. Else the event loop (9 pieces of that tree: 17 s, 118 s batched)."""
    if schedule.nbytes % schedule.chunks:
        return simulate_des(schedule, network)
    return Timing(*BatchedSimulation(schedule.columns, network).run())


def host_rings(model: PhaseNetworks, ranks: int) -> list[list[int]]:
    """The hosts of the first ``ranks`` ranks, each host's ranks in the order of NCCL's ring
    inside one host (:meth:`~commsim.nccl.NcclModel.ring_order` of the first host's ranks,
    which is rank order across hosts), so the host rings follow its NVLinks as the composed
    estimate's do. Hosts are built alike: the first host's order stands for every host's
    (rank order where the first host's ranks are not the first ranks)."""
    groups = model.hosts(ranks)
    per_host = len(groups[0])
    if groups[0] != list(range(per_host)):
        return groups
    order = model.ring_order(per_host)
    return [[group[k] for k in order] for group in groups]


def tree_network(model: PhaseNetworks, schedule: Schedule, protocol: Protocol) -> Network:
    """The network ``schedule`` (a pipelined tree, NVLS or CollNet) runs on: the links its
    transfers between ranks of different hosts cross as the rails' protocol view, the others
    as the host phase's (see the module docstring), of the algorithm's family."""
    ranks, nbytes = schedule.ranks, schedule.nbytes
    groups = model.hosts(ranks)
    per_host, hosts = len(groups[0]), len(groups)
    channels, name = model.config.channels, protocol.name
    family = "tree" if schedule.algorithm == PIPELINED else schedule.algorithm
    scale = model.tree_scale(family, name, nbytes)
    cols = schedule.columns
    depth = cols.level  # a chained schedule's level is its DAG depth (pipelined._chain)
    assert depth is not None
    piece = len(cols) // schedule.chunks
    latency = (int(depth[:piece].max()) + 1) / (int(depth.max()) + 1)
    everyone = tuple(range(ranks))
    host = model.phase_network(
        everyone, protocol, family, 1, active_channels(nbytes, per_host, family, name,
                                                       channels)[0],
        latency=latency, scale=scale, nodes=1)
    # every rail runs at once: where GPUs share a NIC the simulation shares it (the composed
    # estimate, timing one rail alone, gives it its share instead)
    rail = model.phase_network(
        everyone, protocol, family, 1,
        active_channels(max(nbytes // per_host, 1), hosts, family, name, channels)[0],
        latency=latency, scale=scale)
    # the host of every endpoint: a switch's -1; NVLS's switches are its hosts', CollNet's
    # fabric switch is the rails'
    host_of = np.full(int(max(cols.src.max(), cols.dst.max())) + 1, -1, dtype=np.int64)
    host_of[np.concatenate(groups)] = np.repeat(np.arange(hosts), per_host)
    src, dst = cols.src[:piece], cols.dst[:piece]  # every piece has the same transfers
    across = host_of[src] != host_of[dst]
    if schedule.algorithm == NVLS:
        across &= (src < ranks) & (dst < ranks)
    pairs = np.unique(np.stack([src[across], dst[across]]), axis=1)
    railed = np.zeros(len(rail.links), dtype=bool)
    railed[rail.route_links(pairs[0], pairs[1])] = True
    # a rail from a GPU without a NIC of its own reaches the NIC's GPU over NVLink; NCCL's tree
    # leaves a host from that GPU, its chain to it paid by the host phase: such a relay (an
    # NVLink no transfer inside a host crosses) is a copy at the link's own latency, not a
    # protocol hop (a hop latency of 35.7 us each for the tree's Simple on V100)
    inside = np.unique(np.stack([src[~across], dst[~across]]), axis=1)
    hosted = np.zeros(len(rail.links), dtype=bool)
    hosted[rail.route_links(inside[0], inside[1])] = True
    relay = railed & ~hosted & (link_class_codes(model.network) == LINK_CLASSES.index("nvlink"))
    # NCCL's tuner counts a tree (and the NVLS tree) across more than two hosts at each NIC
    # carrying a rail's bytes twice (tuning.cc: bwInter; docs/nccl.md, "Trees"); the rails here
    # carry 2 (H - 1) / H of them, so they run at (H - 1) / H of their links
    slower = (hosts - 1) / hosts if hosts > 2 and schedule.algorithm != COLLNET else 1.0

    def change(_: LinkColumns, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inner, outer = link_values(host.links, at), link_values(rail.links, at)
        on = railed[at]
        own = link_values(model.network.links, at).latency_s * latency
        return (np.where(on, np.where(relay[at], own, outer.latency_s), inner.latency_s),
                np.where(on, outer.bandwidth_Bps * slower, inner.bandwidth_Bps))

    return rail.rebuilt(name=f"{model.network.name}+{family}+{name}",
                        links=DerivedLinks(rail.links, change))


def paced(network: Network, factor: float) -> Network:
    """``network`` with every link ``factor`` times slower: latency x ``factor``, bandwidth /
    ``factor`` (every time a schedule takes on it grows by ``factor``)."""

    def change(links: LinkColumns, _: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return links.latency_s * factor, links.bandwidth_Bps / factor

    slow = network.rebuilt(name=network.name, links=DerivedLinks(network.links, change))
    if not network.gamma_s_per_B:
        return slow
    return Network(slow.name, slow.devices, slow.links, slow.rank_devices,
                   network.gamma_s_per_B * factor, slow.router, dict(slow.meta),
                   _routes=slow._routes, _out=slow._out, _structure=slow._structure)
