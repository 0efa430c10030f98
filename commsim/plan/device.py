"""The accelerator of a topology: the ``device:`` block of a preset or file, validated.

The topology loader keeps the block verbatim (``network.meta["device"]``); this module gives
it meaning::

    device:
      name: H100 SXM5 80GB
      memory: 80GiB                 # HBM per GPU
      memory_bandwidth: 3.35TB/s    # HBM bandwidth
      peak_flops: {bf16: 989TFLOP/s, fp8: 1979TFLOP/s}   # dense tensor-core peaks
      sms: 132                      # streaming multiprocessors (wave quantization)
      efficiency:                   # the "wave-roofline" curve of commsim.plan.compute
        curve: wave-roofline
        gemm: 0.75                  # fraction of peak a large GEMM reaches
        attention: 0.45             # fraction of peak fused attention (today's kernel) reaches
        attention_fa2: 0.34         # optional: FlashAttention-2's fraction (default: attention)
                                    # (FlashAttention v1's: FlashAttention-2's / FA2_OVER_FA1)
        tile: [128, 256]            # the GEMM output tile (M x N) of one thread block
        memory: 0.9                 # fraction of memory_bandwidth a streaming kernel reaches
      sources: [...]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from commsim.errors import SpecError
from commsim.network import Network
from commsim.replay import fields
from commsim.units import parse_bandwidth, parse_size

CURVES = ("wave_roofline",)  #: YAML may spell it wave-roofline
#: FlashAttention-2's speed over FlashAttention's (v1): about 2x, FlashAttention reaching
#: 25-40% of the A100's peak and FlashAttention-2 50-73% (Dao 2023, FlashAttention-2, arXiv
#: 2307.08691, abstract). Taken on every device, an assumption beyond the A100: no H100
#: figure of v1 is published, and neither kernel uses Hopper's TMA or WGMMA (both are Ampere
#: designs). v1's Triton port (``flash_attn_triton.py``, llm-foundry's ``attn_impl:
#: triton``) is, its docstring says, slightly slower than v1's CUDA forward + backward.
FA2_OVER_FA1 = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSpec:
    """One accelerator: memory, bandwidth, peak FLOP/s and its GEMM efficiency curve."""

    name: str
    memory_bytes: int
    memory_bandwidth_Bps: float
    peak_flops: float  #: dense bf16 tensor-core FLOP/s
    sms: int
    gemm_efficiency: float
    attention_efficiency: float
    tile_m: int = 128
    tile_n: int = 256
    #: fraction of ``memory_bandwidth_Bps`` that a streaming (memory-bound) kernel reaches
    memory_efficiency: float = 1.0
    sources: tuple[str, ...] = ()
    #: dense fp8 tensor-core FLOP/s (None: the device has no fp8 tensor cores, or the
    #: preset names no fp8 peak; ``--precision fp8`` is refused)
    peak_flops_fp8: float | None = None
    #: fraction of peak that FlashAttention-2 reaches where today's kernel is a later one
    #: (Hopper: FlashAttention-3, cuDNN); None: ``attention_efficiency``
    attention_fa2_efficiency: float | None = None

    def __post_init__(self) -> None:
        fields.positive_int(self.memory_bytes, "device.memory")
        fields.positive_int(self.sms, "device.sms")
        fields.positive_int(self.tile_m, "device.efficiency.tile")
        fields.positive_int(self.tile_n, "device.efficiency.tile")
        if not (self.memory_bandwidth_Bps > 0 and self.peak_flops > 0):
            raise SpecError("device: memory_bandwidth and peak_flops must be > 0")
        if self.peak_flops_fp8 is not None and not self.peak_flops_fp8 > 0:
            raise SpecError("device.peak_flops.fp8: must be > 0")
        for key in ("gemm_efficiency", "attention_efficiency", "memory_efficiency"):
            if not 0 < getattr(self, key) <= 1:
                raise SpecError(f"device.efficiency.{key.split('_')[0]}: must be in (0, 1]")
        fa2 = self.attention_fa2_efficiency
        if fa2 is not None and not 0 < fa2 <= 1:
            raise SpecError("device.efficiency.attention_fa2: must be in (0, 1]")

    @property
    def hbm_Bps(self) -> float:
        """The HBM bandwidth memory-bound kernels reach: the datasheet's times
        ``memory_efficiency``."""
        return self.memory_bandwidth_Bps * self.memory_efficiency

    def attention_fraction(self, kernel: str) -> float:
        """The fraction of peak fused attention reaches at long sequences: ``fa1``
        (FlashAttention v1: FlashAttention-2's over :data:`FA2_OVER_FA1`), ``fa2``
        (FlashAttention-2) or ``fused`` (today's kernel on this device)."""
        if kernel == "fa1":
            return self.attention_fraction("fa2") / FA2_OVER_FA1
        if kernel == "fa2" and self.attention_fa2_efficiency is not None:
            return self.attention_fa2_efficiency
        return self.attention_efficiency

    def gemm_peak(self, precision: str) -> float:
        """The dense tensor-core peak of ``precision`` (``bf16`` or ``fp8``); SpecError in
        one line where the device has no fp8 peak."""
        if precision == "bf16":
            return self.peak_flops
        if self.peak_flops_fp8 is None:
            raise SpecError(f"--precision {precision}: device {self.name!r} has no fp8 peak "
                            "(its device.peak_flops names no fp8)")
        return self.peak_flops_fp8

    def with_memory(self, nbytes: int | None) -> DeviceSpec:
        """The same device with ``nbytes`` of memory (``--gpu-memory``); None: unchanged."""
        if nbytes is None:
            return self
        from dataclasses import replace

        return replace(self, memory_bytes=fields.positive_int(nbytes, "--gpu-memory"))


def device_from_dict(data: object, path: str = "device") -> DeviceSpec:
    """A ``device:`` mapping -> :class:`DeviceSpec` (errors name the field)."""
    body = fields.mapping(data, path)
    fields.check_keys(
        body,
        ("name", "memory", "memory_bandwidth", "peak_flops", "sms", "efficiency"),
        ("sources",),
        path,
    )
    peaks = fields.mapping(body["peak_flops"], f"{path}.peak_flops")
    if "bf16" not in peaks:
        raise SpecError(f"{path}.peak_flops.bf16: missing (the planner trains in bf16)")
    eff: Mapping[str, Any] = fields.mapping(body["efficiency"], f"{path}.efficiency")
    fields.check_keys(eff, ("curve", "gemm", "attention"), ("tile", "memory", "attention_fa2"),
                      f"{path}.efficiency")
    fields.choice(eff["curve"], f"{path}.efficiency.curve", CURVES)
    tile = eff.get("tile", [128, 256])
    if not (isinstance(tile, list) and len(tile) == 2):
        raise SpecError(f"{path}.efficiency.tile: must be [M, N], got {tile!r}")
    sources = body.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise SpecError(f"{path}.sources: must be a list of strings")
    return DeviceSpec(
        name=str(body["name"]),
        memory_bytes=fields.positive_size(body["memory"], f"{path}.memory"),
        memory_bandwidth_Bps=parse_bandwidth(body["memory_bandwidth"], f"{path}.memory_bandwidth"),
        peak_flops=fields.flops(peaks["bf16"], f"{path}.peak_flops.bf16"),
        peak_flops_fp8=(fields.flops(peaks["fp8"], f"{path}.peak_flops.fp8")
                        if "fp8" in peaks else None),
        sms=fields.positive_int(body["sms"], f"{path}.sms"),
        gemm_efficiency=fields.fraction(eff["gemm"], f"{path}.efficiency.gemm"),
        attention_efficiency=fields.fraction(eff["attention"], f"{path}.efficiency.attention"),
        tile_m=fields.positive_int(tile[0], f"{path}.efficiency.tile[0]"),
        tile_n=fields.positive_int(tile[1], f"{path}.efficiency.tile[1]"),
        memory_efficiency=fields.fraction(eff.get("memory", 1.0), f"{path}.efficiency.memory"),
        attention_fa2_efficiency=(fields.fraction(eff["attention_fa2"],
                                                  f"{path}.efficiency.attention_fa2")
                                  if "attention_fa2" in eff else None),
        sources=tuple(sources),
    )


def network_device(network: Network, gpu_memory: str | int | None = None) -> DeviceSpec:
    """The device of ``network`` (its ``device:`` block), ``gpu_memory`` overriding memory."""
    block = network.meta.get("device")
    if block is None:
        raise SpecError(
            f"topology {network.name!r} has no device: block (memory, peak FLOP/s, efficiency "
            "curve); use a GPU preset such as dgx-h100 or add one (see docs/planning.md)"
        )
    device = device_from_dict(block)
    if gpu_memory is None:
        return device
    return device.with_memory(parse_size(gpu_memory, "--gpu-memory"))
