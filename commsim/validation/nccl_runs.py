"""Logs that hold several nccl-tests runs: one after another in one file.

Job scripts run several tests in a row (``all_reduce_perf``, then ``all_gather_perf``, ...)
and keep one log; each run repeats nccl-tests' preamble (``# nThread ...``, since 2019, and
``# Collective test starting: ...`` in newer versions) and closes its table with the footer
(``# Out of bounds values`` / ``# Avg bus bandwidth``). A run therefore starts at a preamble
line that comes after a table, or, where a report pasted the tables without their preambles,
at a column header that comes after a footer; the lines between the previous footer and that
line (a script's ``Running: ./build/all_gather_perf ...``, a prompt, a report's caption)
belong to the run they announce.
Each run is parsed on its own (:func:`commsim.validation.nccl_tests.parse_nccl_tests`), so it
has its own collective, rank count and hosts, and line numbers in messages stay those of the
file.

>>> two = '''# nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20
... #  size count type redop root time algbw busbw #wrong time algbw busbw #wrong
... 1048576 262144 float sum -1 20.00 52.43 91.75    0 20.00 52.43 91.75    0
... # Avg bus bandwidth    : 91.75
... Running: ./build/broadcast_perf
... # nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20
... #  Rank  0 Group  0 Pid 1 on h device  0 [0x07] GPU
... #  Rank  1 Group  0 Pid 1 on h device  1 [0x0f] GPU
... #  size count type redop root time algbw busbw #wrong time algbw busbw #wrong
...       8     2 float none    0 12.0  0.00  0.00      0 12.0  0.00  0.00      0
... # Avg bus bandwidth    : 0
... '''
>>> [(run.collective.value, run.ranks, run.rows[0].line) for run in parse_nccl_tests_runs(two)]
[('all_reduce', 8, 3), ('broadcast', 2, 10)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from commsim.errors import ParseError
from commsim.validation.nccl_format import clean_line
from commsim.validation.nccl_tests import NcclTestsLog, parse_nccl_tests, read_text

__all__ = ["how_driven", "parse_nccl_tests_runs", "read_nccl_tests_runs", "split_runs"]

_START = re.compile(r"^(?:nThread\s+\d+|Collective test starting:)")
_HEADER = re.compile(r"^size\s+count\b")
_FOOTER = re.compile(r"^(?:Out of bounds values|Avg bus bandwidth)\b")


def split_runs(text: str) -> list[tuple[int, str]]:
    """The runs of a log: (index of its first line, its text); one item for a single run.

    Each run's text is padded with blank lines so that its line numbers are the file's.
    """
    lines = text.splitlines()
    starts = [0]
    seen_table = False  # the current run has shown its column header
    after_footer: int | None = None  # first line after the current run's last footer
    for index, raw in enumerate(lines):
        line = clean_line(raw).strip()
        if not line.startswith("#"):
            continue
        comment = line.lstrip("#").strip()
        if _HEADER.match(comment):
            if seen_table and after_footer is not None:
                # a table pasted without its preamble: the column header after a footer
                # opens the next run (the lines between go with it, as a script's line does)
                starts.append(after_footer)
                after_footer = None
            seen_table = True
        elif _FOOTER.match(comment) and seen_table:
            after_footer = index + 1
        elif _START.match(comment) and seen_table:
            # "starting:" opens the run; the "nThread" line below it then finds no table yet
            starts.append(index if after_footer is None else min(after_footer, index))
            seen_table, after_footer = False, None
    ends = [*starts[1:], len(lines)]
    return [
        (start, "\n" * start + "\n".join(lines[start:end]) + "\n")
        for start, end in zip(starts, ends, strict=True)
    ]


def parse_nccl_tests_runs(
    text: str, source: str = "<text>", *, partial: bool = False
) -> tuple[NcclTestsLog, ...]:
    """Every run of a log (one or several), each inferred on its own.

    Raises
    ------
    ParseError
        One line naming ``source`` and the line where the failing run starts.
    """
    runs = split_runs(text)
    if len(runs) == 1:
        return (parse_nccl_tests(text, source, partial=partial),)
    logs = []
    for number, (start, part) in enumerate(runs, start=1):
        try:
            logs.append(parse_nccl_tests(part, source, partial=partial))
        except ParseError as exc:
            where = f"run {number} of {len(runs)}, from line {start + 1}"
            raise ParseError(f"{exc} ({where})") from None
    return tuple(logs)


def read_nccl_tests_runs(path: str | Path, *, partial: bool = False) -> tuple[NcclTestsLog, ...]:
    """Every run of an nccl-tests log file (see :func:`parse_nccl_tests_runs`)."""
    return parse_nccl_tests_runs(read_text(path), str(path), partial=partial)


def how_driven(runs: Sequence[NcclTestsLog], versions: Iterable[str | None] | None = None
               ) -> tuple[int | None, str | None, str]:
    """How ``runs`` (of one log, or one machine) were driven, as far as they all agree: their
    GPUs per host thread (None where they differ), the NCCL release they print (``versions``
    in its place where given; runs naming none do not count; None where two differ) and the one
    protocol their ``NCCL_PROTO`` allows (``auto`` where they differ)."""
    gpus = {run.gpus_per_thread for run in runs}
    named = set(versions if versions is not None else (run.nccl_version for run in runs))
    named.discard(None)
    protocols = {run.protocol for run in runs}
    return (gpus.pop() if len(gpus) == 1 else None,
            named.pop() if len(named) == 1 else None,
            protocols.pop() if len(protocols) == 1 else "auto")
