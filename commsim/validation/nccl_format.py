"""Scan nccl-tests' text output into table rows (no inference here; its ``-J`` JSON is
:mod:`commsim.validation.nccl_json`'s).

Columns are mapped by the header line (``# size count type [redop] [root] time algbw busbw
#wrong|error [i_min i_max i_p99 i_cv%] time ... [timestamp]``), never by position; launcher
prefixes (``[1,0]<stdout>:``, ``0:``), Markdown's ``> `` quoting and ``NCCL INFO`` lines are
dropped; device lines, test names and command lines are collected for
:mod:`commsim.validation.nccl_tests`, which infers the collective and the rank count from
what this module finds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from commsim.errors import ParseError
from commsim.validation.nccl_launch import launched_ranks

_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?")  # mpirun --tag-output
_QUOTE = re.compile(r"^ {0,3}>[ \t]?")  # a Markdown blockquote: a log pasted into a reply
_ESCAPED = re.compile(r"^(\s*)\\#")  # Markdown's "\#": a comment line kept from becoming a heading
_RULE = re.compile(r":?-+:?")  # a cell of a Markdown table's |---|---| rule
_SRUN = re.compile(r"^\s*\d+:\s")  # srun -l
#: A job launcher's per-process tag, "(name, key=value, ...)": SkyPilot's
#: "(head, rank=0, pid=3808) " or "(worker1, rank=1, pid=2769, ip=10.0.0.2) ".
_LAUNCHER = re.compile(r"^\([A-Za-z][\w-]*(?:,?\s+[A-Za-z_]+=[^,()\s]+)+\)\s?")
_DEVICE = re.compile(
    r"^\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]"
)
BINARY = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_ROW = re.compile(r"^\s*\d+\s+\d+(?:\s|$)")
_ELISION = re.compile(r"^\s*#?\s*(?:\.\.\.|…)\s*$")
_TIME_COLUMNS = ("time", "cputime")
#: nccl-tests' reduction operations (``-o``) and "none" (the tests that do not reduce).
_OPERATIONS = frozenset({"sum", "prod", "max", "min", "avg", "premulsum", "mulsum", "none"})
#: nccl-tests closes every table with these lines (src/common.cu, since 2017).
_FOOTER = re.compile(r"^(Out of bounds values|Avg bus bandwidth)\b")
#: nccl-tests' first line of parameters, printed before any table.
_PREAMBLE = re.compile(r"^nThread\s+\d+(?:\s+nGpus\s+(\d+))?")
#: The NCCL release a run used, as NCCL prints it (``NCCL version 2.18.3+cuda12.2``) or as a
#: version code (``NCCL version: 22602``: 2.26.2; before 2.9 the code was 2804 for 2.8.4).
_VERSION = re.compile(r"\bNCCL version:?\s+(?:(\d+\.\d+(?:\.\d+)?)|(\d{4,5})\b)")
#: nccl-tests >= 2.14's first line names the library it loaded as NCCL's version code:
#: ``# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902``.
_LIBRARY = re.compile(r"\bnccl-library=()(\d{4,5})\b")
#: NCCL's ``NCCL_PROTO set by environment to simple`` and aws-ofi-nccl's ``Setting NCCL_PROTO
#: to "simple"``: the protocols the run was restricted to.
_PROTO = re.compile(r"\bNCCL_PROTO\s+(?:set by environment\s+)?to\s+\\?\"?([\^\w,]+)")


def nccl_release(line: str) -> str | None:
    """The NCCL release a line names (``"2.18.3"``), or None.

    >>> nccl_release("NCCL version 2.18.3+cuda12.2"), nccl_release("NCCL version: 22602, CUDA")
    ('2.18.3', '2.26.2')
    >>> nccl_release("# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902")
    '2.29.2'
    """
    match = _VERSION.search(line) or _LIBRARY.search(line)
    if match is None:
        return None
    if match.group(1):
        return match.group(1)
    code = int(match.group(2))
    major, rest = (code // 10000, code % 10000) if code >= 20900 else (code // 1000, code % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def nccl_proto(line: str) -> str | None:
    """The value of ``NCCL_PROTO`` a line says the run was given, as printed, or None.

    >>> nccl_proto("NCCL INFO NCCL_PROTO set by environment to LL128,Simple")
    'LL128,Simple'
    >>> nccl_proto('NCCL INFO NET/OFI Setting NCCL_PROTO to "simple"')
    'simple'
    """
    match = _PROTO.search(line)
    return None if match is None else match.group(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsRow:
    """One table row: the out-of-place side (or in-place where out-of-place is absent).

    ``*_text`` keep the numbers as printed (their precision bounds the inferred rank count).
    ``wrong_text`` and ``in_place_wrong_text`` are the two ``#wrong`` (or ``error``) cells as
    printed (``N/A`` where nccl-tests did not check the result, ``""`` where absent): alltoall
    leaves its in-place side unchecked, all_gather does not.
    """

    line: int
    nbytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    time_s: float
    algbw_GBps: float | None
    busbw_GBps: float | None
    in_place_time_s: float | None = None
    in_place_only: bool = False
    time_text: str = field(default="", repr=False)
    algbw_text: str = field(default="", repr=False)
    busbw_text: str = field(default="", repr=False)
    wrong_text: str = field(default="", repr=False)
    in_place_wrong_text: str = field(default="", repr=False)


# -- numbers -------------------------------------------------------------------------------
def _number(text: str) -> float | None:
    """A printed number, or None for ``N/A``, ``-`` and the like."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def half_unit(text: str) -> float:
    """Half a unit in the last printed place: ``"12.35"`` -> 0.005, ``"1.2e+05"`` -> 5000."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    scale = 10.0 ** int(exponent) if exponent else 1.0
    return 0.5 * 10.0**-decimals * scale


# -- the text format -----------------------------------------------------------------------
@dataclass(slots=True)
class Layout:
    """Column positions from a header line."""

    prefix: list[str]
    groups: list[list[str]]
    timestamp: bool

    @property
    def width(self) -> int:
        return len(self.prefix) + sum(len(g) for g in self.groups)


def _layout(tokens: list[str]) -> Layout | None:
    """The layout of a ``# size count type ... time algbw busbw ...`` header, or None."""
    if tokens[:2] != ["size", "count"] or "busbw" not in tokens:
        return None
    if not any(t in _TIME_COLUMNS for t in tokens):
        return None
    first = next(i for i, t in enumerate(tokens) if t in _TIME_COLUMNS)
    timestamp = tokens[-1] == "timestamp"
    rest = tokens[first : len(tokens) - timestamp]
    groups: list[list[str]] = []
    for token in rest:
        if token in _TIME_COLUMNS or not groups:
            groups.append([])
        groups[-1].append(token)
    return Layout(prefix=tokens[:first], groups=groups, timestamp=timestamp)


