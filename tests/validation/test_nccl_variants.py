"""nccl-tests output variants, each on a real log of tests/data/nccl-tests (issue 14): several
runs in one log, chatter and NCCL INFO lines inside the table, ``-c 0`` (N/A), old per-test
columns and the pre-2020 all_gather/reduce_scatter convention, indented blocks, truncation;
and the structure of the validation benchmark's tables (never its figures)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from nccl_logs import DATA, RUNS

from commsim.cli import main
from commsim.errors import ParseError
from commsim.validation.nccl_format import nccl_proto
from commsim.validation.nccl_runs import (
    how_driven,
    parse_nccl_tests_runs,
    read_nccl_tests_runs,
    split_runs,
)
from commsim.validation.nccl_tests import parse_nccl_tests, read_nccl_tests, single_protocol

ROOT = Path(__file__).resolve().parents[2]
DGX2 = "v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_5collectives_unresolved-fork-readme.txt"
H800 = "h800_8gpu_1node_broadcast-c0-info_unresolved-nf5688m7.txt"
T4 = "t4_2gpu_2node_aws-g4dn-efa_allreduce_eks-blueprints.txt"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_run_of_a_multi_run_log(name: str) -> None:
    """Each run has its own collective, rank count and rows; line numbers are the file's."""
    runs = read_nccl_tests_runs(DATA / name)
    found = [(r.collective.value, r.ranks, len(r.rows), r.rows[0].line) for r in runs]
    assert found == RUNS[name]
    named = [f"{c}_perf" for c, *_ in RUNS[name]]
    # a binary is named only where the log prints it (the DGX-2 script's "Running:" lines)
    assert all(r.binary in (None, b) for r, b in zip(runs, named, strict=True))
    if name == DGX2:
        assert [r.binary for r in runs] == named


def test_single_run_reader_refuses_several_runs() -> None:
    with pytest.raises(ParseError, match=r"5 nccl-tests runs in one log .*line 67"):
        read_nccl_tests(DATA / DGX2)


def test_split_keeps_a_script_line_with_the_run_it_announces() -> None:
    runs = split_runs((DATA / DGX2).read_text(encoding="utf-8"))
    assert len(runs) == 5
    first = next(line for line in runs[1][1].splitlines() if line and line != "#")
    assert first.startswith("Running:") and "all_reduce_perf" in first


def test_tables_pasted_without_preambles_split_at_each_column_header() -> None:
    """A report that kept only each run's table (column header, rows, footer) under a caption:
    every column header after a footer opens the next run, and the caption goes with it."""
    name = "b200_16gpu_2node_hgx-ib-ndr_3collectives_unresolved-vultr-poc.txt"
    runs = split_runs((DATA / name).read_text(encoding="utf-8"))
    captions = [
        next(line for line in part.splitlines() if line.startswith("**"))
        for _, part in runs[1:]
    ]
    assert [c.split()[0] for c in captions] == ["**all_gather", "**reduce_scatter"]
    # one table, one footer: nothing to split
    assert len(split_runs("\n".join(runs[1][1].splitlines()[runs[1][0]:]))) == 1


def test_a_broken_run_is_named_with_its_first_line() -> None:
    text = (DATA / DGX2).read_text(encoding="utf-8").replace("  65.05    1.01", "  65.05", 1)
    with pytest.raises(ParseError, match=r"dgx2:99: corrupted row .*run 2 of 5, from line 65"):
        parse_nccl_tests_runs(text, "dgx2")


