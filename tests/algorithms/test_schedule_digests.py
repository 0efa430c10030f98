"""Every algorithm's schedule, transfer for transfer, is the one the object builders made.

The vectorised builders replaced builders that made one ``Transfer`` at a time through
``Plan`` (commit history: ``build_objects``). Before those were removed, the columns were
compared with them element for element on every case below, and the digests of those
schedules (sources, destinations, offsets, sizes, ops, sorted dependencies and each schedule's
header, case by case, in order) were stored in ``schedule_digests.json``. A change to any
transfer of any case changes its group's digest.

The cases: small rank counts (powers of two and not), sizes that do and do not divide and
ones that leave pieces empty, default and given pieces, several roots; hosts of equal and
unequal size, tori, reducing switches. After a deliberate change to a schedule, rewrite the
digests with ``.venv/bin/python tests/algorithms/test_schedule_digests.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest

from commsim.algorithms import (
    SCHEDULED,
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
from commsim.collectives import Collective
from commsim.schedule import Schedule, TransferView

DIGESTS = Path(__file__).with_name("schedule_digests.json")
FIELDS = ("src", "dst", "offset", "nbytes", "reduce", "dep_ptr", "dep_idx")
SIZES = (0, 1, 5, 97, 1000, 4097)
Builder = Callable[[Call], Schedule]


def _plain(colls: Iterable[Collective], ranks: Iterable[int],
           chunks: tuple[int | None, ...] = (None, 1, 2, 3, 8)) -> Iterator[Call]:
    for p in ranks:
        for coll in colls:
            for n in SIZES:
                for c in chunks:
                    for root in sorted({0, p // 2, p - 1}):
                        yield Call(collective=coll, ranks=p, nbytes=n, chunks=c, root=root)


HOSTS = [
    *(tuple(r % h if mix else r // g for r in range(h * g))
      for h in range(1, 7) for g in range(1, 5) for mix in (False, True)),
    (0, 0, 0, 1, 1), (0, 1, 1, 2, 2, 2), (0, 1, 0, 2, 1, 0, 3), (3, 3, 1, 1, 1, 0, 2, 2),
    (0, 0, 0, 0, 0, 1), (1, 0, 2, 0, 1, 0, 3, 3, 3, 3, 4),
]
DIMS = [(1,), (2,), (3,), (5,), (2, 2), (2, 3), (3, 4), (4, 1), (2, 3, 4), (3, 3, 3),
        (2, 2, 2, 2)]


def _hosts() -> Iterator[Call]:
    for hosts in HOSTS:
        for n in SIZES:
            for c in (None, 2, 3):
                yield Call(collective=Collective.ALL_REDUCE, ranks=len(hosts), nbytes=n,
                           chunks=c, hosts=hosts)


def _tori() -> Iterator[Call]:
    for dims in DIMS:
        for coll in sorted(torus.COLLECTIVES):
            for n in SIZES:
                for c in (None, 2, 3):
                    yield Call(collective=coll, ranks=math.prod(dims), nbytes=n, chunks=c,
                               torus_dims=dims)


def _in_network(name: str) -> Iterator[Call]:
    """One rank; one host (nvls) or one rank per host (collnet); 2..5 hosts of 1..4 ranks
    (numbered host by host, or interleaved), one reducing switch per host or per two hosts
    (nvls), or one fabric switch (collnet)."""
    for n_hosts in range(1, 6):
        for per_host in range(1, 5):
            p = n_hosts * per_host
            if name == innetwork.NVLS and per_host < 2 < p:
                continue
            for mix in (False, True):
                hosts = tuple(r % n_hosts if mix else r // per_host for r in range(p))
                wheres: list[dict[str, object]] = (
                    [{"host_switches": tuple(p + h // k for h in hosts)} for k in (1, 2)]
                    if name == innetwork.NVLS and p > 1 else [{"fabric_switch": p}] if p > 1
                    else [{}])
                for where in wheres:
                    for n in SIZES:
                        for c in (None, 1, 3):
                            yield Call(collective=Collective.ALL_REDUCE, ranks=p, nbytes=n,
                                       chunks=c, hosts=hosts if n_hosts > 1 else None,
                                       **where)  # type: ignore[arg-type]


def _gloo(coll: Collective) -> Iterator[Call]:
    """gloo's own segments (a 3 MiB buffer: several per rank) and ``--chunks``."""
    for call in _plain([coll], range(1, 11), (None, 1, 3)):
        for n in (call.nbytes, 3 << 20):
            yield Call(collective=coll, ranks=call.ranks, nbytes=n, chunks=call.chunks,
                       root=call.root)


