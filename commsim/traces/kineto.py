"""Read one rank's PyTorch profiler (Kineto) trace: plain or gzipped Chrome-trace JSON.

:func:`load_kineto` returns a :class:`KinetoTrace`: the header (``distributedInfo``: backend,
rank, world size, process groups; ``baseTimeNanoseconds``), every complete (``ph: X``) event,
and the thread names from the ``M`` events. Nothing here knows what an event means; the rules
that classify events live in :mod:`commsim.traces.model`.

Variants that are tolerated (docs/traces.md): ``.json.gz``; the old
``distributedInfo`` with only ``backend``, ``rank`` and ``world_size``; ``pg_config[].ranks``
as a list or as a quoted string (``"[0, 1]"``, ``"{}"``); no ``deviceProperties``; ``ts`` and
``dur`` as ints, floats or numeric strings; ``pid``/``tid`` as ints or strings (numeric strings
become ints). A bare event list is accepted as a trace without ``distributedInfo``.

A file that is missing, empty, truncated, not JSON, or not a trace raises
:class:`~commsim.errors.ParseError` with one line naming the file and what is wrong.

>>> import json, tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "rank1.json"
>>> _ = path.write_text(json.dumps({"distributedInfo": {"backend": "gloo", "rank": 1,
...     "world_size": 2, "pg_config": [{"pg_name": "0", "ranks": "[0, 1]"}]},
...     "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7,
...                      "ts": 10, "dur": 2.5}]}))
>>> trace = load_kineto(path)
>>> trace.rank, trace.world_size, trace.process_groups[0].ranks, trace.events[0].end_us
(1, 2, (0, 1), 12.5)
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commsim.errors import ParseError

#: Suffixes recognised as trace files (``torch.profiler.tensorboard_trace_handler`` writes
#: ``*.pt.trace.json`` and, with ``use_gzip``, ``*.pt.trace.json.gz``).
TRACE_SUFFIXES = (".json", ".json.gz")

_RANK_IN_NAME = re.compile(r"rank[-_.]?(\d+)", re.IGNORECASE)

Lane = int | str


@dataclass(frozen=True, slots=True)
class Event:
    """One complete (``ph: X``) event; times in microseconds as the file has them.

    ``args`` is the event's ``args`` mapping as read (empty when absent).
    """

    name: str
    cat: str
    pid: Lane
    tid: Lane
    ts_us: float
    dur_us: float
    args: Mapping[str, Any]

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """One entry of ``distributedInfo.pg_config``: its name, description and global ranks."""

    name: str
    desc: str
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class KinetoTrace:
    """One rank's trace file, read but not interpreted.

    Attributes
    ----------
    source
        The file it came from.
    rank, world_size
        From ``distributedInfo`` (or the file name ``...rank<N>...``); None when unknown.
    backend
        ``nccl``, ``gloo``, ... (empty when unknown).
    process_groups
        ``pg_config``, in file order (empty for old traces).
    base_time_ns
        ``baseTimeNanoseconds`` (0 when absent): absolute time is ``base + ts * 1000`` ns.
    events
        Every ``X`` event, in file order.
    thread_names
        ``(pid, tid) -> name`` from ``thread_name`` metadata events (the last one wins).
    device_count
        How many ``deviceProperties`` entries the file has (0 for CPU-only traces).
    """

    source: str
    rank: int | None
    world_size: int | None
    backend: str
    process_groups: tuple[ProcessGroup, ...]
    base_time_ns: int
    events: tuple[Event, ...]
    thread_names: dict[tuple[Lane, Lane], str] = field(default_factory=dict)
    device_count: int = 0


def _fail(source: str, message: str) -> ParseError:
    return ParseError(f"{source}: {message}")


def _read_text(path: Path) -> str:
    source = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise _fail(source, "no such file") from None
    except IsADirectoryError:
        raise _fail(source, "is a directory, not a trace file") from None
    except OSError as exc:
        raise _fail(source, f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise _fail(source, f"truncated or corrupt gzip data ({exc})") from None
    if not raw.strip():
        raise _fail(source, "empty file, not a PyTorch profiler trace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(source, f"not UTF-8 text (byte {exc.start}): not a JSON trace") from None


def _number(value: object) -> float | None:
    """A finite float from an int, a float or a numeric string; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _lane(value: object) -> Lane:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value)
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def _int_or_none(value: object, source: str, key: str) -> int | None:
    if value is None:
        return None
    number = _number(value)
    if number is None or number != int(number) or number < 0:
        raise _fail(
            source, f"distributedInfo.{key}: expected a non-negative integer, got {value!r}"
        )
    return int(number)


def parse_ranks(value: object, where: str) -> tuple[int, ...]:
    """Process-group ranks as a list or a string: ``[0, 1]``, ``"[0, 1]"``, ``"{}"``, ``"0,1"``.

    An empty result means "unknown" (kineto's on-demand path prints ``"{}"``).

    >>> parse_ranks("[0, 1]", "x"), parse_ranks("{}", "x"), parse_ranks([2, 3], "x")
    ((0, 1), (), (2, 3))
    """
    if isinstance(value, list | tuple):
        items: list[object] = list(value)
    elif isinstance(value, str):
        items = [t for t in re.split(r"[\s,\[\]{}()]+", value) if t]
    elif value is None:
        return ()
    else:
        raise ParseError(f"{where}: expected a list of ranks, got {value!r}")
    ranks = []
    for item in items:
        number = _number(item)
        if number is None or number != int(number) or number < 0:
            raise ParseError(f"{where}: expected a list of ranks, got {value!r}")
        ranks.append(int(number))
    return tuple(ranks)


