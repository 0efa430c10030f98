"""The registry: names, errors, candidates for ``auto``, and empty single-rank schedules."""

from __future__ import annotations

import pytest

from commsim.algorithms import (
    ALGORITHMS,
    Algorithm,
    Call,
    build_schedule,
    candidates,
    get_algorithm,
)
from commsim.algorithms.ring import build as ring_build
from commsim.collectives import Collective
from commsim.errors import ScheduleError, SpecError


def test_names_of_the_contract() -> None:
    """CONTRACT.md's algorithm names exist, plus the hierarchical, in-network and gloo ones."""
    assert set(ALGORITHMS) >= {
        "nvls",
        "collnet",
        "gloo",
        "ring",
        "binomial_tree",
        "recursive_doubling",
        "rabenseifner",
        "double_binary_tree",
        "hierarchical",
        "hierarchical_rabenseifner",
    }


def test_get_algorithm_spellings_and_unknown() -> None:
    """'-' for '_' and any case are accepted; an unknown name is a SpecError listing the known
    ones."""
    assert get_algorithm("Recursive-Doubling").name == "recursive_doubling"
    with pytest.raises(SpecError, match=r"unknown algorithm 'bogus' \(known: ring, "):
        get_algorithm("bogus")


def test_unsupported_collective_error() -> None:
    """build_schedule refuses a collective the algorithm cannot run, naming what it runs."""
    call = Call(collective=Collective.ALL_GATHER, ranks=4, nbytes=8)
    with pytest.raises(ScheduleError, match="'double_binary_tree' cannot run all_gather"):
        build_schedule(call, "double-binary-tree")


def test_power_of_two_error() -> None:
    """An algorithm limited to powers of two refuses other rank counts with a clear message
    (every shipped algorithm folds non-powers of two in, so this uses a restricted copy)."""
    only = Algorithm(
        name="ring_pow2",
        collectives=frozenset(Collective),
        build=ring_build,
        default_chunks=lambda call: 1,
        power_of_two_only=True,
    )
    only.check_supports(Call(collective=Collective.ALL_REDUCE, ranks=8, nbytes=8))
    with pytest.raises(ScheduleError, match="needs a power-of-two rank count, got 6"):
        only.check_supports(Call(collective=Collective.ALL_REDUCE, ranks=6, nbytes=8))


def test_candidates() -> None:
    """candidates lists, in registry order (ring first), every automatic algorithm able to run
    the call (not gloo, which topologies name explicitly); hierarchical only when the call's
    ranks span several hosts."""
    bc = Call(collective=Collective.BROADCAST, ranks=6, nbytes=8, root=2)
    assert candidates(bc) == ["ring", "binomial_tree", "ring_bidirectional"]
    ar = Call(collective=Collective.ALL_REDUCE, ranks=6, nbytes=8)
    assert "hierarchical" not in candidates(ar)
    one_host = Call(collective=Collective.ALL_REDUCE, ranks=6, nbytes=8, hosts=(0,) * 6)
    assert "hierarchical" not in candidates(one_host)
    hosted = Call(collective=Collective.ALL_REDUCE, ranks=6, nbytes=8, hosts=(0, 0, 0, 1, 1, 1))
    assert candidates(hosted) == [
        name
        for name in ALGORITHMS
        if name != "gloo" and not ALGORITHMS[name].reduces_in and name != "torus"
        and Collective.ALL_REDUCE in ALGORITHMS[name].collectives
    ]
    rs = Call(collective=Collective.REDUCE_SCATTER, ranks=5, nbytes=8)
    assert candidates(rs) == ["ring", "rabenseifner", "ring_bidirectional"]
    on_torus = Call(collective=Collective.REDUCE_SCATTER, ranks=6, nbytes=8, torus_dims=(2, 3))
    assert candidates(on_torus) == ["ring", "rabenseifner", "ring_bidirectional", "torus"]
    a2a = Call(collective=Collective.ALL_TO_ALL, ranks=8, nbytes=64, hosts=(0,) * 4 + (1,) * 4)
    assert candidates(a2a) == ["hierarchical", "pairwise", "bruck", "all_pairs", "pxn"]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_single_rank_is_empty(name: str) -> None:
    """With one rank every algorithm's schedule is empty (zero time)."""
    for coll in ALGORITHMS[name].collectives:
        dims = (1,) if ALGORITHMS[name].needs_torus else None
        call = Call(collective=coll, ranks=1, nbytes=1000, hosts=(0,), torus_dims=dims)
        assert len(build_schedule(call, name)) == 0
