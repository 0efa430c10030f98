"""The preset YAML files as data, and ``base:``: a topology written as a preset plus what differs.

The presets are the YAML files of the ``commsim.presets`` package (the ``topologies/``
folder); their name is the file stem. A topology with ``base: PRESET`` is that preset's file
with the rest of the mapping merged into it as RFC 7396's JSON Merge Patch: a mapping merges
key by key, ``null`` removes a key, any other value (a list too) replaces. So a cluster that
differs from a preset in a few numbers says only those:

>>> data = with_base({"base": "dgx-h100", "nodes": 2, "inter": {"bandwidth": "23GB/s"}})
>>> data["kind"], data["nodes"], data["inter"]
('hierarchical', 2, {'latency': '2.7us', 'bandwidth': '23GB/s'})
>>> data["description"].split(":")[0]
'dgx-h100, edited (inter, nodes)'
>>> with_base({"base": "dgx-h1000"})
Traceback (most recent call last):
...
commsim.errors.SpecError: base: unknown preset 'dgx-h1000' (a preset's own name, ...)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

from commsim.errors import SpecError, describe
from commsim.yamlfile import one_document

#: The package holding the preset YAML files.
PRESET_PACKAGE = "commsim.presets"


@functools.cache
def preset_file_names() -> tuple[str, ...]:
    """Names of the shipped presets, sorted (their file stems)."""
    return tuple(sorted(entry.name[: -len(".yaml")] for entry in files(PRESET_PACKAGE).iterdir()
                        if entry.name.endswith(".yaml")))


def preset_text(name: str) -> str:
    """The YAML file of preset ``name`` as shipped, comments and sources included."""
    if name not in preset_file_names():
        raise SpecError(f"unknown preset {name!r} (presets: {', '.join(preset_file_names())})")
    return files(PRESET_PACKAGE).joinpath(f"{name}.yaml").read_text(encoding="utf-8")


# NOTE: presets are read-only package data, so each file is parsed once per process: YAML
# parsing was most of the time of a sweep that names its topology by preset
# (benchmarks/sweep_throughput.py). Callers must not modify what it returns.
@functools.cache
def preset_data(name: str) -> object:
    """The parsed YAML of preset ``name`` (shared: not to be modified)."""
    return one_document(preset_text(name), f"preset {name!r}", "topology")


def merge_patch(target: object, patch: object) -> object:
    """``target`` with ``patch`` applied as RFC 7396's JSON Merge Patch (neither is modified)."""
    if not isinstance(patch, Mapping):
        return patch
    merged: dict[Any, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def with_base(data: object) -> object:
    """``data`` with its ``base:`` preset resolved (``data`` itself where it has none).

    The result's ``description``, unless ``data`` gives one, is the preset's with the keys
    ``data`` changed. The preset's ``kind`` stays: a patch that names another is refused, as
    is a base that is not a shipped preset's own name (``xN`` and ``+option`` suffixes are
    not: set ``nodes:`` or the fabric's ``reduction_bandwidth``)."""
    if not isinstance(data, Mapping) or "base" not in data:
        return data
    name = data["base"]
    names = preset_file_names()
    if not isinstance(name, str):
        raise SpecError(f"base: must be a preset's name (got {describe(name)})")
    if name not in names:
        raise SpecError(f"base: unknown preset {name!r} (a preset's own name, without xN or "
                        f"+options; presets: {', '.join(names)})")
    base = preset_data(name)
    assert isinstance(base, Mapping)  # a shipped preset is a mapping (tests load every one)
    patch = {key: value for key, value in data.items() if key != "base"}
    if "kind" in patch and patch["kind"] != base["kind"]:
        raise SpecError(f"kind: a topology with base: keeps its preset's kind ({name!r} is "
                        f"{base['kind']!r}; got {describe(patch['kind'])})")
    merged = merge_patch(base, patch)
    assert isinstance(merged, dict)
    changed = sorted(str(key) for key in patch if key not in ("kind", "name"))
    if "description" not in patch and changed:
        merged["description"] = (f"{name}, edited ({', '.join(changed)}): "
                                 f"{base.get('description', '')}")
    return merged
