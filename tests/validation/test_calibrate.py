"""calibrate: recovers known parameters, keeps the template's shape, writes loadable YAML."""

from __future__ import annotations

import dataclasses

import pytest
from nccl_logs import DATA

from commsim.api import simulate
from commsim.collectives import Collective
from commsim.errors import SpecError
from commsim.topology import LinkSpec, load_topology, read_spec_file
from commsim.topology.presets import topology_spec
from commsim.validation.calibrate import calibrate
from commsim.validation.calibration import write_topology
from commsim.validation.measurements import Measurement, filter_rows, parse_sizes_flag
from commsim.validation.nccl_tests import read_nccl_tests
from commsim.validation.validate import validate

SIZES = [2**k for k in range(8, 25, 2)]


def _synthetic(topology: object, collectives: list[str], ranks: list[int], **kw) -> list:
    """Rows whose times are exactly what commsim predicts on ``topology``."""
    rows = []
    network = load_topology(topology)  # type: ignore[arg-type]
    for name in collectives:
        for p in ranks:
            for n in SIZES:
                t = simulate(name, network.with_ranks(p), n, **kw).time_s
                rows.append(
                    Measurement(collective=Collective(name), ranks=p, nbytes=n, time_s=t)
                )
    return rows


def test_recovers_a_switch_from_its_own_predictions(tmp_path) -> None:
    """Rows generated on a 4-rank switch (7 us, 3 GB/s) fit back to those numbers; the file
    it writes loads, runs, and has a header saying what was fitted."""
    truth = {"kind": "switch", "ranks": 4, "link": {"latency": "7us", "bandwidth": "3GB/s"}}
    rows = _synthetic(truth, ["all_reduce", "broadcast"], [2, 4])
    cal = calibrate(rows, source="synthetic.csv")
    assert cal.spec.kind == "switch" and cal.spec.num_ranks == 4
    assert cal.parameters["link.latency_s"] == pytest.approx(7e-6, rel=1e-4)
    assert cal.parameters["link.bandwidth_Bps"] == pytest.approx(3e9, rel=1e-4)
    assert cal.report.median_abs_error_pct < 0.01
    path = tmp_path / "fit.yaml"
    write_topology(cal, path)
    text = path.read_text()
    assert text.startswith("# Calibrated by `commsim calibrate` from synthetic.csv")
    assert "link.latency 7" in text and "residuals on these rows" in text
    spec = read_spec_file(path)
    assert simulate("all_reduce", str(path), "1MiB").time_s > 0 and spec.num_ranks == 4


def test_hierarchical_template_fits_intra_and_inter() -> None:
    """On a 2 x 4 hierarchical template, rows spanning both hosts fit both link classes."""
    truth = {
        "kind": "hierarchical", "nodes": 2, "gpus_per_node": 4,
        "intra": {"latency": "2us", "bandwidth": "100GB/s"},
        "inter": {"latency": "8us", "bandwidth": "10GB/s"},
    }
    rows = _synthetic(truth, ["all_gather"], [4, 8], algorithm="ring")
    template = dict(truth, intra={"latency": "1us", "bandwidth": "50GB/s"},
                    inter={"latency": "1us", "bandwidth": "50GB/s"})
    cal = calibrate(rows, template, algorithm="ring")
    assert cal.parameters["intra.latency_s"] == pytest.approx(2e-6, rel=1e-3)
    assert cal.parameters["intra.bandwidth_Bps"] == pytest.approx(100e9, rel=1e-3)
    assert cal.parameters["inter.latency_s"] == pytest.approx(8e-6, rel=1e-3)
    assert cal.parameters["inter.bandwidth_Bps"] == pytest.approx(10e9, rel=1e-3)


def test_single_host_rows_keep_the_inter_class() -> None:
    """When no row spans two hosts, ``inter`` is kept from the template (and said so)."""
    rows = _synthetic("dgx-h100", ["all_reduce"], [8], algorithm="ring")
    cal = calibrate(rows, "dgx-h100x2", algorithm="ring")
    assert cal.spec.inter == LinkSpec(latency_s=2.7e-6, bandwidth_Bps=46e9)  # type: ignore[attr-defined]
    assert "inter.latency_s" not in cal.parameters
    assert any("inter" in note for note in cal.notes)
    assert cal.parameters["intra.bandwidth_Bps"] == pytest.approx(370e9, rel=1e-3)


def test_custom_template_is_scaled_per_link_class_and_gamma_is_fitted() -> None:
    """A custom template keeps its devices; each (latency, bandwidth) class gets a factor;
    ``fit_gamma`` recovers the reduction cost."""
    truth = {
        "kind": "custom",
        "devices": [{"name": f"c{i}", "kind": "cpu"} for i in range(4)] + [{"name": "bus",
                                                                            "kind": "switch"}],
        "links": [{"src": f"c{i}", "dst": "bus", "latency": "20us", "bandwidth": "2GB/s"}
                  for i in range(4)],
        "gamma": "0.2ns",
        "algorithms": {"all_reduce": "ring"},
    }
    rows = _synthetic(truth, ["all_reduce", "all_gather"], [2, 4])
    template = dict(truth, links=[dict(link, latency="5us", bandwidth="1GB/s")
                                  for link in truth["links"]], gamma="0.01ns")
    cal = calibrate(rows, template, fit_gamma=True)
    assert cal.spec.kind == "custom" and cal.spec.algorithms == (("all_reduce", "ring"),)
    assert cal.parameters["links[0].latency_scale"] == pytest.approx(4.0, rel=1e-3)
    assert cal.parameters["links[0].bandwidth_scale"] == pytest.approx(2.0, rel=1e-3)
    assert cal.parameters["gamma_s_per_B"] == pytest.approx(0.2e-9, rel=1e-3)


