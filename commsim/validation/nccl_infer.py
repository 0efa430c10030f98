"""What an nccl-tests log measured, inferred from its scanned table: the collective (the test
binary it names, checked against the table's columns), the rank count (the size/count ratio,
the device lines, or the bus-bandwidth factor) and the host of each rank. The rules are in
:mod:`commsim.validation.nccl_tests`' docstring; ``--collective`` and ``--ranks`` override them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commsim.collectives import Collective, parse_collective
from commsim.errors import ParseError, SpecError
from commsim.validation.nccl_format import BINARY, Layout, NcclTestsRow, Scan, half_unit

#: The tests whose ``count`` column is per rank (``size = count x type x ranks``) and whose
#: busbw factor is (p-1)/p.
_PER_RANK_COUNT = frozenset({Collective.ALL_GATHER, Collective.REDUCE_SCATTER,
                             Collective.ALL_TO_ALL})

BINARIES: dict[str, Collective | None] = {
    "all_reduce": Collective.ALL_REDUCE,
    "all_gather": Collective.ALL_GATHER,
    "reduce_scatter": Collective.REDUCE_SCATTER,
    "broadcast": Collective.BROADCAST,
    "reduce": Collective.REDUCE,
    "alltoall": Collective.ALL_TO_ALL,
    "alltoallv": None,
    "gather": None,
    "scatter": None,
    "sendrecv": None,
    "hypercube": None,
}

#: Element sizes of nccl-tests' type names (and a few spellings of other tools).
TYPE_SIZES: dict[str, int] = {
    "int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
    "half": 2, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2,
    "int32": 4, "uint32": 4, "int": 4, "float": 4, "float32": 4, "fp32": 4,
    "int64": 8, "uint64": 8, "double": 8, "float64": 8, "fp64": 8,
}


def _binary_collective(name: str) -> tuple[str, Collective | None] | None:
    """``all_gather_perf_mpi`` -> ("all_gather", ALL_GATHER); None if not a known test."""
    match = BINARY.search(name)
    if match is None:
        return None
    test = match.group(1)
    if test not in BINARIES:
        return None
    return test, BINARIES[test]


def _size_ratio(rows: list[NcclTestsRow], source: str, notes: list[str]) -> int | None:
    """size / (count x type size), the same integer on every row, or None."""
    ratios = set()
    for row in rows:
        size = TYPE_SIZES.get(row.dtype.lower())
        if size is None or row.count <= 0:
            continue
        q, rest = divmod(row.nbytes, row.count * size)
        if rest or q < 1:
            notes.append(
                f"line {row.line}: size {row.nbytes} is not a multiple of count x type size"
            )
            return None
        ratios.add(q)
    if len(ratios) > 1:
        notes.append(f"size/count ratio varies between rows ({sorted(ratios)})")
        return None
    return ratios.pop() if ratios else None


def _factor_interval(row: NcclTestsRow) -> tuple[float, float] | None:
    """Bounds on busbw/algbw from the printed precision of busbw, algbw and time."""
    busbw, algbw = row.busbw_GBps, row.algbw_GBps
    if busbw is None or busbw <= 0 or not row.busbw_text:
        return None
    hb = half_unit(row.busbw_text)
    lows, highs = [], []
    if row.time_text and row.time_s > 0:
        ht = half_unit(row.time_text) * 1e-6
        if row.time_s - ht > 0:
            lows.append(row.nbytes / (row.time_s + ht) / 1e9)
            highs.append(row.nbytes / (row.time_s - ht) / 1e9)
    if algbw is not None and algbw > 0 and row.algbw_text:
        ha = half_unit(row.algbw_text)
        low, high = algbw - ha, algbw + ha
        if lows and (low > highs[0] or high < lows[0]):  # printed algbw is not size/time:
            lows, highs = [], []  # the pre-2020 convention; trust what was printed
        lows.append(low)
        highs.append(high)
    if not lows:
        return None
    a_low, a_high = max(lows), min(highs)
    if a_low <= 0 or a_high < a_low:
        return None
    return (busbw - hb) / a_high, (busbw + hb) / a_low


def _ranks_from_factor(
    rows: list[NcclTestsRow], collective: Collective
) -> tuple[int, int, float] | None:
    """(lowest, highest, best estimate) rank count consistent with every row's busbw/algbw."""
    low, high = 1.0, math.inf
    estimates: list[tuple[float, float]] = []
    for row in rows:
        bounds = _factor_interval(row)
        if bounds is None:
            continue
        f_low, f_high = bounds
        if collective is Collective.ALL_REDUCE:  # f = 2(p-1)/p -> p = 2/(2-f)
            p_low = 2 / (2 - f_low) if f_low < 2 else math.inf
            p_high = 2 / (2 - f_high) if f_high < 2 else math.inf
        else:  # (p-1)/p -> p = 1/(1-f)
            p_low = 1 / (1 - f_low) if f_low < 1 else math.inf
            p_high = 1 / (1 - f_high) if f_high < 1 else math.inf
        if p_high - p_low > 64 and estimates:
            continue  # a 0.00-ish row says nothing
        low, high = max(low, p_low), min(high, p_high)
        if math.isfinite(p_low) and math.isfinite(p_high):
            estimates.append(((p_low + p_high) / 2, p_high - p_low))
    if not estimates:
        return None
    best = min(estimates, key=lambda e: e[1])[0]
    lo, hi = math.ceil(low - 1e-9), math.floor(high + 1e-9) if math.isfinite(high) else 10**9
    return lo, hi, best


