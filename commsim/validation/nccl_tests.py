"""Read nccl-tests output (any version since 2019, text or ``-J`` JSON) into measured rows.

nccl-tests prints a header, ``# Rank ...`` device lines and one table row per size. Versions
differ: old ones print per-test columns (``size count type [redop] [root]``) and an ``error``
column, new ones always print ``redop root`` and ``#wrong`` (``N/A`` with ``-c 0``), ``-C``
renames ``time`` to ``cputime``, ``--report_timestamps`` appends a date, 2.19's per-iteration
report adds ``i_min i_max i_p99 i_cv%`` to each side. Columns are therefore mapped by the
header line. Launchers prefix lines (``[1,0]<stdout>:`` from Open MPI, ``0:`` from
``srun -l``, ``(head, rank=0, pid=1)`` from SkyPilot), a reply quotes them with ``> `` and
NCCL interleaves ``NCCL INFO`` lines; all are handled.

The log rarely names its collective and rank count, so both are *inferred* (``--collective``
and ``--ranks`` override):

* **collective**: the test binary when the log names it (``# Collective test starting:
  all_gather_perf``, or a unique ``*_perf`` in the comments), checked against the table's
  structure: a root column holding a rank -> broadcast (``redop none``) or reduce; otherwise
  ``size / (count x type size)``, which is the rank count for all_gather, reduce_scatter and
  alltoall (nccl-tests prints their per-rank count) and 1 for all_reduce. all_gather and
  alltoall print the same columns (``redop none``); the ``#wrong`` cells tell them apart:
  nccl-tests never checks an in-place alltoall, so its in-place ``#wrong`` is ``N/A`` on every
  row while out-of-place is checked, where all_gather checks both. With ``-c 0`` (both ``N/A``)
  a log that names no test is refused: pass ``--collective``.
* **ranks**: that size/count ratio for all_gather/reduce_scatter/alltoall; else the device
  lines when they list every rank; else the bus-bandwidth factor busbw/algbw = 2(p-1)/p
  (all_reduce) or (p-1)/p, solved for p over every row with the printed precision of each
  number taken into account.
  Where the factor allows several p (large p, few digits), the log's own command line
  (``mpirun -np 16 ... -g 1``: :mod:`commsim.validation.nccl_launch`) settles it, else the
  nearest is taken and said so, unless they lie more than a factor of two apart: then the
  count is not guessed (``--ranks``).

Before nccl-tests commit ec1b5e2 (June 2020) all_gather and reduce_scatter printed
``algbw = count x type x (p-1) / time`` and ``busbw = algbw``; the times (which is what
commsim uses) are unaffected, and the parser notes the convention.

>>> log = parse_nccl_tests('''
... #  size   count  type redop root  time algbw busbw #wrong  time algbw busbw #wrong
... 1048576  262144 float   sum   -1 20.00 52.43 91.75      0 20.00 52.43 91.75      0
... ''')
>>> log.collective.value, log.ranks, round(log.rows[0].time_s, 12)
('all_reduce', 8, 2e-05)
"""
from dataclasses import dataclass
from pathlib import Path

from commsim.collectives import Collective
from commsim.errors import ParseError
from commsim.validation.measurements import Measurement
from commsim.validation.nccl_format import (
    NcclTestsRow,
    Scan,
    pipe_table_error,
    scan_text,
)
from commsim.validation.nccl_infer import BINARIES, TYPE_SIZES, infer
from commsim.validation.nccl_json import scan_json

