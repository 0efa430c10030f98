"""``run`` on a machine that runs NCCL: protocols, launch latency, NCCL's algorithm choice
(NVLS for large all-reduce on H100, tree or LL for small), ``+sharp``, and the JSON/table."""

from __future__ import annotations

import json

import pytest

import commsim
from commsim.cli import main
from commsim.nccl import BASE_LATENCY_US


def run_json(capsys, *argv: str) -> object:
    assert main(["run", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_auto_on_dgx_h100_chooses_as_nccl_does(capsys) -> None:
    """Small all-reduce: a tree or the LL protocol; large: NVLS (Simple), and it says so."""
    rows = run_json(capsys, "all_reduce", "--topology", "dgx-h100", "--size", "8B:8GiB:64")
    small, large = rows[0], rows[-1]
    assert small["algorithm"] == "double_binary_tree" or small["protocol"] == "LL"
    assert (large["algorithm"], large["protocol"]) == ("nvls", "Simple")
    assert main(["run", "all_reduce", "-t", "dgx-h100", "-s", "1GiB"]) == 0
    assert "nvls/Simple" in capsys.readouterr().out


def test_named_algorithm_gets_its_best_protocol_and_launch_latency() -> None:
    """ring on dgx-h100 picks LL for 8 B (its launch latency included), Simple-or-LL128 for
    1 GiB; ``protocol='none'`` is the textbook alpha-beta ring without launch latency."""
    tiny = commsim.simulate("all_reduce", "dgx-h100", 8, algorithm="ring")
    assert tiny.protocol == "LL" and tiny.time_s > BASE_LATENCY_US["ring"]["LL"] * 1e-6
    big = commsim.simulate("all_reduce", "dgx-h100", "1GiB", algorithm="ring")
    assert big.protocol in ("LL128", "Simple")
    plain = commsim.simulate("all_reduce", "dgx-h100", 8, algorithm="ring", protocol="none")
    assert plain.protocol is None and plain.time_s < tiny.time_s
    forced = commsim.simulate("all_reduce", "dgx-h100", "1GiB", algorithm="ring",
                              protocol="ll")
    assert forced.protocol == "LL" and forced.time_s > big.time_s


def test_launch_latency_comes_before_the_transfers() -> None:
    """The transfers start after the launch latency; the latest end is still the time."""
    result = commsim.simulate("all_gather", "dgx-h100", "1MiB", algorithm="ring",
                              protocol="Simple")
    frame = result.transfers()
    assert frame.start_s.min() == pytest.approx(BASE_LATENCY_US["ring"]["Simple"] * 1e-6)
    assert frame.end_s.max() == result.time_s


def test_des_and_analytic_agree_under_nccl() -> None:
    """Both engines time the chosen pair on the same protocol network, launch included
    (ring and single-host nvls: uncontended; the double binary tree's two trees share ports,
    which only the DES counts)."""
    for size, algorithm in (("4KiB", "ring"), ("64MiB", "ring"), ("1GiB", "nvls")):
        des = commsim.simulate("all_reduce", "dgx-h100", size, algorithm=algorithm)
        closed = commsim.simulate("all_reduce", "dgx-h100", size, algorithm=algorithm,
                                  engine="analytic")
        assert des.protocol == closed.protocol
        assert des.time_s == pytest.approx(closed.time_s, rel=1e-9)


def test_sharp_option_enables_collnet(capsys) -> None:
    """``+sharp`` makes the fabric reduce: collnet runs and beats the ring across 4 hosts."""
    with pytest.raises(commsim.ScheduleError, match="reducing fabric"):
        commsim.simulate("all_reduce", "dgx-h100x4", "1GiB", algorithm="collnet")
    collnet = commsim.simulate("all_reduce", "dgx-h100x4+sharp", "1GiB", algorithm="collnet")
    ring = commsim.simulate("all_reduce", "dgx-h100x4+sharp", "1GiB", algorithm="ring")
    assert collnet.protocol == "Simple" and collnet.time_s < ring.time_s
    assert collnet.topology == "dgx-h100x4+sharp"


def test_bad_protocol_and_option_are_one_line_errors(capsys) -> None:
    for argv, needle in (
        (["-t", "dgx-h100", "-s", "1MiB", "--protocol", "LL256"], "unknown protocol"),
        (["-t", "dgx-h100x2+sharq", "-s", "1MiB"], "unknown option '+sharq'"),
        (["-t", "dgx-h100", "-s", "1MiB", "-a", "nvls", "--protocol", "LL"], "Simple"),
    ):
        assert main(["run", "all_reduce", *argv]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_topology_nccl_block_is_validated(tmp_path, capsys) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("kind: switch\nranks: 4\nnccl: {arch: hopper, channels: 99}\n"
                    "link: {latency: 1us, bandwidth: 1GB/s}\n")
    assert main(["run", "all_reduce", "-t", str(path), "-s", "1MiB"]) == 2
    assert "nccl.channels" in capsys.readouterr().err
    path.write_text("kind: ring\nranks: 4\nlink: {latency: 1us, bandwidth: 1GB/s, "
                    "reduction_bandwidth: 1GB/s}\n")
    assert main(["run", "all_reduce", "-t", str(path), "-s", "1MiB"]) == 2
    assert "reduction_bandwidth" in capsys.readouterr().err


def test_plain_topologies_are_untouched() -> None:
    """No nccl block: no protocol, no launch latency (the contract's alpha-beta)."""
    net = {"kind": "ring", "ranks": 8, "link": {"latency": "1us", "bandwidth": "100GB/s"}}
    r = commsim.simulate("all_reduce", net, "1GiB", algorithm="ring", chunks=1)
    assert r.protocol is None
    assert r.time_s == pytest.approx(14 * (1e-6 + 2**30 / 8 / 100e9), rel=1e-12)
