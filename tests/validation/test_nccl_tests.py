"""The nccl-tests parser: every real log, the format variants of FORMATS.md section 4, errors."""

from __future__ import annotations

import json
import re

import pytest
from nccl_logs import DATA, GATHER_OR_ALLTOALL, LOGS, RATIO_ONLY, body

from commsim.collectives import Collective
from commsim.errors import ParseError, SpecError
from commsim.validation.nccl_tests import parse_nccl_tests, read_nccl_tests

MODERN_HEADER = """\
# nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907
# Collective test starting: all_reduce_perf_mpi
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 134217728 step: 2(factor) warmup iters: 10 iters: 50
#
# Using devices
#  Rank  0 Group  0 Pid 2994729 on        lab device  0 [0000:02:00] NVIDIA GeForce RTX 5090
#  Rank  1 Group  0 Pid 2994730 on        lab device  1 [0000:03:00] NVIDIA GeForce RTX 5090
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""  # noqa: E501 (verbatim nccl-tests output)
MODERN_ROWS = """\
    67108864      16777216     float     sum      -1    29341.4    2.29    2.29       0  29337.0    2.29    2.29       0
   134217728      33554432     float     sum      -1    58479.5    2.30    2.30       0  58055.4    2.31    2.31       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 1.57614
#
# Collective test concluded: all_reduce_perf_mpi
"""  # noqa: E501 (verbatim nccl-tests output)


def _row(size: int, count: int, dtype: str, redop: str, root: int, us: float, factor: float,
         wrong: str = "0") -> str:
    """A modern nccl-tests row with consistent algbw/busbw."""
    algbw = size / us / 1e3
    return (
        f"{size:>12}  {count:>12}  {dtype:>8}  {redop:>6}  {root:>6}  {us:>7.2f}  {algbw:>6.2f}  "
        f"{algbw * factor:>6.2f}  {wrong:>6}  {us:>7.2f}  {algbw:>6.2f}  {algbw * factor:>6.2f}  "
        f"{wrong:>6}"
    )


HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong"
)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_every_shared_log_is_read(name: str) -> None:
    """Each real log gives its collective, its rank count and every row (provenance included)."""
    collective, ranks, rows, hosts = LOGS[name]
    log = read_nccl_tests(DATA / name)
    assert (log.collective.value, log.ranks, len(log.rows)) == (collective, ranks, rows)
    assert (None if log.hosts is None else len(set(log.hosts))) == hosts
    assert all(m.time_s > 0 and m.nbytes > 0 for m in log.measurements())


@pytest.mark.parametrize("name", sorted(LOGS))
def test_inference_without_provenance_comments(name: str) -> None:
    """Without the COMMAND comments the columns alone give the same collective and ranks, or
    (all_gather run with ``-c 0``: alltoall prints the same table) a one-line refusal that
    asks for ``--collective``, which then parses it."""
    collective, ranks, _, _ = LOGS[name]
    text = body(name)
    if name in GATHER_OR_ALLTOALL:
        with pytest.raises(ParseError, match="all_gather or all_to_all: .* pass --collective"):
            parse_nccl_tests(text, name)
    log = parse_nccl_tests(text, name, collective=collective if name in GATHER_OR_ALLTOALL
                           else None)
    assert (log.collective.value, log.ranks) == (collective, ranks)
    # newer nccl-tests name their binary themselves ("# Collective test concluded: ...")
    assert log.binary is None or log.binary in text


@pytest.mark.parametrize("name", sorted(LOGS))
def test_inference_without_device_lines(name: str) -> None:
    """Without device lines the rank count comes from size/count or busbw/algbw alone (for
    128 ranks the printed precision still leaves one integer). Where the precision allows
    several counts (64 ranks, few digits) the parser says which, and the true one is among
    them."""
    collective, ranks, _, _ = LOGS[name]
    text = "\n".join(line for line in body(name).splitlines() if "Rank" not in line)
    if collective in ("broadcast", "reduce"):  # nothing in a rooted table says how many ranks
        with pytest.raises(ParseError, match="pass --ranks"):
            parse_nccl_tests(text, name)
        return
    log = parse_nccl_tests(text, name,
                           collective=collective if name in GATHER_OR_ALLTOALL else None)
    assert (log.collective.value, log.hosts) == (collective, None)
    expected = RATIO_ONLY.get(name, ranks)
    allowed = [re.search(r"allows (\d+)\.\.(\d+)", note) for note in log.notes]
    span = next((m for m in allowed if m), None)
    if span is None:
        assert log.ranks == expected
    else:
        assert int(span.group(1)) <= expected <= int(span.group(2))
        assert int(span.group(1)) <= log.ranks <= int(span.group(2))


def test_modern_sample_from_formats_md() -> None:
    """The FORMATS.md sample: all_reduce (named), 2 ranks from the device lines, out-of-place
    times in seconds, in-place kept alongside."""
    log = parse_nccl_tests(MODERN_HEADER + MODERN_ROWS, "sample")
    assert log.collective is Collective.ALL_REDUCE and log.ranks == 2
    assert log.binary == "all_reduce_perf_mpi"
    assert log.hosts == ("lab", "lab") and log.host_indices() == (0, 0)
    assert [r.time_s for r in log.rows] == pytest.approx([29341.4e-6, 58479.5e-6])
    assert log.rows[0].in_place_time_s == pytest.approx(29337.0e-6)


def test_tagged_prefixes_info_lines_na_and_exponents() -> None:
    """Open MPI ``[1,0]<stdout>:`` tags, srun ``0:`` prefixes, interleaved NCCL INFO lines,
    ``N/A`` in #wrong (-c 0) and ``%.1e`` numbers all parse."""
    rows = [
        _row(8388608, 2097152, "float", "sum", -1, 100.0, 2 * 7 / 8, "N/A"),
        _row(16777216, 4194304, "float", "sum", -1, 190.0, 2 * 7 / 8, "N/A"),
    ]
    rows.append(
        "  2147483648     536870912     float     sum      -1  1.2e+05   17.90   31.32     N/A"
        "  1.2e+05   17.90   31.32     N/A"
    )
    lines = [HEADER, *rows]
    tagged = "\n".join(
        f"[1,0]<stdout>:{line}" if i % 2 else f" 0: {line}" for i, line in enumerate(lines)
    )
    tagged += "\nnode1:123:456 [0] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7\n"
    log = parse_nccl_tests(tagged, "tagged")
    assert log.collective is Collective.ALL_REDUCE and log.ranks == 8
    assert log.rows[-1].time_s == pytest.approx(0.12)
    assert [r.nbytes for r in log.rows] == [8388608, 16777216, 2147483648]


