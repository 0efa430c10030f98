"""nccl-tests alltoall logs (issue 40): the real logs parse as all_to_all, a log that names no
test is told from all_gather by its ``#wrong`` cells or refused, and commsim refuses to time
all_to_all in one line until it has a schedule for it."""

from __future__ import annotations

import json

import pytest
from nccl_logs import DATA, body

from commsim.collectives import Collective, parse_collective
from commsim.errors import ParseError
from commsim.validation.nccl_format import scan_text
from commsim.validation.nccl_infer import _ranks_from_factor
from commsim.validation.nccl_runs import split_runs
from commsim.validation.nccl_tests import parse_nccl_tests, read_nccl_tests
from commsim.validation.validate import validate

H20 = "h20-3e_4gpu_2node_vm-roce-bond_alltoall-truncated_nccl-tests-issue321.txt"
RTX2080 = "rtx2080ti-pcie_2gpu_1node_pcie3-no-p2p_alltoall_autodl-blog.txt"
RTX2080_RUNS = "rtx2080ti-pcie_2gpu_1node_pcie3-no-p2p_4collectives_unresolved-autodl-blog.txt"

#: file -> (ranks, rows, hosts, (size, time_us, busbw) of its 1 MiB row, largest size).
ALLTOALL = {
    "mi355x_8gpu_1node_xgmi_alltoall_alibaba-readme.txt": (8, 25, 1, (1 << 20, 37.45, 24.50),
                                                           128 << 20),
    "mi355x_16gpu_2node_ainic-roce_alltoall_alibaba-readme.txt": (
        16, 31, 2, (1 << 20, 54.99, 17.88), 16 << 30),
    "rtx6000d_16gpu_2node_cx8_alltoall_unresolved-6kd-report.txt": (
        16, 24, 2, (1 << 20, 76.50, 12.85), 8 << 30),
    RTX2080: (2, 28, 1, (1 << 20, 151.6, 3.46), 1 << 30),
    H20: (4, 13, 2, (1 << 20, 52.94, 14.85), 4 << 30),
}


@pytest.mark.parametrize("name", sorted(ALLTOALL))
def test_real_alltoall_logs(name: str) -> None:
    """Each log: all_to_all, its rank count, every row, its hosts, a row's numbers as printed,
    and busbw/algbw = (p-1)/p on its rows."""
    ranks, rows, hosts, (size, time_us, busbw), largest = ALLTOALL[name]
    log = read_nccl_tests(DATA / name, partial=True)
    assert (log.collective, log.ranks, len(log.rows)) == (Collective.ALL_TO_ALL, ranks, rows)
    assert log.hosts is not None and len(set(log.hosts)) == hosts
    row = next(r for r in log.rows if r.nbytes == size)
    assert (row.time_s, row.busbw_GBps) == (pytest.approx(time_us * 1e-6), busbw)
    assert max(r.nbytes for r in log.rows) == largest
    factor = Collective.ALL_TO_ALL.busbw_factor(ranks)
    assert all(r.busbw_GBps == pytest.approx(r.algbw_GBps * factor, abs=0.011)
               for r in log.rows if r.algbw_GBps and r.algbw_GBps >= 1)
    assert any("in-place #wrong N/A" in note for note in log.notes)


def test_the_truncated_h20_log_needs_partial() -> None:
    """The issue's paste stops at 4 GiB without the footer: an error unless ``partial``; the
    NCCL version comes from an INFO line."""
    with pytest.raises(ParseError, match="truncated"):
        read_nccl_tests(DATA / H20)
    log = read_nccl_tests(DATA / H20, partial=True)
    assert log.nccl_version == "2.26.5" and "truncated" in log.damage


def _unnamed(text: str) -> str:
    """The log without the lines that name its test (shell prompts, starting/concluded)."""
    return "".join(line for line in text.splitlines(keepends=True) if "_perf" not in line)


def test_an_unnamed_alltoall_is_told_from_all_gather() -> None:
    """One machine, one nccl-tests build, no test name: the alltoall run (in-place #wrong N/A,
    out-of-place checked) is all_to_all, the all_gather run (both checked) stays all_gather."""
    assert "alltoall" not in body(RTX2080)
    alltoall = parse_nccl_tests(body(RTX2080), "a2a")
    assert (alltoall.collective, alltoall.ranks, alltoall.binary) == (
        Collective.ALL_TO_ALL, 2, None)
    runs = split_runs((DATA / RTX2080_RUNS).read_text(encoding="utf-8"))
    gathers = [text for _, text in runs if "all_gather_perf" in text]
    assert len(gathers) == 1
    gather = parse_nccl_tests(_unnamed(gathers[0]), "ag")
    assert (gather.collective, gather.ranks) == (Collective.ALL_GATHER, 2)
    assert any("in-place results checked: all_gather" in note for note in gather.notes)


def test_a_named_test_must_match_the_wrong_columns() -> None:
    """``Collective test starting: alltoall_perf`` over an all_gather table (in-place checked)
    is reported, not silently read as either."""
    runs = split_runs((DATA / RTX2080_RUNS).read_text(encoding="utf-8"))
    gather = next(text for _, text in runs if "all_gather_perf" in text)
    named = "# Collective test starting: alltoall_perf\n" + _unnamed(gather)
    with pytest.raises(ParseError, match="names alltoall_perf but its columns look like "
                       "all_gather; pass --collective"):
        parse_nccl_tests(named, "mixed")


