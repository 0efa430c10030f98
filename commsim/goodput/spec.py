"""What ``commsim goodput`` is asked: the run, its failure rates, its checkpoints and restarts.

:class:`GoodputSpec` holds every input in SI units, validated on construction; each error
names the flag it came from (``--write-bandwidth: must be > 0 (got 0.0)``). The defaults and
where they come from:

* ``failures_per_gpu_hour = 2e-5``: Llama 3's pre-training (Dubey et al. 2024, "The Llama 3
  Herd of Models", section 3.3.4 and Table 5): 419 unexpected interruptions in a 54-day
  snapshot on 16,384 H100 GPUs, 419 / (16,384 x 54 x 24 h) = 1.97e-5 per GPU-hour. That count
  includes the host-level causes (switches, NICs, host maintenance), so the per-node rate
  defaults to 0 rather than counting them twice.
* ``restart_s = 10 min``: an assumption (re-initialising 16k GPUs and NCCL, reloading);
  Llama 3 does not publish it.
* ``write_Bps = 100 GB/s`` (shared storage's aggregate), ``rank_Bps = 25 GB/s`` (what one
  writer's 200 Gb/s storage NIC carries) and ``host_Bps = 50 GB/s`` (a GPU-to-host copy over
  PCIe Gen5 x16) are assumptions to override with the machine's figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commsim.errors import SpecError

#: The largest cluster (GPUs) and the highest rate a run is asked about: past these an input
#: is a typo.
MAX_GPUS = 10_000_000
MAX_RATE_PER_HOUR = 1.0
WRITERS = ("sharded", "rank0")
#: Llama 3's 54-day snapshot (Dubey et al. 2024, section 3.3.4, Table 5).
LLAMA3_GPUS, LLAMA3_DAYS, LLAMA3_UNEXPECTED, LLAMA3_INTERRUPTIONS = 16_384, 54, 419, 466
DEFAULT_FAILURES_PER_GPU_HOUR = 2e-5
HOUR_S = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GoodputSpec:
    """One training run on an imperfect machine.

    Attributes
    ----------
    gpus, gpus_per_node
        The job's GPUs and the GPUs per node (``nodes = ceil(gpus / gpus_per_node)``).
    step_time_s
        One training step on all ``gpus``.
    failures_per_gpu_hour, failures_per_node_hour
        Failures that stop the job, per GPU-hour and per node-hour (added up).
    checkpoint_bytes
        One checkpoint: every rank's states together (weights and optimizer state).
    writers
        ``sharded``: every rank writes its shard at once; ``rank0``: one rank writes it all.
    write_Bps, read_Bps
        The storage's aggregate write and read bandwidth.
    rank_Bps
        What one writer (or reader) moves at most.
    async_checkpoint, host_Bps
        Asynchronous checkpoints: training stalls only while each rank copies its shard to
        host memory at ``host_Bps``; the write runs in the background.
    restart_s, requeue_s
        After a failure: restarting the job and waiting in the scheduler's queue (the
        checkpoint's read time is added to them).
    interval_s
        Compute between checkpoints; None picks the best.
    tokens, tokens_per_step
        What the run trains (both or neither).
    spare_wait_s, elastic_step_time_s
        ``--elastic``: how long a lost node takes to come back (a spare, a repair), and the
        step time on one node fewer (None: the same work on ``nodes - 1`` nodes,
        ``step_time_s x nodes / (nodes - 1)``).
    step_source
        ``given``, or the plan configuration or workload replay the step was timed from.
    """

    gpus: int
    step_time_s: float
    checkpoint_bytes: int
    gpus_per_node: int = 8
    failures_per_gpu_hour: float = DEFAULT_FAILURES_PER_GPU_HOUR
    failures_per_node_hour: float = 0.0
    writers: str = "sharded"
    write_Bps: float = 100e9
    read_Bps: float = 100e9
    rank_Bps: float = 25e9
    async_checkpoint: bool = False
    host_Bps: float = 50e9
    restart_s: float = 600.0
    requeue_s: float = 0.0
    interval_s: float | None = None
    tokens: float | None = None
    tokens_per_step: float | None = None
    spare_wait_s: float = HOUR_S
    elastic_step_time_s: float | None = None
    #: Where the step time comes from: ``given``, or the plan or replay that timed it.
    step_source: str = "given"

    def __post_init__(self) -> None:
        _count(self.gpus, "--gpus", MAX_GPUS)
        _count(self.gpus_per_node, "--gpus-per-node", 1024)
        _positive(self.step_time_s, "--step-time")
        for flag, rate in (("--failures-per-gpu-hour", self.failures_per_gpu_hour),
                           ("--failures-per-node-hour", self.failures_per_node_hour)):
            if not (math.isfinite(rate) and 0 <= rate <= MAX_RATE_PER_HOUR):
                raise SpecError(
                    f"{flag}: must be between 0 and {MAX_RATE_PER_HOUR:g} (got {rate!r})")
        if self.checkpoint_bytes < 0:
            raise SpecError(
                f"--checkpoint-bytes: must not be negative (got {self.checkpoint_bytes})")
        if self.writers not in WRITERS:
            raise SpecError(f"writers: {self.writers!r} is not one of {', '.join(WRITERS)}")
        for flag, bw in (("--write-bandwidth", self.write_Bps), ("--read-bandwidth", self.read_Bps),
                         ("--rank-bandwidth", self.rank_Bps), ("--host-bandwidth", self.host_Bps)):
            _positive(bw, flag)
        for flag, t in (("--restart-time", self.restart_s), ("--requeue-time", self.requeue_s),
                        ("--spare-wait", self.spare_wait_s)):
            if not (math.isfinite(t) and t >= 0):
                raise SpecError(f"{flag}: must be a time >= 0 (got {t!r})")
        self._check_interval()
        self._check_tokens()
        if self.elastic_step_time_s is not None:
            _positive(self.elastic_step_time_s, "--elastic-step-time")
            if self.elastic_step_time_s < self.step_time_s:
                raise SpecError(f"--elastic-step-time: {self.elastic_step_time_s:g} s is faster "
                                f"than the full job's --step-time {self.step_time_s:g} s")

    def _check_interval(self) -> None:
        if self.interval_s is None:
            if self.rate_per_s == 0:
                raise SpecError("--interval auto: the failure rates are both 0, so there is no "
                                "best interval (give --interval)")
            return
        _positive(self.interval_s, "--interval")
        if self.interval_s < self.step_time_s:
            raise SpecError(f"--interval: {self.interval_s:g} s is shorter than one step "
                            f"({self.step_time_s:g} s)")

    def _check_tokens(self) -> None:
        if (self.tokens is None) != (self.tokens_per_step is None):
            raise SpecError("--tokens and --tokens-per-step go together (give both or neither)")
        if self.tokens is not None and self.tokens_per_step is not None:
            _positive(self.tokens, "--tokens")
            _positive(self.tokens_per_step, "--tokens-per-step")

    @property
    def nodes(self) -> int:
        return -(-self.gpus // self.gpus_per_node)

    @property
    def rate_per_s(self) -> float:
        """Failures per second of the whole job: GPUs' and nodes' rates added."""
        per_hour = (self.gpus * self.failures_per_gpu_hour
                    + self.nodes * self.failures_per_node_hour)
        return per_hour / HOUR_S

    @property
    def work_s(self) -> float | None:
        """Compute time of the whole run (``tokens / tokens_per_step`` steps), if given."""
        if self.tokens is None or self.tokens_per_step is None:
            return None
        return self.tokens / self.tokens_per_step * self.step_time_s

    @property
    def slowdown(self) -> float:
        """The fraction of full speed that one node out costs an elastic run."""
        if self.nodes < 2:
            return 1.0
        elastic = self.elastic_step_time_s or self.step_time_s * self.nodes / (self.nodes - 1)
        return 1.0 - self.step_time_s / elastic


def _positive(value: float, flag: str) -> None:
    if not (math.isfinite(value) and value > 0):
        raise SpecError(f"{flag}: must be > 0 (got {value!r})")


def _count(value: int, flag: str, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise SpecError(f"{flag}: must be a whole number from 1 to {maximum:,} (got {value!r})")
