"""The analytic engine: a collective's closed-form alpha-beta(-gamma) time, without a schedule.

:func:`predict` evaluates, for the named algorithm, the longest path of the dependency graph
its builder would emit, each transfer of ``x`` bytes costing ``alpha + x/beta`` (plus
``gamma * x`` if it reduces), where ``alpha`` is a path's summed hop latency and ``beta`` its
narrowest hop. The formulas (``closed_forms``, ``butterfly``) see one :class:`Hop` per phase:
this module picks it as the *worst* pair the phase uses (largest ``alpha``, smallest ``beta``),
so the result equals the DES on uncontended networks whose pairs are alike, and bounds it from
above elsewhere as long as nothing is shared. Where the messages of one step share links (a
butterfly on a ring or torus) each gets the busiest link's equal share; other contention
(flows sharing a link) is the DES's business; see ``docs/closed-forms.md``.

Path lookups stay O(p log p) at most, and O(1) for the kinds whose pairs are alike by
construction (``fully_connected``, ``switch``; ``hierarchical`` has one intra-host and one
inter-host class), so ``auto`` can rank algorithms for tens of thousands of ranks.

>>> from commsim.algorithms.base import Call
>>> from commsim.collectives import Collective
>>> from commsim.topology import ring
>>> net = ring(8, latency="1us", bandwidth="100GB/s")
>>> call = Call(collective=Collective.ALL_REDUCE, ranks=8, nbytes=2**30)
>>> t = predict(call, net, "ring")
>>> round(t / (14 * (1e-6 + 2**30 / 8 / 100e9)), 12)
1.0
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from functools import lru_cache, partial

import numpy as np

from commsim.algorithms import get_algorithm
from commsim.algorithms.base import Call
from commsim.algorithms.double_binary_tree import dbt_parents
from commsim.algorithms.innetwork import network_for
from commsim.collectives import Collective
from commsim.engine import bidirectional, exchange, innetwork
from commsim.engine import closed_forms as cf
from commsim.engine.butterfly import (
    rabenseifner,
    rail_rabenseifner,
    recursive_doubling_all_gather,
)
from commsim.engine.closed_forms import Hop, Ints
from commsim.engine.form_cost import check_form_size
from commsim.engine.pairs import MAX_LOOKUPS, UNIFORM_KINDS, PairCosts
from commsim.errors import SpecError
from commsim.network import Network

__all__ = ["CLOSED_FORMS", "MAX_LOOKUPS", "UNIFORM_KINDS", "ClosedForm", "PairCosts", "predict"]

#: A closed form: ``(call, chunks, pairs) -> seconds``, for a call the algorithm supports
#: (checked), at least two ranks and a non-empty buffer; ``pairs`` is the network's
#: :class:`~commsim.engine.pairs.PairCosts` for the call's ranks (``pairs.network``: the
#: network itself).
ClosedForm = Callable[[Call, int, PairCosts], float]


def predict(call: Call, network: Network, algorithm: str) -> float:
    """Closed-form time in seconds of ``call`` run by ``algorithm`` on ``network``.

    Dispatches through :data:`CLOSED_FORMS`, keyed by the registered algorithm's name.
    Raises :class:`~commsim.errors.ScheduleError` when the algorithm cannot run the call, and
    :class:`~commsim.errors.SpecError` when the network has fewer ranks than the call or when
    the closed form in the pieces the call asks for would run for more than seconds
    (:mod:`commsim.engine.form_cost`).
    """
    algo = get_algorithm(algorithm)
    algo.check_supports(call)
    if not algo.closed_form:
        raise SpecError(
            f"algorithm {algo.name!r} has no closed form (gloo: two segments in flight per rank "
            "and local copies on a shared medium): use --engine des"
        )
    if call.ranks > network.ranks:
        raise SpecError(
            f"call needs {call.ranks} ranks, network {network.name!r} has {network.ranks}"
        )
    if call.ranks < 2 or call.nbytes == 0:
        return 0.0
    chunks = call.chunks if call.chunks is not None else algo.default_chunks(call)
    hosts = call.hosts
    if hosts is None and network.host_of(0) is not None:
        hosts = (network.rank_hosts() or (0,))[: call.ranks]
    if call.chunks is not None:  # the algorithms' own pieces are bounded by construction
        check_form_size(call, algo.name, chunks, len(set(hosts)) if hosts else None)
    form = CLOSED_FORMS.get(algo.name)
    if form is None:  # pragma: no cover - tests/engine/test_closed_form_table.py pins the table
        raise SpecError(f"no closed form for algorithm {algo.name!r}")
    return form(call, chunks, PairCosts.of(network, call.ranks, hosts))


def _in_network(name: str, call: Call, chunks: int, pairs: PairCosts) -> float:
    """``nvls``, ``collnet``: timed on the view where the reducing switches' ports reduce."""
    return innetwork.predict(call, network_for(call, pairs.network, name), name, chunks)


