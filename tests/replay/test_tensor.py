"""Tensor parallelism: four blocking all-reduces per layer per micro-batch inside each TP group."""

from __future__ import annotations

import pytest

from commsim.errors import SpecError
from commsim.replay import replay

F, B = 2.0**-10, 2.0**-9
ALPHA, BETA = 2.0**-20, 2.0**30
N = 2**24  # 16 MiB per all-reduce


def _tp(tp: int, layers: int = 3, **extra: object) -> dict[str, object]:
    return {
        "kind": "tensor",
        "tp": tp,
        "layers": layers,
        "forward_time": f"{F!r}s",
        "backward_time": f"{B!r}s",
        "allreduce_bytes": f"{N}B",
        "algorithm": "ring",
        **extra,
    }


def test_step_is_compute_plus_four_allreduces_per_layer(fully_connected) -> None:
    """tp=2 on 4 fully connected ranks: step = L(f + b) + 4 L ar, nothing overlaps."""
    ar = 2 * (ALPHA + N / 2 / BETA)  # ring all-reduce of 2 ranks
    r = replay(_tp(2), fully_connected(4))
    assert r.step_time_s == pytest.approx(3 * (F + B) + 12 * ar, rel=1e-12)
    assert r.exposed_comm_s == pytest.approx(12 * ar, rel=1e-12)
    assert r.overlap_fraction == 0.0
    groups = set(r.tasks().query("kind == 'collective'")["ranks"])
    assert groups == {(0, 1), (2, 3)}
    assert r.to_dict()["allreduces_per_microbatch"] == 12


def test_microbatches_repeat_the_pass(fully_connected) -> None:
    """Micro-batches run one after another; the next one's first half-layer of compute overlaps
    the previous one's last all-reduce (the input gradient, which nothing waits for), so each
    boundary saves f/2."""
    one = replay(_tp(4, layers=1), fully_connected(4))
    three = replay(_tp(4, layers=1, microbatches=3), fully_connected(4))
    assert three.step_time_s == pytest.approx(3 * one.step_time_s - 2 * F / 2, rel=1e-12)
    assert three.metrics.compute_time_s == 3 * one.metrics.compute_time_s


def test_tp_groups_contend_when_they_share_links() -> None:
    """On a ring of 4, TP groups {0,1} and {2,3} use disjoint links; groups of 4 cannot be
    compared, but two groups placed across each other ({0,2} and {1,3}) would share links: the
    tp=2 step on the ring equals the uncontended fully connected one."""
    link = {"latency": f"{ALPHA!r}s", "bandwidth": f"{BETA!r}B/s"}
    ring = {"kind": "ring", "ranks": 4, "link": link}
    fc = {"kind": "fully_connected", "ranks": 4, "link": link}
    assert replay(_tp(2), ring).step_time_s == replay(_tp(2), fc).step_time_s


def test_tp_must_divide_the_world(fully_connected) -> None:
    """A TP degree that does not divide the topology's ranks is a SpecError naming tp."""
    with pytest.raises(SpecError, match=r"^tp: 3 does not divide the topology's 4 ranks"):
        replay(_tp(3), fully_connected(4))
