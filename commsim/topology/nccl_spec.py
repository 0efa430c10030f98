"""The ``nccl:`` block of a topology: how NCCL runs on the machine (its GPU generation,
channels, release, GPUs per host thread, host CPU and path to the NIC), validated, and the
values NCCL's tuner tells apart. :mod:`commsim.nccl` reads it; :mod:`commsim.topology.loader`
parses it from YAML."""

from __future__ import annotations

from dataclasses import dataclass

from commsim.errors import SpecError
from commsim.fields import positive_int

#: GPU generations NCCL's tuner tells apart (per-channel bandwidth caps, src/graph/tuning.cc).
NCCL_ARCHS = ("volta", "ampere", "hopper", "blackwell")
#: The host CPUs NCCL's tuner tells apart (``NCCL_TOPO_CPU_VENDOR_INTEL``/``AMD``; ``arm``: an
#: Arm host such as Grace, which it treats as neither).
NCCL_CPUS = ("intel", "amd", "arm")
#: NCCL's types of the path from a GPU to its NIC, nearest first (src/include/graph.h): one PCIe
#: switch (``pix``), several (``pxb``), NVLink-C2C to the CPU then its PCIe (``p2c``, Grace
#: Hopper), through the CPU's PCIe host bridge (``phb``), across CPU sockets (``sys``).
NCCL_NIC_PATHS = ("pix", "pxb", "p2c", "phb", "sys")
#: The block's times (seconds in :meth:`NcclSpec.as_meta`, with a unit in YAML), each at most
#: :data:`MAX_TIME_S`.
TIME_KEYS = ("host_per_gpu", "overhead")
MAX_TIME_S = 1.0


def parse_nccl_version(text: str) -> tuple[int, int]:
    """An NCCL release, ``"2.18.1"`` -> ``(2, 18)``; a one-line SpecError for anything else.

    >>> parse_nccl_version("2.18.1")
    (2, 18)
    """
    parts = str(text).split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise SpecError(
            f"nccl.version: expected a release like 2.19 or 2.18.1 (got {text!r})"
        ) from None
    if major != 2 or len(parts) > 3:
        raise SpecError(f"nccl.version: expected a release like 2.19 or 2.18.1 (got {text!r})")
    return major, minor


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclSpec:
    """How NCCL runs on this machine: the GPU generation (``arch``, one of
    :data:`NCCL_ARCHS`), the number of channels (rings/trees run at once, 1..64), the NCCL
    release (``version``, whose tuning constants apply: :mod:`commsim.nccl_tables`), how
    many GPUs one host thread drives (``gpus_per_thread``: nccl-tests' ``-g``; 1..64), the
    hosts' CPU (``cpu``, one of :data:`NCCL_CPUS`, or None: not stated), which NCCL's tuner
    reads across nodes, and the path from a GPU to its NIC (``nic_path``, one of
    :data:`NCCL_NIC_PATHS`, or None: not stated, taken as within a PCIe switch), which decides
    whether NCCL runs LL128 across nodes. Two times describe the host and the GPUs' own
    software where it differs from the model's: ``host_per_gpu_s`` (what one host thread
    spends issuing a call per GPU it drives; None: the model's figure) and ``overhead_s``
    (what every call costs on the GPUs beyond NCCL's model; 0 by default). Both are what
    ``commsim calibrate`` fits of a machine's floor."""

    arch: str = "hopper"
    channels: int = 16
    version: str = "2.19"
    gpus_per_thread: int = 1
    cpu: str | None = None
    nic_path: str | None = None
    host_per_gpu_s: float | None = None
    overhead_s: float = 0.0

    def __post_init__(self) -> None:
        if self.arch not in NCCL_ARCHS:
            raise SpecError(f"nccl.arch: unknown GPU generation {self.arch!r} "
                            f"(known: {', '.join(NCCL_ARCHS)})")
        positive_int(self.channels, "nccl.channels")
        if self.channels > 64:
            raise SpecError(f"nccl.channels: at most 64, NCCL's MAXCHANNELS (got {self.channels})")
        parse_nccl_version(self.version)
        positive_int(self.gpus_per_thread, "nccl.gpus_per_thread")
        if self.gpus_per_thread > 64:
            raise SpecError(f"nccl.gpus_per_thread: at most 64 (got {self.gpus_per_thread})")
        if self.cpu is not None and self.cpu not in NCCL_CPUS:
            raise SpecError(f"nccl.cpu: unknown host CPU {self.cpu!r} "
                            f"(known: {', '.join(NCCL_CPUS)})")
        if self.nic_path is not None and self.nic_path not in NCCL_NIC_PATHS:
            raise SpecError(f"nccl.nic_path: unknown path type {self.nic_path!r} "
                            f"(known: {', '.join(NCCL_NIC_PATHS)})")
        for key in TIME_KEYS:
            value = getattr(self, f"{key}_s")
            if value is not None and not (0.0 <= value <= MAX_TIME_S):
                raise SpecError(f"nccl.{key}: expected a time from 0 to 1s (got {value:g} s)")

    def as_meta(self) -> dict[str, object]:
        meta: dict[str, object] = {"arch": self.arch, "channels": self.channels,
                                   "version": self.version,
                                   "gpus_per_thread": self.gpus_per_thread}
        if self.cpu is not None:
            meta["cpu"] = self.cpu
        if self.nic_path is not None:
            meta["nic_path"] = self.nic_path
        if self.host_per_gpu_s is not None:
            meta["host_per_gpu"] = self.host_per_gpu_s
        if self.overhead_s:
            meta["overhead"] = self.overhead_s
        return meta