def test_fit_on_some_sizes_predicts_the_others() -> None:
    """The --sizes split: a model fitted on half of the sizes predicts the other half."""
    truth = {"kind": "switch", "ranks": 4, "link": {"latency": "30us", "bandwidth": "0.5GB/s"}}
    rows = _synthetic(truth, ["all_reduce", "all_gather"], [2, 4])
    fit_half = parse_sizes_flag(",".join(str(n) for n in SIZES[::2]))
    check_half = parse_sizes_flag(",".join(str(n) for n in SIZES[1::2]))
    cal = calibrate(filter_rows(rows, sizes=fit_half))
    report = validate(filter_rows(rows, sizes=check_half), cal.spec)
    assert report.median_abs_error_pct < 0.01


def test_grows_the_template_and_rejects_what_it_cannot_fit() -> None:
    """A hierarchical template grows hosts to the largest world size; a torus cannot grow;
    no rows is an error."""
    rows = _synthetic({"kind": "switch", "ranks": 16,
                       "link": {"latency": "1us", "bandwidth": "10GB/s"}}, ["all_gather"], [16],
                      algorithm="ring")
    assert calibrate(rows[:3], "dgx-h100", algorithm="ring").spec.num_ranks == 16
    with pytest.raises(SpecError, match="template.*4 ranks.*need 16"):
        calibrate(rows, {"kind": "torus", "dims": [2, 2],
                         "link": {"latency": "1us", "bandwidth": "1GB/s"}})
    with pytest.raises(SpecError, match="no measured rows"):
        calibrate([])


def test_deterministic() -> None:
    """The same rows give byte-identical YAML."""
    rows = _synthetic({"kind": "switch", "ranks": 2, "link": {"latency": "9us",
                                                              "bandwidth": "2GB/s"}},
                      ["all_reduce"], [2])
    noisy = [Measurement(collective=r.collective, ranks=r.ranks, nbytes=r.nbytes,
                         time_s=r.time_s * (1.1 if i % 2 else 0.93)) for i, r in enumerate(rows)]
    assert calibrate(noisy).to_yaml() == calibrate(noisy).to_yaml()


def test_a_parameter_the_rows_do_not_determine_is_reported_at_its_bound() -> None:
    """Rows of a zero-latency switch leave the fitted latency on its 1 ns lower bound: the
    calibration says so (at_bounds, notes, JSON) instead of reporting 1 ns as a measurement;
    the progress callback sees every outer iteration, ending with done == total."""
    truth = {"kind": "switch", "ranks": 4, "link": {"latency": 0, "bandwidth": "3GB/s"}}
    rows = _synthetic(truth, ["all_reduce"], [4])
    seen: list[tuple[int, int]] = []
    cal = calibrate(rows, progress=lambda done, total: seen.append((done, total)))
    assert [b.parameter for b in cal.at_bounds] == ["link.latency_s"]
    bound = cal.at_bounds[0]
    assert (bound.side, bound.bound) == ("lower", 1e-9)
    assert bound.message == (
        "link.latency_s hit its 1ns lower bound: the measurements do not determine it; "
        "the fitted latency is meaningless"
    )
    assert bound.message in cal.notes and cal.to_dict()["at_bounds"][0]["side"] == "lower"
    assert seen and [d for d, _ in seen] == list(range(1, len(seen) + 1))
    assert seen[-1][0] == seen[-1][1]


def test_the_floor_parts_no_link_moves_are_not_fitted_into_the_links() -> None:
    """Rows of an nccl-tests ``-g 8`` run generated by NCCL's model on dgx-a100 (the floor's
    ``host`` part rules the small sizes, a constant no link parameter moves) fit back onto
    themselves when calibrate is told the run's GPUs per thread: the fit's local model is
    ``c + J x``, not ``J x``."""
    net = load_topology("dgx-a100")
    rows = [Measurement(collective=Collective.ALL_REDUCE, ranks=8, nbytes=n,
                        time_s=validate([Measurement(collective=Collective.ALL_REDUCE, ranks=8,
                                                     nbytes=n, time_s=1.0)], net,
                                        algorithm="nccl", engine="analytic",
                                        gpus_per_thread=8).rows[0].predicted_time_s)
            for n in SIZES]
    cal = calibrate(rows, "dgx-a100", algorithm="nccl", engine="analytic", gpus_per_thread=8)
    assert cal.report.median_abs_error_pct < 1.0
    assert not cal.at_bounds