def _ring_bidirectional(call: Call, chunks: int, pairs: PairCosts) -> float:
    if call.ranks < 3:  # both directions are the one pair: the ring
        return _ring(call, chunks, pairs)
    return bidirectional.ring_bidirectional(call, chunks, pairs)


def _binomial_tree(call: Call, chunks: int, pairs: PairCosts) -> float:
    coll = call.collective
    up, down = pairs.memo(("binomial_tree", call.root), lambda: _binomial_hops(pairs, call.root))
    return cf.binomial_tree(
        call.ranks,
        call.nbytes,
        chunks,
        up,
        down,
        coll is not Collective.BROADCAST,
        coll is not Collective.REDUCE,
    )


def _double_binary_tree(call: Call, chunks: int, pairs: PairCosts) -> float:
    n = call.nbytes
    time_s = 0.0
    for (tree, up, down), half in zip(_dbt(pairs), (n // 2, n - n // 2), strict=True):
        time_s = max(time_s, cf.tree_all_reduce(tree, half, chunks, up, down))
    # The two trees' formulas ignore each other; where their edges share a link (a rank's
    # single switch port), the busiest link still has to carry its bytes: a lower bound
    # of the DES, which counts that sharing.
    load = pairs.memo("dbt link load", lambda: _dbt_link_load(pairs))
    return max(time_s, load * (n - n // 2))


def _hierarchical_form(butterfly: bool) -> ClosedForm:
    def form(call: Call, chunks: int, pairs: PairCosts) -> float:
        hosts = pairs.host_ids
        if hosts is None:  # check_supports already refused calls without hosts
            raise SpecError("the hierarchical algorithms need a multi-host topology")
        return _hierarchical(hosts, call.nbytes, chunks, pairs, butterfly)

    return form


@lru_cache(maxsize=4)
def _dbt_trees(ranks: int) -> tuple[Ints, Ints]:
    """:func:`dbt_parents` as arrays, kept for the last few rank counts (every protocol's
    network of the same ranks reads the same trees)."""
    trees = tuple(np.asarray(parents, dtype=np.int64) for parents in dbt_parents(ranks))
    for tree in trees:
        tree.flags.writeable = False  # shared: read only
    return trees[0], trees[1]


@lru_cache(maxsize=4)
def _dbt_levels(ranks: int) -> tuple[cf.TreeLevels, ...]:
    """Each tree of :func:`_dbt_trees` level by level (:func:`~.closed_forms.tree_levels`)."""
    return tuple(cf.tree_levels(parents) for parents in _dbt_trees(ranks))


def _dbt(pairs: PairCosts) -> list[tuple[cf.TreeLevels, Hop, Hop]]:
    """Each tree, level by level, and its (up, down) hops."""

    def make() -> list[tuple[cf.TreeLevels, Hop, Hop]]:
        out = []
        for par, levels in zip(_dbt_trees(pairs.ranks), _dbt_levels(pairs.ranks), strict=True):
            child = np.flatnonzero(par >= 0)
            out.append((levels, pairs.hop(child, par[child]), pairs.hop(par[child], child)))
        return out

    return pairs.memo("double_binary_tree", make)


def _dbt_link_load(pairs: PairCosts) -> float:
    """Seconds per byte of a half-buffer on the double binary tree's busiest link: every tree
    edge carries a half up (reduce) and down (broadcast), over the edge's routes."""

    def ends() -> tuple[Ints, Ints]:
        up = [(child, par[child]) for par in _dbt_trees(pairs.ranks)
              for child in [np.flatnonzero(par >= 0)]]
        src = np.concatenate([e for pair in up for e in pair])
        dst = np.concatenate([e for pair in up for e in pair[::-1]])
        return src, dst

    return pairs.busiest("dbt crossings", ends)


def _chain_hop(pairs: PairCosts, first: int, length: int | None = None) -> Hop:
    """The worst of the pairs ``(first + k, first + k + 1) mod p``, ``k < length`` (p - 1)."""
    p = pairs.ranks
    k = np.arange(p - 1 if length is None else length, dtype=np.int64)
    return pairs.hop((first + k) % p, (first + k + 1) % p)


def _binomial_hops(pairs: PairCosts, root: int) -> tuple[Hop, Hop]:
    """The binomial tree's up (child to parent) and down hops."""
    p = pairs.ranks
    v = np.arange(1, p, dtype=np.int64)
    child, parent = (v + root) % p, ((v & (v - 1)) + root) % p
    return pairs.hop(child, parent), pairs.hop(parent, child)


def _ring(call: Call, chunks: int, pairs: PairCosts) -> float:
    """Ring collectives over the pairs ``(i, i + 1 mod p)``; chains skip the pair into/out of
    the root."""
    p, n, root = call.ranks, call.nbytes, call.root
    coll = call.collective
    if coll.rooted:
        # broadcast: root -> root+1 -> ... ; reduce: root+1 -> ... -> root
        first = root if coll is Collective.BROADCAST else root + 1
        hop = pairs.memo(("ring chain", first % p), lambda: _chain_hop(pairs, first))
        return cf.ring_chain(p, n, chunks, hop, coll is Collective.REDUCE)
    hop = pairs.memo("ring", lambda: _chain_hop(pairs, 0, p))
    steps = {
        Collective.ALL_GATHER: (0, p - 1, 0),
        Collective.REDUCE_SCATTER: (p - 1, 0, 1),
        Collective.ALL_REDUCE: (p - 1, p - 1, 1),
    }[coll]
    return cf.ring_collective(p, n, chunks, steps[0], steps[1], steps[2], hop, hop)


def _butterfly_hops(pairs: PairCosts) -> tuple[Hop, dict[int, Hop], Hop]:
    """The fold's, each distance's and the unfold's hop among ``pairs.ranks`` ranks."""
    p = pairs.ranks
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    a = np.arange(pof2, dtype=np.int64)
    core = np.where(a < rem, 2 * a + 1, a + rem)
    evens = 2 * np.arange(rem, dtype=np.int64)
    fold, unfold = pairs.hop(evens, evens + 1), pairs.hop(evens + 1, evens)
    steps: dict[int, Hop] = {}
    mask = 1
    while mask < pof2:
        partner = core[a ^ mask]  # both ways: each core rank is some other's partner
        steps[mask] = pairs.concurrent_hop(("butterfly step", mask), core, partner)
        mask <<= 1
    return fold, steps, unfold


def _butterfly(name: str, call: Call, chunks: int, pairs: PairCosts) -> float:
    """Recursive doubling / Rabenseifner: fold pairs, one hop per distance, unfold pairs."""
    p, n = call.ranks, call.nbytes
    fold, steps, unfold = pairs.memo("butterfly", lambda: _butterfly_hops(pairs))
    ordered = [steps[1 << m] for m in range(len(steps))]
    if name == "recursive_doubling":
        if call.collective is Collective.ALL_GATHER:
            return recursive_doubling_all_gather(p, n, chunks, fold, ordered, unfold)
        return cf.recursive_doubling_all_reduce(p, n, chunks, fold, ordered, unfold)
    all_reduce = call.collective is Collective.ALL_REDUCE
    return rabenseifner(p, n, chunks, all_reduce, fold, steps, unfold)


# -- hierarchical ----------------------------------------------------------------------------
def _groups(hosts: tuple[int, ...]) -> list[Ints]:
    """Ranks of each host, ascending, hosts ordered by their lowest rank (as the builder)."""
    host = np.asarray(hosts, dtype=np.int64)
    order = np.argsort(host, kind="stable")  # by host id, ranks ascending within a host
    _, first, counts = np.unique(host[order], return_index=True, return_counts=True)
    if (counts == counts[0]).all():  # equal hosts: rows of one array, by lowest rank
        table = order.reshape(len(counts), int(counts[0]))
        return list(table[np.argsort(table[:, 0])])
    groups = np.split(order, first[1:])
    return sorted(groups, key=lambda g: int(g[0]))


def _layout(hosts: tuple[int, ...], pairs: PairCosts) -> tuple[list[Ints], Hop, Hop]:
    """The host groups and the intra-host ring's and the rails' worst hops (memoised)."""

    def make() -> tuple[list[Ints], Hop, Hop]:
        groups = _groups(hosts)
        width = min(len(g) for g in groups)  # every host has an owner of local index < width
        if len({len(g) for g in groups}) == 1:
            table = np.stack(groups)
            intra_src, intra_dst = table.ravel(), np.roll(table, -1, axis=1).ravel()
        else:
            intra_src = np.concatenate(groups)
            intra_dst = np.concatenate([np.roll(g, -1) for g in groups])
        intra = pairs.hop(intra_src, intra_dst)
        if len(groups) < 2:
            return groups, intra, intra
        owners = np.stack([g[:width] for g in groups])  # (H, width)
        inter = pairs.hop(owners.ravel(), np.roll(owners, -1, axis=0).ravel())
        return groups, intra, inter

    return pairs.memo(("hierarchical", hosts), make)


def _hierarchical(
    hosts: tuple[int, ...], nbytes: int, chunks: int, pairs: PairCosts, butterfly: bool = False
) -> float:
    """Intra-host ring reduce-scatter, inter-host rail all-reduce, intra-host ring all-gather;
    the rails are rings or, with ``butterfly``, Rabenseifner's (``hierarchical_rabenseifner``).

    Exact for hosts of equal size ``L``: the hosts' intra phases are identical, so phase 1 is
    one ring recurrence; rail ``l`` (part ``l``, cut into ``H`` sub-blocks) starts from phase
    1's arrival of part ``l``; phase 3 continues phase 1's link chains and starts each part from
    its latest arrival over all hosts (the continuation of a path is host-independent, so the
    maximum over hosts commutes with the longest path). With one piece the rails are closed:
    ``E1[l] + (H - 1)(w_r(m_l) + w_c(m_l))``, ``m_l`` the largest sub-block of part ``l``.
    Hosts of unequal size make some ranks own ``k > 1`` rails, whose messages queue on one pair
    or share one NIC (the DES's contention); then this is an estimate: the slowest host's intra
    phases plus the largest rail, each step costing ``q alpha + k x / beta`` for ``q`` rails
    queueing on one pair and ``k`` rails through one rank's NIC. Rabenseifner rails are
    timed by :func:`~commsim.engine.butterfly.rail_rabenseifner` (hosts of equal size: exact;
    otherwise the widest range's rail with each step ``k`` times as long, ``k`` rails per NIC).
    """
    groups, intra, inter = _layout(hosts, pairs)
    sizes = {len(g) for g in groups}
    if len(sizes) == 1:
        return _hierarchical_equal(len(groups), max(sizes), nbytes, chunks, intra, inter, butterfly)
    return _hierarchical_unequal(groups, nbytes, chunks, intra, inter, butterfly)


def _hierarchical_equal(
    hosts: int, local: int, nbytes: int, chunks: int, intra: Hop, inter: Hop, butterfly: bool
) -> float:
    parts = cf.segment_lengths(local, nbytes)
    part_start = (np.arange(local, dtype=np.int64) * nbytes) // local
    table = cf.piece_table(parts, chunks)  # (L, c)
    time_s = 0.0
    if local > 1:
        one = cf.ring_steps(table[None], local - 1, 0, 1, intra, intra)
        # position b - 1's last step reduced block b into position b
        arrived = one.last[0][(np.arange(local) - 1) % local]  # (L, c)
        link = one.link
        time_s = one.time_s
    else:
        arrived, link = np.zeros((1, chunks)), None
    ready3 = arrived
    if hosts > 1:
        if butterfly:
            ready3, rails_s = _butterfly_rails(hosts, parts, arrived, chunks, inter)
        else:
            ready3, rails_s = _rails(hosts, parts, part_start, table, arrived, chunks, inter)
        time_s = max(time_s, rails_s)
    if local > 1:
        three = cf.ring_steps(
            table[None], 0, local - 1, 0, intra, intra, init_ready=ready3[None], init_link=link
        )
        time_s = max(time_s, three.time_s)
    return time_s


def _rails(
    hosts: int,
    parts: Ints,
    part_start: Ints,
    table: Ints,
    arrived: np.ndarray,
    chunks: int,
    inter: Hop,
) -> tuple[np.ndarray, float]:
    """Rail all-reduces of every part: per (part, piece) the latest arrival over all hosts,
    and the latest end."""
    local = len(parts)
    sub = np.arange(hosts + 1, dtype=np.int64)
    sub_bounds = part_start[:, None] + (parts[:, None] * sub) // hosts  # (L, H+1)
    sub_len = np.diff(sub_bounds, axis=1)
    if chunks == 1:
        top = sub_len.max(axis=1)
        per = np.array([inter.reduce(int(m)) + inter.copy(int(m)) for m in top])
        ends = arrived[:, 0] + (hosts - 1) * per
        return ends[:, None], float(ends.max())
    sub_table = cf.piece_table(sub_len, chunks)  # (L, H, c)
    # absolute piece bounds of parts (L, c) and sub-blocks (L, H, c)
    j = np.arange(chunks + 1, dtype=np.int64)
    pcut = part_start[:, None] + (parts[:, None] * j) // chunks
    scut = sub_bounds[:, :-1, None] + (sub_len[..., None] * j) // chunks
    overlap = np.maximum(scut[..., :-1, None], pcut[:, None, None, :-1]) < np.minimum(
        scut[..., 1:, None], pcut[:, None, None, 1:]
    )  # (L, H, c, c)
    init = np.where(overlap, arrived[:, None, None, :], 0.0).max(axis=-1)
    steps = 2 * (hosts - 1) * chunks
    if steps * local * hosts > cf.RING_DP_BUDGET:  # link-chain upper bound
        w_max = inter.reduce(int(sub_table.max()))
        ends = arrived.max(axis=1) + steps * w_max
        return np.repeat(ends[:, None], chunks, axis=1), float(ends.max())
    out = cf.ring_steps(sub_table, hosts - 1, hosts - 1, 1, inter, inter, init_ready=init)
    final = out.last[:, (np.arange(hosts) - 2) % hosts, :]  # (L, H, c) by sub-block
    hit = np.maximum(pcut[:, :-1, None, None], scut[:, None, :, :-1]) < np.minimum(
        pcut[:, 1:, None, None], scut[:, None, :, 1:]
    )  # (L, c, H, c)
    ready = np.where(hit, final[:, None], 0.0).max(axis=(2, 3))
    return ready, out.time_s


def _butterfly_rails(
    hosts: int, parts: Ints, arrived: np.ndarray, chunks: int, inter: Hop
) -> tuple[np.ndarray, float]:
    """Rabenseifner rails of every part (rails of equal parts arriving together are alike)."""
    ready = np.empty((len(parts), chunks))
    done: dict[tuple[int, tuple[float, ...]], tuple[np.ndarray, float]] = {}
    time_s = 0.0
    for part, (length, arrival) in enumerate(zip(parts, arrived, strict=True)):
        key = (int(length), tuple(arrival.tolist()))
        if key not in done:
            done[key] = rail_rabenseifner(hosts, int(length), chunks, arrival, inter)
        ready[part], rail_s = done[key]
        time_s = max(time_s, rail_s)
    return ready, time_s


def _hierarchical_unequal(
    groups: list[Ints],
    nbytes: int,
    chunks: int,
    intra: Hop,
    inter: Hop,
    butterfly: bool = False,
) -> float:
    sizes = [len(g) for g in groups]
    distinct = sorted(set(sizes))
    intra_s = max(
        cf.ring_collective(s, nbytes, chunks, s - 1, 0, 1, intra, intra) for s in distinct
    )
    gather_s = max(
        cf.ring_collective(s, nbytes, chunks, 0, s - 1, 0, intra, intra) for s in distinct
    )
    cuts = sorted({k * nbytes // s for s in distinct for k in range(s)} | {nbytes})
    widest = max(b - a for a, b in zip(cuts, cuts[1:], strict=False))
    owner = {}  # host size -> local index owning each range (as the builder's rails)
    for s in distinct:
        starts = [k * nbytes // s for k in range(s)]
        owner[s] = [bisect_right(starts, c) - 1 for c in cuts[:-1]]
    # rails through one rank share its NIC; rails on one ordered pair queue on it
    nic = max(Counter(owner[s]).most_common(1)[0][1] for s in distinct)
    hops = len(groups)
    transitions = {(sizes[h], sizes[(h + 1) % hops]) for h in range(hops)}
    queue = max(
        Counter(zip(owner[a], owner[b], strict=True)).most_common(1)[0][1] for a, b in transitions
    )
    if butterfly:  # a rank's k rails take turns on its NIC, piece by piece
        serial = Hop(inter.alpha_s * nic, inter.beta_Bps / nic, inter.gamma_s_per_B * nic)
        _, rail_s = rail_rabenseifner(hops, widest, chunks, np.zeros(chunks), serial)
        return intra_s + rail_s + gather_s
    shared = Hop(inter.alpha_s * queue, inter.beta_Bps / nic, inter.gamma_s_per_B)
    rail_s = cf.ring_collective(hops, widest, chunks, hops - 1, hops - 1, 1, shared, shared)
    return intra_s + rail_s + gather_s


#: Each registered algorithm with ``closed_form=True`` and its closed form, by name
#: (``tests/engine/test_closed_form_table.py`` checks that the two agree). The table lives
#: here, in the engine layer, rather than on :class:`~commsim.algorithms.base.Algorithm`,
#: because the algorithms sit below the engine and must not import it.
def _or_axes(form: ClosedForm) -> ClosedForm:
    """``form``, or for all-to-all its phase per axis (:func:`exchange.axes`)."""

    def either(call: Call, chunks: int, pairs: PairCosts) -> float:
        if call.collective is Collective.ALL_TO_ALL:
            return exchange.axes(call, chunks, pairs)
        return form(call, chunks, pairs)

    return either


CLOSED_FORMS: dict[str, ClosedForm] = {
    "ring": _ring,
    "binomial_tree": _binomial_tree,
    "recursive_doubling": partial(_butterfly, "recursive_doubling"),
    "rabenseifner": partial(_butterfly, "rabenseifner"),
    "double_binary_tree": _double_binary_tree,
    "ring_bidirectional": _ring_bidirectional,
    "torus": _or_axes(bidirectional.torus),
    "hierarchical": _or_axes(_hierarchical_form(butterfly=False)),
    "hierarchical_rabenseifner": _hierarchical_form(butterfly=True),
    "nvls": partial(_in_network, "nvls"),
    "collnet": partial(_in_network, "collnet"),
    "pairwise": exchange.pairwise,
    "bruck": exchange.bruck,
    "all_pairs": exchange.all_pairs,
    "pxn": exchange.pxn,
}
