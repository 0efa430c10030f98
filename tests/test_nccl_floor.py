"""The structure of the NCCL model (commsim.nccl, commsim.nccl_tables, commsim.nccl_paths):
the floor is the sum of its named parts, the NCCL release selects the constants, time grows
with size, more channels are never slower at large sizes, NCCL's per-call channel count and
ring order. No test here checks a constant against a measurement."""

from __future__ import annotations

import pytest

import commsim
from commsim.algorithms.calls import make_call
from commsim.nccl import NcclModel, base_latency_s, with_gpus_per_thread
from commsim.nccl_caps import bandwidth_factor
from commsim.nccl_paths import nvlink_spread, ring_order
from commsim.nccl_tables import (
    CHAIN_TRANSFERS,
    HOST_LAUNCH_US,
    SIMPLE_STEP_BYTES,
    VERSIONS,
    active_channels,
    chain_chunks,
    ring_plateau,
    tables,
    tree_correction,
)
from commsim.nccl_tables import PROTOCOLS as NCCL_PROTOCOLS
from commsim.topology import load_topology

ONE_HOST = {"kind": "hierarchical", "nodes": 1, "gpus_per_node": 8,
            "intra": {"latency": "0.6us", "bandwidth": "235GB/s"},
            "inter": {"latency": "2.7us", "bandwidth": "23GB/s"}}


def with_nccl(**nccl: object) -> dict[str, object]:
    return {**ONE_HOST, "nccl": {"arch": "ampere", "channels": 16, **nccl}}


#: The machine's own floor times of an ``nccl:`` block: none (the model's), and calibrated ones.
MACHINE_TIMES = [{}, {"overhead": 3e-6, "host_per_gpu": 6.5e-6}]


@pytest.mark.parametrize("topology", ["dgx-a100", "dgx-h100x2", "dgx1-v100", "pcie-gen4-8gpu"])
@pytest.mark.parametrize("gpus_per_thread", [1, 8])
@pytest.mark.parametrize("machine", MACHINE_TIMES)
def test_floor_is_the_sum_of_its_named_parts(topology: str, gpus_per_thread: int,
                                             machine: dict[str, float]) -> None:
    """For every (algorithm, protocol) NCCL weighs, the time of a one-byte-per-rank call is
    base + overhead + hops + host, each from its source: base = tuning.cc baseLat of the
    release, overhead = the block's (0 unless calibrated), host = what the host's issue time
    (GPUs per thread x the per-GPU cost) leaves unhidden."""
    net = load_topology(topology)
    meta = {**net.meta, "nccl": {**net.meta["nccl"], "gpus_per_thread": gpus_per_thread,
                                 **machine}}
    net = net.rebuilt(meta=meta)
    model = NcclModel.of(net)
    version = str(meta["nccl"]["version"])  # type: ignore[index]
    per_gpu = machine.get("host_per_gpu", HOST_LAUNCH_US * 1e-6)
    for collective in ("all_reduce", "all_gather", "broadcast"):
        call = make_call(collective, net, net.ranks)
        for name, protocol in model.candidates(call):
            floor = model.floor(call, name, protocol)
            assert floor.total_s == pytest.approx(sum(floor.parts.values()), rel=1e-12)
            assert floor.base_s == base_latency_s(name, protocol, version)
            assert floor.overhead_s == machine.get("overhead", 0.0)
            unhidden = gpus_per_thread * per_gpu - floor.base_s - floor.overhead_s - floor.hops_s
            assert floor.host_s == pytest.approx(max(0.0, unhidden))
            timed = commsim.simulate(collective, net, net.ranks, algorithm=name,
                                     protocol=protocol, engine="des").time_s
            assert timed == pytest.approx(floor.total_s, rel=1e-9)


def test_ring_hops_are_its_steps_times_the_hop_latency() -> None:
    """On one NVSwitch host a ring all-reduce's hops are its 2 (p - 1) steps, each the
    topology's NVLink hop scaled by hwLat (LL: the hop itself; Simple: 3.4 / 0.6 of it)."""
    net = load_topology("dgx-a100")
    call = make_call("all_reduce", net, 8)
    model = NcclModel.of(net)
    hop = 0.6e-6
    assert model.floor(call, "ring", "LL").hops_s == pytest.approx(14 * hop, rel=1e-3)
    assert model.floor(call, "ring", "Simple").hops_s == pytest.approx(14 * hop * 3.4 / 0.47,
                                                                       rel=1e-3)