def _process_groups(info: Mapping[str, Any], source: str) -> tuple[ProcessGroup, ...]:
    config = info.get("pg_config")
    if config is None:
        return ()
    if isinstance(config, str):  # some writers serialise the whole list as a string
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            raise _fail(source, "distributedInfo.pg_config: not a JSON list") from None
    if isinstance(config, Mapping):  # {"0": {...}, ...}
        config = [dict(v, pg_name=v.get("pg_name", k)) for k, v in config.items()]
    if not isinstance(config, list):
        raise _fail(source, f"distributedInfo.pg_config: expected a list, got {config!r}")
    groups = []
    for index, entry in enumerate(config):
        where = f"{source}: distributedInfo.pg_config[{index}]"
        if not isinstance(entry, Mapping):
            raise ParseError(f"{where}: expected an object, got {entry!r}")
        name = str(entry.get("pg_name", entry.get("uid", index)))
        desc = str(entry.get("pg_desc", ""))
        groups.append(ProcessGroup(name, desc, parse_ranks(entry.get("ranks"), f"{where}.ranks")))
    return tuple(groups)


def _events(raw: list[Any], source: str) -> tuple[tuple[Event, ...], dict[tuple[Lane, Lane], str]]:
    events: list[Event] = []
    names: dict[tuple[Lane, Lane], str] = {}
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise _fail(source, f"traceEvents[{index}]: expected an object, got {item!r:.40}")
        phase = item.get("ph")
        if phase == "M":
            if item.get("name") == "thread_name" and isinstance(item.get("args"), Mapping):
                key = (_lane(item.get("pid", "")), _lane(item.get("tid", "")))
                names[key] = str(item["args"].get("name", ""))
            continue
        if phase != "X":
            continue
        ts, dur = _number(item.get("ts")), _number(item.get("dur", 0))
        if ts is None:
            raise _fail(source, f"traceEvents[{index}]: 'X' event without a numeric 'ts'")
        if dur is None or dur < 0:
            raise _fail(source, f"traceEvents[{index}]: 'dur' must be a number >= 0")
        args = item.get("args")
        events.append(
            Event(
                name=str(item.get("name", "")),
                cat=str(item.get("cat", "")),
                pid=_lane(item.get("pid", "")),
                tid=_lane(item.get("tid", "")),
                ts_us=ts,
                dur_us=dur,
                args=args if isinstance(args, Mapping) else {},
            )
        )
    return tuple(events), names


def load_kineto(path: str | Path) -> KinetoTrace:
    """Read one trace file (``.json`` or ``.json.gz``); ParseError naming the file if unreadable."""
    path = Path(path)
    source = str(path)
    text = _read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "truncated JSON" if exc.pos >= len(text.rstrip()) else "not valid JSON"
        raise _fail(source, f"{what} (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:  # the decoder recurses once per level of nesting
        raise _fail(source, "not valid JSON (nested too deeply)") from None
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, Mapping):
        raise _fail(source, f"top level is {type(data).__name__}, expected a trace object")
    raw_events = data.get("traceEvents")
    if raw_events is None:
        raise _fail(source, "no 'traceEvents' key: not a PyTorch profiler trace")
    if not isinstance(raw_events, list):
        raise _fail(source, "'traceEvents' must be a list")
    info = data.get("distributedInfo") or {}
    if not isinstance(info, Mapping):
        raise _fail(source, f"distributedInfo: expected an object, got {info!r:.40}")
    rank = _int_or_none(info.get("rank"), source, "rank")
    if rank is None:
        match = _RANK_IN_NAME.search(path.name)
        rank = int(match.group(1)) if match else None
    world_size = _int_or_none(info.get("world_size"), source, "world_size")
    if world_size is not None and rank is not None and rank >= world_size:
        raise _fail(source, f"distributedInfo: rank {rank} is not below world_size {world_size}")
    base = data.get("baseTimeNanoseconds", 0)  # ~1.8e18: an int, or float loses the ns
    if isinstance(base, str) and re.fullmatch(r"\d+", base.strip()):
        base = int(base)
    elif not isinstance(base, int) or isinstance(base, bool):
        base = _number(base)
        if base is None:
            raise _fail(source, "baseTimeNanoseconds: expected a number")
    events, names = _events(raw_events, source)
    devices = data.get("deviceProperties")
    return KinetoTrace(
        source=source,
        rank=rank,
        world_size=world_size,
        backend=str(info.get("backend", "")),
        process_groups=_process_groups(info, source),
        base_time_ns=int(base),
        events=events,
        thread_names=names,
        device_count=len(devices) if isinstance(devices, list) else 0,
    )


def trace_files(path: str | Path) -> list[Path]:
    """The trace files a path names: itself, or a directory's ``*.json``/``*.json.gz`` (sorted).

    ParseError if the path does not exist or a directory holds no trace file.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and is_trace_name(p))
        if not files:
            raise ParseError(f"{path}: no *.json or *.json.gz trace files in this directory")
        return files
    if not path.exists():
        raise ParseError(f"{path}: no such file or directory")
    return [path]


def is_trace_name(path: str | Path) -> bool:
    """Whether a file name looks like a trace (``.json`` or ``.json.gz``)."""
    return str(path).lower().endswith(TRACE_SUFFIXES)
