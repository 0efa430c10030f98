"""In-network reduction: all-reduce inside NVSwitch (NVLS) and InfiniBand switches (SHARP).

A reducing switch is a schedule endpoint after the ranks (``Call.host_switches``,
``Call.fabric_switch``). Ranks send it their data with ``reduce`` transfers; it adds them up
in hardware (no ``gamma``) and sends the sum back, one copy per rank: the multicast. The
switch starts empty and holds only what ranks send it, so the symbolic checker proves these
schedules like any other. The buffer moves in ``chunks`` pieces, one at a time per port.

* ``nvls`` (NVLink SHARP, NVSwitch gen 3, H100/H800): on one host, every rank sends each
  piece up to the node switch, which multicasts the reduced piece to every rank. On several
  hosts, three phases with a barrier between them: (1) that in-switch all-reduce on every
  host; (2) local rank ``l`` of every host ring-all-reduces part ``l`` of the buffer with its
  peers (a rail, over their NICs); (3) local rank ``l`` sends part ``l`` up to its node switch,
  which multicasts it to the host's other ranks. NCCL's own multi-node NVLS (NVLS tree)
  overlaps the phases; this model does not.
* ``collnet`` (NCCL CollNet over SHARP): (1) intra-host ring reduce-scatter; (2) every rail
  reduces its part inside the fabric switch, which multicasts the sum back; (3) intra-host ring
  all-gather; barriers between the phases.

Sources: NVIDIA, "NVLink SHARP" in the NVSwitch gen 3 / DGX H100 architecture papers (in-switch
reduction and multicast, multimem loads and stores); NCCL ``src/graph/tuning.cc`` (NVLS and
CollNet are all-reduce algorithms of the Simple protocol); Graham et al., "Scalable
Hierarchical Aggregation Protocol (SHArP)", COMHPC 2016.
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.algorithms.hierarchical import host_groups
from commsim.algorithms.plan import Range, pipeline_chunks
from commsim.collectives import Collective, segment
from commsim.errors import ScheduleError
from commsim.network import Network
from commsim.schedule import Schedule

NVLS = "nvls"
COLLNET = "collnet"
#: Where each in-network algorithm reduces: ``"host"`` (node switches) or ``"fabric"``
#: (:attr:`~commsim.algorithms.base.Algorithm.reduces_in`; the registry takes it from here).
REDUCES_IN = {NVLS: "host", COLLNET: "fabric"}
#: Most pieces a default in-network all-reduce is cut into (512 KiB each until then).
MAX_CHUNKS = 64


def network_for(call: Call, network: Network, algorithm: str) -> Network:
    """The network ``algorithm`` runs on: for an in-network algorithm, the view in which the
    ports of the switches it reduces in carry their reduction bandwidth; else ``network``
    (``algorithm``: a registered name, as :func:`commsim.algorithms.get_algorithm` spells it)."""
    where = REDUCES_IN.get(algorithm)
    if where is None:
        return network
    ends = call.host_switches if where == "host" else (call.fabric_switch,)
    devices = frozenset(network.endpoint_device(e) for e in ends or () if e is not None)
    return network.reducing_view(devices)


def default_chunks(call: Call) -> int:
    """``ceil(n / 512 KiB)`` pieces, at most 64: a piece's up-and-back latency is paid once."""
    return pipeline_chunks(call.nbytes, MAX_CHUNKS)


def endpoints(call: Call) -> int:
    """How many endpoints after the ranks the call's switches need."""
    top = max([*(call.host_switches or ()), call.fabric_switch or 0, call.ranks - 1])
    return top - call.ranks + 1


def parts(groups: list[list[int]], nbytes: int) -> list[list[Range]]:
    """Part ``l`` of each host: ``segment(l, L_h, n)``, the block local rank ``l`` owns."""
    return [[segment(i, len(g), nbytes) for i in range(len(g))] for g in groups]


def build_nvls(call: Call) -> Schedule:
    """The ``nvls`` all-reduce of ``call`` (see the module docstring), built as columns
    (:func:`commsim.algorithms.innetwork_columns.nvls_columns`)."""
    _check(call, NVLS)
    from commsim.algorithms.innetwork_columns import nvls_columns
    from commsim.algorithms.rows import Table

    p, chunks = call.ranks, call.chunks or default_chunks(call)
    if p < 2:
        return Schedule.of_columns(call.collective, NVLS, p, call.nbytes, call.root, chunks,
                                   Table().columns())
    assert call.host_switches is not None
    groups = host_groups(call.hosts) if call.hosts is not None else [list(range(p))]
    columns = nvls_columns(groups, call.nbytes, chunks, [call.host_switches[g[0]] for g in groups])
    return Schedule.of_columns(call.collective, NVLS, p, call.nbytes, call.root, chunks,
                               columns, endpoints(call))


def build_collnet(call: Call) -> Schedule:
    """The ``collnet`` all-reduce of ``call`` (see the module docstring), built as columns
    (:func:`commsim.algorithms.innetwork_columns.collnet_columns`)."""
    _check(call, COLLNET)
    from commsim.algorithms.innetwork_columns import collnet_columns
    from commsim.algorithms.rows import Table

    if call.ranks < 2:
        return Schedule.of_columns(call.collective, COLLNET, call.ranks, call.nbytes,
                                   call.root, call.chunks or default_chunks(call),
                                   Table().columns())
    assert call.fabric_switch is not None
    chunks = call.chunks or default_chunks(call)
    groups = host_groups(call.hosts) if call.hosts is not None else [[r] for r in range(call.ranks)]
    columns = collnet_columns(groups, call.nbytes, chunks, call.fabric_switch)
    return Schedule.of_columns(call.collective, COLLNET, call.ranks, call.nbytes, call.root,
                               chunks, columns, endpoints(call))


def _check(call: Call, name: str) -> None:
    if call.collective is not Collective.ALL_REDUCE:
        raise ScheduleError(f"algorithm {name!r} cannot run {call.collective.value}")
    if call.hosts is not None and len({len(g) for g in host_groups(call.hosts)}) != 1:
        raise ScheduleError(f"algorithm {name!r} needs the same number of ranks on every host")
