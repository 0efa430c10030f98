"""Every algorithm built as columns equals the same schedule built one ``Transfer`` at a time
through ``Plan`` (``build_objects``): the same transfers in the same order, the same endpoints,
bytes and sorted dependencies, element for element, over small rank counts (powers of two and
not), sizes that do and do not divide (and ones that leave pieces empty), pieces and roots.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType

import numpy as np
import pytest

from commsim.algorithms import (
    double_binary_tree,
    gloo,
    hierarchical,
    innetwork,
    recursive,
    torus,
    tree,
)
from commsim.algorithms.base import Call
from commsim.collectives import Collective
from commsim.schedule import Columns, Schedule, TransferView

FIELDS = ("src", "dst", "offset", "nbytes", "reduce", "dep_ptr", "dep_idx")
SIZES = (0, 1, 5, 97, 1000, 4097)


def assert_same(made: Schedule, reference: Schedule, case: object) -> None:
    """``made`` is columnar and equals ``reference`` row for row."""
    assert isinstance(made.transfers, TransferView), case
    new, old = made.columns, Columns.from_transfers(reference.transfers)
    for name in FIELDS:
        a, b = getattr(new, name), getattr(old, name)
        assert a.shape == b.shape and np.array_equal(a, b), (case, name)
    head = ("collective", "algorithm", "ranks", "nbytes", "root", "chunks", "endpoints")
    assert [getattr(made, k) for k in head] == [getattr(reference, k) for k in head], case
    if new.level is not None:  # a level, where given, is above every dependency's
        owner = np.repeat(np.arange(len(new)), np.diff(new.dep_ptr))
        assert np.all(new.level[new.dep_idx] < new.level[owner]), case


def calls(collectives: Callable[[int], object], ranks: Iterable[int],
          chunks: tuple[int | None, ...] = (None, 1, 2, 3, 8), **extra: object) -> Iterator[Call]:
    for p in ranks:
        for coll in collectives(p):  # type: ignore[attr-defined]
            for n in SIZES:
                for c in chunks:
                    for root in sorted({0, p // 2, p - 1}):
                        yield Call(collective=coll, ranks=p, nbytes=n, chunks=c, root=root,
                                   **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("module", [tree, double_binary_tree], ids=lambda m: m.NAME)
def test_trees(module: ModuleType) -> None:
    collectives = sorted(getattr(module, "COLLECTIVES", {Collective.ALL_REDUCE}))
    for call in calls(lambda p: collectives, range(1, 18)):
        assert_same(module.build(call), module.build_objects(call), call)


@pytest.mark.parametrize(("build", "reference", "collective"), [
    (recursive.build_recursive_doubling, recursive.build_recursive_doubling_objects,
     Collective.ALL_REDUCE),
    (recursive.build_recursive_doubling, recursive.build_recursive_doubling_objects,
     Collective.ALL_GATHER),
    (recursive.build_rabenseifner, recursive.build_rabenseifner_objects, Collective.ALL_REDUCE),
    (recursive.build_rabenseifner, recursive.build_rabenseifner_objects,
     Collective.REDUCE_SCATTER),
], ids=["doubling-all_reduce", "doubling-all_gather", "rabenseifner-all_reduce",
        "rabenseifner-reduce_scatter"])
def test_recursive(build: Callable[[Call], Schedule], reference: Callable[[Call], Schedule],
                   collective: Collective) -> None:
    for call in calls(lambda p: [collective], (*range(1, 20), 24, 33)):
        if call.root == 0:
            assert_same(build(call), reference(call), call)


HOSTS = [
    *(tuple(r % h if mix else r // g for r in range(h * g))
      for h in range(1, 7) for g in range(1, 5) for mix in (False, True)),
    (0, 0, 0, 1, 1), (0, 1, 1, 2, 2, 2), (0, 1, 0, 2, 1, 0, 3), (3, 3, 1, 1, 1, 0, 2, 2),
    (0, 0, 0, 0, 0, 1), (1, 0, 2, 0, 1, 0, 3, 3, 3, 3, 4),
]


@pytest.mark.parametrize(("build", "reference"), [
    (hierarchical.build, hierarchical.build_objects),
    (hierarchical.build_rabenseifner, hierarchical.build_rabenseifner_objects),
], ids=[hierarchical.NAME, hierarchical.RABENSEIFNER])
def test_hierarchical(build: Callable[[Call], Schedule],
                      reference: Callable[[Call], Schedule]) -> None:
    """1..6 hosts of 1..4 ranks (powers of two and not; ranks numbered host by host, or
    interleaved) and hosts of unequal sizes."""
    for hosts in HOSTS:
        for n in SIZES:
            for c in (None, 2, 3):
                call = Call(collective=Collective.ALL_REDUCE, ranks=len(hosts), nbytes=n,
                            chunks=c, hosts=hosts)
                assert_same(build(call), reference(call), call)


DIMS = [(1,), (2,), (3,), (5,), (2, 2), (2, 3), (3, 4), (4, 1), (2, 3, 4), (3, 3, 3),
        (2, 2, 2, 2)]


@pytest.mark.parametrize("dims", DIMS, ids=str)
def test_torus(dims: tuple[int, ...]) -> None:
    for coll in sorted(torus.COLLECTIVES):
        for n in SIZES:
            for c in (None, 2, 3):
                call = Call(collective=coll, ranks=math.prod(dims), nbytes=n, chunks=c,
                            torus_dims=dims)
                assert_same(torus.build(call), torus.build_objects(call), call)


@pytest.mark.parametrize("name", [innetwork.NVLS, innetwork.COLLNET])
@pytest.mark.parametrize("interleaved", [False, True])
def test_innetwork(name: str, interleaved: bool) -> None:
    """One rank; one host (nvls) or one rank per host (collnet); 2..5 hosts of 1..4 ranks, one
    reducing switch per host or per two hosts (nvls), or one fabric switch (collnet)."""
    build, reference = ((innetwork.build_nvls, innetwork.build_nvls_objects)
                        if name == innetwork.NVLS
                        else (innetwork.build_collnet, innetwork.build_collnet_objects))
    for n_hosts in range(1, 6):
        for per_host in range(1, 5):
            p = n_hosts * per_host
            if name == innetwork.NVLS and per_host < 2 < p:
                continue
            hosts = tuple(r % n_hosts if interleaved else r // per_host for r in range(p))
            wheres: list[dict[str, object]] = (
                [{"host_switches": tuple(p + h // k for h in hosts)} for k in (1, 2)]
                if name == innetwork.NVLS and p > 1 else [{"fabric_switch": p}] if p > 1
                else [{}])
            for where in wheres:
                for n in SIZES:
                    for c in (None, 1, 3):
                        call = Call(collective=Collective.ALL_REDUCE, ranks=p, nbytes=n,
                                    chunks=c, hosts=hosts if n_hosts > 1 else None,
                                    **where)  # type: ignore[arg-type]
                        assert_same(build(call), reference(call), call)


@pytest.mark.parametrize("coll", sorted(Collective), ids=lambda c: c.value)
def test_gloo(coll: Collective) -> None:
    """gloo's own segments (a 3 MiB buffer: several per rank) and ``--chunks``."""
    for call in calls(lambda p: [coll], range(1, 11), (None, 1, 3)):
        for n in (call.nbytes, 3 << 20):
            call = Call(collective=coll, ranks=call.ranks, nbytes=n, chunks=call.chunks,
                        root=call.root)
            assert_same(gloo.build(call), gloo.build_objects(call), call)