def _structure(
    rows: list[NcclTestsRow], layout: Layout, q: int | None, notes: list[str]
) -> Collective | None:
    """The collective the columns imply, or None when they cannot tell."""
    has_redop, has_root = "redop" in layout.prefix, "root" in layout.prefix
    redops = {(r.redop or "").lower() for r in rows}
    reducing = has_redop and bool(redops - {"none", ""})
    rooted = has_root and any(r.root is not None and r.root >= 0 for r in rows)
    modern = has_redop and has_root
    if rooted:
        if q is not None and q > 1:
            raise ParseError("a root column with a per-rank count: gather or scatter")
        if not has_redop:
            return Collective.BROADCAST
        return Collective.REDUCE if reducing else Collective.BROADCAST
    if modern or has_redop:
        if q is not None and q > 1:
            if reducing:
                return Collective.REDUCE_SCATTER
            if not has_root and redops == {""}:  # old all_gather printed no redop column
                notes.append("old columns, redop printed blank, per-rank count: alltoall")
                return Collective.ALL_TO_ALL
            return _gather_or_alltoall(rows, "none" if "none" in redops else "blank", notes)
        if q == 1 and reducing:
            return Collective.ALL_REDUCE
        if q is None and reducing:
            return None  # all_reduce or reduce_scatter: the busbw factor decides below
        return None
    if has_root:  # old broadcast prints root without redop
        return Collective.BROADCAST
    if q is not None and q > 1:  # old all_gather: neither redop nor root
        return Collective.ALL_GATHER
    return None


def _gather_or_alltoall(
    rows: list[NcclTestsRow], redop: str, notes: list[str]
) -> Collective | None:
    """all_gather or alltoall, which print the same columns (redop none, the per-rank count),
    told apart by the ``#wrong`` cells: nccl-tests never checks an in-place alltoall
    (``alltoall.cu``: "We don't support in-place alltoall"), so its in-place ``#wrong`` is
    ``N/A`` on every row while the out-of-place side is checked; all_gather checks both. With
    ``-c 0`` (neither side checked) or no ``#wrong`` columns nothing tells: None."""
    pairs = [(r.wrong_text, r.in_place_wrong_text) for r in rows]
    if pairs and all(inp == "N/A" and _checked(out) for out, inp in pairs):
        notes.append(f"redop {redop}, per-rank count, in-place #wrong N/A on every row while "
                     "out-of-place is checked: alltoall (nccl-tests does not check in-place "
                     "alltoall)")
        return Collective.ALL_TO_ALL
    if pairs and all(_checked(inp) for _, inp in pairs):
        notes.append(f"redop {redop}, per-rank count, in-place results checked: all_gather "
                     "(alltoall leaves them N/A)")
        return Collective.ALL_GATHER
    return None


def _checked(cell: str) -> bool:
    """A ``#wrong`` cell that holds a count: the result was checked."""
    try:
        float(cell)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Inference:
    """What a log measured: its collective, rank count, hosts (one per rank, when the device
    lines list them all), the binary it names, and how each was found (``notes``)."""

    collective: Collective
    ranks: int
    hosts: tuple[str, ...] | None
    binary: str | None
    notes: tuple[str, ...]