def test_recovers_the_machines_floor_times() -> None:
    """Rows of nccl-tests ``-g 4`` generated on dgx-a100 with a 7 us overhead per call and
    6 us of host time per GPU fit back to both from the plain preset (its floor has neither),
    the links back to the preset's, and the file says so."""
    preset = topology_spec("dgx-a100")
    assert preset.nccl is not None
    net = load_topology(dataclasses.replace(preset, nccl=dataclasses.replace(
        preset.nccl, overhead_s=7e-6, host_per_gpu_s=6e-6)))
    sizes = [2**k for k in range(3, 31, 3)]
    rows = [Measurement(collective=Collective(c), ranks=4, nbytes=n,
                        time_s=validate([Measurement(collective=Collective(c), ranks=4,
                                                     nbytes=n, time_s=1.0)], net,
                                        algorithm="nccl", engine="analytic",
                                        gpus_per_thread=4).rows[0].predicted_time_s)
            for c in ("all_reduce", "all_gather") for n in sizes]
    cal = calibrate(rows, "dgx-a100", algorithm="nccl", engine="analytic", gpus_per_thread=4)
    assert cal.parameters["nccl.overhead_s"] == pytest.approx(7e-6, rel=1e-3)
    assert cal.parameters["nccl.host_per_gpu_s"] == pytest.approx(6e-6, rel=1e-3)
    intra = preset.intra  # type: ignore[attr-defined]
    assert cal.parameters["intra.latency_s"] == pytest.approx(intra.latency_s, rel=1e-3)
    assert cal.parameters["intra.bandwidth_Bps"] == pytest.approx(intra.bandwidth_Bps, rel=1e-3)
    assert cal.report.median_abs_error_pct < 0.1
    assert "host_per_gpu: 6us" in cal.to_yaml() and "overhead: 7us" in cal.to_yaml()


def test_a_bandwidth_the_rows_do_not_bound_is_kept_at_the_templates() -> None:
    """Rows whose time does not grow with the size drive the bandwidth to its 100 TB/s bound,
    which no machine has: with a template, the fit keeps the template's bandwidth, says so,
    and refits the latency; without one, the bound is reported as before."""
    rows = [Measurement(collective=Collective.ALL_REDUCE, ranks=4, nbytes=n, time_s=20e-6)
            for n in SIZES]
    template = {"kind": "switch", "ranks": 4, "link": {"latency": "1us", "bandwidth": "50GB/s"}}
    cal = calibrate(rows, template)
    assert cal.spec.link.bandwidth_Bps == 50e9  # type: ignore[union-attr]
    assert "link.bandwidth_Bps not determined by the rows (the fit took it to a bound): kept " \
           "at the template's value" in cal.notes
    assert not cal.at_bounds and cal.parameters["link.latency_s"] > 1e-6
    assert [b.parameter for b in calibrate(rows).at_bounds] == ["link.bandwidth_Bps"]


def test_a_template_whose_every_parameter_is_undetermined_is_kept_whole() -> None:
    """A custom link without latency has one parameter, its bandwidth scale; rows far faster
    than any bandwidth drive it to its bound. It is held at the template's and nothing is left
    to refit: the template comes back, not a 'nothing to fit' error."""
    rows = [Measurement(collective=Collective.ALL_REDUCE, ranks=2, nbytes=n, time_s=1e-12)
            for n in SIZES]
    template = {"kind": "custom", "devices": [{"name": "a"}, {"name": "b"}],
                "links": [{"src": "a", "dst": "b", "latency": 0, "bandwidth": "10GB/s"}]}
    cal = calibrate(rows, template)
    assert cal.parameters == {"links[0].bandwidth_scale": 1.0}
    assert cal.spec.links[0].bandwidth_Bps == 10e9  # type: ignore[union-attr]
    assert cal.notes == ("links[0].bandwidth_scale not determined by the rows (the fit took it "
                         "to a bound): kept at the template's value",)


def test_a_link_the_fit_made_too_fast_to_bind_is_kept_at_the_templates() -> None:
    """The RTX 6000D alltoall on its preset: the first fit raises the NICs' bandwidth until no
    row depends on it any more (PCIe binds), so the rows bound it from one side only. It is
    held at the template's value, said so, and the rest refitted; no parameter said to be
    kept moved."""
    log = read_nccl_tests(DATA / "rtx6000d_16gpu_2node_cx8_alltoall_unresolved-6kd-report.txt")
    cal = calibrate(log.measurements(), "rtx6000d-cx8x2", hosts=log.host_indices(),
                    placement="log", algorithm="nccl", engine="analytic",
                    nccl_version=log.nccl_version, gpus_per_thread=log.gpus_per_thread)
    idle = [n for n in cal.notes if "the fit moved it where no row depends on it" in n]
    assert "links[2].bandwidth_scale not determined by the rows (the fit moved it where no row " \
           "depends on it): kept at the template's value" in idle
    kept = [n.split()[0] for n in cal.notes if "kept at the template's value" in n
            or "kept at its start value" in n]
    assert kept and all(cal.parameters[name] == 1.0 for name in kept)
    assert cal.report.median_abs_error_pct < 5
