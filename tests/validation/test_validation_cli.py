"""``commsim validate`` and ``commsim calibrate`` in-process: outputs, flags, every error path."""

from __future__ import annotations

import json
import re

import pytest
from nccl_logs import DATA

from commsim.cli import main
from commsim.validation.measurements import read_measurements, write_measurements
from commsim.validation.nccl_tests import read_nccl_tests

RTX4 = str(DATA / "rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker.txt")
H100 = str(DATA / "h100-sxm_16gpu_2node_alpha-test_allreduce_unresolved-cnh.txt")


def _csv(tmp_path) -> str:
    path = tmp_path / "m.csv"
    write_measurements(read_nccl_tests(RTX4).measurements(), path, comments=["from rtx4090"])
    return str(path)


def test_validate_nccl_tests_table(capsys) -> None:
    """The table names the inferred collective/ranks, has a line per row and the medians."""
    assert main(["validate", "nccl-tests", RTX4, "--topology", "pcie-gen4-8gpu"]) == 0
    out = capsys.readouterr().out
    assert "all_reduce, 4 ranks" in out and "ranks 4 (device lines)" in out
    assert out.count("\n") >= 29 + 5 and "median |error|" in out


def test_validate_table_columns_fit_the_longest_algorithm(capsys) -> None:
    """Across hosts the algorithm can be ``hierarchical_pipelined/LL128``: the column widens
    to it, so every header and row line of the table has the same length."""
    assert main(["validate", "nccl-tests", H100, "--topology", "dgx-h100x2", "--engine",
                 "analytic"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines[lines.index("#") + 1:] if not line.startswith("# median")]
    assert any("hierarchical_pipelined/LL128" in line for line in table)
    assert len({len(line) for line in table}) == 1


def test_validate_json_contract_keys(capsys) -> None:
    """--json has rows with the contract keys and median_abs_error_pct."""
    assert main(["validate", "nccl-tests", RTX4, "-t", "pcie-gen4-8gpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["rows"]) == 29 and isinstance(data["median_abs_error_pct"], float)
    assert {"collective", "ranks", "nbytes", "measured_time_s", "predicted_time_s",
            "error_pct"} <= set(data["rows"][0])
    assert data["median_abs_error_pct_below_1MiB"] is not None


def test_validate_csv_filters_and_plot(tmp_path, capsys) -> None:
    """A measurements CSV (recognised by its header, with or without the 'measurements'
    word) with --sizes / --collectives, and --plot writing a PNG."""
    csv = _csv(tmp_path)
    plot = tmp_path / "v.png"
    argv = ["validate", csv, "-t", "pcie-gen4-8gpu", "--sizes", "1KiB:1MiB",
            "--collectives", "all_reduce", "--json", "--plot", str(plot)]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["nbytes"] for r in data["rows"]] == [2**k for k in range(10, 21)]
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert main(["validate", "measurements", csv, "-t", "pcie-gen4-8gpu", "--ranks", "4",
                 "--sizes", "8B"]) == 0
    assert "all_reduce" in capsys.readouterr().out


def test_validate_ranks_and_collective_overrides(capsys) -> None:
    """--ranks/--collective override what the log says (first R ranks of the topology)."""
    assert main(["validate", "nccl-tests", H100, "-t", "dgx-h100x2", "--ranks", "8",
                 "--collective", "all_reduce", "--sizes", "1MiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(r["ranks"], r["nbytes"]) for r in data["rows"]] == [(8, 1 << 20)]


def test_placement_first_says_where_the_log_ran_and_log_places_it_so(capsys) -> None:
    """A real 2 x 1 GH200 log (one GPU on each of two nodes): by default its rows run on the
    topology's first 2 ranks and the header says the run sat on 2 hosts; --placement log
    puts them on two hosts, so they cross the network (slower at 128 MiB)."""
    log = str(DATA / "gh200_2gpu_2node_alps-slingshot_allreduce_cscs-docs-sarus-suite.txt")
    times = {}
    for placement in ("first", "log"):
        argv = ["validate", "nccl-tests", log, "--topology", "dgx-h100x2", "--json",
                "--engine", "analytic", "--placement", placement]
        assert main(argv) == 0
        data = json.loads(capsys.readouterr().out)
        times[placement] = data["rows"][-1]["predicted_time_s"]
        said = [n for n in data["notes"] if "sat on 2 host(s)" in n]
        assert len(said) == (placement == "first")
    assert times["log"] > 4 * times["first"]


def test_calibrate_then_validate_round_trip(tmp_path, capsys) -> None:
    """calibrate on half the sizes writes a topology; validate on the other half with it;
    run accepts it too."""
    csv = _csv(tmp_path)
    out = tmp_path / "fit.yaml"
    fit = ",".join(str(2**k) for k in range(3, 32, 2))
    check = ",".join(str(2**k) for k in range(4, 32, 2))
    assert main(["calibrate", csv, "--out", str(out), "--sizes", fit]) == 0
    printed = capsys.readouterr().out
    assert "fitted: link.latency" in printed and f"wrote {out}" in printed
    assert main(["validate", csv, "-t", str(out), "--sizes", check, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["median_abs_error_pct"] < 15.0
    assert main(["run", "all_reduce", "-t", str(out), "--size", "1MiB"]) == 0
    assert len(read_measurements(csv)) == 29


def test_calibrate_nccl_tests_json(tmp_path, capsys) -> None:
    """calibrate nccl-tests LOG --json reports the parameters and residuals."""
    out = tmp_path / "fit.yaml"
    assert main(["calibrate", "nccl-tests", RTX4, "-o", str(out), "--json",
                 "--sizes", "64KiB:64MiB"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "switch" and data["ranks"] == 4
    assert set(data["parameters"]) == {"link.latency_s", "link.bandwidth_Bps"}
    assert isinstance(data["at_bounds"], list)  # fitted parameters that ended on a bound
    assert out.read_text().startswith("# Calibrated by")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["validate", "nccl-tests", "/no/such.log", "-t", "dgx-h100"], "no such file"),
        (["validate", "nccl-tests", RTX4, "-t", "no-such-topology"], "unknown topology"),
        (["validate", "nccl-tests", RTX4, "-t", "dgx-h100", "--sizes", "3MiB"],
         "--sizes 3MiB: no measured row left"),
        (["validate", "nccl-tests", RTX4, "-t", "dgx-h100", "--sizes", "3parsecs"],
         "unknown size unit"),
        (["validate", "nccl-tests", RTX4, "-t", "dgx-h100", "--collectives", "broadcast"],
         "--collectives broadcast: no measured row left"),
        (["validate", "nccl-tests", RTX4, "-t", "dgx-h100", "--collective", "gather"],
         "unknown collective"),
        (["validate", "nccl-tests", RTX4, "-t", "dgx-h100", "--ranks", "0"], "--ranks"),
        (["validate", "nccl-tests", RTX4, "-t", "dgx-h100", "--ranks", "9"],
         "9 ranks.*only 8"),
        (["validate", "nccl-tests", RTX4, "-t", "dgx-h100", "--algorithm", "magic"],
         "unknown algorithm"),
        (["validate", "nccl-tests", RTX4, "-t", "dgx-h100", "--plot", "/no/dir/p.png"],
         "does not exist"),
        (["validate", "nccl-tests", "a", "b", "-t", "dgx-h100"], "expected one input file"),
        (["validate", "nccl-tests", RTX4], "required: --topology"),
        (["calibrate", RTX4], "required: --out"),
        (["calibrate", RTX4, "--out", "/no/dir/x.yaml"], "does not exist"),
        (["calibrate", RTX4, "--out", "x.yaml", "-t", "tpu-v4-64", "--ranks", "128"],
         "64 ranks.*need 128"),
    ],
)
def test_error_paths_are_one_line_exit_2(argv, message, capsys, tmp_path, monkeypatch) -> None:
    """Every bad input: exit status 2 and one line on stderr naming the problem."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("commsim")
    assert re.search(message, err), err


def test_bad_files_are_one_line_errors(tmp_path, capsys) -> None:
    """Empty, garbage and truncated logs and a malformed CSV: exit 2, one line naming the file."""
    cases = {
        "empty.log": "",
        "garbage.log": "Segmentation fault (core dumped)\n",
        "trunc.log": (DATA / "rtx4090-pcie_2gpu_1node_allreduce_kalavai-k8s.txt")
        .read_text().split("        8   ")[0],
        "bad.csv": "collective,ranks,nbytes,time_s\nall_reduce,2,1024,nan?\n",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        for command in (["validate", str(path), "-t", "dgx-h100"],
                        ["calibrate", str(path), "--out", str(tmp_path / "o.yaml")]):
            assert main(command) == 2, name
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and name in err, err


def test_partial_reads_a_truncated_log_and_says_how_many_rows(tmp_path, capsys) -> None:
    """A log cut before its footer: exit 2 with one line naming the last good line; with
    --partial, exit 0, and one stderr line saying how many rows were read; --partial on a CSV
    is refused."""
    lines = (DATA / "rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker.txt").read_text()
    cut = tmp_path / "cut.log"
    cut.write_text(lines.split("# Out of bounds")[0].rsplit("\n", 4)[0] + "\n")
    argv = ["validate", "nccl-tests", str(cut), "-t", "pcie-gen4-8gpu", "--json"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "truncated" in err and "last good line" in err
    assert main([*argv, "--partial"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["rows"]) == 26
    assert re.fullmatch(r"commsim: --partial: read 26 rows of .*cut.log: truncated: .*\n", err)
    assert main(["validate", _csv(tmp_path), "-t", "pcie-gen4-8gpu", "--partial"]) == 2
    assert "--partial: only for nccl-tests logs" in capsys.readouterr().err