__all__ = ["BINARIES", "TYPE_SIZES", "NcclTestsLog", "NcclTestsRow", "parse_nccl_tests",
           "read_nccl_tests", "read_text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsLog:
    """A parsed nccl-tests run.

    Attributes
    ----------
    source : str
        The file (or label) it came from.
    collective, ranks : Collective, int
        What ran, inferred or given (see the module docstring).
    rows : tuple of NcclTestsRow
        Every table row, in order.
    hosts : tuple of str or None
        Host name of each rank, when the device lines list every rank.
    binary : str or None
        The test binary the log names (``all_reduce_perf``), if any.
    gpus_per_thread : int or None
        GPUs each host thread drove (the preamble's ``nGpus``, nccl-tests' ``-g``), if shown:
        predict on :func:`commsim.nccl.with_gpus_per_thread` of the machine.
    nccl_version : str or None
        The NCCL release the run used, when the log prints it (``NCCL version 2.18.3``):
        its tuning tables apply (``validate(..., nccl_version=...)``).
    nccl_proto : str or None
        The ``NCCL_PROTO`` the run was given, as the log prints it (NCCL's ``NCCL_PROTO set
        by environment to ...``, or aws-ofi-nccl's ``Setting NCCL_PROTO to "simple"``);
        :attr:`protocol` is the one protocol it restricts the run to.
    notes : tuple of str
        How the collective and rank count were determined, and anything odd.
    damage : str
        What was wrong with a log read with ``partial=True`` (empty: nothing).
    """

    source: str
    collective: Collective
    ranks: int
    rows: tuple[NcclTestsRow, ...]
    hosts: tuple[str, ...] | None = None
    binary: str | None = None
    gpus_per_thread: int | None = None
    nccl_version: str | None = None
    nccl_proto: str | None = None
    notes: tuple[str, ...] = ()
    damage: str = ""

    @property
    def protocol(self) -> str:
        """The one protocol ``NCCL_PROTO`` restricted the run to (``Simple``, ``LL`` or
        ``LL128``: predict with it, ``validate(..., protocol=...)``), else ``auto``."""
        return single_protocol(self.nccl_proto) or "auto"

    def measurements(self) -> list[Measurement]:
        """One :class:`Measurement` per row with a size and a time (0-byte rows are dropped:
        NCCL returns at once and the time is launch overhead, nothing a network model has)."""
        return [
            Measurement(
                collective=self.collective, ranks=self.ranks, nbytes=r.nbytes, time_s=r.time_s,
                dtype=r.dtype,
            )
            for r in self.rows
            if r.nbytes > 0 and r.time_s > 0
        ]

    def host_indices(self) -> tuple[int, ...] | None:
        """Hosts as indices in order of first appearance (``(0,)*8 + (1,)*8``), or None."""
        if self.hosts is None:
            return None
        index: dict[str, int] = {}
        return tuple(index.setdefault(h, len(index)) for h in self.hosts)


# -- entry points --------------------------------------------------------------------------
def _shorten(text: str, width: int = 60) -> str:
    """``text`` on one line, runs of blanks as one, cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _check_damage(scan: Scan, source: str, partial: bool) -> str:
    """What is wrong with the log ('' if nothing); ParseError unless ``partial``."""
    found = scan.damage()
    if found is None:
        return ""
    line, problem, good = found
    at = f"{source}:{line}" if line is not None else source
    where = "no good line before it" if good is None else (
        f"last good line {source}:{good[0]}: '{_shorten(good[1])}'"
    )
    if not partial:
        raise ParseError(f"{at}: {problem}; {where} (pass --partial to use the rows that parse)")
    return f"{'' if line is None else f'line {line}: '}{problem}; {where}"


def parse_nccl_tests(
    text: str,
    source: str = "<text>",
    *,
    collective: Collective | str | None = None,
    ranks: int | None = None,
    partial: bool = False,
) -> NcclTestsLog:
    """Parse nccl-tests output (text or ``-J`` JSON) given as a string.

    A text log is *corrupted* when a line that looks like a row does not fit the column
    header (too few fields, a row cut mid-line, a number that is not one), and *truncated*
    when it shows nccl-tests' preamble (``# nThread ...``) but its table is not closed by
    the footer (``# Out of bounds values`` / ``# Avg bus bandwidth``). Either is an error
    naming the last good line, unless ``partial``: then the rows that parse are used and
    :attr:`NcclTestsLog.damage` says what was wrong.

    Raises
    ------
    ParseError
        One line naming ``source``: empty, no result table, a header but no rows
        (truncated), a corrupted or truncated table (without ``partial``), a test commsim
        does not model, or a log that determines neither its collective nor its rank count
        (pass ``collective`` / ``ranks``).
    """
    if not text.strip():
        raise ParseError(f"{source}: empty file")
    if text.lstrip().startswith("{"):
        scan = scan_json(text, source)
    else:
        scan = scan_text(text, source)
    if not scan.header_seen and scan.pipe_table:
        raise pipe_table_error(source)
    if not scan.header_seen:
        raise ParseError(f"{source}: no nccl-tests result table (no '# size count type ...' line)")
    if scan.later_runs:
        raise ParseError(
            f"{source}: {len(scan.later_runs) + 1} nccl-tests runs in one log (the next starts "
            f"at line {scan.later_runs[0]}); read them one by one (commsim.validation.nccl_runs)"
        )
    damage = _check_damage(scan, source, partial)
    if not scan.rows:
        raise ParseError(f"{source}: a column header but no result rows (truncated log?)")
    found = infer(scan, source, collective, ranks)
    return NcclTestsLog(source=source, collective=found.collective, ranks=found.ranks,
                        rows=tuple(scan.rows), hosts=found.hosts, binary=found.binary,
                        gpus_per_thread=scan.gpus_per_thread,
                        nccl_version=scan.nccl_version, nccl_proto=scan.nccl_proto,
                        notes=found.notes + _proto_note(scan.nccl_proto), damage=damage)


def single_protocol(value: str | None) -> str | None:
    """The one NCCL protocol an ``NCCL_PROTO`` value allows, or None (unset, several, or an
    exclusion list such as ``^LL128``, which leaves NCCL a choice).

    >>> single_protocol("simple"), single_protocol("LL128,Simple"), single_protocol("^LL")
    ('Simple', None, None)
    """
    from commsim.nccl_tables import PROTOCOL_NAMES  # the model's names; lazy: parsing is light

    if value is None or value.startswith("^") or "," in value:
        return None
    return next((name for name in PROTOCOL_NAMES if name.lower() == value.lower()), None)


def _proto_note(value: str | None) -> tuple[str, ...]:
    """What the header says of a printed ``NCCL_PROTO``."""
    if value is None:
        return ()
    one = single_protocol(value)
    if one is not None:
        return (f"NCCL_PROTO={value} printed: predicted with {one} only",)
    return (f"NCCL_PROTO={value} printed: not applied (commsim restricts a prediction to one "
            "protocol or none)",)


def read_text(path: str | Path) -> str:
    """A log file's text (undecodable bytes replaced); ParseError when it cannot be a log."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ParseError(f"{source}: no such file") from None
    except OSError as exc:
        raise ParseError(f"{source}: cannot read ({exc.strerror or exc})") from None
    if b"\x00" in data[:4096]:
        raise ParseError(f"{source}: binary data, not an nccl-tests log")
    return data.decode("utf-8", errors="replace")


def read_nccl_tests(
    path: str | Path,
    *,
    collective: Collective | str | None = None,
    ranks: int | None = None,
    partial: bool = False,
) -> NcclTestsLog:
    """Read an nccl-tests log file (see :func:`parse_nccl_tests`)."""
    return parse_nccl_tests(read_text(path), str(path),
                            collective=collective, ranks=ranks, partial=partial)