def test_unchecked_results_cannot_tell_and_ask_for_the_collective() -> None:
    """With ``-c 0`` both #wrong sides print N/A: an unnamed log is refused in one line asking
    for --collective, which settles it (the size/count ratio still gives the ranks)."""
    lines = body(RTX2080).splitlines()
    unchecked = "".join(
        " ".join([*line.split()[:8], "N/A", *line.split()[9:]]) + "\n"
        if line.rstrip().endswith("N/A") and not line.startswith("#") else line + "\n"
        for line in lines
    )
    assert unchecked.count("N/A") == 2 * unchecked.count(" none ")
    with pytest.raises(ParseError) as info:
        parse_nccl_tests(unchecked, "c0.log")
    assert str(info.value).startswith("c0.log: all_gather or all_to_all") and (
        "pass --collective all_gather or --collective all_to_all" in str(info.value))
    assert "\n" not in str(info.value)
    log = parse_nccl_tests(unchecked, "c0.log", collective="alltoall")
    assert (log.collective, log.ranks) == (Collective.ALL_TO_ALL, 2)


def test_busbw_factor_gives_the_ranks() -> None:
    """busbw/algbw = (p-1)/p bounds an alltoall's rank count as it does an all_gather's."""
    scan = scan_text((DATA / "rtx6000d_16gpu_2node_cx8_alltoall_unresolved-6kd-report.txt")
                     .read_text(encoding="utf-8"), "rtx")
    low, high, best = _ranks_from_factor(scan.rows, Collective.ALL_TO_ALL)
    assert low <= 16 <= high and round(best) == 16


def test_json_unchecked_in_place_is_alltoall() -> None:
    """-J output writes an unchecked side's ``nwrong`` as null: the same rule applies."""
    results = [
        {"size": 1 << 20, "count": 1 << 16, "type": "float", "redop": "none", "root": -1,
         "out_of_place": {"time": 52.94, "alg_bw": 19.81, "bus_bw": 14.85, "nwrong": 0},
         "in_place": {"time": 53.47, "alg_bw": 19.61, "bus_bw": 14.71, "nwrong": None}},
    ]
    log = parse_nccl_tests(json.dumps({"results": results}), "a2a.json")
    assert (log.collective, log.ranks) == (Collective.ALL_TO_ALL, 4)
    results[0]["in_place"]["nwrong"] = 0
    assert parse_nccl_tests(json.dumps({"results": results}), "ag.json").collective is (
        Collective.ALL_GATHER)


@pytest.mark.parametrize("spelling", ["alltoall", "all-to-all", "ALL_TO_ALL", "AllToAll"])
def test_the_sixth_collective_is_named(spelling: str) -> None:
    """Its spellings and nccl-tests' busbw factor (p-1)/p."""
    assert parse_collective(spelling) is Collective.ALL_TO_ALL
    assert Collective.ALL_TO_ALL.busbw_factor(8) == 7 / 8


def test_old_alltoall_columns_with_a_blank_redop() -> None:
    """nccl-tests' alltoall of 2020-21 names ``redop`` in its header (no ``root``) and prints
    it blank, where the old all_gather had no redop column: such rows are read, as alltoall.
    The rows: NVIDIA/nccl-tests#78, 2021-12-08 comment (8 nodes x 8 V100, 100 Gb/s IB)."""
    text = (
        "#       size         count      type   redop     time   algbw   busbw  error     time"
        "   algbw   busbw  error\n"
        "   268435456       1048576     float           520935    0.52    0.51  0e+00   519562"
        "    0.52    0.51  1e+00\n"
        "   536870912       2097152     float          1041974    0.52    0.51  0e+00  1041299"
        "    0.52    0.51  1e+00\n"
    )
    log = parse_nccl_tests(text, "issue78")
    assert (log.collective, log.ranks, len(log.rows)) == (Collective.ALL_TO_ALL, 64, 2)
    assert log.rows[1].time_s == pytest.approx(1.041974)


GB300 = ("gb300_4gpu_1node_nvl72_alltoall_oci-quickstart.txt",
         "gb300_8gpu_2node_nvl72_alltoall_oci-quickstart.txt",
         "gb300_64gpu_16node_nvl72_alltoall_oci-quickstart.txt")


def test_gb300_runs_on_the_gb200_nvl72_preset() -> None:
    """OCI's GB300 NVL72 runs (8 and 16 GiB rows only) predicted on gb200-nvl72, as
    benchmarks/validate_alltoall.py does: every rank's NVLink port bounds it (busbw = the
    preset's 738 GB/s on 4, 8 and 64 ranks) and predicted faster than measured (the median
    |error| of each run is a benchmark figure, benchmarks/validate_alltoall.py; 16% bounds it
    here only to catch a wrong reading of the logs)."""
    medians = []
    for name in GB300:
        log = read_nccl_tests(DATA / name)
        report = validate(log.measurements(), "gb200-nvl72", algorithm="nccl", engine="auto",
                          source=name, gpus_per_thread=log.gpus_per_thread,
                          nccl_version=log.nccl_version, protocol=log.protocol,
                          hosts=log.host_indices())
        assert [r.nbytes for r in report.rows] == [8 << 30, 16 << 30]
        assert all(r.predicted_busbw_Bps == pytest.approx(738e9, rel=0.005) for r in report.rows)
        assert all(r.error_pct < 0 for r in report.rows)
        medians.append(sorted(abs(r.error_pct) for r in report.rows))
    one_node, two_nodes, sixteen = (sum(m) / 2 for m in medians)
    assert max(one_node, two_nodes, sixteen) < 16