def test_per_iteration_timestamp_and_cputime_columns_are_mapped_by_header() -> None:
    """2.19's ``i_min i_max i_p99 i_cv%`` columns, a trailing timestamp (two tokens) and
    ``cputime`` (-C) are mapped by name: the time is still the out-of-place time."""
    header = (
        "#       size         count      type   redop    root  cputime   algbw   busbw #wrong"
        "    i_min    i_max    i_p99    i_cv%  cputime   algbw   busbw #wrong    i_min    i_max"
        "    i_p99    i_cv% timestamp"
    )
    row = (
        "     1048576        262144     float     sum      -1    20.00   52.43   91.75      0"
        "    19.00    25.00    24.00     3.10    21.00   49.93   87.38      0    19.50    26.00"
        "    25.00     3.20  2025-01-02 03:04:05"
    )
    log = parse_nccl_tests(f"{header}\n{row}\n", "periter")
    assert log.rows[0].time_s == pytest.approx(20e-6)
    assert log.rows[0].in_place_time_s == pytest.approx(21e-6)
    assert (log.collective, log.ranks) == (Collective.ALL_REDUCE, 8)


def test_json_output() -> None:
    """``-J`` JSON: binary from args[0], devices, root as a string, null nwrong."""
    data = {
        "version": 2,
        "args": ["/opt/nccl-tests/build/all_gather_perf", "-b", "8M"],
        "config": {"nthreads": 1, "ngpus": 1},
        "devices": [{"rank": r, "hostname": f"h{r // 2}"} for r in range(4)],
        "results": [
            {
                "size": 4 * 1048576, "count": 262144, "type": "float", "redop": "none",
                "root": "    -1",
                "out_of_place": {"time": 100.0, "alg_bw": 41.943, "bus_bw": 31.457, "nwrong": None},
                "in_place": {"time": 99.0, "alg_bw": 42.4, "bus_bw": 31.8, "nwrong": None},
            }
        ],
    }
    log = parse_nccl_tests(json.dumps(data), "out.json")
    assert (log.collective, log.ranks, log.binary) == (Collective.ALL_GATHER, 4, "all_gather_perf")
    assert log.host_indices() == (0, 0, 1, 1)
    assert log.rows[0].time_s == pytest.approx(1e-4)


