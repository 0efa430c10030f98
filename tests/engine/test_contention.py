"""The DES's flow-level bandwidth sharing: max-min fair rates, re-shared as flows come and go.

Every network here is built by hand so that each expected time can be written down exactly:
bandwidths and sizes are powers of two, so the piecewise-linear times are exact in binary
floating point and the comparisons use a relative tolerance of 1e-12.
"""

from __future__ import annotations

import pytest

from commsim.collectives import Collective
from commsim.engine import des, maxmin
from commsim.engine.des import simulate_des
from commsim.network import Device, Link, Network
from commsim.schedule import OpKind, Schedule, Transfer

A = 2.0**-20  # per-hop latency, s (about 1 us)
B = 2.0**30  # link bandwidth, B/s (about 1 GB/s)
N = 2**20  # transfer size, B


def _network(
    ranks: int, links: list[tuple[int, int, float]], devices: int | None = None
) -> Network:
    """Ranks 0..ranks-1 on devices 0..ranks-1 (more devices are switches); links (src, dst, bw)."""
    total = devices if devices is not None else ranks
    devs = tuple(
        Device(f"gpu{i}", "gpu") if i < ranks else Device(f"sw{i}", "switch") for i in range(total)
    )
    return Network(
        "hand-built",
        devs,
        tuple(Link(s, d, A, bw) for s, d, bw in links),
        tuple(range(ranks)),
    )


def _star(ranks: int) -> Network:
    """Ranks behind one switch (device ``ranks``): each rank has an up and a down link of B."""
    sw = ranks
    links = [(r, sw, B) for r in range(ranks)] + [(sw, r, B) for r in range(ranks)]
    return _network(ranks, links, devices=ranks + 1)


def _schedule(ranks: int, transfers: list[Transfer]) -> Schedule:
    return Schedule(Collective.ALL_GATHER, "hand", ranks, 0, 0, 1, tuple(transfers))


def _copy(src: int, dst: int, nbytes: int, deps: tuple[int, ...] = ()) -> Transfer:
    return Transfer(src, dst, 0, nbytes, OpKind.COPY, deps)


def test_two_flows_through_one_link_each_get_half_its_bandwidth() -> None:
    """Two transfers into the same rank share the switch's down link: each drains at B/2."""
    net = _star(3)
    timing = simulate_des(_schedule(3, [_copy(0, 2, N), _copy(1, 2, N)]), net)
    expected = 2 * A + N / (B / 2)
    assert timing.start_s.tolist() == [0.0, 0.0]
    assert timing.end_s[0] == pytest.approx(expected, rel=1e-12)
    assert timing.end_s[1] == pytest.approx(expected, rel=1e-12)


def test_alone_a_transfer_costs_alpha_plus_n_over_beta() -> None:
    """The uncontended baseline: summed hop latency plus size over the narrowest hop."""
    net = _network(2, [(0, 1, B)])
    assert simulate_des(_schedule(2, [_copy(0, 1, N)]), net).time_s == pytest.approx(
        A + N / B, rel=1e-12
    )


def test_max_min_fairness_three_flows_with_a_bottleneck() -> None:
    """Classic max-min example: link X (8B) carries flows a, b; link Y (2B) carries b, c.

    Y is the bottleneck (2B / 2 = B each for b and c); a gets what X has left, 8B - B = 7B,
    not the naive equal share 4B. When a ends, b stays at B: it is still limited by Y.
    """
    # devices 0 -> 1 -> 2; ranks 0,1,2; X = 0->1 (8B), Y = 1->2 (2B)
    net = _network(3, [(0, 1, 8 * B), (1, 2, 2 * B)])
    flows = [_copy(0, 1, 7 * N), _copy(0, 2, N), _copy(1, 2, N)]  # a, b, c
    timing = simulate_des(_schedule(3, flows), net)
    assert timing.end_s[0] == pytest.approx(A + 7 * N / (7 * B), rel=1e-12)
    assert timing.end_s[1] == pytest.approx(2 * A + N / B, rel=1e-12)
    assert timing.end_s[2] == pytest.approx(A + N / B, rel=1e-12)