def test_the_release_selects_the_constants() -> None:
    """The same machine under NCCL 2.7 and 2.23: each floor's base is that release's baseLat,
    and a tree's Simple hop follows that release's hwLat (28 us per NVLink hop in 2.7, 4 in
    2.23, as ratios to the ring LL hop)."""
    old, new = (load_topology(with_nccl(version=v)) for v in ("2.7", "2.23"))
    for net, version in ((old, "2.7"), (new, "2.23")):
        call = make_call("all_reduce", net, 8)
        floor = NcclModel.of(net).floor(call, "ring", "LL")
        assert floor.base_s == tables(version).base_us["ring"]["LL"] * 1e-6
    assert tables("2.7").base_us["ring"]["LL"] != tables("2.23").base_us["ring"]["LL"]
    hosts = {**ONE_HOST, "nodes": 2}
    times = {}
    for version in ("2.7", "2.23"):
        net = load_topology({**hosts, "nccl": {"arch": "ampere", "version": version}})
        times[version] = commsim.simulate("all_reduce", net, 1 << 16,
                                          algorithm="double_binary_tree",
                                          protocol="Simple").time_s
    assert times["2.7"] > times["2.23"]
    assert [t.release for t in VERSIONS] == sorted((t.release for t in VERSIONS),
                                                   key=lambda r: tuple(map(int, r.split("."))))
    assert tables("2.7.5").release == "2.7" and tables("2.12").release == "2.8"
    assert tables("2.19").release == "2.18" and tables("2.30").release == VERSIONS[-1].release


@pytest.mark.parametrize("topology", ["dgx-a100", "dgx-h100x2", "dgx1-v100", "dgx2-v100",
                                      "pcie-gen4-8gpu", "gcp-a3-megax2"])
def test_time_grows_with_size(topology: str) -> None:
    """At nccl-tests' sizes (powers of two) NCCL's choice never gets faster for more bytes,
    for every collective (the channel ramp keeps each channel's share constant)."""
    for collective in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        times = [commsim.simulate(collective, topology, 2**e, engine="analytic").time_s
                 for e in range(3, 31)]
        # within 1e-4: a chain's piece count is an integer, rounded from its optimum
        assert all(b >= a * (1 - 1e-4) for a, b in zip(times, times[1:], strict=False))


def test_more_channels_never_slower_at_large_sizes() -> None:
    """At 256 MiB and 1 GiB, 1..64 channels: time never grows with the channel count."""
    for size in ("256MiB", "1GiB"):
        for collective in ("all_reduce", "all_gather"):
            times = [commsim.simulate(collective, load_topology(with_nccl(channels=c)),
                                      size).time_s for c in (1, 2, 4, 8, 16, 32, 64)]
            assert all(b <= a * (1 + 1e-12) for a, b in zip(times, times[1:], strict=False))


def test_small_calls_run_fewer_channels() -> None:
    """enqueue.cc's loop: one channel less while the call has fewer than channels x threads x
    threshold bytes; the ring's LL threshold scales with the ranks; then threads halve."""
    assert active_channels(1 << 30, 8, "ring", "Simple", 16) == (16, 512)
    channels = [active_channels(2**e, 8, "ring", "Simple", 16)[0] for e in range(10, 24)]
    assert channels == sorted(channels) and channels[0] == 1 and channels[-1] == 16
    assert active_channels(1 << 16, 16, "ring", "LL", 16)[0] < \
        active_channels(1 << 16, 2, "ring", "LL", 16)[0]
    assert active_channels(8, 8, "ring", "Simple", 16) == (1, 64)
    assert active_channels(8, 8, "nvls", "Simple", 16) == (16, 512)


def test_rings_follow_direct_nvlinks_and_use_them_all() -> None:
    """On the DGX-1's cube-mesh NCCL's ring visits the GPUs through direct NVLinks only, and
    commsim's one ring gets all of a GPU's NVLinks (6 links, 120 GB/s); behind a switch the
    order is the rank order."""
    net = load_topology("dgx1-v100")
    order = ring_order(net, 8)
    assert sorted(order) == list(range(8)) and order[0] == 0
    direct = {(link.src, link.dst) for link in net.links}
    devices = net.rank_devices
    assert all((devices[a], devices[b]) in direct for a, b in zip(order, order[1:] + order[:1],
                                                                  strict=True))
    assert set(nvlink_spread(net).values()) == {120e9}
    assert ring_order(load_topology("dgx-a100"), 8) == tuple(range(8))


