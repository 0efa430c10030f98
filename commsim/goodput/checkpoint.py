"""What one checkpoint costs: its size from the memory model, and its write, read and stall times.

**Size** of a model's checkpoint (:func:`model_checkpoint_bytes`): the states a run needs to
resume, as :mod:`commsim.plan.memory` counts them: bf16 weights ``2N`` and the fp32 master
weights, momentum and variance ``12N``, so ``14N`` bytes for ``N`` parameters. Gradients are
not saved (a step starts without them). Sharded (ZeRO, FSDP) or replicated (DDP), the bytes
written are one copy of these states.

**Write**: ``sharded``, every rank writes its shard at once, at ``min(storage, ranks x one
writer)``; ``rank0``, one rank gathers the states and writes them all, at ``min(storage, one
writer)`` (the course's failover example). The read after a restart goes the same way.

**Stall**: a synchronous checkpoint stalls training for its write. An asynchronous one stalls
only while each rank copies what it writes to host memory (its shard, or everything on rank 0)
at ``host_Bps``; the write then runs in the background, and the checkpoint counts only once
it ends (a failure before that rolls back to the previous one).

>>> from commsim.goodput.spec import GoodputSpec
>>> c = checkpoint_cost(GoodputSpec(gpus=16, step_time_s=1, checkpoint_bytes=10**12))
>>> c.write_s, c.blocking_s, c.commit_delay_s   # 1 TB at min(100 GB/s, 16 x 25 GB/s)
(10.0, 10.0, 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from commsim.goodput.spec import GoodputSpec
from commsim.plan.memory import OPTIMIZER_BYTES, WEIGHT_BYTES
from commsim.plan.models import ModelSpec

#: Bytes saved per parameter: bf16 weights and fp32 master weights, momentum and variance.
CHECKPOINT_BYTES_PER_PARAM = WEIGHT_BYTES + OPTIMIZER_BYTES


def model_checkpoint_bytes(model: ModelSpec) -> int:
    """``14 N``: one copy of the weights and Adam states of ``model`` (see above)."""
    return CHECKPOINT_BYTES_PER_PARAM * model.params


@dataclass(frozen=True, slots=True)
class CheckpointCost:
    """Seconds: the write and read of one checkpoint, the stall it causes, and after the stall
    until it is durable (the background write; 0 when synchronous)."""

    write_s: float
    read_s: float
    blocking_s: float
    commit_delay_s: float


def checkpoint_cost(spec: GoodputSpec) -> CheckpointCost:
    """The :class:`CheckpointCost` of ``spec``'s checkpoints (see the module docstring)."""
    writers = spec.gpus if spec.writers == "sharded" else 1
    write_s = spec.checkpoint_bytes / min(spec.write_Bps, writers * spec.rank_Bps)
    read_s = spec.checkpoint_bytes / min(spec.read_Bps, writers * spec.rank_Bps)
    if not spec.async_checkpoint:
        return CheckpointCost(write_s, read_s, write_s, 0.0)
    snapshot_s = spec.checkpoint_bytes / writers / spec.host_Bps
    return CheckpointCost(write_s, read_s, snapshot_s, write_s)
