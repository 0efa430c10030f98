"""Scan nccl-tests' ``-J`` JSON output into the same table rows as its text
(:func:`scan_json`; the text format is :mod:`commsim.validation.nccl_format`).

A JSON result gives each side (``out_of_place``, ``in_place``) as an object with ``time`` (or
``cpu_time``) in microseconds, ``alg_bw``, ``bus_bw`` and ``nwrong`` (null where nccl-tests
did not check, as the text prints ``N/A``); the launch arguments and devices sit beside the
results, where the inference of :mod:`commsim.validation.nccl_infer` finds the test and the
ranks as it does in the text.
"""

from __future__ import annotations

import json
from pathlib import Path

from commsim.errors import ParseError
from commsim.validation.nccl_format import Layout, NcclTestsRow, Scan


def _json_wrong(side: dict[str, object]) -> str:
    """A JSON side's ``nwrong`` as the text column would print it: ``N/A`` for null (not
    checked), the count otherwise, ``""`` where the key is absent."""
    if "nwrong" not in side:
        return ""
    value = side["nwrong"]
    return "N/A" if value is None else f"{value:g}" if isinstance(value, int | float) else ""


def scan_json(text: str, source: str) -> Scan:
    """The rows, the binary's name and the devices of nccl-tests ``-J`` output ``text``
    (ParseError in one line naming ``source`` where it is not that JSON)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{source}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:  # the decoder recurses once per level of nesting
        raise ParseError(f"{source}: invalid JSON (nested too deeply)") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ParseError(f"{source}: JSON without a 'results' list: not nccl-tests -J output")
    scan = Scan(header_seen=True)
    args = data.get("args")
    if isinstance(args, list) and args and isinstance(args[0], str):
        scan.binaries_strong.append(Path(args[0]).name)
    config = data.get("config")
    devices = config.get("devices") if isinstance(config, dict) else None
    if devices is None:
        devices = data.get("devices")
    if isinstance(devices, list):
        for device in devices:
            if isinstance(device, dict) and isinstance(device.get("rank"), int):
                scan.devices[device["rank"]] = str(device.get("hostname", ""))
    scan.rows.extend(_row(result, i, f"{source}: results[{i}]")
                     for i, result in enumerate(data["results"]))
    has_columns = bool(scan.rows)
    scan.layout = Layout(
        prefix=["size", "count", "type", "redop", "root"] if has_columns else [],
        groups=[],
        timestamp=False,
    )
    return scan


def _row(result: object, i: int, where: str) -> NcclTestsRow:
    """The ``i``-th JSON result as a table row: its out-of-place side, or its in-place side
    where it has only that one."""
    if not isinstance(result, dict):
        raise ParseError(f"{where}: not an object")
    side = result.get("out_of_place")
    in_place_only = not isinstance(side, dict)
    if in_place_only:
        side = result.get("in_place")
    if not isinstance(side, dict):
        raise ParseError(f"{where}: neither out_of_place nor in_place results")
    time_us = side.get("time", side.get("cpu_time"))
    try:
        if not isinstance(time_us, int | float):
            raise TypeError(time_us)
        nbytes, count = int(result["size"]), int(result.get("count", 0))
        root_text = result.get("root")
        root = None if root_text is None else int(str(root_text).strip())
    except (KeyError, TypeError, ValueError):
        raise ParseError(f"{where}: missing or malformed size/count/time/root") from None
    other = result.get("in_place")
    in_place_time = None
    if not in_place_only and isinstance(other, dict):
        value = other.get("time", other.get("cpu_time"))
        in_place_time = float(value) * 1e-6 if isinstance(value, int | float) else None
    algbw, busbw = side.get("alg_bw"), side.get("bus_bw")
    wrong = _json_wrong(side)
    in_place_wrong = wrong if in_place_only else (
        _json_wrong(other) if isinstance(other, dict) else "")
    return NcclTestsRow(
        line=i,
        nbytes=nbytes,
        count=count,
        dtype=str(result.get("type", "")),
        redop=None if result.get("redop") is None else str(result["redop"]),
        root=root,
        time_s=float(time_us) * 1e-6,
        algbw_GBps=float(algbw) if isinstance(algbw, int | float) else None,
        busbw_GBps=float(busbw) if isinstance(busbw, int | float) else None,
        in_place_time_s=in_place_time,
        in_place_only=in_place_only,
        time_text=f"{float(time_us):f}",
        algbw_text=f"{algbw:f}" if isinstance(algbw, int | float) else "",
        busbw_text=f"{busbw:f}" if isinstance(busbw, int | float) else "",
        wrong_text="" if in_place_only else wrong,
        in_place_wrong_text=in_place_wrong,
    )
