"""validate: predictions against closed forms, errors and medians, engines, table, plot."""

from __future__ import annotations

import pytest
from nccl_logs import DATA

from commsim.collectives import Collective
from commsim.errors import SpecError
from commsim.nccl_tables import tables
from commsim.timing import DES_RANKING_MAX_RANKS
from commsim.topology import load_topology
from commsim.validation.measurements import Measurement
from commsim.validation.nccl_tests import read_nccl_tests
from commsim.validation.plot import plot_report, save_plot
from commsim.validation.validate import as_run, format_report, validate

SWITCH = {"kind": "switch", "ranks": 4, "link": {"latency": "10us", "bandwidth": "1GB/s"}}


def _ring_all_reduce(p: int, n: int, alpha: float = 10e-6, beta: float = 1e9) -> float:
    return 2 * (p - 1) * (alpha + n / p / beta)


def test_rows_errors_and_medians() -> None:
    """Each row's prediction is the ring closed form; error = (pred - meas)/meas x 100, signed;
    medians of |error| overall and split at 1 MiB."""
    sizes = [1024, 65536, 1 << 20, 1 << 24]
    truth = [_ring_all_reduce(4, n) for n in sizes]
    measured = [t * f for t, f in zip(truth, (1.25, 0.5, 1.0, 0.8), strict=True)]
    rows = [
        Measurement(collective=Collective.ALL_REDUCE, ranks=4, nbytes=n, time_s=t)
        for n, t in zip(sizes, measured, strict=True)
    ]
    report = validate(rows, SWITCH, algorithm="ring")
    errors = [r.error_pct for r in report.rows]
    assert errors == pytest.approx([-20.0, 100.0, 0.0, 25.0])
    assert report.median_abs_error_pct == pytest.approx(22.5)
    assert report.median_abs_error_pct_below_1MiB == pytest.approx(60.0)
    assert report.median_abs_error_pct_above_1MiB == pytest.approx(12.5)
    data = report.to_dict()
    assert set(data["rows"][0]) >= {
        "collective", "ranks", "nbytes", "measured_time_s", "predicted_time_s", "error_pct"
    }
    assert data["median_abs_error_pct"] == report.median_abs_error_pct


def test_fewer_ranks_than_the_topology_use_its_first_ranks() -> None:
    """A 2-rank row on a 4-rank topology is predicted on ranks 0-1."""
    row = Measurement(collective=Collective.ALL_REDUCE, ranks=2, nbytes=2000, time_s=1e-5)
    report = validate([row], SWITCH, algorithm="ring")
    assert report.rows[0].predicted_time_s == pytest.approx(_ring_all_reduce(2, 2000))


def test_ranks_are_placed_on_hosts_as_the_run_placed_them() -> None:
    """One GPU on each of two hosts crosses the network (a 2-host log with one GPU per node
    is not predicted on two GPUs of one host); where the topology cannot hold the placement,
    its first ranks and a note saying so."""
    net = load_topology("dgx-h100x2")
    assert net.on_hosts([0, 1]).rank_devices == (0, 8)
    assert net.on_hosts([0, 0, 1, 1]).rank_devices == (0, 1, 8, 9)
    assert net.on_hosts([0] * 8 + [1] * 8) is net
    assert net.on_hosts([0, 1, 2]) is None and net.on_hosts([0] * 9) is None
    row = Measurement(collective=Collective.ALL_REDUCE, ranks=2, nbytes=1 << 30, time_s=1.0)
    one_host = validate([row], "dgx-h100x2", algorithm="ring/Simple", engine="analytic")
    two_hosts = validate([row], "dgx-h100x2", algorithm="ring/Simple", engine="analytic",
                         hosts=[0, 1])
    # 1 GiB ring all-reduce on 2 ranks: the bytes go once over the slower link each way
    assert two_hosts.rows[0].predicted_time_s > 4 * one_host.rows[0].predicted_time_s
    assert not two_hosts.notes
    lone = validate([row], "dgx-h100", algorithm="ring+Simple", engine="analytic",
                    hosts=[0, 1])
    assert lone.rows[0].predicted_time_s == one_host.rows[0].predicted_time_s
    assert lone.notes == ("placed on the first 2 ranks of 'dgx-h100': it cannot hold the "
                          "run's 2 host(s) of 1 rank(s) at most",)


def test_topology_algorithm_mapping_is_honoured() -> None:
    """``algorithms: {all_reduce: binomial_tree}`` in the topology makes auto use it."""
    topo = dict(SWITCH, algorithms={"all_reduce": "binomial_tree"})
    row = Measurement(collective=Collective.ALL_REDUCE, ranks=4, nbytes=1 << 20, time_s=1e-3)
    assert validate([row], topo).rows[0].algorithm == "binomial_tree"


def test_errors() -> None:
    """No rows, too many ranks for the topology and an unknown engine are SpecErrors."""
    row = Measurement(collective=Collective.ALL_REDUCE, ranks=8, nbytes=1024, time_s=1e-5)
    with pytest.raises(SpecError, match="no measured rows"):
        validate([], SWITCH)
    with pytest.raises(SpecError, match="8 ranks.*only 4"):
        validate([row], SWITCH)
    with pytest.raises(SpecError, match="unknown engine"):
        validate([row], "dgx-h100", engine="fast")


