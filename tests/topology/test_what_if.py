"""What-if files: degraded and failed links, the network they make, and ``run --what-if``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import commsim
from commsim.cli import main
from commsim.errors import SpecError
from commsim.topology import load_topology
from commsim.topology.degrade import degrade, link_labels
from commsim.topology.what_if import load_what_if, what_if_from_dict

RING = {"kind": "ring", "ranks": 8, "link": {"latency": "1us", "bandwidth": "100GB/s"}}
NIC3_FAILED = {"links": {"gpu3->fabric": {"failed": True}, "fabric->gpu3": {"failed": True}}}


def _degraded(topology: object, data: dict) -> commsim.Network:
    return degrade(load_topology(topology), what_if_from_dict(data))


@pytest.mark.parametrize("engine", ["des", "analytic"])
def test_ring_with_one_half_speed_link_takes_the_slowest_links_closed_form(engine: str) -> None:
    """A ring all-reduce where one link runs at half bandwidth takes the alpha-beta closed
    form of the slowest link: 2(p-1)(alpha + n / (p beta/2)), by the DES and the closed form."""
    p, n = 8, 2**30
    r = commsim.simulate("all_reduce", RING, n, algorithm="ring", engine=engine,
                         what_if={"links": {"gpu3->gpu4": {"bandwidth": 0.5}}})
    assert r.time_s == pytest.approx(2 * (p - 1) * (1e-6 + n / p / 50e9), rel=1e-12)


def test_absolute_bandwidth_and_added_latency() -> None:
    """An absolute bandwidth replaces the link's, a latency adds to it; other links keep
    theirs."""
    net = _degraded(RING, {"links": {"gpu0->gpu1": {"bandwidth": "200Gbps", "latency": "3us"}}})
    labels = link_labels(net)
    changed = net.links[labels.index("gpu0->gpu1")]
    assert (changed.bandwidth_Bps, changed.latency_s) == (25e9, pytest.approx(4e-6))
    other = net.links[labels.index("gpu1->gpu0")]
    assert (other.bandwidth_Bps, other.latency_s) == (100e9, 1e-6)


def test_failed_nic_reroutes_through_a_peers_nic_over_nvlink() -> None:
    """A GPU whose NIC failed reaches other hosts through a peer GPU's NIC over the node's
    switch (NCCL's PXN); other GPUs keep their own rail."""
    net = _degraded("dgx-h100x2", NIC3_FAILED)
    route = [net.links[i].label for i in net.route(3, 11)]
    assert route == ["gpu3->nvswitch0", "nvswitch0->gpu0", "gpu0->fabric", "fabric->gpu11"]
    back = [net.links[i].label for i in net.route(11, 3)]
    assert back[0] == "gpu11->fabric" and back[-1] == "nvswitch0->gpu3"
    assert [net.links[i].label for i in net.route(2, 10)] == ["gpu2->fabric", "fabric->gpu10"]


def test_failed_nic_on_an_8_rail_node_costs_the_ring_one_rail() -> None:
    """NCCL's ring across two 8-rail DGX H100 runs one channel per NIC: with one NIC failed
    it crosses on the 7 that remain, so a large all-reduce's bandwidth falls by 7/8."""
    size = 8 * 2**30
    healthy = commsim.simulate("all_reduce", "dgx-h100x2", size, algorithm="ring")
    failed = commsim.simulate("all_reduce", "dgx-h100x2", size, algorithm="ring",
                              what_if=NIC3_FAILED)
    assert failed.busbw_Bps / healthy.busbw_Bps == pytest.approx(7 / 8, rel=0.01)


def test_half_speed_nic_paces_every_channel() -> None:
    """NCCL splits a call evenly over its channels, one NIC each: one NIC at half speed makes
    the large ring all-reduce across hosts about twice as slow, not 1/16 slower."""
    size = 8 * 2**30
    half = {"links": {"gpu3->fabric": {"bandwidth": 0.5}, "fabric->gpu3": {"bandwidth": 0.5}}}
    healthy = commsim.simulate("all_reduce", "dgx-h100x2", size, algorithm="ring")
    slow = commsim.simulate("all_reduce", "dgx-h100x2", size, algorithm="ring", what_if=half)
    assert slow.time_s / healthy.time_s == pytest.approx(2.0, rel=0.05)


def test_a_slow_rail_slows_nccls_trees_across_hosts() -> None:
    """The composed trees across hosts time every rail that differs, not the first only: a
    slow NIC on GPU 3 slows them, a healthy what-if does not."""
    size = 64 * 2**20
    algo = "hierarchical_pipelined"
    healthy = commsim.simulate("all_reduce", "dgx-h100x4", size, algorithm=algo)
    slow = commsim.simulate("all_reduce", "dgx-h100x4", size, algorithm=algo,
                            what_if={"links": {"gpu3->fabric": {"bandwidth": 0.25}}})
    same = commsim.simulate("all_reduce", "dgx-h100x4", size, algorithm=algo,
                            what_if={"links": {"gpu3->fabric": {"bandwidth": 1.0}}})
    assert slow.time_s > 1.5 * healthy.time_s
    assert same.time_s == healthy.time_s


def test_nvls_off_removes_nvls() -> None:
    """``nccl: {nvls: false}`` turns NVLink SHARP off: auto no longer picks nvls."""
    on = commsim.simulate("all_reduce", "dgx-h100", 2**30)
    off = commsim.simulate("all_reduce", "dgx-h100", 2**30, what_if={"nccl": {"nvls": False}})
    assert on.algorithm == "nvls" and off.algorithm != "nvls"


def test_a_cut_is_one_error_naming_it() -> None:
    """Failures that leave a rank without a route are an error naming the links and rank."""
    with pytest.raises(SpecError, match=r"gpu3->nvswitch0, gpu3->fabric\).*cut rank 3 \(gpu3\)"):
        _degraded("dgx-h100", {"links": {"gpu3->*": {"failed": True}}})


@pytest.mark.parametrize("data, match", [
    ({"links": {"gpu9->fabric": {"bandwidth": 0.5}}}, "matches no link"),
    ({"links": {"gpu0->fabric": {"bandwidth": 0}}}, "factor must be in"),
    ({"links": {"gpu0->fabric": {"bandwidth": "fast"}}}, "bandwidth"),
    ({"links": {"gpu0->fabric": {"speed": 1}}}, "unknown key"),
    ({"links": {"gpu0->fabric": {"failed": True, "bandwidth": 0.5}}}, "failed link"),
    ({"links": {"gpu0->fabric": {}}}, "changes nothing"),
    ({"ranks": {"x": {"compute": 2}}}, "ranks"),
    ({"ranks": {1: {"compute": -1}}}, "compute"),
    ({"jitter": {"distribution": "cauchy", "sigma": 0.1}}, "unknown 'cauchy'"),
    ({"jitter": {"distribution": "lognormal"}}, "sigma"),
    ({"nccl": {"arch": "volta"}}, "unknown key"),
    ({}, "changes nothing"),
])
def test_bad_what_if_is_a_spec_error(data: dict, match: str) -> None:
    """Bad what-if content is a SpecError naming the field."""
    with pytest.raises(SpecError, match=match):
        _degraded("dgx-a100", data)


def test_compute_factors_are_seeded_and_per_rank() -> None:
    """Jitter draws the same factors for the same seed; a named rank's factor multiplies."""
    w = what_if_from_dict({"ranks": {2: {"compute": 2.0}},
                           "jitter": {"distribution": "lognormal", "sigma": 0.1, "seed": 7}})
    a, b = w.compute_factors(4), w.compute_factors(4)
    assert np.array_equal(a, b)
    plain = what_if_from_dict({"jitter": {"distribution": "lognormal", "sigma": 0.1,
                                          "seed": 7}}).compute_factors(4)
    assert a[2] == pytest.approx(2 * plain[2]) and a[0] == plain[0]
    with pytest.raises(SpecError, match="ranks.2: the run has 2 ranks"):
        w.compute_factors(2)


def test_run_what_if_json_has_the_healthy_result_beside(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """``run --what-if --json`` gives the degraded result's keys and ``healthy`` with the
    same keys for the machine without the file."""
    path = tmp_path / "nic.yaml"
    path.write_text('links:\n  "gpu3->fabric": {failed: true}\n  "fabric->gpu3": {failed: true}\n')
    assert main(["run", "all_reduce", "-t", "dgx-h100x2", "-s", "1GiB", "-a", "ring",
                 "--what-if", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["healthy"]) <= set(out) and out["what_if"] == "nic"
    assert out["time_s"] > out["healthy"]["time_s"]
    assert out["slowdown"] == pytest.approx(out["time_s"] / out["healthy"]["time_s"])


@pytest.mark.parametrize("text, match", [
    ('links:\n  "gpu99->fabric": {bandwidth: 0.5}\n', "matches no link"),
    ('links:\n  "gpu3->*": {failed: true}\n', "cut rank 3"),
    ("links: [1, 2]\n", "must be a mapping"),
    ("links: {a: \n", "invalid YAML"),
])
def test_run_bad_what_if_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            text: str, match: str) -> None:
    """A what-if that matches nothing, cuts ranks off or does not parse: one line, exit 2."""
    path = tmp_path / "w.yaml"
    path.write_text(text)
    assert main(["run", "all_reduce", "-t", "dgx-h100", "-s", "1MiB",
                 "--what-if", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err and "w.yaml" in err


def test_topologies_links_lists_every_label(capsys: pytest.CaptureFixture[str]) -> None:
    """``topologies NAME --links`` prints one label a line, every link of the preset."""
    assert main(["topologies", "dgx-h100x2", "--links"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(load_topology("dgx-h100x2").links)
    assert "gpu3->fabric" in lines and "nvswitch1->gpu8" in lines


def test_what_if_file_round_trips(tmp_path: Path) -> None:
    """A parsed what-if written back as a mapping parses to the same what-if."""
    w = what_if_from_dict({"links": {"gpu*->fabric": {"bandwidth": "100Gbps", "latency": "2us"},
                                     "gpu1->nvswitch0": {"failed": True}},
                           "ranks": {3: {"compute": 1.5}},
                           "jitter": {"distribution": "normal", "sigma": 0.02, "seed": 3}})
    assert what_if_from_dict(w.as_dict()) == w
    path = tmp_path / "degraded.yaml"
    path.write_text(json.dumps(w.as_dict()))
    assert load_what_if(path).links == w.links


@pytest.mark.parametrize(("preset", "failed"), [
    ("dgx-h100x4", ("gpu3->fabric", "fabric->gpu3", "gpu9->nvswitch*")),
    ("dgx1-v100", ("gpu0->gpu1", "gpu2->gpu3", "gpu4->gpu6")),
    ("tpu-v4-64", ("tpu32->tpu33", "tpu30->tpu46", "tpu0->tpu48")),
])
def test_fewest_hops_in_numpy_is_the_routers_route(preset: str, failed: tuple[str, ...]) -> None:
    """The failover router's numpy breadth-first search finds the same route as
    shortest_path_router (fewest hops, ties by the lowest link index) for every pair of
    devices of a degraded network, and a cut pair is the same one-line error."""
    from commsim.network import shortest_path_router
    from commsim.topology.degrade import fewest_hops
    net = degrade(load_topology(preset),
                  what_if_from_dict({"links": {p: {"failed": True} for p in failed}}))
    for src in range(len(net.devices)):
        for dst in range(len(net.devices)):
            try:
                expected: object = shortest_path_router(net, src, dst)
            except SpecError as exc:
                expected = str(exc)
            try:
                got: object = fewest_hops(net, src, dst)
            except SpecError as exc:
                got = str(exc)
            assert got == expected, (src, dst)


def test_a_degraded_pair_never_stands_for_its_class() -> None:
    """On a degraded hierarchical network a closed form's worst pair of a phase must not
    depend on what was timed before: a pair touching a changed link stands only for itself,
    so timing the ring first (whose first pair crosses the slowed NIC) leaves the double
    binary tree's hops as they are alone (a bug found in what-if speed work: 1.20e-4 s alone,
    1.76e-4 s after the ring)."""
    from commsim.collectives import Collective
    from commsim.nccl import NcclModel
    from commsim.nccl_composed import ComposedTimer

    rail = tuple(range(5, 64, 8))
    answers = []
    for order in (("double_binary_tree", "ring"), ("ring", "double_binary_tree")):
        net = degrade(load_topology("dgx-h100x8"), what_if_from_dict(
            {"links": {"gpu5->fabric": {"latency": "5us"}}}))
        model = NcclModel.of(net)
        timer = ComposedTimer(model, "analytic")
        got = {name: timer._run(Collective.ALL_REDUCE, rail, 512, name, model.protocol("LL"),
                                1.0) for name in order}
        answers.append(got)
    assert answers[0] == answers[1]
