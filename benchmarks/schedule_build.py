"""Building schedules: one ``Transfer`` object at a time through ``Plan`` (before) vs the
vectorised numpy builders (after), same process, same calls.

Run: ``.venv/bin/python benchmarks/schedule_build.py [--ranks 512,4096] [--size 1GiB]
[--repeat 3]``

For each algorithm and collective built as columns, at each rank count: the transfers, the
build time per transfer of the object builder (``build_objects``: the reference the tests
compare the columns with) and of the columnar one (``build``), best of ``--repeat``, and their
ratio. Both give the same schedule (checked here on the column arrays). The object builder is
skipped above ``--max-objects`` transfers (minutes and gigabytes), and a case altogether above
``--max-columns`` (estimated); the hierarchical ones run on hosts of 8 ranks like a DGX, the
torus on a cube, ``nvls`` on one host behind one switch, ``collnet`` with one rank per host.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np
from _common import best_of, table

from commsim.algorithms import (
    bidirectional,
    double_binary_tree,
    gloo,
    hierarchical,
    innetwork,
    recursive,
    ring,
    torus,
    tree,
)
from commsim.algorithms.base import Call
from commsim.algorithms.estimate import estimate_transfers
from commsim.collectives import Collective
from commsim.schedule import Columns, Schedule
from commsim.units import parse_size

Builder = Callable[[Call], Schedule]
C = Collective
#: (algorithm, collective, columnar builder, object builder, layout): ``host8``: hosts of 8
#: ranks; ``torus``: a cube; ``switch``: every rank behind one reducing switch (nvls) or one
#: fabric switch (collnet), one rank per host.
CASES: list[tuple[str, Collective, Builder, Builder, str]] = [
    ("ring", C.ALL_REDUCE, ring.build, ring.build_objects, ""),
    ("ring", C.BROADCAST, ring.build, ring.build_objects, ""),
    ("ring_bidirectional", C.ALL_GATHER, bidirectional.build, bidirectional.build_objects, ""),
    ("binomial_tree", C.ALL_REDUCE, tree.build, tree.build_objects, ""),
    ("binomial_tree", C.BROADCAST, tree.build, tree.build_objects, ""),
    ("double_binary_tree", C.ALL_REDUCE, double_binary_tree.build,
     double_binary_tree.build_objects, ""),
    ("recursive_doubling", C.ALL_REDUCE, recursive.build_recursive_doubling,
     recursive.build_recursive_doubling_objects, ""),
    ("recursive_doubling", C.ALL_GATHER, recursive.build_recursive_doubling,
     recursive.build_recursive_doubling_objects, ""),
    ("rabenseifner", C.ALL_REDUCE, recursive.build_rabenseifner,
     recursive.build_rabenseifner_objects, ""),
    ("rabenseifner", C.REDUCE_SCATTER, recursive.build_rabenseifner,
     recursive.build_rabenseifner_objects, ""),
    ("torus", C.ALL_REDUCE, torus.build, torus.build_objects, "torus"),
    ("hierarchical", C.ALL_REDUCE, hierarchical.build, hierarchical.build_objects, "host8"),
    ("hierarchical_rabenseifner", C.ALL_REDUCE, hierarchical.build_rabenseifner,
     hierarchical.build_rabenseifner_objects, "host8"),
    ("nvls", C.ALL_REDUCE, innetwork.build_nvls, innetwork.build_nvls_objects, "switch"),
    ("collnet", C.ALL_REDUCE, innetwork.build_collnet, innetwork.build_collnet_objects,
     "switch"),
    ("gloo", C.ALL_REDUCE, gloo.build, gloo.build_objects, ""),
    ("gloo", C.BROADCAST, gloo.build, gloo.build_objects, ""),
]
FIELDS = ("src", "dst", "offset", "nbytes", "reduce", "dep_ptr", "dep_idx")


def _same(a: Columns, b: Columns) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELDS)


def _call(coll: Collective, p: int, nbytes: int, layout: str) -> Call:
    if layout == "host8":
        return Call(collective=coll, ranks=p, nbytes=nbytes, hosts=tuple(r // 8 for r in range(p)))
    if layout == "torus":
        side = round(p ** (1 / 3))
        return Call(collective=coll, ranks=p, nbytes=nbytes, torus_dims=(side,) * 3)
    if layout == "switch":
        return Call(collective=coll, ranks=p, nbytes=nbytes, host_switches=(p,) * p,
                    fabric_switch=p)
    return Call(collective=coll, ranks=p, nbytes=nbytes)


def build_chunks(call: Call, name: str) -> int:
    """The pieces ``name`` cuts ``call`` into by default."""
    from commsim.algorithms import get_algorithm

    return get_algorithm(name).default_chunks(call)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="512,4096")
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-objects", type=int, default=600_000)
    parser.add_argument("--max-columns", type=int, default=5_000_000)
    args = parser.parse_args(argv)
    nbytes = parse_size(args.size, "--size")
    rows = []
    for p in (int(r) for r in args.ranks.split(",")):
        for name, coll, build, objects, layout in CASES:
            call = _call(coll, p, nbytes, layout)
            if estimate_transfers(call, name, build_chunks(call, name)) > args.max_columns:
                continue
            build(call)  # warm: lazy imports, caches
            after, made = best_of(args.repeat, lambda call=call, build=build: build(call))
            count = len(made)
            row: list[object] = [name, coll.value, p, count, 1e6 * after / max(count, 1)]
            if count <= args.max_objects:
                before, old = best_of(1 if count > 100_000 else args.repeat,
                                      lambda call=call, objects=objects: objects(call))
                assert _same(made.columns, Columns.from_transfers(old.transfers)), (name, p)
                row += [1e6 * before / max(count, 1), f"{before / after:.1f}x"]
            else:
                row += ["-", "-"]
            rows.append(row)
    print(f"schedule build, {args.size}, default pieces; us per transfer, best of {args.repeat} "
          "(objects: once above 100k transfers); same schedules checked")
    print(table(["<algorithm", "<collective", "ranks", "transfers", "columns us/tr",
                 "objects us/tr", "speed-up"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
