"""FSDP: prefetched all-gathers hidden under compute or exposing exactly the difference; memory.

4 ranks, fully connected, ring all-gather of a unit of ``g`` bytes:
``ag = 3 (alpha + g / (4 beta))``.
With prefetch 1 the forward of ``U`` units of compute ``F`` takes ``ag + U F`` when ``F >= ag``
(every all-gather after the first hides under the previous unit's forward) and ``U ag + F`` when
``F < ag`` (each unit after the first waits ``ag - F``).
"""

from __future__ import annotations

import pytest

from commsim import simulate
from commsim.replay import FsdpSpec, replay

U = 4
PARAMS = 2**22  # per unit: 8 MiB gathered at 2 bytes per parameter
G = 2 * PARAMS
ALPHA, BETA = 2.0**-20, 2.0**30
AG = 3 * (ALPHA + G / 4 / BETA)  # ring all-gather on 4 ranks


def _fsdp(forward: float, **extra: object) -> dict[str, object]:
    return {
        "kind": "fsdp",
        "units": U,
        "params_per_unit": PARAMS,
        "bytes_per_param": 2,
        "forward_time": f"{forward!r}s",
        "backward_time": f"{2 * forward!r}s",
        "algorithm": "ring",
        **extra,
    }


def test_ring_allgather_time_is_the_alpha_beta_cost(fully_connected) -> None:
    """The oracle used below: simulate() agrees with 3 (alpha + g / 4 beta)."""
    assert simulate("all_gather", fully_connected(4), G, algorithm="ring").time_s == pytest.approx(
        AG, rel=1e-12
    )


def test_prefetch_hides_allgathers_when_compute_exceeds_them(fully_connected) -> None:
    """F = 2 ag: forward = ag + U F; only the first all-gather is exposed."""
    f = 2 * AG
    r = replay(_fsdp(f, forward_only=True), fully_connected(4))
    assert r.step_time_s == pytest.approx(AG + U * f, rel=1e-12)
    assert r.exposed_comm_s == pytest.approx(AG, rel=1e-12)
    assert r.metrics.comm_time_s == pytest.approx(U * AG, rel=1e-12)


def test_prefetch_exposes_exactly_the_difference_when_compute_is_short(fully_connected) -> None:
    """F = ag / 2: forward = U ag + F; exposed = ag + (U - 1)(ag - F)."""
    f = AG / 2
    r = replay(_fsdp(f, forward_only=True), fully_connected(4))
    assert r.step_time_s == pytest.approx(U * AG + f, rel=1e-12)
    assert r.exposed_comm_s == pytest.approx(AG + (U - 1) * (AG - f), rel=1e-12)


def test_no_prefetch_serializes_gather_and_compute(fully_connected) -> None:
    """prefetch 0: each all-gather is issued when its unit is about to run: U (ag + F)."""
    f = 2 * AG
    r = replay(_fsdp(f, forward_only=True, prefetch=0), fully_connected(4))
    assert r.step_time_s == pytest.approx(U * (AG + f), rel=1e-12)
    assert r.exposed_comm_s == pytest.approx(U * AG, rel=1e-12)


def test_full_step_hides_everything_but_the_edges(fully_connected) -> None:
    """Long compute: forward and backward all-gathers and reduce-scatters hide, except the first
    all-gather of each pass and the last reduce-scatter (all-gather and reduce-scatter overlap
    on the same ring links, but 2F of backward compute covers both)."""
    f = 8 * AG
    r = replay(_fsdp(f), fully_connected(4))
    assert r.step_time_s == pytest.approx(AG + U * f + AG + U * 2 * f + AG, rel=1e-12)
    assert r.exposed_comm_s == pytest.approx(3 * AG, rel=1e-12)


def test_reshard_after_forward_off_skips_the_backward_allgathers(fully_connected) -> None:
    """reshard_after_forward false: no backward all-gathers, more memory held."""
    on = replay(_fsdp(2 * AG), fully_connected(4))
    off = replay(_fsdp(2 * AG, reshard_after_forward=False), fully_connected(4))
    count = {
        name: len(r.tasks().query("collective == 'all_gather'"))
        for name, r in (("on", on), ("off", off))
    }
    assert count == {"on": 2 * U, "off": U}
    assert off.step_time_s < on.step_time_s
    assert off.metrics.peak_memory_bytes > on.metrics.peak_memory_bytes


def test_peak_memory_counts_shards_gathered_units_and_activations(fully_connected) -> None:
    """Per rank: 16 B per parameter sharded, plus two gathered units in flight with prefetch 1
    in forward; with reshard off, all U units stay gathered (plus their activations)."""
    sharded = U * PARAMS // 4 * 16
    act = 2**20
    r = replay(_fsdp(2 * AG, forward_only=True), fully_connected(4))
    assert r.metrics.peak_memory_bytes == sharded + 2 * G
    assert [m.peak_memory_bytes for m in r.metrics.per_rank] == [sharded + 2 * G] * 4
    off = replay(
        _fsdp(2 * AG, forward_only=True, reshard_after_forward=False, activation_bytes=f"{act}B"),
        fully_connected(4),
    )
    assert off.metrics.peak_memory_bytes == sharded + U * G + U * act
    assert off.to_dict()["peak_memory_bytes"] == sharded + U * G + U * act
    assert off.to_dict()["per_rank"][0]["peak_memory_bytes"] == sharded + U * G + U * act


def test_step_memory_includes_unsharded_gradients(fully_connected) -> None:
    """In backward a unit's gathered parameters and its unsharded gradients are both live."""
    r = replay(_fsdp(8 * AG), fully_connected(4))
    sharded = U * PARAMS // 4 * 16
    assert r.metrics.peak_memory_bytes >= sharded + 3 * G


def test_spec_api() -> None:
    """FsdpSpec is a frozen keyword-only dataclass; unit_bytes and sharded_bytes are derived."""
    spec = FsdpSpec(
        units=2, params_per_unit=100, forward_time_s=(1.0, 1.0), backward_time_s=(2.0, 2.0)
    )
    assert spec.unit_bytes == 200
    assert spec.sharded_bytes(3) == 67 * 16
