"""A mixture of experts' dispatch and combine on the links: NCCL's all-to-all, or DeepEP's.

``Stack.dispatcher`` says which software moves the routed tokens:

* ``alltoall`` (Megatron-Core's ``alltoall`` token dispatcher, its default): the tokens are
  permuted by expert and every copy goes to its expert's rank, ``k`` copies of each token in
  all: one NCCL all-to-all over the expert-parallel group (:func:`~commsim.plan.moe_layer.
  dispatch_bytes` its size).
* ``deepep`` (DeepSeek's DeepEP normal kernels, deepseek-ai/DeepEP README, "Normal kernels
  with NVLink and RDMA forwarding"; Megatron-Core's ``flex`` dispatcher with
  ``--moe-enable-deepep``): a token goes **once to each rank** that holds one of its experts,
  and **once to each other host** that holds one, over RDMA to the GPU with the sender's local
  index there, which forwards it over NVLink to the host's ranks that need it. So per token a
  rank sends ``(N - 1) P_host`` copies across hosts and ``(EP - N) P_rank`` over NVLink (as
  sender or as forwarder), where ``N`` is the hosts of the expert-parallel group, ``P_host`` the
  chance that a token's ``k`` experts include one of a given host's and ``P_rank`` one of a given
  rank's (:func:`hit`: experts chosen evenly, consecutive experts on consecutive ranks, under
  the model's group-limited routing where it has one). The two legs run together (the
  forwarding warps forward chunks as they arrive), each timed as the all-to-all of its bytes
  on its own links: across hosts among the group's ranks of one local index (one per host),
  within a host among its ranks of the group; the dispatch takes the longer. The combine
  moves the same bytes back (reduced on the forwarders). The README's measured "bottleneck
  bandwidth" (its setting: 4096 tokens, hidden 7168, top-8 of 256 experts in 4 of 8 groups,
  on H800 with 50 GB/s RDMA NICs) is 43-58 GB/s across hosts for EP 16-64 and 153 GB/s over
  NVLink for EP 8: the bytes of each leg over about its links' speed, as this model times them.

>>> round(hit_probability(experts=8, top_k=2, held=4), 4)   # 1 - C(4,2)/C(8,2) = 1 - 6/28
0.7857
"""

from __future__ import annotations

from collections.abc import Callable
from math import comb

from commsim.plan.experts import MoESpec
from commsim.plan.stack import DISPATCHERS
from commsim.plan.timing import CollectiveTimer

#: A subgroup of an expert-parallel group and the bytes each of its ranks sends in one
#: all-to-all among them.
Leg = tuple[tuple[int, ...], int]


def hit_probability(*, experts: int, top_k: int, held: int) -> float:
    """The chance that ``top_k`` distinct experts drawn evenly from ``experts`` include one of
    ``held`` given ones: ``1 - C(experts - held, k) / C(experts, k)``."""
    held = min(held, experts)
    return 1.0 - comb(experts - held, top_k) / comb(experts, top_k)


def hit(moe: MoESpec, ep: int, width: int) -> float:
    """The chance that a token's experts include one of ``width`` consecutive expert-parallel
    ranks' (``E / ep`` consecutive experts each), under the model's group-limited routing where
    those experts are whole groups or lie in one group (else as if routing were unlimited)."""
    e, k = moe.experts, moe.top_k
    held = width * e // ep
    g, m = moe.groups, moe.group_limit
    if not g:
        return hit_probability(experts=e, top_k=k, held=held)
    size = e // g                       # experts per routing group
    pool = m * size                     # the experts of a token's chosen groups
    if held % size == 0:                # whole groups: j of them among the token's m
        q = held // size
        miss = sum(comb(q, j) * comb(g - q, m - j) / comb(g, m)
                   * comb(pool - j * size, k) / comb(pool, k)
                   for j in range(max(0, m - (g - q)), min(q, m) + 1))
        return 1.0 - miss
    if size % held == 0:                # part of one group, which is chosen with m / g
        return m / g * hit_probability(experts=pool, top_k=k, held=held)
    return hit_probability(experts=e, top_k=k, held=held)


def dispatch_seconds(timer: CollectiveTimer, moe: MoESpec, group: tuple[int, ...],
                     nbytes: int, dispatcher: str) -> float:
    """One dispatch (or combine) over the expert-parallel ``group`` (global ranks) whose
    all-to-all would send ``nbytes`` per rank (``k`` copies of each token): NCCL's all-to-all,
    or DeepEP's two legs (see the module docstring)."""
    assert dispatcher in DISPATCHERS, dispatcher  # Stack checks what a user names
    if dispatcher == "alltoall" or len(group) < 2:
        return timer.collective("all_to_all", group, nbytes)
    return timer.derived(("deepep", moe, nbytes), group,
                         lambda: _deepep(timer, moe, group, nbytes))


def deepep_legs(moe: MoESpec, group: tuple[int, ...], host_of: Callable[[int], object],
                nbytes: int) -> tuple[list[Leg], list[Leg]]:
    """DeepEP's two legs of one dispatch over ``group`` whose all-to-all would send ``nbytes``
    per rank (see the module docstring), each an all-to-all of a subgroup and its bytes per
    rank, as nccl-tests counts them: across hosts, one per local index, among the group's
    ranks of that index on each host; within each host, among the group's ranks there."""
    hosts: dict[object, list[int]] = {}
    for r in group:
        hosts.setdefault(host_of(r), []).append(r)
    ep, n = len(group), len(hosts)
    width = len(next(iter(hosts.values())))
    per_copy = nbytes / moe.top_k
    across = per_copy * (n - 1) * hit(moe, ep, width)
    within = per_copy * (ep - n) * hit(moe, ep, 1)
    rails: list[Leg] = []
    if n > 1:   # each rank's bytes to the n - 1 others of its local index
        rails = [(rail, int(across * n / (n - 1))) for i in range(width)
                 if len(rail := tuple(ranks[i] for ranks in hosts.values() if i < len(ranks)))
                 > 1]
    local = [(tuple(ranks), int(within * width / (width - 1))) for ranks in hosts.values()
             if len(ranks) > 1] if width > 1 else []
    return rails, local


def _deepep(timer: CollectiveTimer, moe: MoESpec, group: tuple[int, ...], nbytes: int) -> float:
    """The longer of the two legs, each timed by its first subgroup (the others are its
    shape on other GPUs)."""
    rails, local = deepep_legs(moe, group, timer.network.host_of, nbytes)
    return max([timer.collective("all_to_all", *legs[0]) for legs in (rails, local) if legs],
               default=0.0)
