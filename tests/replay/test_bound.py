"""The FSDP bound: the contract's formula, its JSON keys, and agreement with the replayed forward.

alpha log2(p) <= (B S f / C - b / beta) n. The replay check uses a log-depth all-gather
(recursive doubling) on a uniform fully connected network, where a unit's all-gather costs
``alpha log2(p) + (p - 1)/p * b n / beta``: the bound counts the whole ``b n / beta``, so it is
conservative by ``b n / (p beta)`` (31 us here, far less than one sequence of compute, 0.53 ms).
"""

from __future__ import annotations

import math

import pytest

from commsim import simulate
from commsim.bound import fsdp_bound
from commsim.errors import SpecError
from commsim.replay import replay

CONTRACT = dict(
    latency_s=1e-6,
    bandwidth_Bps=50e9,
    flops=1500e12,
    batch=10,
    seq=8000,
    params_per_layer=1e8,
    ranks=64,
)


def test_contract_example() -> None:
    """The contract's example: 6 us of latency against 3.33 ms of spare compute."""
    r = fsdp_bound(**CONTRACT)
    assert r.lhs_s == pytest.approx(6e-6, rel=1e-12)
    assert r.rhs_s == pytest.approx((10 * 8000 / 1500e12 - 1 / 50e9) * 1e8, rel=1e-12)
    assert not r.comm_bound
    assert r.min_batch == 4  # B >= C (alpha log2 p / n + b / beta) / S = 3.7501...
    assert r.max_log2_ranks == math.floor(r.rhs_s / 1e-6)
    out = r.to_dict()
    for key in ("lhs_s", "rhs_s", "comm_bound", "min_batch", "max_log2_ranks"):
        assert key in out


def test_min_batch_and_max_log2_ranks_sit_on_the_boundary() -> None:
    """min_batch is the smallest B with lhs <= rhs; max_log2_ranks the largest such log2 p."""
    r = fsdp_bound(**{**CONTRACT, "batch": 1})
    assert r.comm_bound
    assert not fsdp_bound(**{**CONTRACT, "batch": r.min_batch}).comm_bound
    assert fsdp_bound(**{**CONTRACT, "batch": r.min_batch - 1}).comm_bound
    big = fsdp_bound(**{**CONTRACT, "latency_s": 1e-3})
    assert not fsdp_bound(
        **{**CONTRACT, "latency_s": 1e-3, "ranks": 2**big.max_log2_ranks}
    ).comm_bound
    assert fsdp_bound(
        **{**CONTRACT, "latency_s": 1e-3, "ranks": 2 ** (big.max_log2_ranks + 1)}
    ).comm_bound


def test_no_rank_count_helps_when_bandwidth_alone_is_too_slow() -> None:
    """If b/beta exceeds B S f / C, even p = 1 is communication bound: max_log2_ranks is None."""
    r = fsdp_bound(**{**CONTRACT, "batch": 1, "bandwidth_Bps": 1e9})
    assert r.rhs_s < 0 and r.comm_bound
    assert r.max_log2_ranks is None and r.to_dict()["max_log2_ranks"] is None


def test_flops_and_bytes_per_param_generalise_the_textbook_form() -> None:
    """f FLOPs and b bytes per parameter scale the compute and bandwidth terms."""
    r = fsdp_bound(**CONTRACT, flops_per_param=6, bytes_per_param=2)
    assert r.rhs_s == pytest.approx((10 * 8000 * 6 / 1500e12 - 2 / 50e9) * 1e8, rel=1e-12)


@pytest.mark.parametrize("field", ["latency_s", "bandwidth_Bps", "flops", "batch", "ranks"])
def test_non_positive_inputs_are_errors(field: str) -> None:
    """Zero or negative inputs are SpecErrors naming the flag."""
    with pytest.raises(SpecError, match="must be"):
        fsdp_bound(**{**CONTRACT, field: 0})


def test_replayed_forward_agrees_with_the_bound_on_both_sides(fully_connected) -> None:
    """FSDP forward, prefetch 1, recursive-doubling all-gather on 64 fully connected ranks:
    for every batch around min_batch, forward communication beyond the first all-gather is
    exposed exactly when the bound says communication bound."""
    net = fully_connected(64, latency=1e-6, bandwidth=50e9)
    n, seq, flops, units = 1e8, 8000, 1500e12, 3
    ag = simulate("all_gather", net, int(n), algorithm="recursive_doubling").time_s
    assert ag == pytest.approx(6e-6 + 63 / 64 * n / 50e9, rel=1e-12)
    min_batch = fsdp_bound(**CONTRACT).min_batch
    seen = set()
    for batch in range(1, 2 * min_batch + 1):
        forward = batch * seq * n / flops
        r = replay(
            {
                "kind": "fsdp",
                "units": units,
                "params_per_unit": int(n),
                "bytes_per_param": 1,
                "forward_time": f"{forward!r}s",
                "backward_time": f"{forward!r}s",
                "all_gather_algorithm": "recursive_doubling",
                "forward_only": True,
            },
            net,
        )
        exposed_beyond_first = r.exposed_comm_s - ag > 1e-12
        bound = fsdp_bound(**{**CONTRACT, "batch": batch})
        assert exposed_beyond_first == bound.comm_bound, batch
        if exposed_beyond_first:
            assert r.exposed_comm_s == pytest.approx(ag + (units - 1) * (ag - forward), rel=1e-9)
        seen.add(bound.comm_bound)
    assert seen == {True, False}
