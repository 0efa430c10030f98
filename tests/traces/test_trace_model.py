"""The trace model: what the GPU (NCCL) and CPU (gloo) rules read from a rank's events."""

from __future__ import annotations

from pathlib import Path

import pytest
from _synthetic import NELEMS, OLD_KERNEL, comm_args, gloo_rank, nccl_rank, write, write_ranks

from commsim.errors import ParseError
from commsim.traces import FRAME_COLUMNS, CommKind, read_traces
from commsim.traces.comms import comm_kind, dtype_size

NEW_SIG = "(ncclDevKernelArgsStorage<4096ul>)"  # NCCL >= 2.19
OLD_SIG = "(ncclDevComm*, unsigned long, ncclWork*)"  # NCCL <= 2.18


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL" + NEW_SIG, "all_reduce"),
        ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "reduce_scatter"),
        ("ncclDevKernel_AllGather_RING_LL", "all_gather"),
        ("ncclDevKernel_Broadcast_RING_LL", "broadcast"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float" + OLD_SIG, "all_reduce"),
        ("ncclKernel_Broadcast_RING_LL_Sum_int8_t" + OLD_SIG, "broadcast"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t" + OLD_SIG, "send_recv"),
        ("ncclAllReduceRingLLKernel_sum_f32", "all_reduce"),
        ("c10d::_allgather_base_", "all_gather"),
        ("c10d::_reduce_scatter_base_", "reduce_scatter"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("c10d::recv_", "recv"),
        ("nccl:_all_gather_base", "all_gather"),
        ("gloo:all_reduce", "all_reduce"),
        ("allgather_into_tensor_coalesced", "all_gather"),
        ("allreduce_coalesced", "all_reduce"),
    ],
)  # fmt: skip
def test_comm_kind_of_every_spelling(name: str, kind: str) -> None:
    """Kernel names old and new, c10d ops, annotations and record_param_comms names."""
    assert comm_kind(name) == CommKind(kind)


def test_not_communication() -> None:
    """Compute ops and unknown NCCL kernels are not communication kinds."""
    assert comm_kind("aten::mm") is None
    assert comm_kind("aten::scatter") is None
    assert comm_kind("ncclDevKernel_Generic") is None


def test_dtype_sizes() -> None:
    """ATen and C++ dtype names, as record_param_comms and Input type spell them."""
    assert [dtype_size(n) for n in ("Float", "BFloat16", "Half", "Long", "Byte", "Char")] == [
        4, 2, 2, 8, 1, 1,
    ]  # fmt: skip
    assert [dtype_size(n) for n in ("float", "c10::BFloat16", "c10::Half", "long int")] == [
        4, 2, 2, 8,
    ]  # fmt: skip
    assert dtype_size("TensorList") is None


@pytest.mark.parametrize(
    "variant",
    [
        {},  # new kernel names, args copied onto the kernel
        {"kernel": OLD_KERNEL, "args_on_kernel": False},  # via record_param_comms
        {"header": "quoted"},  # pg ranks "{}": from the args' "Process Group Ranks"
        {"header": "old", "params": {}, "args_on_kernel": False, "kernel": OLD_KERNEL},
    ],
    ids=["new-kernel-args", "old-kernel-record_param_comms", "quoted-ranks", "nccl-annotation"],
)
def test_nccl_all_reduce_is_read_from_any_source(tmp_path: Path, variant: dict) -> None:
    """Kind, bytes (4 MiB float32), group and lanes come out the same whichever event carries
    them: the kernel's args, record_param_comms, or the nccl:* annotation's Input Dims."""
    model = read_traces(write_ranks(tmp_path, [nccl_rank(r, **variant) for r in range(2)]))
    assert (model.flavour, model.backend, model.world_size) == ("gpu", "nccl", 2)
    assert model.notes == ()
    for rank in model.ranks:
        (call,) = rank.comms
        assert (call.kind, call.nbytes, call.group, call.lane) == (
            CommKind.ALL_REDUCE, 4 * NELEMS, (0, 1), "gpu:0:20",
        )  # fmt: skip
        assert call.start_s == pytest.approx(500e-6) and call.end_s == pytest.approx(780e-6)
        assert call.launch_s == pytest.approx(295e-6)
        assert [op.name for op in rank.compute] == [
            "sm80_xmma_gemm_k1", "sm80_xmma_gemm_k2", "elementwise_k3",
        ]  # fmt: skip
        assert rank.compute[2].launch_s == pytest.approx(320e-6)
        assert [(s.number, s.dur_s) for s in rank.steps] == [(5, pytest.approx(1e-3))]


@pytest.mark.parametrize(
    ("collective", "n_in", "n_out", "nbytes"),
    [
        ("_allgather_base", NELEMS, 2 * NELEMS, 8 * NELEMS),  # the gathered output
        ("_reduce_scatter_base", 2 * NELEMS, NELEMS, 8 * NELEMS),  # the unreduced input
        ("broadcast", NELEMS, NELEMS, 4 * NELEMS),
    ],
)
def test_nccl_bytes_follow_nccl_tests(
    tmp_path: Path, collective: str, n_in: int, n_out: int, nbytes: int
) -> None:
    """nbytes is nccl-tests' size: the full buffer."""
    params = comm_args(collective, n_in, n_out)
    model = read_traces(write_ranks(tmp_path, [nccl_rank(r, params=params) for r in range(2)]))
    assert [r.comms[0].nbytes for r in model.ranks] == [nbytes, nbytes]
    assert model.ranks[0].comms[0].kind is CommKind(comm_kind(collective))


def test_clocks_are_aligned_on_base_time(tmp_path: Path) -> None:
    """Ranks whose files have different baseTimeNanoseconds land on one clock."""
    late = nccl_rank(1, base_ns=1_711_964_646_000_000_000 + 1_000_000, t0=4_458_676_524_000.0)
    model = read_traces(write_ranks(tmp_path, [nccl_rank(0), late]))
    assert model.ranks[1].comms[0].start_s - model.ranks[0].comms[0].start_s == pytest.approx(1e-3)


def test_gloo_rules(tmp_path: Path) -> None:
    """gloo: top-level main-thread ops are compute (the nested addmm is not counted again);
    the c10d launch is matched to the runloop's gloo:all_reduce, sized from its Input Dims
    and Input type; phases come from the annotations and autograd ops."""
    model = read_traces(write_ranks(tmp_path, [gloo_rank(r) for r in range(2)]))
    assert (model.flavour, model.backend) == ("cpu", "gloo")
    rank = model.ranks[0]
    assert [(op.name[:12], op.phase) for op in rank.compute] == [
        ("aten::linear", "forward"),
        ("autograd::en", "backward"),
        ("torch.distri", ""),
        ("aten::add_", "optimizer"),
    ]
    (call,) = rank.comms
    assert (call.kind, call.nbytes, call.group, call.pg, call.lane) == (
        CommKind.ALL_REDUCE, 2 << 20, (0, 1), "0", "gloo:3000",
    )  # fmt: skip
    assert (call.launch_s, call.start_s, call.end_s) == pytest.approx((400e-6, 460e-6, 1500e-6))


def test_frame_has_the_documented_columns(tmp_path: Path) -> None:
    """TraceModel.frame: one row per compute interval and call, FRAME_COLUMNS, by rank/start."""
    frame = read_traces(write_ranks(tmp_path, [gloo_rank(r) for r in range(2)])).frame()
    assert tuple(frame.columns) == FRAME_COLUMNS
    assert len(frame) == 2 * (4 + 1)
    assert list(frame["kind"][:5]) == ["compute", "compute", "all_reduce", "compute", "compute"]
    assert frame["start_s"].is_monotonic_increasing is False  # sorted per rank, not globally
    assert list(frame.groupby("rank")["start_s"].apply(lambda s: s.is_monotonic_increasing)) == [
        True, True,
    ]  # fmt: skip


def test_every_rank_needs_a_file(tmp_path: Path) -> None:
    """A world of 2 with only rank 0's file, or a rank twice, is a ParseError."""
    (tmp_path / "a").mkdir()
    write(nccl_rank(0), tmp_path / "a" / "rank0.json")
    with pytest.raises(ParseError, match=r"no trace file for rank\(s\) 1"):
        read_traces(tmp_path / "a")
    write(nccl_rank(0), tmp_path / "a" / "again.json")
    with pytest.raises(ParseError, match="rank 0 again"):
        read_traces(tmp_path / "a")


def test_mixed_gpu_and_cpu_files(tmp_path: Path) -> None:
    """Files of one capture must agree on having GPU kernels."""
    with pytest.raises(ParseError, match="mixed captures"):
        read_traces(write_ranks(tmp_path, [nccl_rank(0), gloo_rank(1)]))