@dataclass(slots=True)
class Scan:
    """What one pass over the lines found."""

    rows: list[NcclTestsRow] = field(default_factory=list)
    devices: dict[int, str] = field(default_factory=dict)
    devices_elided: bool = False
    binaries_strong: list[str] = field(default_factory=list)
    binaries_weak: set[str] = field(default_factory=set)
    header_seen: bool = False
    layout: Layout | None = None
    notes: list[str] = field(default_factory=list)
    #: The log shows nccl-tests' preamble (``# nThread ...``): it is a whole run's output.
    preamble: bool = False
    #: GPUs each host thread drives (the preamble's ``nGpus``: nccl-tests' ``-g``), if shown.
    gpus_per_thread: int | None = None
    #: The NCCL release the run used, if the log prints it (:func:`nccl_release`).
    nccl_version: str | None = None
    #: The ``NCCL_PROTO`` the run was given, as printed (:func:`nccl_proto`), if the log says.
    nccl_proto: str | None = None
    #: A footer (``# Avg bus bandwidth``) follows the last row: the table is complete.
    closed: bool = False
    #: The last line read as a row (or the column header): (line number, text).
    last_good: tuple[int, str] | None = None
    #: Lines that look like rows but do not fit the header: (line number, why).
    bad_rows: list[tuple[int, str]] = field(default_factory=list)
    #: :attr:`last_good` when the first bad row was met.
    good_before_bad: tuple[int, str] | None = None
    #: Lines where a further run's preamble follows a table: several runs in one log.
    later_runs: list[int] = field(default_factory=list)
    #: Rank counts the log's own command lines launched the test with (:func:`launched_ranks`).
    launches: set[int] = field(default_factory=set)
    #: A Markdown table's ``|---|`` rule was met (:func:`unpipe`).
    pipe_table: bool = False

    def damage(self) -> tuple[int | None, str, tuple[int, str] | None] | None:
        """What is wrong with a text log and the last good line before it, or None: a row
        that does not fit its header (corrupted, or cut mid-line), or a whole run's output
        (it has the ``# nThread`` preamble) whose table lacks its footer (truncated):
        (line of the problem or None, the problem, the last good (line, text) before it)."""
        if self.bad_rows:
            number, why = self.bad_rows[0]
            return number, f"corrupted row ({why})", self.good_before_bad
        if self.preamble and self.rows and not self.closed:
            problem = "truncated: the table has no '# Avg bus bandwidth' footer"
            return None, problem, self.last_good
        return None


