"""Properties of both engines, checked on generated cases (hypothesis).

* time never decreases when the buffer grows (for a fixed piece count);
* bus bandwidth never exceeds what the links allow: ring collectives reach at most one link's
  bandwidth B, and no algorithm beats the bytes a rank must move over its links;
* runs are deterministic: the same inputs give byte-identical timings;
* one rank takes no time.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from commsim.algorithms import ALGORITHMS, build_schedule
from commsim.algorithms.base import Call
from commsim.api import make_call
from commsim.collectives import Collective
from commsim.engine.analytic import predict
from commsim.engine.des import simulate_des
from commsim.network import Network
from commsim.topology import fully_connected, hierarchical, ring

B = 100e9  # link bandwidth, B/s
PAIRS = sorted(
    (name, coll)
    for name, algo in ALGORITHMS.items()
    if not algo.needs_hosts and algo.closed_form and not algo.reduces_in and not algo.needs_torus
    for coll in algo.collectives
)
#: Example budgets scale with the hypothesis profile (tests/conftest.py): x1, or x20 under fuzz.
EXAMPLE_SCALE = settings.default.max_examples // 100
SETTINGS = settings(
    max_examples=40 * EXAMPLE_SCALE, suppress_health_check=[HealthCheck.too_slow]
)


def _net(kind: str, p: int, gamma: float = 0.0) -> Network:
    build = fully_connected if kind == "fully_connected" else ring
    return build(p, latency="1us", bandwidth=B, gamma=gamma)


def _supported(name: str, p: int) -> bool:
    return not (ALGORITHMS[name].power_of_two_only and p & (p - 1))


def _des(name: str, call: Call, net: Network) -> float:
    return simulate_des(build_schedule(call, name), net).time_s


@SETTINGS
@given(
    pair=st.sampled_from(PAIRS),
    p=st.integers(1, 9),
    sizes=st.lists(st.integers(0, 300_000), min_size=2, max_size=2).map(sorted),
    chunks=st.integers(1, 4),
    kind=st.sampled_from(["fully_connected", "ring"]),
    gamma=st.sampled_from([0.0, 2e-12]),
    data=st.data(),
)
def test_time_is_non_decreasing_in_size(pair, p, sizes, chunks, kind, gamma, data) -> None:
    """More bytes never take less time, for a fixed piece count whose pieces line up from step
    to step (see _aligned): the closed form always, the DES wherever nothing is shared. (The
    default piece count grows with the size, which may legitimately make a larger buffer
    faster.)"""
    name, coll = pair
    assume(_supported(name, p))
    assume(_aligned(name, coll, chunks))
    root = data.draw(st.integers(0, p - 1))
    net = _net(kind, p, gamma)
    small, large = (
        Call(collective=coll, ranks=p, nbytes=n, root=root, chunks=chunks) for n in sizes
    )
    assert predict(small, net, name) <= predict(large, net, name) * (1 + 1e-12)
    if _uncontended(name, kind, chunks):
        assert _des(name, small, net) <= _des(name, large, net) * (1 + 1e-12)


def _aligned(name: str, coll: Collective, chunks: int) -> bool:
    """Whether every piece waits only for whole earlier pieces of the same bytes. Pipelined
    recursive-doubling all-gather and Rabenseifner cut each step's window afresh, so a piece's
    data readiness depends on which earlier pieces its bytes straddle, and one more byte can
    remove a dependency: recursive_doubling all_gather, p=3, 3 pieces takes 6.00049 us for 50 B
    and 5.00045 us for 51 B (DES, graph and closed form alike)."""
    if chunks == 1:
        return True
    if name == "recursive_doubling":
        return coll is Collective.ALL_REDUCE
    return name != "rabenseifner"


def _uncontended(name: str, kind: str, chunks: int | None) -> bool:
    """No two concurrent transfers of the schedule share a link: every algorithm on fully
    connected ranks except the pipelined double binary tree (its trees share pairs), and the
    ring algorithm on the ring topology. Elsewhere max-min sharing may make one more byte end a
    few picoseconds *earlier* (e.g. double_binary_tree, p=2, 3 pieces: 24196 B -> 4.266156 us,
    24197 B -> 4.266154 us), as processor sharing can."""
    if kind == "ring":
        return name == "ring"
    return name != "double_binary_tree" or chunks == 1


@SETTINGS
@given(
    coll=st.sampled_from([Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER]),
    p=st.integers(2, 12),
    n=st.integers(1, 2**26),
    chunks=st.sampled_from([None, 1, 2, 5]),
    kind=st.sampled_from(["fully_connected", "ring"]),
)
def test_ring_busbw_never_exceeds_the_link_bandwidth(coll, p, n, chunks, kind) -> None:
    """Ring all-reduce / all-gather / reduce-scatter: busbw <= B, the bandwidth of the one link
    each rank sends on (nccl-tests' busbw is defined so that this is the bound)."""
    net = _net(kind, p)
    call = Call(collective=coll, ranks=p, nbytes=n, chunks=chunks)
    factor = coll.busbw_factor(p)
    for time_s in (_des("ring", call, net), predict(call, net, "ring")):
        assert n / time_s * factor <= B * (1 + 1e-12)


def _links_per_rank(kind: str, p: int) -> int:
    if kind == "fully_connected":
        return p - 1
    return 1 if p == 2 else 2


@SETTINGS
@given(
    pair=st.sampled_from(PAIRS),
    p=st.integers(2, 9),
    n=st.integers(1, 2**24),
    chunks=st.sampled_from([None, 1, 3]),
    kind=st.sampled_from(["fully_connected", "ring"]),
)
def test_busbw_bounded_by_what_a_rank_must_move(pair, p, n, chunks, kind) -> None:
    """Any algorithm: a rank has ``k`` links of bandwidth B each way, and must send (reduce,
    reduce-scatter, all-reduce) or receive (broadcast, all-gather) at least the bytes of the
    others' segments, so busbw <= k B; all-reduce's factor 2(p-1)/p multiplies an algbw that
    cannot exceed k B."""
    name, coll = pair
    assume(_supported(name, p))
    net = _net(kind, p)
    call = Call(collective=coll, ranks=p, nbytes=n, chunks=chunks)
    bound = _links_per_rank(kind, p) * B
    if coll is Collective.ALL_REDUCE:
        bound *= coll.busbw_factor(p)
    time_s = _des(name, call, net)
    assert n / time_s * coll.busbw_factor(p) <= bound * (1 + 1e-12)


@settings(max_examples=15 * EXAMPLE_SCALE)
@given(
    hosts=st.integers(1, 3),
    gpus=st.integers(1, 4),
    n=st.integers(1, 2**24),
    chunks=st.sampled_from([None, 1, 3]),
)
def test_hierarchical_busbw_bounded_by_a_gpus_ports(hosts, gpus, n, chunks) -> None:
    """A GPU of the hierarchical topology sends on two ports (NVSwitch and NIC): all-reduce's
    algbw cannot exceed their sum, whichever engine."""
    assume(hosts * gpus > 1)
    net = hierarchical(hosts, gpus, intra=("2us", "450GB/s"), inter=("5us", "50GB/s"))
    call = make_call("all_reduce", net, n, chunks=chunks)
    for time_s in (_des("hierarchical", call, net), predict(call, net, "hierarchical")):
        assert n / time_s <= (450e9 + 50e9) * (1 + 1e-12)


@SETTINGS
@given(
    pair=st.sampled_from(PAIRS),
    p=st.integers(1, 9),
    n=st.integers(0, 2**22),
    chunks=st.sampled_from([None, 1, 3]),
    kind=st.sampled_from(["fully_connected", "ring"]),
)
def test_runs_are_byte_identical(pair, p, n, chunks, kind) -> None:
    """The same schedule on the same (or a freshly built) network gives the same Timing, byte
    for byte; the closed form is as repeatable."""
    name, coll = pair
    assume(_supported(name, p))
    call = Call(collective=coll, ranks=p, nbytes=n, root=p - 1, chunks=chunks)
    schedule = build_schedule(call, name)
    first = simulate_des(schedule, _net(kind, p))
    again = simulate_des(schedule, _net(kind, p))
    same_net = _net(kind, p)
    third = simulate_des(build_schedule(call, name), same_net)
    fourth = simulate_des(schedule, same_net)
    blobs = {pickle.dumps(t) for t in (first, again, third, fourth)}
    assert len(blobs) == 1
    assert predict(call, same_net, name) == predict(call, _net(kind, p), name)


@pytest.mark.parametrize(("name", "coll"), PAIRS, ids=lambda v: str(v))
@given(n=st.integers(0, 2**40), chunks=st.sampled_from([None, 1, 7]))
@settings(max_examples=10 * EXAMPLE_SCALE)
def test_one_rank_takes_zero_time(name, coll, n, chunks) -> None:
    """A single rank has nobody to talk to: no transfers, zero seconds, in both engines."""
    net = _net("fully_connected", 1)
    call = Call(collective=coll, ranks=1, nbytes=n, chunks=chunks)
    schedule = build_schedule(call, name)
    assert len(schedule) == 0
    assert simulate_des(schedule, net).time_s == 0.0
    assert predict(call, net, name) == 0.0