def test_gpus_per_thread_sets_the_host_part() -> None:
    """nccl-tests -g 8 on one host: the floor is the host's 8 x 4 us, not the GPUs' time;
    at 1 GiB the host's time is hidden."""
    net = with_gpus_per_thread(load_topology("dgx-a100"), 8)
    small = commsim.simulate("all_reduce", net, 8).time_s
    assert small == pytest.approx(8 * HOST_LAUNCH_US * 1e-6, rel=1e-9)
    big = commsim.simulate("all_reduce", net, "1GiB").time_s
    assert big == pytest.approx(commsim.simulate("all_reduce", "dgx-a100", "1GiB").time_s)


def test_the_machines_floor_times_add_to_every_size() -> None:
    """An ``overhead`` in the block adds the same time to a call of every size (the GPUs'
    own cost per call), and a ``host_per_gpu`` moves only what the host rules (-g 8's small
    sizes); both load from YAML with units and are written back the same."""
    from commsim.topology.dump import dump_yaml
    from commsim.topology.loader import spec_from_dict

    plain = load_topology(with_nccl())
    slower = load_topology(with_nccl(overhead="2.5us"))
    for size in ("8B", "1MiB", "1GiB"):
        gap = (commsim.simulate("all_reduce", slower, size).time_s
               - commsim.simulate("all_reduce", plain, size).time_s)
        assert gap == pytest.approx(2.5e-6, rel=1e-6)
    host = load_topology(with_nccl(gpus_per_thread=8, host_per_gpu="5us"))
    assert commsim.simulate("all_reduce", host, 8).time_s == pytest.approx(40e-6, rel=1e-9)
    big = commsim.simulate("all_reduce", host, "1GiB").time_s
    assert big == pytest.approx(commsim.simulate("all_reduce", plain, "1GiB").time_s)
    spec = spec_from_dict(with_nccl(overhead="2.5us", host_per_gpu="5us"))
    assert "host_per_gpu: 5us" in dump_yaml(spec) and "overhead: 2.5us" in dump_yaml(spec)
    assert spec_from_dict(with_nccl()).nccl.as_meta().keys().isdisjoint(  # type: ignore[union-attr]
        {"overhead", "host_per_gpu"})


@pytest.mark.parametrize(("value", "message"), [
    ({"overhead": "-1us"}, "nccl.overhead: must not be negative"),
    ({"overhead": 5}, "nccl.overhead: 5 has no unit"),
    ({"overhead": "2s"}, "nccl.overhead: expected a time from 0 to 1s"),
    ({"host_per_gpu": "fast"}, "nccl.host_per_gpu: not a time"),
])
def test_the_machines_floor_times_are_validated(value: dict[str, object], message: str) -> None:
    with pytest.raises(commsim.SpecError, match=message):
        load_topology(with_nccl(**value))


def test_gpus_per_thread_is_validated() -> None:
    """gpus_per_thread and version are checked as the rest of the nccl block."""
    with pytest.raises(commsim.SpecError, match="nccl.gpus_per_thread"):
        load_topology(with_nccl(gpus_per_thread=0))
    with pytest.raises(commsim.SpecError, match="nccl.version"):
        load_topology(with_nccl(version="two"))