def test_old_formats_broadcast_reduce_and_reduce_scatter() -> None:
    """Pre-2020 per-test columns: broadcast has ``root`` only, reduce ``redop root``,
    reduce_scatter ``redop`` with a per-rank count (and the old busbw = algbw convention)."""
    devices = "\n".join(
        f"#   Rank {r} Pid 1 on host device {r} [0x{r:02x}] Tesla V100" for r in range(4)
    )
    bcast = (
        f"# Using devices\n{devices}\n#\n"
        "#       size         count    type    root     time   algbw   busbw  error     time"
        "   algbw   busbw  error\n"
        "     1048576        262144   float       0    50.00   20.97   20.97  0e+00    50.00"
        "   20.97   20.97  0e+00\n"
    )
    log = parse_nccl_tests(bcast, "bcast")
    assert (log.collective, log.ranks) == (Collective.BROADCAST, 4)
    reduce = bcast.replace("    root ", "   redop    root ").replace("   float       0 ",
                                                                      "   float     sum       0 ")
    assert parse_nccl_tests(reduce, "reduce").collective is Collective.REDUCE
    rs = (
        "#       size         count    type   redop     time   algbw   busbw  error     time"
        "   algbw   busbw  error\n"
        "     4194304        262144   float     sum    100.0   31.46   31.46  2e-07    100.0"
        "   31.46   31.46  2e-07\n"
    )
    log = parse_nccl_tests(rs, "rs")
    assert (log.collective, log.ranks) == (Collective.REDUCE_SCATTER, 4)
    assert any("pre-2020" in note for note in log.notes)


def test_in_place_only_rows_use_the_in_place_time() -> None:
    """When out-of-place is skipped (blank), the in-place columns are used and said so."""
    row = "     1048576        262144     float     sum      -1    30.00   34.95   61.17      0"
    log = parse_nccl_tests(f"{HEADER}\n{row}\n", "inplace")
    assert log.rows[0].in_place_only and log.rows[0].time_s == pytest.approx(30e-6)
    assert any("in-place" in note for note in log.notes)


def test_overrides_win() -> None:
    """``collective``/``ranks`` replace inference, and are validated."""
    log = parse_nccl_tests(MODERN_HEADER + MODERN_ROWS, "s", collective="allreduce", ranks=2)
    assert any("given" in note for note in log.notes)
    with pytest.raises(SpecError, match="--collective"):
        parse_nccl_tests(MODERN_HEADER + MODERN_ROWS, "s", collective="all_to_some")
    with pytest.raises(SpecError, match="--ranks"):
        parse_nccl_tests(MODERN_HEADER + MODERN_ROWS, "s", ranks=0)


def test_ratio_one_is_two_ranks_of_all_reduce_or_an_error() -> None:
    """busbw = algbw with ``sum``/root -1 is all_reduce on 2 ranks; with 8 device lines it
    contradicts the log, which is reported instead of guessed."""
    row = _row(1048576, 262144, "float", "sum", -1, 100.0, 1.0)
    assert parse_nccl_tests(f"{HEADER}\n{row}\n", "two").ranks == 2
    devices = "\n".join(
        f"#  Rank {r} Group 0 Pid 1 on h device {r} [0x01] GPU" for r in range(8)
    )
    with pytest.raises(ParseError, match="8 device lines.*pass --ranks"):
        parse_nccl_tests(f"{devices}\n{HEADER}\n{row}\n", "odd")


def test_broadcast_without_device_lines_needs_ranks() -> None:
    """A broadcast's busbw factor is 1 for any p: without device lines the rank count is
    unknown, a one-line error asking for --ranks; with --ranks it parses."""
    row = _row(1048576, 262144, "float", "none", 0, 100.0, 1.0)
    with pytest.raises(ParseError, match="rank count.*pass --ranks"):
        parse_nccl_tests(f"{HEADER}\n{row}\n", "bcast.log")
    log = parse_nccl_tests(f"{HEADER}\n{row}\n", "bcast.log", ranks=8)
    assert (log.collective, log.ranks) == (Collective.BROADCAST, 8)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("   \n\n", "empty file"),
        ("hello world\nthis is not a log\n", "no nccl-tests result table"),
        (MODERN_HEADER, "a column header but no result rows"),
        ("{not json", "invalid JSON"),
        ('{"results": 3}', "not nccl-tests -J output"),
        (f"{HEADER}\n   1048576  262144  float  sum  -1  12.0  1.0  1.0  0  12.0  1.0  1.0  0\n"
         "   2097152  524288 float sum -1\n   4194304  1048576  float  sum  -1  1 1 1 0 1 1 1 0\n",
         r"bad.log:3: corrupted row \(5 fields, the column header has 13\); last good line "
         r"bad.log:2: '1048576 262144 float sum -1 12.0 1.0 1.0 0 12.0 1.0 1.0 0'"),
        (HEADER.replace("#", "", 1) + "\n", "no nccl-tests result table"),
        ("  1048576  262144  float  sum  -1  12.0  1.0  1.0  0  12.0  1.0  1.0  0\n",
         "before any column header"),
    ],
)
def test_bad_logs_are_one_line_parse_errors(text: str, message: str) -> None:
    """Empty, garbage, truncated and malformed logs: one-line ParseError naming the file."""
    with pytest.raises(ParseError, match=message) as info:
        parse_nccl_tests(text, "bad.log")
    assert str(info.value).startswith("bad.log") and "\n" not in str(info.value)


