"""The FSDP compute-bound condition: does a layer's all-gather hide under its forward compute?

A layer of ``n`` parameters takes ``B * S * f * n / C`` seconds of forward compute on a batch of
``B`` sequences of ``S`` tokens (``f`` FLOPs per parameter per token, ``C`` FLOP/s), while the
next layer's all-gather over ``p`` ranks costs ``alpha * log2(p) + b * n / beta`` (a log-depth
algorithm: latency ``alpha`` per step, ``b`` bytes per parameter at ``beta`` bytes/s). FSDP
stays compute bound while

    alpha * log2(p) <= (B * S * f / C - b / beta) * n

(``f = b = 1`` is the lectures' form). A log-depth all-gather moves only ``(p - 1)/p`` of the
``b * n`` bytes through each rank, so the bound is conservative by ``b * n / (p * beta)``.

>>> r = fsdp_bound(latency_s=1e-6, bandwidth_Bps=50e9, flops=1500e12, batch=10, seq=8000,
...                params_per_layer=1e8, ranks=64)
>>> r.comm_bound, r.min_batch, r.max_log2_ranks
(False, 4, 3333)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commsim.errors import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class FsdpBound:
    """The inputs and both sides of the FSDP bound.

    Attributes
    ----------
    lhs_s
        ``alpha * log2(p)``: the all-gather's latency term.
    rhs_s
        ``(B S f / C - b / beta) n``: the forward compute left after the bandwidth term.
    comm_bound
        ``lhs_s > rhs_s``.
    min_batch
        The smallest batch ``B`` that is not communication bound.
    max_log2_ranks
        The largest ``log2 p`` (an integer) that is not communication bound; None when even
        ``p = 1`` is (the bandwidth term alone exceeds the compute).
    """

    latency_s: float
    bandwidth_Bps: float
    flops: float
    batch: int
    seq: int
    params_per_layer: float
    ranks: int
    flops_per_param: float = 1.0
    bytes_per_param: float = 1.0

    def __post_init__(self) -> None:
        positive = {
            "latency": self.latency_s,
            "bandwidth": self.bandwidth_Bps,
            "flops": self.flops,
            "batch": self.batch,
            "seq": self.seq,
            "params-per-layer": self.params_per_layer,
            "ranks": self.ranks,
            "flops-per-param": self.flops_per_param,
            "bytes-per-param": self.bytes_per_param,
        }
        for name, value in positive.items():
            if isinstance(value, bool) or not (
                isinstance(value, int | float) and value > 0 and math.isfinite(value)
            ):
                raise SpecError(f"--{name}: must be a finite number > 0, got {value!r}")
        for name in ("batch", "seq", "ranks"):
            if not isinstance(getattr(self, name), int):
                raise SpecError(
                    f"--{name}: must be a positive integer, got {getattr(self, name)!r}"
                )

    def _rhs(self, batch: float) -> float:
        per_token = batch * self.seq * self.flops_per_param / self.flops
        return (per_token - self.bytes_per_param / self.bandwidth_Bps) * self.params_per_layer

    @property
    def lhs_s(self) -> float:
        return self.latency_s * math.log2(self.ranks)

    @property
    def rhs_s(self) -> float:
        return self._rhs(self.batch)

    @property
    def comm_bound(self) -> bool:
        return self.lhs_s > self.rhs_s

    @property
    def min_batch(self) -> int:
        lhs = self.lhs_s
        need = lhs / self.params_per_layer + self.bytes_per_param / self.bandwidth_Bps
        batch = max(1, math.ceil(need * self.flops / (self.seq * self.flops_per_param)))
        while batch > 1 and lhs <= self._rhs(batch - 1):  # guard the ceil against rounding
            batch -= 1
        while lhs > self._rhs(batch):
            batch += 1
        return batch

    @property
    def max_log2_ranks(self) -> int | None:
        rhs = self.rhs_s
        if rhs < 0:
            return None
        log2p = math.floor(rhs / self.latency_s)
        while log2p > 0 and self.latency_s * log2p > rhs:
            log2p -= 1
        return log2p

    def to_dict(self) -> dict[str, object]:
        """The contract's JSON object: the inputs, then both sides and the verdicts."""
        return {
            "latency_s": self.latency_s,
            "bandwidth_Bps": self.bandwidth_Bps,
            "flops": self.flops,
            "batch": self.batch,
            "seq": self.seq,
            "params_per_layer": self.params_per_layer,
            "ranks": self.ranks,
            "flops_per_param": self.flops_per_param,
            "bytes_per_param": self.bytes_per_param,
            "lhs_s": self.lhs_s,
            "rhs_s": self.rhs_s,
            "comm_bound": self.comm_bound,
            "min_batch": self.min_batch,
            "max_log2_ranks": self.max_log2_ranks,
        }


def fsdp_bound(
    *,
    latency_s: float,
    bandwidth_Bps: float,
    flops: float,
    batch: int,
    seq: int,
    params_per_layer: float,
    ranks: int,
    flops_per_param: float = 1.0,
    bytes_per_param: float = 1.0,
) -> FsdpBound:
    """Evaluate the FSDP bound (see the module docstring); SpecError on a non-positive input."""
    return FsdpBound(
        latency_s=latency_s,
        bandwidth_Bps=bandwidth_Bps,
        flops=flops,
        batch=batch,
        seq=seq,
        params_per_layer=params_per_layer,
        ranks=ranks,
        flops_per_param=flops_per_param,
        bytes_per_param=bytes_per_param,
    )