def infer(
    scan: Scan,
    source: str,
    collective: Collective | str | None,
    ranks: int | None,
) -> Inference:
    """The log's collective, rank count and hosts, from the scan (and the flags)."""
    rows = scan.rows
    notes = list(scan.notes)
    assert scan.layout is not None
    q = _size_ratio(rows, source, notes)
    binary, named = _named_binary(scan, collective, source, notes)
    if collective is not None:
        try:
            chosen = parse_collective(collective)
        except SpecError as exc:
            raise SpecError(f"--collective: {exc}") from None
        notes.append(f"collective {chosen.value} (given)")
    else:
        chosen = _collective_from_columns(scan, q, binary, named, source, notes)
    hosts, p = _hosts_and_ranks(scan, chosen, q, ranks, source, notes)
    if chosen in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER) and p > 2:
        # rows whose printed digits pin busbw/algbw within 0.1 ((p-1)/p against 1 for p > 2)
        factors = [b for b in map(_factor_interval, rows) if b is not None and b[1] - b[0] < 0.1]
        if factors and all(f_low <= 1.0 <= f_high for f_low, f_high in factors[-3:]):
            notes.append(
                "busbw = algbw: the pre-2020 nccl-tests convention for all_gather/"
                "reduce_scatter (algbw = count x type x (p-1) / time); times are unaffected"
            )
    if any(r.in_place_only for r in rows):
        notes.append("out-of-place results absent: in-place times used")
    return Inference(chosen, p, hosts, binary, tuple(notes))


def _named_binary(
    scan: Scan, collective: Collective | str | None, source: str, notes: list[str]
) -> tuple[str | None, Collective | None]:
    """(the test binary the log names, the collective it measures), each None if unknown."""
    binary: str | None = None
    named: Collective | None = None
    strong = sorted(set(scan.binaries_strong))
    if len(strong) > 1:
        raise ParseError(f"{source}: several tests in one log ({', '.join(strong)})")
    candidates = strong or sorted(scan.binaries_weak)
    known: list[tuple[str, tuple[str, Collective | None]]] = []
    for name in candidates:
        found = _binary_collective(name)
        if found is not None:
            known.append((name, found))
    if len({k[0] for _, k in known}) == 1:
        binary, (test, named) = known[0]
        if named is None and collective is None:
            raise ParseError(
                f"{source}: {binary} measures {test}, which commsim does not model "
                f"(it models {', '.join(c.value for c in Collective)})"
            )
    elif len(known) > 1:
        notes.append(f"comments name several tests ({', '.join(c for c, _ in known)}); ignored")
    return binary, named


def _collective_from_columns(
    scan: Scan,
    q: int | None,
    binary: str | None,
    named: Collective | None,
    source: str,
    notes: list[str],
) -> Collective:
    """The collective the columns show, reconciled with the one the log names."""
    rows, strong = scan.rows, bool(scan.binaries_strong)
    assert scan.layout is not None
    try:
        structural = _structure(rows, scan.layout, q, notes)
    except ParseError as exc:
        raise ParseError(f"{source}: {exc}; commsim does not model it") from None
    if structural is None and named is None and q is None:
        # redop but no count information: the busbw factor tells all_reduce (> 1) apart
        factors = [b for b in map(_factor_interval, rows) if b is not None]
        if factors and all(f_low > 1.0 for f_low, _ in factors[-3:]):
            structural = Collective.ALL_REDUCE
    if structural is not None and named is not None and structural is not named:
        if strong:
            raise ParseError(
                f"{source}: the log names {binary} but its columns look like "
                f"{structural.value}; pass --collective"
            )
        notes.append(f"comments mention {binary}, columns say {structural.value}")
    chosen = named if named is not None and (strong or structural is None) else None
    chosen = chosen or structural
    if chosen is None:
        raise ParseError(f"{source}: {_undetermined(rows, q)}")
    how = f"named by {binary}" if chosen is named else "from the columns"
    notes.append(f"collective {chosen.value} ({how})")
    return chosen


def _undetermined(rows: list[NcclTestsRow], q: int | None) -> str:
    """Why the collective of a log that names no test cannot be told, and what to pass."""
    if q is not None and q > 1 and all((r.redop or "").lower() in ("none", "") for r in rows):
        return ("all_gather or all_to_all: the log names no test, both print these columns, "
                "and its #wrong cells do not tell them apart (both N/A with -c 0); pass "
                "--collective all_gather or --collective all_to_all")
    return ("cannot tell which collective this log measured (no test name, ambiguous "
            "columns); pass --collective")


