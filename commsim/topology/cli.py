"""``commsim topologies [NAME]``: its parser and the command (the presets as a table or JSON,
a preset's YAML file, or a topology's link labels). :mod:`commsim.cli` dispatches to it."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any


def add_parser(sub: Any) -> None:
    """``commsim topologies [NAME] [--json]``."""
    topo = sub.add_parser(
        "topologies",
        help="list the preset topologies",
        description="List the preset topologies usable as --topology NAME; with NAME, print "
        "that preset's YAML file (to copy, or to start a file of your own with 'base: NAME').",
    )
    topo.add_argument("name", nargs="?", metavar="NAME",
                      help="a preset: print its YAML file as shipped")
    topo.add_argument("--json", action="store_true",
                      help="print a JSON list (with NAME: that preset's object)")
    topo.add_argument("--links", action="store_true",
                      help="with NAME (a preset or a topology file): print every link's label, "
                      "one a line, as a what-if file's patterns match them")
    topo.set_defaults(handler=cmd_topologies)


def _preset_row(preset: object) -> dict[str, object]:
    """A preset's listing entry: name, kind, ranks, description first, then anything else."""
    if dataclasses.is_dataclass(preset) and not isinstance(preset, type):
        data = dataclasses.asdict(preset)
    else:
        data = dict(preset)  # type: ignore[call-overload]
    first = ("name", "kind", "ranks", "description")
    return {k: data.get(k) for k in first} | {k: v for k, v in data.items() if k not in first}


def cmd_topologies(args: argparse.Namespace) -> int:
    """``commsim topologies``: the presets, as a table or a JSON list; with a name, that
    preset's YAML file (or its JSON object)."""
    from commsim.topology import list_presets
    from commsim.topology.preset_files import preset_text

    if args.links:
        from commsim.errors import SpecError
        from commsim.topology import load_topology
        from commsim.topology.degrade import link_labels

        if args.name is None:
            raise SpecError("--links: name a preset or a topology file")
        labels = link_labels(load_topology(args.name))
        print(json.dumps(labels, indent=2) if args.json else "\n".join(labels))
        return 0
    if args.name is not None and not args.json:
        print(preset_text(args.name), end="")
        return 0
    rows = [_preset_row(p) for p in list_presets()]
    if args.name is not None:
        preset_text(args.name)  # an unknown name: one line, exit 2
        print(json.dumps(next(r for r in rows if r["name"] == args.name), indent=2))
        return 0
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    name_w = max([4] + [len(str(r["name"])) for r in rows])
    kind_w = max([4] + [len(str(r["kind"])) for r in rows])
    print(f"{'name':<{name_w}}  {'kind':<{kind_w}}  {'ranks':>6}  description")
    for r in rows:
        print(
            f"{r['name']!s:<{name_w}}  {r['kind']!s:<{kind_w}}  {r['ranks']!s:>6}  "
            f"{r['description'] or ''}"
        )
    return 0
