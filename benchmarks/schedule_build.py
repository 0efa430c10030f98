"""Building schedules as numpy columns: time per transfer of every algorithm at scale, against
making one ``Transfer`` object per transfer (same process, same schedules).

Run: ``.venv/bin/python benchmarks/schedule_build.py [--ranks 512,4096] [--size 1GiB]
[--repeat 3] [--quick]``

For each algorithm and collective, at each rank count: the transfers, the build time per
transfer (``build``, best of ``--repeat``), and, as the baseline, the time per transfer of
merely making the schedule's ``Transfer`` objects from its columns (``to_transfers``: the least
that any builder making one object per transfer pays; the object builders these columns
replaced paid 5 to 80 us per transfer, docs/performance.md). A case is skipped above
``--max-columns`` transfers (estimated), the baseline above ``--max-objects``; the
hierarchical ones run on hosts of 8 ranks like a DGX, the torus on a cube, ``nvls`` on one
host behind one switch, ``collnet`` with one rank per host (both at most 1024 ranks).
"""

from __future__ import annotations

import argparse
import sys

from _common import best_of, parse_args, table

from commsim.algorithms import build_schedule, get_algorithm
from commsim.algorithms.base import Call
from commsim.algorithms.estimate import estimate_transfers
from commsim.collectives import Collective
from commsim.units import parse_size

C = Collective
#: (algorithm, collective, layout): ``host8``: hosts of 8 ranks; ``torus``: a cube;
#: ``switch``: every rank behind one reducing switch (nvls) or one fabric switch (collnet), one
#: rank per host.
CASES: list[tuple[str, Collective, str]] = [
    ("ring", C.ALL_REDUCE, ""), ("ring", C.BROADCAST, ""),
    ("ring_bidirectional", C.ALL_GATHER, ""),
    ("binomial_tree", C.ALL_REDUCE, ""), ("binomial_tree", C.BROADCAST, ""),
    ("double_binary_tree", C.ALL_REDUCE, ""),
    ("recursive_doubling", C.ALL_REDUCE, ""), ("recursive_doubling", C.ALL_GATHER, ""),
    ("rabenseifner", C.ALL_REDUCE, ""), ("rabenseifner", C.REDUCE_SCATTER, ""),
    ("torus", C.ALL_REDUCE, "torus"),
    ("hierarchical", C.ALL_REDUCE, "host8"), ("hierarchical_rabenseifner", C.ALL_REDUCE, "host8"),
    ("nvls", C.ALL_REDUCE, "switch"), ("collnet", C.ALL_REDUCE, "switch"),
    ("gloo", C.ALL_REDUCE, ""), ("gloo", C.BROADCAST, ""),
]
#: ``nvls`` and ``collnet`` have p^2 dependencies per piece (each multicast waits for every
#: reduce): at most this many ranks.
MAX_SWITCH_RANKS = 1024


def _call(coll: Collective, p: int, nbytes: int, layout: str) -> Call:
    if layout == "host8":
        return Call(collective=coll, ranks=p, nbytes=nbytes, hosts=tuple(r // 8 for r in range(p)))
    if layout == "torus":
        side = round(p ** (1 / 3))
        return Call(collective=coll, ranks=p, nbytes=nbytes, torus_dims=(side,) * 3)
    if layout == "switch":  # every multicast piece waits for all p reduces: 2 pieces
        return Call(collective=coll, ranks=p, nbytes=nbytes, host_switches=(p,) * p,
                    fabric_switch=p, chunks=2)
    return Call(collective=coll, ranks=p, nbytes=nbytes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="512,4096")
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-columns", type=int, default=5_000_000)
    parser.add_argument("--max-objects", type=int, default=1_000_000)
    args = parse_args(parser, {"ranks": "8", "repeat": 1}, "8 ranks, once", argv)
    nbytes = parse_size(args.size, "--size")
    rows = []
    for p in (int(r) for r in args.ranks.split(",")):
        for name, coll, layout in CASES:
            call = _call(coll, p, nbytes, layout)
            if layout == "switch" and p > MAX_SWITCH_RANKS:
                continue
            chunks = call.chunks or get_algorithm(name).default_chunks(call)
            if estimate_transfers(call, name, chunks) > args.max_columns:
                continue
            build_schedule(call, name)  # warm: lazy imports, caches
            after, made = best_of(args.repeat, lambda call=call, name=name: build_schedule(call,
                                                                                         name))
            count = max(len(made), 1)
            row: list[object] = [name, coll.value, p, len(made), 1e6 * after / count, "-", "-"]
            if count <= args.max_objects:
                objects, _ = best_of(1, made.columns.to_transfers)
                row[5:] = [1e6 * objects / count, f"{objects / after:.1f}x"]
            rows.append(row)
    print(f"schedule build, {args.size}, default pieces (nvls, collnet: 2); us per transfer, "
          f"best of {args.repeat} (Transfer objects: once, up to {args.max_objects:,})")
    print(table(["<algorithm", "<collective", "ranks", "transfers", "build us/tr",
                 "Transfer objects us/tr", "objects / build"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