def test_cli_reads_every_run_and_filters_by_collective(capsys: pytest.CaptureFixture) -> None:
    log = str(DATA / DGX2)
    assert main(["validate", "nccl-tests", log, "--topology", "dgx2-v100", "--collectives",
                 "broadcast,reduce", "--sizes", "1GiB:8GiB", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count('"collective": "broadcast"') == 4 and out.count('"collective": "reduce"') == 4
    assert main(["validate", "nccl-tests", log, "--topology", "dgx2-v100", "--collective",
                 "all_reduce"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "several nccl-tests runs" in err


def test_chatter_inside_the_table() -> None:
    """A user's debug print between header and rows, MPI help messages between rows, and NCCL
    INFO lines before the table and between the last row and the footer are all skipped."""
    gdr = read_nccl_tests(DATA / "v100-sxm2-16gb_4gpu_1node_allreduce-c0_unresolved-gdr116.txt")
    assert gdr.rows[0].nbytes == 4 and gdr.rows[0].in_place_time_s == pytest.approx(23.10e-6)
    mpi = read_nccl_tests(DATA / "a100-sxm4-80gb_8gpu_1node_allreduce-mpirun_unresolved-thanos.txt")
    assert mpi.rows[-1].nbytes == 4294967296 and mpi.rows[-1].time_s == pytest.approx(32285e-6)
    h800 = read_nccl_tests(DATA / H800)
    assert (h800.collective.value, h800.rows[0].root, h800.damage) == ("broadcast", 0, "")
    assert h800.rows[-1].busbw_GBps == pytest.approx(164.97)


def test_n_a_in_wrong_and_old_columns() -> None:
    """``-c 0`` prints N/A in #wrong; 2019 logs have per-test columns and an error column."""
    h800 = read_nccl_tests(DATA / H800)
    assert all(r.in_place_time_s is not None for r in h800.rows)
    old = read_nccl_tests(
        DATA / "v100-sxm2-16gb_8gpu_1node_dgx1-hybrid-cube-mesh_allreduce_unresolved-blog-2019.txt"
    )
    assert old.rows[0].root is None and old.rows[0].redop == "sum" and len(old.rows) == 25


def test_pre_2020_all_gather_convention_is_noted() -> None:
    """busbw == algbw on every all_gather / reduce_scatter run of the DGX-2 log, the size
    column is the total buffer (size / (count x 4) = 12), and only the broadcast, reduce and
    all_reduce runs use the modern factors."""
    for run in read_nccl_tests_runs(DATA / DGX2):
        noted = any("pre-2020" in note for note in run.notes)
        assert noted == (run.collective.value in ("all_gather", "reduce_scatter"))
        if noted:
            assert {r.nbytes // (r.count * 4) for r in run.rows if r.count} == {12}


def test_indented_block_and_truncation(capsys: pytest.CaptureFixture) -> None:
    """A README's 4-space-indented block reads; a log cut mid-table is one line, exit 2, and
    ``--partial`` keeps the rows that parse."""
    name = "h100-sxm_8gpu_1node_allreduce_unresolved-single-node-readme.txt"
    assert len(read_nccl_tests(DATA / name).rows) == 4
    lines = (DATA / H800).read_text(encoding="utf-8").splitlines()
    cut = next(i for i, line in enumerate(lines) if line.lstrip().startswith("1048576"))
    text = "\n".join(lines[:cut]) + "\n" + lines[cut][:40] + "\n"
    with pytest.raises(ParseError, match="corrupted row"):
        parse_nccl_tests(text, "cut")
    assert len(parse_nccl_tests(text, "cut", partial=True).rows) == 18


def test_the_library_version_line_names_the_release() -> None:
    """nccl-tests >= 2.14 print ``nccl-library=NNNNN`` (NCCL's version code) on their first line."""
    sarus = read_nccl_tests(
        DATA / "gh200_2gpu_2node_alps-slingshot_allreduce_cscs-docs-sarus-suite.txt"
    )
    assert sarus.nccl_version == "2.30.7"
    failed = read_nccl_tests(
        DATA / "gh200_2gpu_2node_cray-ex-slingshot11_allreduce-wrong_nccl-tests-issue369.txt"
    )
    assert failed.nccl_version == "2.29.2"
    assert len(failed.rows) == 25  # the failed-validation row is a row like any other


def test_a_printed_nccl_proto_restricts_the_prediction(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """A run restricted to one protocol (the T4 log prints aws-ofi-nccl setting NCCL_PROTO to
    simple) is predicted with it alone, and the header says so; a value that leaves NCCL a
    choice (``^LL128``, a list) is named and not applied."""
    t4 = read_nccl_tests(DATA / T4)
    assert (t4.nccl_proto, t4.protocol) == ("simple", "Simple")
    assert "NCCL_PROTO=simple printed: predicted with Simple only" in t4.notes
    assert read_nccl_tests(DATA / H800).protocol == "auto"  # printed no NCCL_PROTO
    assert [single_protocol(v) for v in ("LL", "ll128", "Simple,LL", "^LL128", None)] == [
        "LL", "LL128", None, None, None]
    assert nccl_proto("x NCCL INFO NCCL_PROTO set by environment to ^LL128") == "^LL128"

    def algorithms(path: Path, *flags: str) -> set[str]:
        assert main(["validate", "nccl-tests", str(path), "--topology", "aws-g4dn-metalx2",
                     "--placement", "log", "--json", *flags]) == 0
        report = json.loads(capsys.readouterr().out)
        return {row["algorithm"].split("/")[1] for row in report["rows"]}

    assert algorithms(DATA / T4) == {"Simple"}
    assert algorithms(DATA / T4, "--protocol", "ll") == {"LL"}  # the flag wins over the log
    assert main(["validate", "nccl-tests", str(DATA / T4), "--topology", "aws-g4dn-metalx2",
                 "--protocol", "XL"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'XL'" in err
    freed = tmp_path / "t4-exclusion.txt"
    text = (DATA / T4).read_text(encoding="utf-8")
    freed.write_text(text.replace('Setting NCCL_PROTO to \\"simple\\"', "NCCL_PROTO ^LL128")
                     .replace('Setting NCCL_PROTO to "simple"',
                              "NCCL_PROTO set by environment to ^LL128"), encoding="utf-8")
    assert read_nccl_tests(freed).protocol == "auto"
    assert "LL" in algorithms(freed)  # NCCL's own choice again: LL for the small sizes


def test_how_several_runs_were_driven_is_what_they_agree_on() -> None:
    """One log's runs (the 2080 Ti's four, all -g2, no release or NCCL_PROTO printed) give
    their shared settings; runs that differ give None / auto, and a release only some name
    counts as theirs."""
    runs = read_nccl_tests_runs(DATA / "rtx2080ti-pcie_2gpu_1node_pcie3-no-p2p_4collectives_"
                                       "unresolved-autodl-blog.txt")
    assert how_driven(runs) == (2, None, "auto")
    t4, h800 = read_nccl_tests(DATA / T4), read_nccl_tests(DATA / H800)
    assert how_driven([t4]) == (t4.gpus_per_thread, t4.nccl_version, "Simple")
    assert how_driven([t4, h800]) == (None, None, "auto")  # -g 1 and -g 8; 2.8.3 and 2.18.3
    assert how_driven([t4, h800], ["2.8.3", None]) == (None, "2.8.3", "auto")


def test_skypilot_and_open_mpi_tags_on_every_line() -> None:
    """SkyPilot tags each line "(head, rank=0, pid=N) " before Open MPI's "[1,0]<stdout>:"."""
    log = read_nccl_tests(
        DATA / "h200_16gpu_2node_gcp-a3ultra-rdma_allgather-skypilot_skypilot-examples.txt"
    )
    assert (log.collective.value, log.ranks, len(log.rows)) == ("all_gather", 16, 24)
    assert log.host_indices() == (0,) * 8 + (1,) * 8
    assert log.rows[0].nbytes == 1024 and log.rows[-1].nbytes == 8589934592


def test_rank_count_from_a_kept_device_line() -> None:
    """A source that keeps only the last device line: its rank settles what busbw/algbw leaves
    open (1391..1565 at 1440 ranks); where the ratio is exact and disagrees, the ratio wins."""
    twenty = read_nccl_tests(
        DATA / "gb200_1440gpu_360node_20rack-nvl72-ib_allreduce_coreweave-f443305.txt"
    )
    assert twenty.ranks == 1440
    assert "last device line" in twenty.notes[-1]
    two = read_nccl_tests(
        DATA / "gb200_128gpu-inferred_2rack_nvl72-ib_allreduce_coreweave-f443305.txt"
    )
    assert two.ranks == 128
    assert "do not match" in two.notes[-1]


# -- the benchmark ----------------------------------------------------------------------------
def test_family_from_device_lines_or_header() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from validate_presets import family_of
    finally:
        sys.path.pop(0)
    assert family_of((DATA / H800).read_text(encoding="utf-8")) == "Hopper"
    assert family_of("# HARDWARE: 16 x 8 A100-SXM4-80GB\n") == "Ampere"
    assert family_of("#  Rank  0 Group  0 Pid 1 on h device  0 [0x1a] NVIDIA GeForce RTX 4090\n"
                     "# HARDWARE: V100\n") == "PCIe"
    assert family_of("no hardware here\n") == "other"
    gh200 = "gh200_8gpu_2node_olivia-slingshot_allreduce-int8_nris-docs-apptainer.txt"
    assert family_of((DATA / gh200).read_text(encoding="utf-8")) == "Hopper"
    gb200 = "gb200_72gpu_18node_nvl72-mnnvl_allreduce_coreweave-f443305.txt"  # "Graphics Device"
    assert family_of((DATA / gb200).read_text(encoding="utf-8")) == "Blackwell"


def test_spread_of_runs_the_model_cannot_tell_apart() -> None:
    """The benchmark's fourth table, on the real DGX-2 log: each run's out-of-place vs
    in-place noise, and runs with the same model inputs grouped with their minimax floor."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from _spread import group_floors, indistinguishable, minimax_error, self_disagreement
    finally:
        sys.path.pop(0)
    runs = read_nccl_tests_runs(DATA / DGX2)
    noise = self_disagreement(runs[0])  # all_gather: out-of-place 106.8 ms, in-place 70.1 ms
    assert noise[-1][0] == runs[0].rows[-1].nbytes
    assert noise[-1][1] == pytest.approx(abs(70089 - 106773) / 106773)
    assert minimax_error([70089.0, 106773.0]) == pytest.approx(36684 / 176862)

    class Run:
        def __init__(self, label: str, log: object) -> None:
            self.label, self.family, self.log = label, "Volta", log

    pairs = [Run("ar", runs[1]), Run("bc", runs[2]), Run("ar again", runs[1])]
    groups = indistinguishable(pairs, key=lambda r: (r.log.collective,))
    assert [[r.label for r in g] for g in groups] == [["ar", "ar again"]]
    assert {v for _, v in group_floors(groups[0])} == {0.0}  # the same run twice


def test_benchmark_fast_mode_prints_its_six_tables() -> None:
    """The structure of the tables (one row per run, every family, overall, which way they
    err and at which sizes, the runs' own spread, the cross-collective machines), never an
    accuracy figure."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "validate_presets.py"), "--fast"],
        capture_output=True, text=True, timeout=600, check=True, cwd=ROOT,
    )
    blocks = done.stdout.split("\n\n")
    assert len(blocks) == 6
    per_log = blocks[0].splitlines()
    assert per_log[1].split()[:3] == ["log", "family", "preset"]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from validate_presets import CASES
    finally:
        sys.path.pop(0)
    runs = sum(len(read_nccl_tests_runs(DATA / case.log)) for case in CASES)
    assert runs >= 28 + 16 + 29  # issue 14's first 28 runs, then the 16 and 29 added later
    assert len(per_log) == 3 + runs  # title, header, rule, one row per run
    family = [line.split()[0] for line in blocks[1].splitlines()[3:]]
    assert family == ["PCIe", "Volta", "Ampere", "Hopper", "Blackwell", "overall"]
    bias = [line.split() for line in blocks[2].splitlines()[3:]]
    assert [cells[0] for cells in bias] == family
    for cells in bias:  # a signed median and "K of N" runs per band, K <= N
        runs = [(int(cells[i - 1]), int(cells[i + 1])) for i, word in enumerate(cells)
                if word == "of"]
        assert len(runs) == 2 and all(0 <= k <= n for k, n in runs)
    rows = {line.split()[0]: int(line.split()[2]) for line in blocks[1].splitlines()[3:]}
    counted = dict.fromkeys(rows, 0)
    for line in blocks[3].splitlines()[3:]:  # family, one/several, "+x.x (n)" per size band
        name, nodes, *cells = line.split()
        assert nodes in ("one", "several")
        counted[name] += sum(int(c.strip("()")) for c in cells if c.startswith("("))
    assert counted == {**rows, "overall": 0}  # every row of a family in one size band
    spread = [line.split()[0] for line in blocks[4].splitlines()[3:]]
    assert spread == family
    cross = blocks[5].splitlines()[3:]
    assert any(line.startswith("DGX-2 V100") and "all_reduce" in line for line in cross)


def test_benchmark_runs_chosen_logs_and_writes_their_rows(tmp_path: Path) -> None:
    """``--only`` keeps the logs whose name contains the text (and writes no docs); ``--rows``
    writes every predicted row: the log's own measured times, each error from its two times;
    a text matching no log is one line and exit 2."""
    script = str(ROOT / "benchmarks" / "validate_presets.py")
    out = tmp_path / "rows.csv"
    doc = (ROOT / "docs" / "validation.md").read_bytes()
    done = subprocess.run(
        [sys.executable, script, "--only", "nf5688", "--rows", str(out), "--skip-cross"],
        capture_output=True, text=True, timeout=600, check=True, cwd=ROOT,
    )
    per_log = done.stdout.split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in per_log[3:]] == [H800.removesuffix(".txt")]
    assert (ROOT / "docs" / "validation.md").read_bytes() == doc  # a part is not the table
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    log = read_nccl_tests(DATA / H800)
    assert [int(r["nbytes"]) for r in rows] == [row.nbytes for row in log.rows]
    assert [float(r["measured_time_s"]) for r in rows] == [
        m.time_s for m in log.measurements()]
    assert {(r["run"], r["family"], r["preset"], r["collective"]) for r in rows} == {
        (H800.removesuffix(".txt"), "Hopper", "hgx-h800", "broadcast")}
    for r in rows:
        measured, predicted = float(r["measured_time_s"]), float(r["predicted_time_s"])
        assert float(r["error_pct"]) == pytest.approx((predicted - measured) / measured * 100)
    missing = subprocess.run([sys.executable, script, "--only", "no-such-log"],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        "validate_presets: error: --only 'no-such-log' matches no log in tests/data/nccl-tests"]