def test_a_row_cut_mid_line_is_an_error_unless_partial() -> None:
    """A log cut in the middle of its last row is an error naming the last good line (file:line
    and its text, shortened); with ``partial`` the complete rows are used and ``damage`` says
    what was wrong."""
    text = MODERN_HEADER + MODERN_ROWS.splitlines()[0] + "\n   268435456      67108864   float"
    with pytest.raises(ParseError) as info:
        parse_nccl_tests(text, "cut")
    assert str(info.value) == (
        "cut:13: corrupted row (3 fields, the column header has 13); last good line cut:12: "
        "'67108864 16777216 float sum -1 29341.4 2.29 2.29 0 29337....' "
        "(pass --partial to use the rows that parse)"
    )
    log = parse_nccl_tests(text, "cut", partial=True)
    assert len(log.rows) == 1 and log.damage.startswith("line 13: corrupted row")


def _real(name: str = "rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker.txt") -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines(keepends=True)


def test_a_real_log_without_its_footer_is_truncated(tmp_path) -> None:
    """A whole run's output (it has the ``# nThread`` preamble) whose table is not closed by
    the ``# Out of bounds values`` / ``# Avg bus bandwidth`` footer was cut: an error naming
    the last row read; ``partial`` reads the rows that are there."""
    lines = _real()
    footer = next(i for i, line in enumerate(lines) if "Out of bounds" in line)
    path = tmp_path / "cut.log"
    path.write_text("".join(lines[: footer - 5]))
    expected = (r"cut.log: truncated: the table has no '# Avg bus bandwidth' footer; "
                rf"last good line .*cut.log:{footer - 5}: ")
    with pytest.raises(ParseError, match=expected):
        read_nccl_tests(path)
    complete = read_nccl_tests(DATA / "rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker.txt")
    log = read_nccl_tests(path, partial=True)
    assert log.rows == complete.rows[: len(log.rows)] and len(log.rows) == len(complete.rows) - 5
    assert "truncated" in log.damage and complete.damage == ""


def test_a_corrupted_row_inside_a_real_log_is_skipped_only_with_partial(tmp_path) -> None:
    """Garbage in a row (a number that is not one) is an error naming that line and the good
    line before it; with ``partial`` only that row is dropped."""
    lines = _real()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("1048576 "))
    lines[row] = lines[row].replace("sum", "sum 12#$x", 1)
    path = tmp_path / "bad.log"
    path.write_text("".join(lines))
    with pytest.raises(ParseError, match=rf"bad.log:{row + 1}: corrupted row .*last good "
                       rf"line .*bad.log:{row}: '524288 131072 float sum"):
        read_nccl_tests(path)
    log = read_nccl_tests(path, partial=True)
    assert 1048576 not in [r.nbytes for r in log.rows] and len(log.rows) == 28


def test_tests_commsim_does_not_model_are_rejected() -> None:
    """gather/scatter/sendrecv logs are errors naming the test, not silent all_gathers."""
    text = MODERN_HEADER.replace("all_reduce_perf_mpi", "sendrecv_perf") + MODERN_ROWS
    with pytest.raises(ParseError, match="sendrecv_perf measures sendrecv, which commsim"):
        parse_nccl_tests(text, "p2p")
    gather = _row(4194304, 262144, "float", "none", 0, 100.0, 0.75)
    with pytest.raises(ParseError, match="gather or scatter"):
        parse_nccl_tests(f"{HEADER}\n{gather}\n", "g")


def test_a_named_test_that_contradicts_the_columns_is_an_error() -> None:
    """``Collective test starting: broadcast_perf`` over an all_reduce table is reported."""
    text = MODERN_HEADER.replace("all_reduce_perf_mpi", "broadcast_perf") + MODERN_ROWS
    with pytest.raises(ParseError, match="names broadcast_perf.*all_reduce"):
        parse_nccl_tests(text, "mixed")


def test_missing_and_binary_files(tmp_path) -> None:
    """A missing or binary file is a ParseError naming it."""
    with pytest.raises(ParseError, match="no such file"):
        read_nccl_tests(tmp_path / "nope.txt")
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(ParseError, match="binary data"):
        read_nccl_tests(blob)


def test_zero_byte_rows_are_not_measurements() -> None:
    """The DGX-2 logs start with 0-byte rows (launch overhead): kept as rows, dropped as
    measurements."""
    log = read_nccl_tests(
        DATA / "v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_allgather_unresolved-fork-readme.txt"
    )
    assert sum(r.nbytes == 0 for r in log.rows) == 3
    assert len(log.measurements()) == len(log.rows) - 3
