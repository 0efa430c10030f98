"""The real nccl-tests logs copied into tests/data, for the validation tests.

A module of its own (not conftest.py, which every test folder has) so that
``from nccl_logs import DATA`` finds it whatever folders pytest collected first.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "nccl-tests"

#: Every shared log: file -> (collective, ranks, rows, hosts or None).
LOGS = {
    "a100-sxm4-40gb_16gpu_2node_oci-roce_allreduce_ocitutorials.txt": ("all_reduce", 16, 28, 2),
    "a100-sxm4-80gb_128gpu_16node_ib_allreduce_coreweave-22df9b7.txt": (
        "all_reduce", 128, 30, None,
    ),
    "a100-sxm4-80gb_32gpu-inferred_multinode_ib-sharp_allreduce_coreweave-703d6eb.txt": (
        "all_reduce", 32, 31, None,
    ),
    "h100-sxm_16gpu_2node_alpha-test_allreduce_unresolved-cnh.txt": ("all_reduce", 16, 31, 2),
    "h100-sxm_16gpu_2node_gcp-a3mega-tcpxo_allgather_unresolved-slurm1790.txt": (
        "all_gather", 16, 11, None,
    ),
    "h100-sxm_16gpu_2node_gcp-a3mega-tcpxo_allreduce_lessizzmore.txt": ("all_reduce", 16, 31, 2),
    "h100-sxm_96gpu-inferred_multinode_ib-sharp-collnetchain_allreduce_coreweave-fb4787c.txt": (
        "all_reduce", 96, 5, None,
    ),
    "rtx4090-pcie_2gpu_1node_allreduce_kalavai-docker.txt": ("all_reduce", 2, 29, 1),
    "rtx4090-pcie_2gpu_1node_allreduce_kalavai-k8s.txt": ("all_reduce", 2, 29, 1),
    "rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker.txt": ("all_reduce", 4, 29, 1),
    "v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_allgather_unresolved-fork-readme.txt": (
        "all_gather", 12, 31, 1,
    ),
    "v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_reducescatter_unresolved-fork-readme.txt": (
        "reduce_scatter", 12, 31, 1,
    ),
}


def body(name: str) -> str:
    """A log without its provenance header (everything before the nccl-tests output), so
    inference cannot lean on the ``COMMAND:`` comments."""
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    start = next(
        (i for i, line in enumerate(lines) if "nThread" in line or "out-of-place" in line), 0
    )
    return "\n".join(lines[start:]) + "\n"