def test_engine_follows_the_request_and_the_one_size_policy() -> None:
    """By default every row is predicted by the DES, as ``commsim run`` times it; ``auto``
    takes the timing layer's size policy: the 128-rank A100 log by the closed forms, a 4-rank
    log by the DES; each row says which."""
    log = read_nccl_tests(DATA / "a100-sxm4-80gb_128gpu_16node_ib_allreduce_coreweave-22df9b7.txt")
    rows = log.measurements()[:3]
    assert {r.engine for r in validate(rows, "dgx-a100x16").rows} == {"des"}
    report = validate(log.measurements(), "dgx-a100x16", engine="auto")
    assert {r.engine for r in report.rows} == {"analytic"} and 128 > DES_RANKING_MAX_RANKS
    small = read_nccl_tests(DATA / "rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker.txt")
    auto = validate(small.measurements(), "pcie-gen4-8gpu", engine="auto")
    assert {r.engine for r in auto.rows} == {"des"}


def test_deterministic_table_and_plot(tmp_path) -> None:
    """The table has one line per row plus the medians; two runs give identical bytes for the
    table and the PNG; one figure per (collective, ranks)."""
    log = read_nccl_tests(DATA / "rtx4090-pcie_2gpu_1node_allreduce_kalavai-k8s.txt")
    report = validate(log.measurements(), "pcie-gen4-8gpu", source="k8s")
    text = format_report(report)
    assert text.count("\n") >= len(report.rows) + 4 and "median |error|" in text
    assert text == format_report(validate(log.measurements(), "pcie-gen4-8gpu", source="k8s"))
    save_plot(report, tmp_path / "a.png")
    save_plot(report, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert len(plot_report(report)) == 1


def test_a_logs_gpus_per_thread_is_read_and_predicted() -> None:
    """A log's ``# nThread 1 nGpus N`` line gives its GPUs per host thread; validate then
    predicts on the machine driven that way (commsim.nccl.with_gpus_per_thread): the host's
    issue time is part of the floor, so small calls take longer with more GPUs per thread,
    and never less; without an NCCL model the count changes nothing."""
    log = read_nccl_tests(DATA / "a100-sxm4-80gb_8gpu_1node_allreduce-g8_unresolved-thanos.txt")
    assert log.gpus_per_thread == 8
    one_process = DATA / "a100-sxm4-80gb_8gpu_1node_allreduce-mpirun_unresolved-thanos.txt"
    assert read_nccl_tests(one_process).gpus_per_thread == 1
    rows = log.measurements()
    plain = validate(rows, "dgx-a100", algorithm="nccl", engine="analytic")
    driven = validate(rows, "dgx-a100", algorithm="nccl", engine="analytic", gpus_per_thread=8)
    pairs = list(zip(plain.rows, driven.rows, strict=True))
    assert all(d.predicted_time_s >= p.predicted_time_s for p, d in pairs)
    assert pairs[0][1].predicted_time_s > pairs[0][0].predicted_time_s
    bare = {"kind": "switch", "ranks": 8, "link": {"latency": "1us", "bandwidth": "100GB/s"}}
    assert validate(rows, bare, engine="analytic", gpus_per_thread=8).rows == validate(
        rows, bare, engine="analytic").rows


def test_a_logs_nccl_version_is_read_and_predicted_with_its_tables() -> None:
    """A log that prints its NCCL release (``NCCL version 2.18.3+cuda12.2``, or the code
    ``NCCL version: 22602``) is predicted with that release's tuning tables (validate's
    ``nccl_version``, :func:`commsim.validation.validate.as_run`); a bad release is refused."""
    h800 = read_nccl_tests(DATA / "h800_8gpu_1node_broadcast-c0-info_unresolved-nf5688m7.txt")
    assert h800.nccl_version == "2.18.3"
    gdr = read_nccl_tests(DATA / "v100-sxm2-16gb_4gpu_1node_allreduce-c0_unresolved-gdr116.txt")
    assert gdr.nccl_version == "2.26.2"
    net = as_run(load_topology("dgx-a100"), "nccl", nccl_version="2.19")
    assert net.meta["nccl"]["version"] == "2.19"  # type: ignore[index]
    rows = [Measurement(collective=Collective.ALL_REDUCE, ranks=8, nbytes=8, time_s=1e-5)]
    old = validate(rows, "dgx-a100", algorithm="ring+LL", engine="analytic").rows[0]
    new = validate(rows, "dgx-a100", algorithm="ring+LL", engine="analytic",
                   nccl_version="2.19").rows[0]
    launch = (tables("2.19").base_us["ring"]["LL"] - tables("2.7").base_us["ring"]["LL"]) * 1e-6
    assert new.predicted_time_s - old.predicted_time_s == pytest.approx(launch, rel=1e-6)
    with pytest.raises(SpecError, match="nccl.version"):
        validate(rows, "dgx-a100", algorithm="nccl", nccl_version="two")