@pytest.mark.parametrize("ranks", [3, 8, 12, 64, 4096])
def test_chain_pieces_follow_nccl_steps_within_a_budget(ranks: int) -> None:
    """A Simple chain never has more pieces than NCCL's 512 KiB steps per channel, never
    fewer than commsim's ring chains (``max(64, 4 (ranks - 1))`` or the steps), and more
    only within the transfer budget; more bytes never mean fewer pieces."""
    last = 0
    for nbytes in (1 << 20, 64 << 20, 1 << 30, 8 << 30):
        steps = -(-nbytes // (16 * SIMPLE_STEP_BYTES))
        got = chain_chunks(nbytes, ranks, "Simple", 16)
        assert got <= steps
        assert got >= min(steps, max(64, 4 * (ranks - 1)))
        assert got <= max(64, 4 * (ranks - 1)) or (ranks - 1) * got <= CHAIN_TRANSFERS
        assert got >= last
        last = got


def test_ll_bandwidth_factors_follow_the_release() -> None:
    """LL's bandwidth factor: the tree's below the ring's; the ring's for a reducing or
    multi-node call at most its factor for others; from 2.23 the ring's is LL's data half;
    LL128 and Simple keep their protocol factor on rings."""
    ll, ll128, simple = NCCL_PROTOCOLS
    for version in ("2.7", "2.18", "2.19"):
        ring = bandwidth_factor(version, "ring", ll, False, False)
        assert bandwidth_factor(version, "ring", ll, True, True) <= ring
        assert bandwidth_factor(version, "tree", ll, True, True) < ring < ll.bandwidth
    assert bandwidth_factor("2.23", "ring", ll, True, True) == ll.bandwidth
    for protocol in (ll128, simple):
        assert bandwidth_factor("2.19", "ring", protocol, True, True) == protocol.bandwidth


def test_a_chain_pays_each_hops_latency_once() -> None:
    """NCCL's chain (broadcast, reduce) keeps several steps in flight, so a hop's latency is
    paid once along it: under NCCL's model more pieces never make a chain slower, and its
    time is at least the hops' latency plus the bytes at the link's pace (the fill aside)."""
    net = load_topology("dgx-h100")
    model = NcclModel(net)
    times = []
    for pieces in (1, 8, 64, 512):
        call = make_call("broadcast", net, 256 << 20, chunks=pieces)
        times.append(model.evaluate(call, "ring", "LL128", "des").time_s)
    assert times == sorted(times, reverse=True)
    one_hop = model.evaluate(make_call("broadcast", net.with_ranks(2), 256 << 20, chunks=1),
                             "ring", "LL128", "des").time_s
    assert times[-1] >= one_hop


def test_trees_move_a_fraction_of_their_bandwidth_at_medium_sizes() -> None:
    """tuning.cc's tree correction: a fraction in (0, 1] at every size, 1 at the largest;
    NCCL's tree across hosts (and only the tree) is then never faster than uncorrected: its
    composed time at 8 MiB is at least that of the same network without the correction."""
    for version in ("2.7", "2.19", "2.20"):
        for protocol in ("LL", "LL128", "Simple"):
            factors = [tree_correction(version, protocol, 2**e) for e in range(0, 34)]
            assert all(0 < f <= 1 for f in factors) and factors[-1] == 1.0
    net = load_topology("dgx-h100x2")
    model = NcclModel(net)
    call = make_call("all_reduce", net, 8 << 20)
    corrected = model.evaluate(call, "hierarchical_pipelined", "LL128", "analytic").time_s
    assert model.tree_scale("tree", "LL128", 8 << 20) < 1
    assert model.tree_scale("ring", "LL128", 8 << 20) == 1.0
    model.tree_scale = lambda *args: 1.0  # type: ignore[method-assign]
    plain = NcclModel.evaluate(model, call, "hierarchical_pipelined", "LL128", "analytic")
    assert corrected > plain.time_s


def test_the_ring_plateau_only_slows_multi_node_simple_all_reduce() -> None:
    """tuning.cc's ring plateau: 1 on tiny calls, then a constant factor above 1 (never
    decreasing with size); applied to a ring Simple all_reduce across hosts only, where it
    makes the call slower than the same ring within its hops' plain latencies would be."""
    for version in ("2.7", "2.18", "2.20"):
        for arch in ("volta", "ampere", "hopper"):
            factors = [ring_plateau(version, arch, 2**e, 16, 16) for e in range(0, 34)]
            assert factors[0] == 1.0 and factors[-1] > 1.0 and factors == sorted(factors)
    net = load_topology("dgx-h100x2")
    model = NcclModel(net)
    call = make_call("all_reduce", net, 64 << 20)
    simple = model.evaluate(call, "ring", "Simple", "analytic").time_s
    plain = model.network_for(16, "ring", "Simple", 64 << 20)
    assert simple > commsim.simulate("all_reduce", plain, 64 << 20, algorithm="ring",
                                     engine="analytic").time_s