def _hosts_and_ranks(
    scan: Scan,
    chosen: Collective,
    q: int | None,
    ranks: int | None,
    source: str,
    notes: list[str],
) -> tuple[tuple[str, ...] | None, int]:
    """(the host of each rank from the device lines, or None; the rank count)."""
    devices = scan.devices
    complete = bool(devices) and not scan.devices_elided and set(devices) == set(
        range(len(devices))
    )
    hosts = tuple(devices[r] for r in range(len(devices))) if complete else None
    device_count = len(devices) if complete else None
    if ranks is not None:
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise SpecError(f"--ranks: must be a positive integer, got {ranks!r}")
        p = ranks
        notes.append(f"ranks {p} (given)")
    else:
        # a device line for rank r proves r + 1 ranks at least; where the source kept some
        # device lines and marked no elision after them, the highest is the last rank
        shown = max(len(devices), max(devices, default=-1) + 1)
        last = shown if devices and not scan.devices_elided else None
        launched = min(scan.launches) if len(scan.launches) == 1 else None
        p = _infer_ranks(
            scan.rows, chosen, q, device_count, shown, source, notes, last=last, launched=launched
        )
    if hosts is not None and len(hosts) != p:
        hosts = hosts[:p] if len(hosts) > p else None
    return hosts, p


def _infer_ranks(
    rows: list[NcclTestsRow],
    collective: Collective,
    q: int | None,
    device_count: int | None,
    devices_listed: int,
    source: str,
    notes: list[str],
    last: int | None = None,
    launched: int | None = None,
) -> int:
    """The rank count (see the module docstring); ParseError when nothing determines it.

    ``devices_listed`` bounds it from below; ``last`` (the rank count the last of some kept
    device lines implies) and ``launched`` (the log's command line) are taken where
    busbw/algbw allows them but cannot settle the count. Where it allows counts more than a
    factor of two apart and nothing else tells, the count is not guessed.
    """
    if collective in _PER_RANK_COUNT and q is not None:
        if device_count is not None and device_count != q:
            notes.append(f"{device_count} device lines, size/count says {q}: using {q}")
        notes.append(f"ranks {q} (size / (count x type size))")
        return q
    factor = None
    if collective is Collective.ALL_REDUCE or collective in _PER_RANK_COUNT:
        factor = _ranks_from_factor(rows, collective)
    if device_count is not None:
        if factor is not None and not factor[0] <= device_count <= factor[1]:
            raise ParseError(
                f"{source}: {device_count} device lines, but busbw/algbw implies "
                f"{factor[0]}..{factor[1]} ranks for {collective.value}; pass --ranks"
            )
        notes.append(f"ranks {device_count} (device lines)")
        return device_count
    if factor is not None:
        return _ranks_within(factor, collective, devices_listed, source, notes, last, launched)
    if launched is not None and launched >= devices_listed:
        notes.append(f"ranks {launched} (the log's command line)")
        return launched
    listed = f" (the device lines are elided: at least {devices_listed})" if devices_listed else ""
    raise ParseError(
        f"{source}: cannot tell the rank count of this {collective.value} log{listed}; "
        "pass --ranks"
    )


def _ranks_within(
    factor: tuple[int, int, float],
    collective: Collective,
    devices_listed: int,
    source: str,
    notes: list[str],
    last: int | None,
    launched: int | None,
) -> int:
    """The rank count where busbw/algbw bounds it to ``factor`` (low, high, best estimate):
    one count, else the last device line's or the command line's, else the nearest, unless
    the bounds lie more than a factor of two apart."""
    low, high, best = factor
    if low <= high < devices_listed:  # nccl-tests computed busbw from its rank count
        p = min(max(round(best), low), high)
        notes.append(
            f"ranks {p} (busbw/algbw allows {low}..{high}; a device line shows rank "
            f"{devices_listed - 1}: the log's device lines do not match its table)"
        )
        return p
    low = max(low, devices_listed, 1)
    if low > high:
        p = max(devices_listed, round(best))
        notes.append(
            f"ranks {p}: busbw/algbw is inconsistent between rows (best {best:.1f}); "
            "pass --ranks to be sure"
        )
        return p
    if low == high:
        notes.append(f"ranks {low} (busbw/algbw)")
        return low
    if last is not None and low <= last <= high:
        notes.append(f"ranks {last} (the last device line kept; busbw/algbw allows "
                     f"{factor[0]}..{high})")
        return last
    if launched is not None and low <= launched <= high:
        notes.append(f"ranks {launched} (the log's command line; busbw/algbw allows "
                     f"{low}..{high})")
        return launched
    if launched is not None:
        notes.append(f"the log's command line launches {launched} ranks, busbw/algbw "
                     f"allows {low}..{high}: not used")
    if high > 2 * low:
        raise ParseError(
            f"{source}: cannot tell the rank count of this {collective.value} log: "
            f"busbw/algbw allows {low}..{high} at the printed precision; pass --ranks"
        )
    p = min(max(round(best), low), high)
    notes.append(
        f"ranks {p} (busbw/algbw allows {low}..{high} at the printed precision; "
        "pass --ranks to be sure)"
    )
    return p
