"""The measurements CSV (contract columns collective, ranks, nbytes, time_s) and the filters."""

from __future__ import annotations

import pytest

from commsim.collectives import Collective
from commsim.errors import ParseError, SpecError
from commsim.validation.measurements import (
    Measurement,
    filter_rows,
    format_measurements,
    parse_collectives_flag,
    parse_measurements,
    parse_sizes_flag,
    read_measurements,
    write_measurements,
)

HEAD = "collective,ranks,nbytes,time_s\n"
ROWS = [
    Measurement(collective=Collective.ALL_REDUCE, ranks=2, nbytes=1024, time_s=1.5e-4),
    Measurement(collective=Collective.ALL_REDUCE, ranks=4, nbytes=1 << 20, time_s=2.5e-3),
    Measurement(collective=Collective.BROADCAST, ranks=4, nbytes=65536, time_s=3e-4),
]


def test_round_trip_with_comments_and_extra_columns(tmp_path) -> None:
    """write -> read gives the same rows; comments and extra columns are allowed and ignored,
    and the text is deterministic."""
    path = tmp_path / "m.csv"
    write_measurements(
        ROWS, path, comments=["torch 2.13.0", "backend gloo"], extra={"note": [1, 2, 3]}
    )
    text = path.read_text()
    assert text.startswith("# torch 2.13.0\n# backend gloo\ncollective,ranks,nbytes,time_s,")
    assert read_measurements(path) == ROWS
    assert format_measurements(ROWS) == format_measurements(ROWS)


def test_columns_in_any_order_and_units_in_nbytes() -> None:
    """Columns are found by name; nbytes may carry a unit; collective any spelling; the
    record's optional columns (``host``) are kept."""
    rows = parse_measurements("time_s,nbytes,host,collective,ranks\n0.001,1MiB,vm,allreduce,2\n")
    assert rows == [
        Measurement(
            collective=Collective.ALL_REDUCE, ranks=2, nbytes=1 << 20, time_s=1e-3, host="vm"
        )
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty measurement file"),
        ("# only a comment\n", "empty measurement file"),
        ("a,b,c\n1,2,3\n", "missing column 'collective' \\(need collective, ranks, nbytes, time_s"),
        ("collective,ranks,nbytes,time_s\nsendrecv,2,1024,1\n", "no collective rows"),
        ("collective,ranks,nbytes,time_s\n", "header but no measurement rows"),
        ("collective,ranks,nbytes,time_s\nall_reduce,2,1024\n", ":2: 3 fields"),
        (f"{HEAD}gather,2,1024,1\n", ":2: column 'collective': unknown collective"),
        (f"{HEAD}all_reduce,two,1024,1\n", "column 'ranks': invalid value 'two'"),
        (f"{HEAD}all_reduce,2,1024,fast\n", "column 'time_s': invalid value 'fast'"),
        ("collective,ranks,nbytes,time_s\nall_reduce,2,1024,0\n", "must be a finite number > 0"),
        ("collective,ranks,nbytes,time_s\nall_reduce,2,-5,1\n", "nbytes"),
        ("collective,ranks,nbytes,time_s\nall_reduce,0,5,1\n", "'ranks': must be a positive"),
    ],
)
def test_bad_csv_is_a_one_line_parse_error(text: str, message: str) -> None:
    """Every malformed file is a ParseError naming the file (and line)."""
    with pytest.raises(ParseError, match=message) as info:
        parse_measurements(text, "m.csv")
    assert str(info.value).startswith("m.csv") and "\n" not in str(info.value)


def test_missing_file(tmp_path) -> None:
    """A missing file is a ParseError naming it."""
    with pytest.raises(ParseError, match="no such measurement file"):
        read_measurements(tmp_path / "none.csv")


def test_filters() -> None:
    """--sizes (exact sizes or MIN:MAX), --collectives and ranks select rows in order."""
    assert filter_rows(ROWS, sizes=parse_sizes_flag("1KiB,64KiB")) == [ROWS[0], ROWS[2]]
    assert filter_rows(ROWS, sizes=parse_sizes_flag("2KiB:1MiB")) == ROWS[1:]
    assert filter_rows(ROWS, sizes=parse_sizes_flag(":64KiB")) == [ROWS[0], ROWS[2]]
    assert filter_rows(ROWS, collectives=parse_collectives_flag("bcast")) == [ROWS[2]]
    assert filter_rows(ROWS, ranks=[4], collectives=[Collective.ALL_REDUCE]) == [ROWS[1]]
    assert filter_rows(ROWS, sizes=[(3, 3)]) == []


@pytest.mark.parametrize(
    ("flag", "text", "message"),
    [
        (parse_sizes_flag, "", "empty list"),
        (parse_sizes_flag, "1KiB,,2KiB", "empty item"),
        (parse_sizes_flag, "1parsec", "unknown size unit"),
        (parse_sizes_flag, "2MiB:1MiB", "MAX < MIN"),
        (parse_sizes_flag, "1:2:3", "invalid item"),
        (parse_collectives_flag, "all_reduce,gather", "unknown collective 'gather'"),
        (parse_collectives_flag, " ", "empty list"),
    ],
)
def test_bad_filter_flags(flag, text: str, message: str) -> None:
    """Malformed --sizes/--collectives are SpecErrors naming the value."""
    with pytest.raises(SpecError, match=message):
        flag(text)