A = Collective.ALL_REDUCE


def groups() -> dict[str, tuple[Builder, Callable[[], Iterable[Call]]]]:
    """Every case group: its builder and its calls."""
    out: dict[str, tuple[Builder, Callable[[], Iterable[Call]]]] = {}
    for module in (ring, bidirectional):
        for coll in SCHEDULED:
            out[f"{module.NAME}-{coll.value}"] = (
                module.build, lambda coll=coll: _plain([coll], range(1, 10), (None, 1, 2, 4)))
    for coll in sorted(tree.COLLECTIVES):
        out[f"binomial_tree-{coll.value}"] = (tree.build,
                                              lambda coll=coll: _plain([coll], range(1, 18)))
    out["double_binary_tree"] = (double_binary_tree.build, lambda: _plain([A], range(1, 18)))
    rec = (*range(1, 20), 24, 33)
    for build, coll in ((recursive.build_recursive_doubling, A),
                        (recursive.build_recursive_doubling, Collective.ALL_GATHER),
                        (recursive.build_rabenseifner, A),
                        (recursive.build_rabenseifner, Collective.REDUCE_SCATTER)):
        out[f"{build.__name__}-{coll.value}"] = (
            build, lambda coll=coll: (c for c in _plain([coll], rec) if c.root == 0))
    out["hierarchical"] = (hierarchical.build, _hosts)
    out["hierarchical_rabenseifner"] = (hierarchical.build_rabenseifner, _hosts)
    out["torus"] = (torus.build, _tori)
    out["nvls"] = (innetwork.build_nvls, lambda: _in_network(innetwork.NVLS))
    out["collnet"] = (innetwork.build_collnet, lambda: _in_network(innetwork.COLLNET))
    for coll in SCHEDULED:
        out[f"gloo-{coll.value}"] = (gloo.build, lambda coll=coll: _gloo(coll))
    return out


def digest(schedules: Iterable[Schedule]) -> str:
    """One digest of ``schedules``, in order: headers and column arrays."""
    h = hashlib.sha256()
    for s in schedules:
        h.update(repr((s.collective.value, s.algorithm, s.ranks, s.nbytes, s.root, s.chunks,
                       s.endpoints)).encode())
        for name in FIELDS:
            h.update(np.ascontiguousarray(getattr(s.columns, name), dtype=np.int64).tobytes())
    return h.hexdigest()


def _made(build: Builder, calls: Iterable[Call]) -> Iterator[Schedule]:
    for call in calls:
        schedule = build(call)
        assert isinstance(schedule.transfers, TransferView), call
        cols = schedule.columns
        owner = np.repeat(np.arange(len(cols)), np.diff(cols.dep_ptr))
        assert np.all(cols.dep_idx < owner), call          # dependencies come first
        if cols.level is not None:
            assert np.all(cols.level[cols.dep_idx] < cols.level[owner]), call
        yield schedule


@pytest.mark.parametrize("group", sorted(groups()))
def test_schedules_are_the_recorded_ones(group: str) -> None:
    build, calls = groups()[group]
    assert digest(_made(build, calls())) == json.loads(DIGESTS.read_text())[group], group


if __name__ == "__main__":  # rewrite the digests (after a deliberate change to a schedule)
    made = {name: digest(_made(build, calls())) for name, (build, calls) in groups().items()}
    DIGESTS.write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")
    sys.exit(0)