def clean_line(raw: str) -> str:
    """A log line without what was put in front of it: quoting, launchers' tags."""
    line = raw.rstrip("\r\n")
    while True:  # "> " quotes, nested or not, then a launcher's tag
        stripped = _QUOTE.sub("", line, count=1)
        if stripped == line:
            break
        line = stripped
    for _ in range(2):  # e.g. "(head, rank=0, pid=1) [1,0]<stdout>:" then nothing, or "0: "
        stripped = _LAUNCHER.sub("", line, count=1)
        stripped = _TAG.sub("", stripped, count=1)
        stripped = _SRUN.sub("", stripped, count=1)
        if stripped == line:
            break
        line = stripped
    return _ESCAPED.sub(r"\1#", line, count=1)


def pipe_table_error(source: str) -> ParseError:
    """The refusal of a Markdown table whose header is not nccl-tests' own (a table rewritten by
    hand: renamed columns, sizes in GB): its numbers cannot be read for certain."""
    return ParseError(
        f"{source}: a Markdown table whose header does not name nccl-tests' columns "
        "('size count type ...'): paste the log as nccl-tests printed it"
    )


def unpipe(line: str) -> tuple[str, bool]:
    """A line of a Markdown pipe table (``1024 | 512 | half | ...``) as nccl-tests printed it:
    a row's cells joined by blanks, a header of nccl-tests' own names as its ``#`` comment,
    nothing for the ``|---|`` rule; any other line as it is. Also whether it was a table's
    rule (the sign that a pipe table was pasted). Only cells of one token each are joined, and
    a row only of six or more (nccl-tests prints at least eight): a blank cell, a renamed
    column ("Message Size (GB)") or a short line of numbers leaves the line as it is."""
    if line.count("|") < 3:
        return line, False
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    if all(_RULE.fullmatch(cell) for cell in cells):
        return "", True
    if not all(len(cell.split()) == 1 for cell in cells):
        return line, False
    if cells[0].isdigit() and len(cells) >= 6:
        return " ".join(cells), False
    if cells[:2] == ["size", "count"]:
        return "# " + " ".join(cells), False
    return line, False


def scan_text(text: str, source: str) -> Scan:
    """Every row of a text log; rows that do not fit the header are set aside in
    ``bad_rows`` (the caller decides whether that is fatal, see :meth:`Scan.damage`)."""
    scan = Scan()
    lines = text.splitlines()
    in_devices = False
    for number, raw in enumerate(lines, start=1):
        line, rule = unpipe(clean_line(raw))
        scan.pipe_table |= rule
        body = line.strip()
        if not body:
            continue
        if scan.nccl_version is None and ("NCCL version" in body or "nccl-library=" in body):
            scan.nccl_version = nccl_release(body)
        if scan.nccl_proto is None and "NCCL_PROTO" in body:
            scan.nccl_proto = nccl_proto(body)
        if "NCCL INFO" in body or "NCCL WARN" in body:
            continue
        if body.startswith("#"):
            comment = body.lstrip("#").strip()
            match = STARTING.search(comment)
            if match:
                scan.binaries_strong.append(match.group(1))
            else:
                scan.binaries_weak.update(m.group(0) for m in BINARY.finditer(comment))
            if comment.startswith("Using devices"):
                in_devices = True
                continue
            preamble = _PREAMBLE.match(comment)
            if preamble:
                if scan.header_seen and not in_devices:
                    scan.later_runs.append(number)
                scan.preamble = True
                if preamble.group(1) and int(preamble.group(1)) > 0:
                    scan.gpus_per_thread = int(preamble.group(1))
            if _FOOTER.match(comment) and scan.rows:
                scan.closed = True
            device = _DEVICE.match(comment)
            if device:
                scan.devices[int(device.group(1))] = device.group(2)
                continue
            layout = _layout(comment.split())
            if layout is not None:
                if scan.layout is not None and layout.width != scan.layout.width:
                    scan.notes.append(f"line {number}: a second table with other columns")
                scan.layout, scan.header_seen, in_devices = layout, True, False
                scan.last_good = (number, body)
                continue
            if in_devices and _ELISION.match(body):
                scan.devices_elided = True
            continue
        if _ELISION.match(body):
            if in_devices or not scan.header_seen:
                scan.devices_elided = True
            continue
        if not _ROW.match(line):
            # launcher chatter, SHARP/UCX logs, prompts; a script's command line
            # ("Running: ./build/all_gather_perf ...") still names the test
            scan.binaries_weak.update(m.group(0) for m in BINARY.finditer(body))
            if (launched := launched_ranks(body)) is not None:
                scan.launches.add(launched)
            continue
        if scan.layout is None and scan.pipe_table:
            raise pipe_table_error(source)
        if scan.layout is None:
            raise ParseError(
                f"{source}:{number}: a result row before any column header "
                "('#  size  count  type ...')"
            )
        row, problem = _row(line.split(), scan.layout, number)
        if row is None:
            if not scan.bad_rows:
                scan.good_before_bad = scan.last_good
            scan.bad_rows.append((number, problem))
            continue
        scan.rows.append(row)
        scan.closed = False
        scan.last_good = (number, body)
    return scan


