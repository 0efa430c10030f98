"""``validate --diagnose``: the causes the docs found by hand on anomalous logs, healthy on
clean ones, the JSON contract, the rule, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nccl_logs import DATA

from commsim.cli import main
from commsim.errors import SpecError
from commsim.topology import load_topology
from commsim.topology.degrade import apply_what_if
from commsim.validation.causes import Machine, _socket
from commsim.validation.diagnose import CAUSES, diagnose, verdict
from commsim.validation.nccl_runs import how_driven, parse_nccl_tests_runs
from commsim.validation.nccl_tests import read_text

ROOT = Path(__file__).resolve().parents[2]


def _diagnose(name: str, preset: str, algorithm: str = "nccl", version: str | None = None):
    """The diagnosis of log ``name`` on ``preset`` as it ran (what the CLI's --placement log
    --diagnose does; engine auto, as the benchmark)."""
    runs = parse_nccl_tests_runs(read_text(DATA / name), name)
    rows = [row for log in runs for row in log.measurements()]
    gpus, printed, protocol = how_driven(runs)
    return diagnose(rows, preset, algorithm=algorithm, engine="auto", gpus_per_thread=gpus,
                    nccl_version=printed or version, protocol=protocol,
                    hosts=runs[0].host_indices(), placement="log")


def _top(diagnosis):
    return next(f for f in diagnosis.findings if f.cause != "healthy")


def test_p2p_off_sends_a_hosts_gpu_traffic_through_host_memory() -> None:
    """``nccl: {p2p: false}``: GPUs under one PCIe switch exchange via the CPU (up the
    switch's uplink and down again), GPUs of two sockets via both CPUs; a host without a CPU
    device is a one-line error naming it."""
    net, _ = apply_what_if(load_topology("pcie-gen4-8gpu"), {"nccl": {"p2p": False}})
    assert [net.links[i].label for i in net.route(0, 1)] == [
        "gpu0->pcie-switch0", "pcie-switch0->cpu0", "cpu0->pcie-switch0", "pcie-switch0->gpu1"]
    assert "cpu0->cpu1" in [net.links[i].label for i in net.route(0, 5)]
    with pytest.raises(SpecError, match="no CPU device on the host of gpu0"):
        apply_what_if(load_topology("dgx-h100"), {"nccl": {"p2p": False}})


def test_v100s_with_nvlink_unused_are_diagnosed_so() -> None:
    """The 4 V100-SXM2 at 7 GB/s (the docs: NVLink apparently unused, a PCIe/SHM path): the
    verdict is that path, NVLink unused or no P2P at all (host memory), never healthy."""
    found = _diagnose("v100-sxm2-16gb_4gpu_1node_allreduce-c0_unresolved-gdr116.txt",
                      "dgx1-v100")
    assert found.verdict in ("nvlink-unused", "p2p-off")
    assert found.findings[0].median_abs_error_pct < found.healthy.median_abs_error_pct / 2


def test_h100_pair_below_its_nics_rate_is_diagnosed_so() -> None:
    """nccl-tests issue 290's forced ring (90 GB/s busbw over 8 NDR NICs): the NICs at a
    quarter of their rate, where the healthy preset misses by 70%."""
    found = _diagnose("h100-sxm_16gpu_2node_ib-ndr_allreduce-ring_nccl-tests-issue290.txt",
                      "dgx-h100x2", algorithm="ring")
    assert (found.verdict, found.findings[0].level) == ("slow-nics", "1/4")


def test_alps_pair_without_its_plugin_ranks_the_socket_transport_first() -> None:
    """The Alps GH200 pair without the OFI plugin: the top cause is NCCL's socket transport
    (which the rule does not take as the verdict: it does not halve the preset's error; the
    log is 'unexplained', never healthy)."""
    found = _diagnose(
        "gh200_8gpu_2node_alps-no-ofi-plugin_allreduce_cscs-docs-image-nccl-tests.txt",
        "alps-gh200x2")
    assert _top(found).cause == "socket"
    assert _top(found).median_abs_error_pct < found.healthy.median_abs_error_pct
    assert found.verdict == "unexplained"


def test_l40s_pair_over_sockets_ranks_the_socket_transport_first() -> None:
    """The two L40S over NCCL's socket transport (NCCL_IB_DISABLE=1, 8 GB/s busbw on a 200 Gb/s
    NIC): the top cause is the socket transport at one 25 Gb/s stream a channel (the preset's
    2 channels: 6.25 GB/s), which the rule does not take as the verdict (it does not halve the
    preset's error on the rows it changes)."""
    found = _diagnose("l40s_2gpu_2node_socket-sriov_allreduce_nvidia-tools-image.txt",
                      "r760xa-l40sx2")
    assert (_top(found).cause, _top(found).level) == ("socket", "channel")
    assert _top(found).median_abs_error_pct < found.healthy.median_abs_error_pct
    assert found.verdict == "unexplained"


def test_socket_variants_cap_the_nics_at_streams_of_25_gbps() -> None:
    """The socket cause's two levels: every NIC of the log's hosts at one 25 Gb/s stream a GPU
    using it (thread) or a channel crossing it (channel, the preset's channels over the NICs
    in use), no latency added (NCCL's tuner gives every network the same hop latency)."""
    net = load_topology("r760xa-l40sx2")
    placed = net.on_hosts([0, 1])
    machine = Machine(network=net, rank_hosts=(0, 1), rank_devices=placed.rank_devices,
                      collectives=frozenset())
    variants = _socket(machine)
    assert [v.level for v in variants] == ["thread", "channel"]
    thread, channel = (v.what_if["links"] for v in variants)
    assert all(c == {"bandwidth": "25Gbps"} for c in thread.values())
    assert all(c == {"bandwidth": "50Gbps"} for c in channel.values())
    assert set(thread) == set(channel) and len(thread) == 8  # 2 NICs x 2 directions x 2 hosts


def test_a_slow_host_and_slow_nics_are_two_causes() -> None:
    """The 'alpha test' H100 pair misses the preset at small sizes (a slow host) and at large
    ones (the docs: below its NICs' rate): the host's issue time explains the small rows, and
    on the rows it leaves, NICs at a quarter of their rate the large ones."""
    found = _diagnose("h100-sxm_16gpu_2node_alpha-test_allreduce_unresolved-cnh.txt",
                      "dgx-h100x2")
    assert [(c.cause, c.level) for c in found.causes] == [("host-launch", "2x"),
                                                          ("slow-nics", "1/4")]
    small = {k for k, r in enumerate(found.healthy.report.rows) if r.nbytes <= 2**20}
    assert set(found.causes[0].changed_at) <= small
    assert not set(found.causes[1].changed_at) & set(found.causes[0].changed_at)

def test_a100_pcie_without_p2p_ranks_p2p_off_first() -> None:
    """The 4 A100 PCIe at 5 GB/s (the docs: apparently no P2P): p2p-off is the top cause,
    though it halves the rate only where the log measures a quarter (so not the verdict)."""
    found = _diagnose("a100-pcie-40gb_4gpu_1node_allreduce_unresolved-sm02.txt",
                      "pcie-gen4-8gpu")
    assert _top(found).cause == "p2p-off"
    assert _top(found).report.median_abs_error_pct_above_1MiB < \
        found.healthy.report.median_abs_error_pct_above_1MiB


@pytest.mark.parametrize(("name", "preset"), [
    ("h100-sxm_8gpu_1node_allreduce-nvls_nccl-tests-issue290.txt", "dgx-h100"),
    ("h100-sxm_8gpu_1node_allreduce_unresolved-single-node-readme.txt", "dgx-h100"),
    ("h800_8gpu_1node_broadcast-c0-info_unresolved-nf5688m7.txt", "hgx-h800"),
])
def test_clean_logs_are_healthy(name: str, preset: str) -> None:
    """Logs the docs call clean: the verdict is healthy, first in the list."""
    found = _diagnose(name, preset)
    assert found.verdict == "healthy" and found.findings[0] is found.healthy
    assert found.causes == ()


def test_the_rule_needs_a_large_miss_halved() -> None:
    """A cause is the verdict only where the preset misses by more than 20% and the cause
    halves that."""
    assert verdict(60.0, 29.0) and not verdict(60.0, 31.0) and not verdict(19.0, 1.0)


def test_cause_names_are_the_catalogue() -> None:
    """The catalogue holds the issue's seven causes, each with a one-line explanation."""
    assert [c.name for c in CAUSES] == ["p2p-off", "nvlink-unused", "fewer-nics", "slow-nics",
                                        "socket", "nvls-off", "host-launch"]
    assert all(c.explanation and "\n" not in c.explanation for c in CAUSES)


def test_json_diagnosis_keys(capsys) -> None:
    """--json adds ``diagnosis`` (best first: the verdict), each with cause,
    median_abs_error_pct and what_if (the what-if content, {} for healthy), and the verdict;
    the text output ends with the ranked causes and the verdict."""
    log = str(DATA / "h100-sxm_8gpu_1node_allreduce-nvls_nccl-tests-issue290.txt")
    assert main(["validate", "nccl-tests", log, "--topology", "dgx-h100", "--diagnose",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "healthy" == data["diagnosis"][0]["cause"]
    assert data["causes"] == []
    for entry in data["diagnosis"]:
        assert {"cause", "median_abs_error_pct", "what_if"} <= set(entry)
    assert data["diagnosis"][0]["what_if"] == {}
    nvls = next(e for e in data["diagnosis"] if e["cause"] == "nvls-off")
    assert nvls["what_if"] == {"nccl": {"nvls": False}}
    assert main(["validate", "nccl-tests", log, "--topology", "dgx-h100", "--diagnose"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("# verdict: healthy") and any("nvls-off" in x for x in lines)


def test_bad_inputs_are_one_line(tmp_path, capsys) -> None:
    """--diagnose on a measurements CSV, or on a topology none of whose causes apply: one
    line on stderr naming why, exit 2."""
    csv = str(ROOT / "tests" / "data" / "measure" / "gloo-vm-2cpu.csv")
    assert main(["validate", csv, "--topology", "dgx-h100", "--diagnose"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--diagnose: only for nccl-tests logs" in err
    topo = tmp_path / "sw.yaml"
    topo.write_text("kind: switch\nranks: 8\nlink: {latency: 1us, bandwidth: 10GB/s}\n")
    log = str(DATA / "h100-sxm_8gpu_1node_allreduce-nvls_nccl-tests-issue290.txt")
    assert main(["validate", "nccl-tests", log, "--topology", str(topo), "--diagnose"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no cause applies to topology 'sw'" in err


def test_benchmark_quick_mode_prints_its_table() -> None:
    """benchmarks/diagnose_logs.py --quick: a header, a rule and one row per quick log, each
    with a verdict and a match, then the counts; the structure, not its figures."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}  # this checkout's commsim
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "diagnose_logs.py"),
                           "--quick"], capture_output=True, text=True, timeout=300,
                          check=True, cwd=ROOT, env=env)
    table, counts = done.stdout.split("\n\n")
    lines = table.splitlines()
    assert lines[0].split()[:2] == ["log", "preset"] and len(lines) == 2 + 4
    assert all(line.split()[-1] in ("yes", "no", "only") for line in lines[2:])
    assert counts.startswith("anomalous logs:")
