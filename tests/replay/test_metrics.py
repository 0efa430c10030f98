"""Step metrics: the documented definitions on hand-made timelines, and interval properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commsim.replay import GraphBuilder, GraphTiming, step_metrics
from commsim.replay.metrics import length, uncovered, union


def _timeline():
    """Rank 0 computes [0, 2] and [3, 4]; a collective of ranks 0 and 1 runs [1, 5]; rank 1
    never computes. Step = 5."""
    b = GraphBuilder(2)
    b.compute(0, 2.0, name="a", phase="forward")
    b.compute(0, 1.0, name="b", phase="backward")
    b.collective((0, 1), "all_reduce", 8, algorithm="ring", name="ar", phase="gradient")
    timing = GraphTiming(
        start_s=(0.0, 3.0, 1.0), end_s=(2.0, 4.0, 5.0), algorithms=("", "", "ring")
    )
    return b.build(), timing


def test_definitions_on_a_hand_made_timeline() -> None:
    """compute = union of compute, comm = union of comm, exposed = comm not under compute,
    overlap = hidden / comm, idle = (step - compute) / step; aggregates are means over ranks."""
    graph, timing = _timeline()
    m = step_metrics(graph, timing)
    r0, r1 = m.per_rank
    assert (r0.compute_time_s, r0.comm_time_s, r0.exposed_comm_s) == (3.0, 4.0, 2.0)
    assert r0.overlap_fraction == 0.5 and r0.idle_fraction == 0.4
    assert (r1.compute_time_s, r1.comm_time_s, r1.exposed_comm_s) == (0.0, 4.0, 4.0)
    assert r1.overlap_fraction == 0.0 and r1.idle_fraction == 1.0
    assert m.step_time_s == 5.0
    assert m.compute_time_s == 1.5 and m.comm_time_s == 4.0 and m.exposed_comm_s == 3.0
    assert m.overlap_fraction == 2.0 / 8.0  # hidden summed over ranks / comm summed over ranks
    assert m.idle_fraction == 0.7  # mean of 0.4 and 1.0


def test_json_keys_are_the_contracts() -> None:
    """The aggregate and every per-rank object carry the contract's six keys."""
    graph, timing = _timeline()
    out = step_metrics(graph, timing).to_dict()
    keys = {
        "step_time_s",
        "compute_time_s",
        "comm_time_s",
        "exposed_comm_s",
        "overlap_fraction",
        "idle_fraction",
    }
    assert keys <= set(out)
    assert len(out["per_rank"]) == 2
    assert all(keys <= set(rank) for rank in out["per_rank"])


def test_no_communication_means_zero_overlap() -> None:
    """overlap_fraction is 0, not NaN, when a rank does not communicate."""
    b = GraphBuilder(1)
    b.compute(0, 1.0, name="a", phase="forward")
    m = step_metrics(b.build(), GraphTiming((0.0,), (1.0,), ("",)))
    assert m.overlap_fraction == 0.0 and m.idle_fraction == 0.0


intervals = st.lists(
    st.tuples(st.integers(0, 50), st.integers(0, 20)).map(
        lambda t: (float(t[0]), float(t[0] + t[1]))
    ),
    max_size=12,
)


@given(intervals, intervals)
def test_uncovered_is_length_minus_the_intersection(a, b) -> None:
    """uncovered(A, B) = |A| - |A and B| = |A or B| - |B|, and stays within [0, |A|]."""
    ua, ub = union(a), union(b)
    left = uncovered(ua, ub)
    assert left == pytest.approx(length(union(a + b)) - length(ub))
    assert 0.0 <= left <= length(ua)


@given(intervals)
def test_union_is_disjoint_and_sorted(a) -> None:
    """union() returns sorted disjoint non-empty intervals covering the same points."""
    u = union(a)
    assert all(s < e for s, e in u)
    assert all(u[i][1] < u[i + 1][0] for i in range(len(u) - 1))
    for point in range(0, 72):
        inside = any(s <= point + 0.5 < e for s, e in a)
        assert inside == any(s <= point + 0.5 < e for s, e in u)