def _blank_redop(tokens: list[str], prefix: list[str]) -> list[str] | None:
    """A row whose ``redop`` was printed blank, with an empty token put in its place; None if
    it is not one. Either a fork's all_gather (``bfloat16      -1``: the header reads ``type
    redop root`` and the token in redop's place is the root, an integer) or nccl-tests'
    alltoall before the root column (2020-21: the header ends ``type redop``, the token in
    redop's place is the time). The token before it must be a type, not an operation (a row
    missing its type is corrupted)."""
    at = prefix.index("redop") if "redop" in prefix else -1
    if at < 1 or prefix[at - 1] != "type" or tokens[at - 1].lower() in _OPERATIONS:
        return None
    if prefix[at + 1 : at + 2] == ["root"]:
        fits = re.fullmatch(r"-?\d+", tokens[at]) is not None
    else:
        fits = at == len(prefix) - 1 and _number(tokens[at]) is not None
    return [*tokens[:at], "", *tokens[at:]] if fits else None


def _row(tokens: list[str], layout: Layout, number: int) -> tuple[NcclTestsRow | None, str]:
    """Map a data line's tokens by the header; (None, why) when they do not fit."""
    groups = layout.groups
    width = layout.width
    n = len(tokens)
    if layout.timestamp and n == width + 2:  # "YYYY-mm-dd HH:MM:SS"
        tokens, n = tokens[:width], width
    if n == width - 1 and (filled := _blank_redop(tokens, layout.prefix)) is not None:
        tokens, n = filled, width
    in_place_only = False
    if n == width:
        sides = groups
    elif len(groups) == 2 and n == len(layout.prefix) + len(groups[1]):
        sides, in_place_only = [groups[1]], True  # out-of-place skipped (blank)
    else:
        return None, f"{n} fields, the column header has {width}"
    values = dict(zip(layout.prefix, tokens, strict=False))
    try:
        nbytes, count = int(values["size"]), int(values.get("count", "0"))
    except ValueError:
        return None, "size/count are not integers"
    offset = len(layout.prefix)
    parsed: list[dict[str, str]] = []
    for group in sides:
        parsed.append(dict(zip(group, tokens[offset : offset + len(group)], strict=True)))
        offset += len(group)
    first = parsed[0]
    time_key = next(k for k in first if k in _TIME_COLUMNS)
    time_us = _number(first[time_key])
    if time_us is None:
        return None, f"time {first[time_key]!r} is not a number"
    in_place_time = None
    in_place_wrong = ""
    if len(parsed) == 2:
        second = parsed[1]
        value = _number(second.get(time_key, ""))
        in_place_time = None if value is None else value * 1e-6
        in_place_wrong = _wrong(second)
    root_text = values.get("root")
    root = None
    if root_text is not None:
        try:
            root = int(root_text)
        except ValueError:
            return None, f"root {root_text!r} is not an integer"
    return (
        NcclTestsRow(
            line=number,
            nbytes=nbytes,
            count=count,
            dtype=values.get("type", ""),
            redop=values.get("redop"),
            root=root,
            time_s=time_us * 1e-6,
            algbw_GBps=_number(first.get("algbw", "")),
            busbw_GBps=_number(first.get("busbw", "")),
            in_place_time_s=in_place_time,
            in_place_only=in_place_only,
            time_text=first[time_key],
            algbw_text=first.get("algbw", ""),
            busbw_text=first.get("busbw", ""),
            wrong_text=_wrong(first) if not in_place_only else "",
            in_place_wrong_text=_wrong(first) if in_place_only else in_place_wrong,
        ),
        "",
    )


def _wrong(side: dict[str, str]) -> str:
    """A side's ``#wrong`` (or old ``error``) cell as printed, ``""`` if it has none."""
    return side.get("#wrong", side.get("error", ""))
