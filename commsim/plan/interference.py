"""What an overlapped NCCL collective costs the compute it overlaps (``Stack.overlap_cost``).

NCCL's kernels run on the GPU's SMs (one thread block per channel) and move their data
through its HBM, so a GEMM that overlaps a collective has fewer SMs and less memory
bandwidth than it would alone. Measured: Hong et al. 2025, "Characterizing
Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning: Performance and
Power Implications" (arXiv 2507.03114), find overlapped compute 18.9% slower on average (at
most 40.0%) than alone, on 4 A100s, H100s, MI250s and MI210s; the DeepSeek-V3 report
(arXiv 2412.19437, Section 3.2.2) holds 20 of an H800's 132 SMs for its communication.

**The model.** While a collective of ``a`` seconds (its uncontended time, as the timer gives
it) runs, the compute it overlaps runs at ``1 - share`` of its rate, with ``share`` the
larger of the two fractions of the device it takes:

* SMs: ``comm_sms / sms`` (:data:`~commsim.plan.stack.COMM_SMS`, the DeepSeek-V3 report's 20
  SMs, of the device's ``sms``);
* HBM: its bytes through HBM over the device's achievable bandwidth (``memory_bandwidth x
  efficiency.memory``, :meth:`~commsim.plan.device.DeviceSpec.hbm_Bps`) in ``a``. A rank's
  every received byte is written to HBM on arrival and read back by the kernel, and one more
  byte is read (its own operand) or written (the result): :func:`hbm_bytes`.

The larger, not the sum: a kernel bound by its FLOPs (a GEMM) on ``1 - f_sm`` of the SMs and
``1 - f_hbm`` of the bandwidth takes at most ``1 / (1 - max(f_sm, f_hbm))`` of its time
alone (its bytes took less than its FLOPs' time), and so does one bound by its bytes; the
roofline's bound, reached by the resource that binds.

With ``C`` the compute the collective can overlap, the compute takes ``C + charge``,
:func:`charge`: ``min(a share, C share / (1 - share))`` (slowed while the collective runs,
or slowed throughout when it cannot hide the collective), never more than ``a`` (no slower
than running them back to back). For H100 (132 SMs, 3.35 TB/s at 0.9) and a reduction at
the model's 42 GB/s of bus bandwidth of a 25 MiB all-reduce between two hosts' GPUs, the SMs
bind: ``20/132 = 0.15`` (``3 x 42/3015 = 0.04`` of the HBM); for its all-reduces among the 8
GPUs of a ``dgx-h100`` (262 GB/s at 25 MiB, 410 at 200 MiB) the HBM does, ``0.26`` to
``0.41``: Hong et al.'s mean and largest slowdowns, 0.189 and 0.40, span the same range.
The bytes are counted as a ring moves them (``2 (n-1)/n`` of an all-reduce's buffer
received, ``(n-1)/n`` of a reduce-scatter's), whichever algorithm NCCL picks.

>>> round(charge(1.0, 0.2, 10.0), 3)  # the compute hides the collective: a share
0.2
>>> round(charge(1.0, 0.2, 0.4), 3)  # too little compute: slowed throughout, C share/(1 - share)
0.1
>>> hbm_bytes("all_reduce", 4 << 20, 4)  # 2 (n - 1)/n of it received, 3 bytes per byte
18874368
"""

from __future__ import annotations

#: HBM bytes per byte a rank receives (see the module docstring)
HBM_PER_RECEIVED = 3
#: Bytes a rank receives per byte of the collective's buffer, times ranks/(ranks - 1)
RECEIVED = {"all_reduce": 2.0, "reduce_scatter": 1.0, "all_gather": 1.0}


def charge(seconds: float, share: float, compute: float) -> float:
    """Seconds the compute ``compute`` grows by when a collective of ``seconds`` holding
    ``share`` of the device overlaps it (see the module docstring)."""
    if seconds <= 0 or share <= 0 or compute <= 0:
        return 0.0
    if share >= 1.0:  # the compute stops while the collective runs
        return seconds
    return min(seconds * share, compute * share / (1.0 - share))


def hbm_bytes(collective: str, nbytes: int, ranks: int) -> int:
    """Bytes a rank's HBM moves for ``collective`` of ``nbytes`` among ``ranks``."""
    if ranks < 2:
        return 0
    return int(HBM_PER_RECEIVED * RECEIVED[collective] * nbytes * (ranks - 1) // ranks)


def load(seconds: float, sm_share: float, nbytes_hbm: int, hbm_Bps: float) -> float:
    """``seconds x share`` of one collective: the larger of its SMs' share of its time and
    the time its HBM bytes take at the device's achievable bandwidth (at most ``seconds``)."""
    if seconds <= 0:
        return 0.0
    return min(seconds, max(seconds * sm_share, nbytes_hbm / hbm_Bps))