def test_rates_are_max_min_not_proportional() -> None:
    """The rates the engine assigns are the max-min allocation (checked on the helper directly)."""
    net = _network(3, [(0, 1, 8 * B), (1, 2, 2 * B)])
    flows = [des._Flow(0, (0,), N, 0.0), des._Flow(1, (0, 1), N, 0.0), des._Flow(2, (1,), N, 0.0)]
    on_link = {0: {0: flows[0], 1: flows[1]}, 1: {1: flows[1], 2: flows[2]}}
    rates = maxmin.fill(flows, [0, 1], [lk.bandwidth_Bps for lk in net.links], on_link)
    assert rates == {0: 7 * B, 1: B, 2: B}


def test_a_flow_speeds_up_when_the_other_ends() -> None:
    """Flows of N and 3N on one link: both at B/2 until the small one drains at 2N/B, then the
    large one has 2N left at full rate B and drains at 4N/B; each arrives a latency later."""
    net = _network(2, [(0, 1, B)])
    timing = simulate_des(_schedule(2, [_copy(0, 1, N), _copy(0, 1, 3 * N)]), net)
    assert timing.end_s[0] == pytest.approx(2 * N / B + A, rel=1e-12)
    assert timing.end_s[1] == pytest.approx(4 * N / B + A, rel=1e-12)


def test_a_late_flow_slows_an_early_one_piecewise() -> None:
    """Flow a (4N, 0->2 via the switch) runs alone at B until flow b joins on the same down link.

    b waits for c (3->1, N bytes, 2 hops, on links a does not use: ends at t1 = 2A + N/B) and
    then sends N bytes 1->2. From t1 both drain at B/2 until b is done (2N/B later); then a
    drains what is left at B again.
    """
    net = _star(4)
    flows = [_copy(0, 2, 4 * N), _copy(1, 2, N, deps=(2,)), _copy(3, 1, N)]  # a, b, c
    timing = simulate_des(_schedule(4, flows), net)
    t1 = 2 * A + N / B
    assert timing.start_s[1] == pytest.approx(t1, rel=1e-12)
    b_drained = t1 + N / (B / 2)
    assert timing.end_s[1] == pytest.approx(b_drained + 2 * A, rel=1e-12)
    a_left = 4 * N - t1 * B - (b_drained - t1) * (B / 2)
    assert timing.end_s[0] == pytest.approx(b_drained + a_left / B + 2 * A, rel=1e-12)


def test_an_unrelated_flow_is_unaffected_and_never_reshared(monkeypatch) -> None:
    """A flow on disjoint links ends exactly at A + N/B while a contended pair shares another
    link; and every re-sharing computation touches only flows connected through shared links
    (the uncontended flow is only ever re-shared alone), so uncontended cost stays O(transfers)."""
    # star of 3 ranks for the contended pair; ranks 3 -> 4 on a private link
    links = [(0, 5, B), (1, 5, B), (5, 2, B), (3, 4, B)]
    net = _network(5, links, devices=6)
    seen: list[frozenset[int]] = []
    original = maxmin.fill

    def spy(flows, links_, capacity, on_link):  # type: ignore[no-untyped-def]
        seen.append(frozenset(f.index for f in flows))
        return original(flows, links_, capacity, on_link)

    monkeypatch.setattr(maxmin, "fill", spy)
    flows = [_copy(0, 2, N), _copy(1, 2, 3 * N), _copy(3, 4, N)]
    timing = simulate_des(_schedule(5, flows), net)
    assert timing.end_s[2] == pytest.approx(A + N / B, rel=1e-12)
    assert all(s == {2} or 2 not in s for s in seen)
    assert {0, 1} in seen  # the contended pair was shared together
    # and the contended pair is unaffected by the private flow: same times without it
    alone = simulate_des(_schedule(5, flows[:2]), net)
    assert alone.end_s.tolist() == timing.end_s[:2].tolist()


def test_shared_link_in_the_middle_of_a_path() -> None:
    """Fairness is per link along the whole path: two flows 0->3 and 1->3 whose only common hop
    is the middle link (4B) each get 2B, although their first hops have 8B."""
    # devices: ranks 0,1,2,3; switches 4 and 5; 0->4, 1->4 (8B), 4->5 (4B), 5->3 (8B)
    net = _network(4, [(0, 4, 8 * B), (1, 4, 8 * B), (4, 5, 4 * B), (5, 3, 8 * B)], devices=6)
    timing = simulate_des(_schedule(4, [_copy(0, 3, 2 * N), _copy(1, 3, 2 * N)]), net)
    for end in timing.end_s:
        assert end == pytest.approx(3 * A + 2 * N / (2 * B), rel=1e-12)
