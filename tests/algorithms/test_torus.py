"""``ring_bidirectional`` and ``torus``: checker-verified schedules, their shape (one message
per direction per rank per step, contiguous blocks), sub-tori, and how ``auto`` and the TPU
presets' ``algorithms:`` mapping use them."""

from __future__ import annotations

import math

import pytest

from commsim.algorithms import ALGORITHMS, SCHEDULED, Call, build_schedule, candidates
from commsim.algorithms.bidirectional import halves
from commsim.algorithms.torus import sub_torus
from commsim.algorithms.torus_columns import axis_rings
from commsim.api import make_call, simulate
from commsim.checker import check
from commsim.collectives import Collective
from commsim.errors import ScheduleError, SpecError
from commsim.topology import load_topology, ring, torus

SIZES = (0, 1, 7, 1000, 1001, 2**20 + 3)
RING_COLLECTIVES = (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_REDUCE)
DIMS = [
    (1,),
    (2,),
    (3,),
    (7,),
    (4, 4),
    (2, 4),
    (4, 2),
    (3, 5),
    (8, 1),
    (1, 6),
    (2, 2, 2),
    (2, 3, 4),
    (4, 4, 4),
    (3, 1, 2, 3),
]


@pytest.mark.parametrize("p", range(1, 12))
@pytest.mark.parametrize("coll", SCHEDULED, ids=str)
def test_ring_bidirectional_passes_the_checker(coll: Collective, p: int) -> None:
    """Every collective, ranks 1..11, even and uneven sizes, 1 / 3 pieces, roots off 0."""
    for n in SIZES:
        for chunks in (None, 1, 3):
            call = Call(collective=coll, ranks=p, nbytes=n, chunks=chunks, root=(3 * p) // 4)
            check(build_schedule(call, "ring_bidirectional"))


@pytest.mark.parametrize("dims", DIMS, ids=str)
@pytest.mark.parametrize("coll", RING_COLLECTIVES, ids=str)
def test_torus_passes_the_checker(coll: Collective, dims: tuple[int, ...]) -> None:
    """2D / 3D / 4D tori with size-1 and size-2 axes, even and uneven sizes, 1 / 2 pieces."""
    p = math.prod(dims)
    for n in SIZES:
        for chunks in (None, 2):
            call = Call(collective=coll, ranks=p, nbytes=n, chunks=chunks, torus_dims=dims)
            check(build_schedule(call, "torus"))


def test_halves_and_rings() -> None:
    """Blocks split at the floor midpoint; the counter-clockwise ring runs i -> i - 1 with the
    second halves; below 3 ranks one ring of whole blocks."""
    assert halves((0, 1)) == ((0, 0), (0, 1))
    rings, lo, hi = axis_rings((4,), 0, 13)         # blocks (0, 3) (3, 6) (6, 9) (9, 13)
    assert rings.tolist() == [[0, 1, 2, 3], [0, 3, 2, 1]]
    assert list(zip(lo[0].tolist(), hi[0].tolist(), strict=True)) == [(0, 1), (3, 4), (6, 7),
                                                                       (9, 11)]
    assert list(zip(lo[1].tolist(), hi[1].tolist(), strict=True)) == [(1, 3), (11, 13), (7, 9),
                                                                       (4, 6)]
    rings, lo, hi = axis_rings((2,), 0, 4)
    assert (rings.tolist(), lo.tolist(), hi.tolist()) == ([[0, 1]], [[0, 2]], [[2, 4]])


def test_ring_bidirectional_uses_both_directions() -> None:
    """All-gather on 5 ranks: 4 steps, each rank sends one half-block to each neighbour."""
    s = build_schedule(
        Call(collective=Collective.ALL_GATHER, ranks=5, nbytes=1000), "ring_bidirectional"
    )
    pairs = {(t.src, t.dst) for t in s.transfers}
    assert pairs == {(i, (i + 1) % 5) for i in range(5)} | {(i, (i - 1) % 5) for i in range(5)}
    assert len(s.transfers) == 2 * 5 * 4
    assert {t.nbytes for t in s.transfers} == {100}
    two = Call(collective=Collective.ALL_REDUCE, ranks=2, nbytes=1000)
    assert len(build_schedule(two, "ring_bidirectional")) == len(build_schedule(two, "ring"))


@pytest.mark.parametrize("dims", [(4, 4), (3, 5), (2, 3, 4), (4, 4, 4)], ids=str)
def test_torus_moves_contiguous_blocks_between_neighbours(dims: tuple[int, ...]) -> None:
    """Every transfer is one contiguous range between torus neighbours, and each phase's step
    is one message per direction per rank (2 (d - 1) steps per axis of an all-reduce)."""
    p = math.prod(dims)
    call = Call(collective=Collective.ALL_REDUCE, ranks=p, nbytes=p * 6, torus_dims=dims)
    s = build_schedule(call, "torus")
    strides = [math.prod(dims[a + 1 :]) for a in range(len(dims))]

    def coords(r: int) -> list[int]:
        return [(r // st) % d for st, d in zip(strides, dims, strict=True)]

    for t in s.transfers:
        diff = [(a - b) % d for a, b, d in zip(coords(t.src), coords(t.dst), dims, strict=True)]
        moved = [(x, d) for x, d in zip(diff, dims, strict=True) if x]
        assert len(moved) == 1 and moved[0][0] in (1, moved[0][1] - 1)
    per_axis = sum(2 * (d - 1) * (2 if d > 2 else 1) * p for d in dims if d > 1)
    assert len(s.transfers) == per_axis


def test_axis_blocks_are_contiguous_rank_groups() -> None:
    """On a 2 x 3 torus the axis-0 blocks are rows (3 ranks each), the axis-1 ones single
    ranks; the rank order of a line follows the axis' stride."""
    rings, lo, hi = axis_rings((2, 3), 0, 600)
    assert (rings[0].tolist(), lo[0].tolist(), hi[0].tolist()) == ([0, 3], [0, 300], [300, 600])
    rings, lo, hi = axis_rings((2, 3), 1, 600)
    assert (rings[2].tolist(), lo[2].tolist(), hi[2].tolist()) == ([3, 4, 5], [300, 400, 500],
                                                                   [350, 450, 550])


def test_sub_torus() -> None:
    """A --ranks prefix is a torus if it is whole rows of 1, 2 or all of an axis."""
    assert sub_torus((16, 16), 256) == (16, 16)
    assert sub_torus((16, 16), 32) == (2, 16)
    assert sub_torus((16, 16), 16) == (16,)
    assert sub_torus((16, 16), 8) is None
    assert sub_torus((16, 16), 48) is None
    assert sub_torus((4, 4, 4), 32) == (2, 4, 4)
    assert sub_torus((4, 4, 4), 2) == (2,)
    assert sub_torus((4, 4, 4), 1) == (1,)


def test_torus_needs_torus_dims() -> None:
    """Without torus dims ``torus`` is refused with a clear error and not offered to auto."""
    call = Call(collective=Collective.ALL_REDUCE, ranks=16, nbytes=1024)
    with pytest.raises(ScheduleError, match="needs a torus topology"):
        build_schedule(call, "torus")
    assert "torus" not in candidates(call)
    assert "ring_bidirectional" in candidates(call)
    on_torus = Call(collective=Collective.ALL_REDUCE, ranks=16, nbytes=1024, torus_dims=(4, 4))
    assert "torus" in candidates(on_torus)
    bcast = Call(collective=Collective.BROADCAST, ranks=16, nbytes=1024, torus_dims=(4, 4))
    assert "torus" not in candidates(bcast)
    assert ALGORITHMS["torus"].needs_torus


def test_call_validates_torus_dims() -> None:
    with pytest.raises(SpecError, match="torus dims"):
        Call(collective=Collective.ALL_REDUCE, ranks=16, nbytes=1, torus_dims=(4, 3))


def test_make_call_reads_the_torus() -> None:
    """Torus networks give their dims (a sub-torus prefix its own); rings and others none."""
    net = torus([4, 4, 4], latency="1us", bandwidth="45GB/s")
    assert make_call("all_reduce", net, 1).torus_dims == (4, 4, 4)
    assert make_call("all_reduce", net.with_ranks(32), 1).torus_dims == (2, 4, 4)
    assert make_call("all_reduce", net.with_ranks(12), 1).torus_dims is None
    assert make_call("all_reduce", ring(8, latency=1e-6, bandwidth=1e9), 1).torus_dims is None


@pytest.mark.parametrize(("preset", "prefix"), [("tpu-v5e-256", 8), ("tpu-v4-64", 12)])
def test_tpu_presets_map_to_torus(preset: str, prefix: int) -> None:
    """The TPU presets run all-gather, reduce-scatter and all-reduce as ``torus``; a --ranks
    prefix that is no torus falls back to auto instead of failing."""
    net = load_topology(preset)
    for coll in ("all_gather", "reduce_scatter", "all_reduce"):
        assert simulate(coll, net, 2**30, engine="analytic").algorithm == "torus"
    small = net.with_ranks(prefix)
    assert simulate("all_reduce", small, 2**30, engine="analytic").algorithm != "torus"
    r = simulate("all_reduce", preset, "1MiB", ranks=prefix)
    assert r.algorithm != "torus" and r.time_s > 0
    sub = simulate("all_reduce", preset, "1MiB", ranks=32, engine="analytic")  # a sub-torus
    assert sub.algorithm == "torus"


def test_auto_picks_torus_for_large_all_reduce_on_an_unmapped_torus() -> None:
    """Without a mapping, ``auto`` on a torus prefers ``torus`` for a large all-reduce."""
    net = torus([8, 8], latency="1us", bandwidth="45GB/s")
    assert simulate("all_reduce", net, 2**30, engine="analytic").algorithm == "torus"
