"""A :class:`~commsim.algorithms.base.Call` for a network: the call's ranks, hosts, reducing
switches and torus read off the machine it runs on (its first ``ranks`` ranks)."""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.algorithms.torus import sub_torus
from commsim.collectives import Collective, parse_collective
from commsim.network import Network
from commsim.units import parse_size


def make_call(
    collective: Collective | str,
    network: Network,
    size: int | str,
    *,
    root: int = 0,
    chunks: int | None = None,
    counts: tuple[int, ...] | None = None,
) -> Call:
    """Validate the pieces of a collective call on all ranks of ``network`` (``counts``: an
    all-to-allv's bytes per pair, see :class:`~commsim.algorithms.base.Call`)."""
    host_switches, fabric_switch = network.reducing_switches_of()
    return Call(
        collective=parse_collective(collective),
        ranks=network.ranks,
        nbytes=parse_size(size, "--size"),
        root=root,
        chunks=chunks,
        hosts=network.rank_hosts(),
        host_switches=host_switches,
        fabric_switch=fabric_switch,
        torus_dims=torus_dims(network),
        counts=counts,
    )


def torus_dims(network: Network) -> tuple[int, ...] | None:
    """The torus a ``kind: torus`` network's ranks form (None: not a torus, or a ``--ranks``
    prefix that is not a whole sub-torus)."""
    dims = network.meta.get("dims")
    if network.meta.get("kind") != "torus" or not isinstance(dims, tuple | list):
        return None
    return sub_torus(dims, network.ranks)
