"""nccl-tests output as users paste it (issue 14, item 5), on real logs: quoted in a Markdown
reply or rewritten as a Markdown pipe table, a fork's blank ``redop``, the command line the log
ran as the only word on its rank count, every element type of a ``-d all`` run; and what the
parser will not guess."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from nccl_logs import DATA

from commsim.cli import main
from commsim.errors import ParseError
from commsim.validation.nccl_launch import launched_ranks
from commsim.validation.nccl_runs import parse_nccl_tests_runs
from commsim.validation.nccl_tests import parse_nccl_tests, read_nccl_tests

FORMATS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests-formats"
RCCL = FORMATS / "mi250x_16gpu_allreduce-cmdline_rccl-pr929.txt"
DALL = FORMATS / "h200_16gpu_2node_allreduce-dall_unresolved-openshift.txt"
B200 = "b200_8gpu_1node_hgx-nvswitch_3collectives_unresolved-vultr-poc.txt"
THANOS = "a100-sxm4-80gb_8gpu_1node_allreduce-mpirun_unresolved-thanos.txt"


def _summary(runs: list) -> list[tuple]:
    return [(r.collective, r.ranks, r.hosts, [(x.nbytes, x.time_s) for x in r.rows])
            for r in runs]


@pytest.mark.parametrize("quote", ["> ", ">", "> > "])
def test_a_log_quoted_in_markdown_reads_as_the_log(quote: str) -> None:
    """GitHub replies quote a log with "> " on every line (nested: "> > "); the quoting goes,
    the log stays: the same runs, ranks, hosts and rows as the file itself."""
    text = (DATA / B200).read_text(encoding="utf-8")
    quoted = "\n".join(quote + line for line in text.splitlines())
    assert _summary(parse_nccl_tests_runs(quoted, "quoted")) == _summary(
        parse_nccl_tests_runs(text, B200)
    )


def test_a_blank_redop_column_is_the_fork_s_all_gather() -> None:
    """A fork of nccl-tests (MetaX's mccl-tests) prints all_gather's redop as blanks where
    NVIDIA's prints "none": the row then has one field fewer, its root where redop stood. The
    B200 log's all_gather run with its "none" blanked reads as the run itself."""
    runs = parse_nccl_tests_runs((DATA / B200).read_text(encoding="utf-8"), B200)
    gather = next(r for r in runs if r.collective.value == "all_gather")
    lines = (DATA / B200).read_text(encoding="utf-8").splitlines()
    blanked = [line.replace("    none      -1", "              -1") for line in lines]
    assert blanked != lines
    again = next(r for r in parse_nccl_tests_runs("\n".join(blanked), "blanked")
                 if r.collective.value == "all_gather")
    assert _summary([again]) == _summary([gather])
    assert {row.redop for row in again.rows} == {""}
    # a row short of another column (its redop's place holds no integer) is still corrupted
    with pytest.raises(ParseError, match="corrupted row"):
        parse_nccl_tests_runs("\n".join(line.replace(" float ", " ") for line in lines), "cut")


def test_the_command_line_settles_the_rank_count() -> None:
    """rccl-tests' old columns, no device lines, rows up to 1 KiB: busbw/algbw allows 7..124
    ranks, the log's own ``mpirun.mpich -np 16 ... -g 1`` says 16. Without that line the
    parser refuses rather than guess one of 118 counts."""
    log = read_nccl_tests(RCCL)
    assert (log.collective.value, log.ranks, len(log.rows)) == ("all_reduce", 16, 8)
    assert "command line" in log.notes[-1] and "7..124" in log.notes[-1]
    text = RCCL.read_text(encoding="utf-8").replace("mpirun.mpich -np 16", "echo")
    with pytest.raises(ParseError, match=r"allows 7\.\.124.*pass --ranks"):
        parse_nccl_tests(text, "no command")
    assert parse_nccl_tests(text, "no command", ranks=16).ranks == 16


def test_a_command_line_the_columns_contradict_is_not_used() -> None:
    """The same rows launched "with 4 ranks": busbw/algbw rules 4 out, so the command line is
    noted and set aside (and the counts it allows are still too many to guess)."""
    text = RCCL.read_text(encoding="utf-8").replace("-np 16", "-np 4")
    with pytest.raises(ParseError, match="pass --ranks"):
        parse_nccl_tests(text, "contradicted")


def test_device_lines_outrank_a_command_line() -> None:
    """A log that lists its ranks' devices is read by them, whatever a command line says."""
    text = (DATA / THANOS).read_text(encoding="utf-8")
    assert parse_nccl_tests(text, THANOS).ranks == 8
    assert parse_nccl_tests("mpirun -np 4 ./all_reduce_perf -g 1\n" + text, "x").ranks == 8


@pytest.mark.parametrize(
    ("line", "ranks"),
    [
        ("+ mpirun --allow-run-as-root -np 16 -N 8 ./build/all_reduce_perf -b 8 -e 8G -g 1", 16),
        ("srun --nodes=2 --ntasks-per-node=8 --mpi=pmix all_reduce_perf_mpi -b 512M -g 1", 16),
        ("srun -n 4 all_gather_perf -b 8 -e 1G -t 2 -g 2", 16),
        ("$ ./build/broadcast_perf -b 8 -e 128M -f 2 -g 8", 8),
        ("mpirun -np 8 ./all_reduce_perf -b 8 -e 1G -n 100", 8),  # -n after: iterations
        ("mpirun -H a:8,b:8 ./all_reduce_perf -g 1", None),  # the slots of hosts: unknown
        ("The test is all_reduce_perf, the maca version is 3.8.1", None),  # prose
        ("Running: ./build/all_gather_perf", None),  # a name, no command
        ("mpirun -np 8 ./all_reduce_perf -g x", None),
    ],
)
def test_ranks_a_command_line_launches(line: str, ranks: int | None) -> None:
    """processes (the launcher's -np / -n / --ntasks, or nodes x tasks per node under srun;
    one without a launcher) x nccl-tests' -t threads x -g GPUs."""
    assert launched_ranks(line) == ranks


def test_imprecise_rows_do_not_suggest_the_pre_2020_convention() -> None:
    """busbw/algbw printed as 0.01 / 0.01 fits any factor: the B200 reduce_scatter's rows up to
    8 KiB say nothing about nccl-tests' convention, and no note claims it."""
    text = (DATA / B200).read_text(encoding="utf-8")
    runs = parse_nccl_tests_runs(text, B200)
    scatter = next(r for r in runs if r.collective.value == "reduce_scatter")
    first = scatter.rows[0].line
    lines = text.splitlines()
    start = max(i for i in range(first) if lines[i].lstrip("# ").startswith("size"))
    small = [line for line in lines[start:first + 7] if line.strip()]
    log = parse_nccl_tests("\n".join(small), "small")
    assert log.collective.value == "reduce_scatter" and log.ranks == 8
    assert not any("pre-2020" in note for note in log.notes)


def _as_pipe_table(text: str, edge: str) -> str:
    """A log as a Markdown reply may carry it: its comment lines escaped (``\\#``, lest they
    become headings), each row's fields between pipes, the table's ``|---|`` rule after the
    first row; ``edge`` is what opens and closes a row ("" or "| ")."""
    out: list[str] = []
    ruled = False
    for line in text.splitlines():
        if line.startswith("#"):
            out.append("\\" + line)
            continue
        if not re.match(r"\s*\d+\s+\d+\s", line):
            out.append(line)
            continue
        cells = line.split()
        out.append(edge + " | ".join(cells) + edge[::-1])
        if not ruled:
            out.append(edge + " | ".join("---" for _ in cells) + edge[::-1])
            ruled = True
    return "\n".join(out)


@pytest.mark.parametrize("edge", ["", "| "])
def test_a_log_rewritten_as_a_markdown_pipe_table_reads_as_the_log(edge: str) -> None:
    """A table pasted as Markdown (the mscclpp pull request 736 did so): ``\\#`` comment lines,
    rows as pipe-separated cells, a ``|---|`` rule; the same run and rows as the file."""
    text = (DATA / THANOS).read_text(encoding="utf-8")
    piped = _as_pipe_table(text, edge)
    assert " | " in piped and "\\# " in piped
    assert _summary(parse_nccl_tests_runs(piped, "piped")) == _summary(
        parse_nccl_tests_runs(text, THANOS)
    )


def test_a_table_rewritten_with_other_column_names_is_refused() -> None:
    """A table rewritten by hand under its own header ("Size (B)", "Time (us)") is not read:
    which number is which is a guess. The refusal says what it met."""
    text = (DATA / THANOS).read_text(encoding="utf-8")
    rows = [line.split() for line in text.splitlines() if re.match(r"\s*\d+\s+\d+\s", line)]
    names = ["Size (B)", "Count", "Type", "Op", "Root", "Time (us)", "Algbw (GB/s)",
             "Busbw (GB/s)", "Wrong"]
    width = len(rows[0])
    header = (names + [f"in-place {n}" for n in names[5:]])[:width]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * width,
             *("| " + " | ".join(row) + " |" for row in rows[:6])]
    with pytest.raises(ParseError, match="a Markdown table whose header does not name"):
        parse_nccl_tests("\n".join(table), "rewritten")


def test_every_element_type_of_a_d_all_run_keeps_its_type(capsys) -> None:
    """nccl-tests ``-d all`` times each size once per element type: every row keeps its type,
    in ``--json`` (``dtype``) and as the table's ``type`` column, which a log of one type does
    not get."""
    types = [m.dtype for m in read_nccl_tests(DALL).measurements()]
    assert len(types) == 36 and len(set(types)) == 12 and types[:4] == ["int8"] * 3 + ["uint8"]
    args = ["validate", "nccl-tests", str(DALL), "-t", "hgx-h200x2", "--engine", "analytic"]
    assert main([*args, "--json"]) == 0
    assert [r["dtype"] for r in json.loads(capsys.readouterr().out)["rows"]] == types
    assert main(args) == 0
    table = capsys.readouterr().out.splitlines()
    assert next(line for line in table if "predicted" in line).split()[1:4] == [
        "size", "type", "collective"]
    assert sum(" f8e5m2 " in line for line in table) == 3
    assert main(["validate", "nccl-tests", str(DATA / THANOS), "-t", "dgx-a100", "--engine",
                 "analytic"]) == 0
    assert " type " not in capsys.readouterr().out
