"""Property tests: torus routes are valid, minimal with wrap-around, and dimension-ordered."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from commsim.topology import torus

#: Example budgets scale with the hypothesis profile (tests/conftest.py): x1, or x20 under fuzz.
EXAMPLE_SCALE = settings.default.max_examples // 100


def coords(index: int, dims: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major coordinates of a flat index (the last dimension varies fastest)."""
    out = []
    for size in reversed(dims):
        index, c = divmod(index, size)
        out.append(c)
    return tuple(reversed(out))


@st.composite
def torus_and_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], int, int]:
    """A torus shape of 1-3 dimensions (sizes 1-6) and two of its ranks."""
    dims = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    count = math.prod(dims)
    return dims, draw(st.integers(0, count - 1)), draw(st.integers(0, count - 1))


@settings(max_examples=300 * EXAMPLE_SCALE)
@given(torus_and_pair())
def test_torus_routes_are_minimal_and_dimension_ordered(
    case: tuple[tuple[int, ...], int, int],
) -> None:
    """Each hop moves one step along one dimension; dimensions are visited in order 0, 1, ...;
    the hop count per dimension is min(delta, size - delta) (wrap-around, shortest); ties
    (delta = size/2) go in the + direction; the route ends at the destination."""
    dims, src, dst = case
    net = torus(dims, latency="1us", bandwidth="45GB/s")
    path = net.route(src, dst)
    here = src
    last_dim = -1
    for link_id in path:
        link = net.links[link_id]
        assert link.src == here
        a, b = coords(link.src, dims), coords(link.dst, dims)
        moved = [d for d in range(len(dims)) if a[d] != b[d]]
        assert len(moved) == 1
        d = moved[0]
        assert d >= last_dim
        step = (b[d] - a[d]) % dims[d]
        assert step in (1, dims[d] - 1)
        c_src, c_dst = coords(src, dims)[d], coords(dst, dims)[d]
        delta = (c_dst - c_src) % dims[d]
        if delta <= dims[d] - delta:
            assert step == 1 % dims[d]  # + direction, including ties
        else:
            assert step == dims[d] - 1
        last_dim = d
        here = link.dst
    assert here == dst
    expected = sum(
        min((b - a) % n, (a - b) % n)
        for a, b, n in zip(coords(src, dims), coords(dst, dims), dims, strict=True)
    )
    assert len(path) == expected
