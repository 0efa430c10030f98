"""What trace events say about communication: op names, kernel names, dtypes and byte counts.

Pure functions over strings and numbers, shared by the GPU (NCCL) and CPU (gloo) rules of
:mod:`commsim.traces.model`:

* :func:`comm_kind` maps every spelling of a communication call (``record_param_comms``'
  ``Collective name``, ``c10d::<op>_`` ops, ``nccl:<op>``/``gloo:<op>`` annotations, NCCL
  kernel names old and new) to one :class:`CommKind`;
* :func:`dtype_size` gives bytes per element for ATen (``Float``, ``BFloat16``) and C++
  (``float``, ``c10::BFloat16``) dtype names;
* :data:`HTA_COMM`, :data:`HTA_MEMORY` are HolisticTraceAnalysis' kernel classification
  regexes (docs/traces.md).

>>> comm_kind("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
<CommKind.ALL_REDUCE: 'all_reduce'>
>>> comm_kind("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)")
<CommKind.ALL_GATHER: 'all_gather'>
>>> comm_kind("c10d::_reduce_scatter_base_"), comm_kind("gloo:all_reduce").value
(<CommKind.REDUCE_SCATTER: 'reduce_scatter'>, 'all_reduce')
>>> dtype_size("BFloat16"), dtype_size("c10::BFloat16"), dtype_size("float")
(2, 2, 4)
"""

from __future__ import annotations

import re
from enum import StrEnum

from commsim.algorithms import UNSCHEDULED
from commsim.collectives import Collective


class CommKind(StrEnum):
    """A communication call as traces name it (a superset of :class:`Collective`)."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    GATHER = "gather"
    SCATTER = "scatter"
    BARRIER = "barrier"
    SEND = "send"
    RECV = "recv"
    SEND_RECV = "send_recv"  #: an NCCL SendRecv kernel whose direction is unknown

    @property
    def collective(self) -> Collective | None:
        """The simulator's collective for the five it models directly (barrier: all_reduce)."""
        if self is CommKind.BARRIER:
            return Collective.ALL_REDUCE
        try:
            collective = Collective(self.value)
        except ValueError:
            return None
        # one commsim names but cannot schedule yet (all_to_all) goes as point-to-point sends
        return None if collective in UNSCHEDULED else collective

    @property
    def p2p(self) -> bool:
        return self in (CommKind.SEND, CommKind.RECV, CommKind.SEND_RECV)


#: HTA: a kernel is communication if its name matches this.
HTA_COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
#: HTA: a kernel is a memory operation if its name matches this (else computation).
HTA_MEMORY = re.compile(r"^(hip)?Memcpy|^(hip)?Memset|^dma")

_KINDS = {
    "allreduce": CommKind.ALL_REDUCE,
    "allgather": CommKind.ALL_GATHER,
    "reducescatter": CommKind.REDUCE_SCATTER,
    "broadcast": CommKind.BROADCAST,
    "bcast": CommKind.BROADCAST,
    "reduce": CommKind.REDUCE,
    "alltoall": CommKind.ALL_TO_ALL,
    "alltoallv": CommKind.ALL_TO_ALL,
    "gather": CommKind.GATHER,
    "scatter": CommKind.SCATTER,
    "barrier": CommKind.BARRIER,
    "monitoredbarrier": CommKind.BARRIER,
    "send": CommKind.SEND,
    "recv": CommKind.RECV,
    "recvanysource": CommKind.RECV,
    "sendrecv": CommKind.SEND_RECV,
}

#: Decorations of one call's name that do not change what it does.
_NOISE = re.compile(r"base|coalesced|intotensor|tensor|single|multigpu|async")
_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_OLD_KERNEL = re.compile(
    r"^nccl([A-Z][A-Za-z]+?)(?:Ring|Tree|CollNet|Nvls)?(?:LL128|LL|Simple)?Kernel"
)


def comm_kind(name: str) -> CommKind | None:
    """The call a name denotes, or None when it is not a communication call we know."""
    text = name.strip()
    match = _KERNEL.match(text) or _OLD_KERNEL.match(text)
    if match:
        key = match.group(1).lower()
        return _KINDS.get(key)
    for prefix in ("c10d::", "nccl:", "gloo:", "mpi:", "ucc:", "xccl:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    key = re.sub(r"[^a-z]", "", text.lower())
    if key in _KINDS:
        return _KINDS[key]
    return _KINDS.get(_NOISE.sub("", key))


_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "f32": 4,
    "double": 8,
    "float64": 8,
    "f64": 8,
    "half": 2,
    "float16": 2,
    "f16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "long": 8,
    "longint": 8,
    "int64": 8,
    "i64": 8,
    "u64": 8,
    "uint64": 8,
    "unsignedlong": 8,
    "int": 4,
    "int32": 4,
    "i32": 4,
    "u32": 4,
    "uint32": 4,
    "unsignedint": 4,
    "short": 2,
    "shortint": 2,
    "int16": 2,
    "uint16": 2,
    "char": 1,
    "signedchar": 1,
    "int8": 1,
    "i8": 1,
    "byte": 1,
    "unsignedchar": 1,
    "uint8": 1,
    "u8": 1,
    "bool": 1,
    "complexfloat": 8,
    "complexdouble": 16,
    "complexhalf": 4,
}


def dtype_size(name: object) -> int | None:
    """Bytes per element of an ATen or C++ dtype name; None when unknown.

    >>> dtype_size("Float8_e4m3fn"), dtype_size("c10::complex<float>"), dtype_size("Tensor")
    (1, 8, None)
    """
    text = str(name).lower().replace("c10::", "").replace("at::", "").replace("torch.", "")
    if text.startswith("float8") or text.startswith("fp8"):
        return 1
    if text.startswith("complex<"):
        inner = dtype_size(text[len("complex<") : -1])
        return 2 * inner if inner else None
    return _DTYPE_BYTES.get(re.sub(r"[^a-z0-9]", "", text))


def full_buffer_bytes(kind: CommKind, in_bytes: int, out_bytes: int) -> int:
    """nccl-tests' size from a call's input and output bytes: the gathered output for
    all_gather, the unreduced input for reduce_scatter, the larger buffer otherwise.

    >>> full_buffer_bytes(CommKind.ALL_GATHER, 4, 8)
    8
    >>> full_buffer_bytes(CommKind.REDUCE_SCATTER, 8, 4)
    8
    """
    if kind is CommKind.ALL_GATHER:
        return out_bytes or in_bytes
    if kind is CommKind.REDUCE_SCATTER:
        return in_bytes or out_bytes
    return max(in_bytes, out_bytes)
