"""The real nccl-tests logs copied into tests/data, for the validation tests.

A module of its own (not conftest.py, which every test folder has) so that
``from nccl_logs import DATA`` finds it whatever folders pytest collected first.
"""

from __future__ import annotations

import re
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
    # added for issue 14 (single-run logs; the 5-run DGX-2 log is RUNS below)
    "a100-sxm4-40gb_8gpu_1node_allreduce_unresolved-test-fixture.txt": ("all_reduce", 8, 11, 1),
    "a100-sxm4-80gb_8gpu_1node_allreduce-g8_unresolved-thanos.txt": ("all_reduce", 8, 30, 1),
    "a100-sxm4-80gb_8gpu_1node_allreduce-mpirun_unresolved-thanos.txt": ("all_reduce", 8, 30, 1),
    "h100-sxm_16gpu_2node_dgx-06-07_allreduce_unresolved-cnh.txt": ("all_reduce", 16, 32, 2),
    "h100-sxm_16gpu_2node_ib-8nic_allreduce_unresolved-multinode-readme.txt": (
        "all_reduce", 16, 6, 2,
    ),
    "h100-sxm_8gpu_1node_allreduce_unresolved-single-node-readme.txt": ("all_reduce", 8, 4, 1),
    "h800_8gpu_1node_broadcast-c0-info_unresolved-nf5688m7.txt": ("broadcast", 8, 30, 1),
    "v100-sxm2-16gb_4gpu_1node_allreduce-c0_unresolved-gdr116.txt": ("all_reduce", 4, 29, 1),
    "a100-pcie-40gb_4gpu_1node_allreduce_unresolved-sm02.txt": ("all_reduce", 4, 25, 1),
    "h100-sxm_8gpu_1node_allreduce-nvls_nccl-tests-issue290.txt": ("all_reduce", 8, 6, 1),
    "h100-sxm_16gpu_2node_ib-ndr_allreduce-srun_nccl-tests-issue290.txt": (
        "all_reduce", 16, 11, 2,
    ),
    "h100-sxm_16gpu_2node_ib-ndr_allreduce-ring_nccl-tests-issue290.txt": (
        "all_reduce", 16, 11, 2,
    ),
    "v100-sxm2-16gb_8gpu_1node_dgx1-hybrid-cube-mesh_allreduce_unresolved-blog-2019.txt": (
        "all_reduce", 8, 25, 1,
    ),
    # added for issue 14: Volta, Ampere and PCIe cards ("[1,0]<stdout>:" tags, old columns,
    # INFO lines inside the table, zero-byte rows)
    "a100-sxm4-40gb_8gpu_1node_nvswitch_allreduce_ocitutorials.txt": ("all_reduce", 8, 28, 1),
    "a100-sxm4-40gb_16gpu_2node_aws-p4d-efa_allreduce_aws-efa-eks.txt": ("all_reduce", 16, 28, 2),
    "v100-sxm2-32gb_2gpu_2node_aws-p3dn-efa_allreduce_eks-efa-examples-np2.txt": (
        "all_reduce", 2, 29, 2,
    ),
    "v100-sxm2-32gb_2gpu_2node_aws-p3dn-efa_allreduce_eks-efa-examples-readme.txt": (
        "all_reduce", 2, 29, 2,
    ),
    "v100-sxm2-32gb_16gpu_2node_aws-p3dn-efa_allreduce_eks-efa-examples.txt": (
        "all_reduce", 16, 28, 2,
    ),
    "v100-sxm2-32gb_64gpu_8node_aws-p3dn-efa_allreduce_eks-efa-examples.txt": (
        "all_reduce", 64, 28, 8,
    ),
    "t4_2gpu_2node_aws-g4dn-efa_allreduce_eks-blueprints.txt": ("all_reduce", 2, 31, 2),
    "l40s_2gpu_2node_socket-sriov_allreduce_nvidia-tools-image.txt": ("all_reduce", 2, 31, 2),
    "l40s_4gpu_2node_roce-sriov_allreduce_nvidia-tools-image.txt": ("all_reduce", 4, 31, 2),
    "a100-pcie-40gb_2gpu_2node_ib-hdr-gdr_allreduce_nccl-tests-issue293.txt": (
        "all_reduce", 2, 28, 2,
    ),
    "a100-pcie-40gb_2gpu_2node_ib-hdr-nps4_allreduce_nccl-tests-issue293.txt": (
        "all_reduce", 2, 28, 2,
    ),
    "v100-pcie-32gb_2gpu_2node_allreduce_unresolved-nccl-notes.txt": ("all_reduce", 2, 25, 2),
    # issue 14, Hopper and Blackwell logs found later
    "gb200_72gpu_18node_nvl72-mnnvl_allreduce_coreweave-f443305.txt": ("all_reduce", 72, 5, None),
    "gb200_128gpu-inferred_2rack_nvl72-ib_allreduce_coreweave-f443305.txt": (
        "all_reduce", 128, 6, None,
    ),
    "gb200_1440gpu_360node_20rack-nvl72-ib_allreduce_coreweave-f443305.txt": (
        "all_reduce", 1440, 6, None,
    ),
    "gh200_8gpu_2node_alps-slingshot-ofi_allreduce_cscs-docs-image-nccl-tests.txt": (
        "all_reduce", 8, 25, 2,
    ),
    "gh200_8gpu_2node_alps-no-ofi-plugin_allreduce_cscs-docs-image-nccl-tests.txt": (
        "all_reduce", 8, 25, 2,
    ),
    "gh200_8gpu_2node_alps-santis-slingshot-cxi_allreduce_cscs-nccl-tests-cxi-readme.txt": (
        "all_reduce", 8, 25, 2,
    ),
    "gh200_2gpu_2node_alps-slingshot_allreduce_cscs-docs-sarus-suite.txt": (
        "all_reduce", 2, 8, 2,
    ),
    "gh200_2gpu_2node_cray-ex-slingshot11_allreduce-wrong_nccl-tests-issue369.txt": (
        "all_reduce", 2, 25, 2,
    ),
    "gh200_8gpu_2node_olivia-slingshot_allreduce-int8_nris-docs-apptainer.txt": (
        "all_reduce", 8, 28, 2,
    ),
    "h200_16gpu_2node_spectrum-x-roce_allreduce-g8_unresolved-openshift.txt": (
        "all_reduce", 16, 25, 2,
    ),
    "h200_16gpu_2node_nebius-k8s_allreduce_unresolved-runai-nebius.txt": (
        "all_reduce", 16, 5, 2,
    ),
    "h200_2gpu_2node_gcp-a3ultra-gib-rdma_allgather_dranet.txt": ("all_gather", 2, 24, 2),
    "b200_16gpu_2node_gcp-a4-gib-rdma_allgather_dranet.txt": ("all_gather", 16, 24, 2),
    "gb200_128gpu_32node_2rack-oci-gb200-v3_allreduce_oci-hpc-oke.txt": (
        "all_reduce", 128, 33, None,
    ),
    "h100-nvl_4gpu_2node_slingshot200_allreduce-bad_nccl-issue2441.txt": (
        "all_reduce", 4, 11, 2,
    ),
    "h100-nvl_4gpu_2node_slingshot200_allreduce-good_nccl-issue2441.txt": (
        "all_reduce", 4, 11, 2,
    ),
    "h100-nvl_4gpu_2node_slingshot200_allreduce-ldoms_nccl-issue2441.txt": (
        "all_reduce", 4, 11, 2,
    ),
    "h100-sxm_16gpu_2node_ib-ndr-8nic_allreduce_nccl-tests-issue309-xe9680.txt": (
        "all_reduce", 16, 32, 2,
    ),
    "h100-sxm_32gpu_4node_vmware-ib-8nic_allreduce_nccl-tests-issue309-vm.txt": (
        "all_reduce", 32, 32, 4,
    ),
    "h100-sxm_64gpu_8node_ib-400g_allreduce_nccl-tests-issue309-gj.txt": (
        "all_reduce", 64, 14, 8,
    ),
    "h100-sxm_16gpu_2node_ib-400g_allreduce_nccl-tests-issue309-gj.txt": (
        "all_reduce", 16, 14, 2,
    ),
    "h100-sxm_32gpu_4node_ib-400g_allreduce_nccl-tests-issue309-gj.txt": (
        "all_reduce", 32, 14, 4,
    ),
    "h100-sxm_64gpu_8node_ib-400g_allreduce-minctas24_nccl-tests-issue309-gj.txt": (
        "all_reduce", 64, 14, 8,
    ),
    "h100-sxm_16gpu_2node_ib-400g_allreduce-ring-minctas24_nccl-tests-issue309-gj.txt": (
        "all_reduce", 16, 14, 2,
    ),
    "h100-sxm_16gpu_2node_ib-8nic-doca_allreduce_nccl-tests-issue319.txt": (
        "all_reduce", 16, 32, 2,
    ),
    "h100-sxm_16gpu_2node_ib-8nic-doca_allreduce-ring-info_nccl-tests-issue319.txt": (
        "all_reduce", 16, 32, 2,
    ),
    "h200_16gpu_2node_gcp-a3ultra-rdma_allgather-skypilot_skypilot-examples.txt": (
        "all_gather", 16, 24, 2,
    ),
    "h200_16gpu_2node_gcp-gib-rdma_allgather-gcp-pods_skypilot-examples.txt": (
        "all_gather", 16, 24, 2,
    ),
    "h200_16gpu_2node_oci_allreduce_unresolved-oci-hpc-guide.txt": ("all_reduce", 16, 5, 2),
    # issue 40: alltoall_perf (the 4 GiB-truncated H20-3e log is read in test_nccl_alltoall.py)
    "mi355x_8gpu_1node_xgmi_alltoall_alibaba-readme.txt": ("all_to_all", 8, 25, 1),
    "mi355x_16gpu_2node_ainic-roce_alltoall_alibaba-readme.txt": ("all_to_all", 16, 31, 2),
    "rtx6000d_16gpu_2node_cx8_alltoall_unresolved-6kd-report.txt": ("all_to_all", 16, 24, 2),
    "rtx2080ti-pcie_2gpu_1node_pcie3-no-p2p_alltoall_autodl-blog.txt": ("all_to_all", 2, 28, 1),
    # GB300 NVL72 (OCI's guide): the guide kept only the 8 and 16 GiB rows
    "gb300_4gpu_1node_nvl72_alltoall_oci-quickstart.txt": ("all_to_all", 4, 2, 1),
    "gb300_8gpu_2node_nvl72_alltoall_oci-quickstart.txt": ("all_to_all", 8, 2, None),
    "gb300_64gpu_16node_nvl72_alltoall_oci-quickstart.txt": ("all_to_all", 64, 2, None),
    # the alltoall tables of two sources the issue-14 search had read for their other collectives:
    # the B200 report (no preamble, so no hosts) and the A100 fixture (old columns, blank redop)
    "b200_8gpu_1node_hgx-nvswitch_alltoall_unresolved-vultr-poc.txt": ("all_to_all", 8, 32, None),
    "b200_16gpu_2node_hgx-ib-ndr_alltoall_unresolved-vultr-poc.txt": ("all_to_all", 16, 32, None),
    "a100-sxm4-40gb_8gpu_1node_nvswitch_alltoall_superbench-fixture.txt": ("all_to_all", 8, 34, 1),
}

#: Logs of several runs: file -> one (collective, ranks, rows, first row's line) per run.
RUNS = {
    "v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_5collectives_unresolved-fork-readme.txt": [
        ("all_gather", 12, 31, 32),
        ("all_reduce", 12, 31, 86),
        ("broadcast", 12, 31, 140),
        ("reduce", 12, 31, 194),
        ("reduce_scatter", 12, 31, 248),
    ],
    "rtx4090-pcie_2gpu_1node_4collectives_unresolved-comprehensive.txt": [
        ("all_reduce", 2, 25, 40),
        ("broadcast", 2, 25, 90),
        ("all_gather", 2, 25, 140),
        ("reduce_scatter", 2, 25, 190),
    ],
    # added for issue 14's cross mode: shell prompts, a README's script lines, Python string
    # delimiters and a report's captions between the runs; old per-test columns (GTX 1080,
    # A100 fixture); tables pasted without any preamble (the B200 report)
    "rtx2080ti-pcie_2gpu_1node_pcie3-no-p2p_4collectives_unresolved-autodl-blog.txt": [
        ("all_reduce", 2, 28, 29),
        ("all_gather", 2, 28, 71),
        ("broadcast", 2, 28, 113),
        ("reduce", 2, 28, 156),
    ],
    "gtx1080-pcie_2gpu_1node_macos_5collectives_nccl-osx-readme.txt": [
        ("all_reduce", 2, 25, 30),
        ("all_gather", 2, 25, 69),
        ("broadcast", 2, 25, 108),
        ("reduce", 2, 25, 147),
        ("reduce_scatter", 2, 25, 186),
    ],
    "a100-sxm4-40gb_8gpu_1node_nvswitch_5collectives_superbench-fixture.txt": [
        ("all_gather", 8, 34, 37),
        ("all_reduce", 8, 34, 92),
        ("reduce", 8, 34, 147),
        ("broadcast", 8, 34, 202),
        ("reduce_scatter", 8, 34, 257),
    ],
    "b200_8gpu_1node_hgx-nvswitch_3collectives_unresolved-vultr-poc.txt": [
        ("all_reduce", 8, 32, 22),
        ("all_gather", 8, 32, 63),
        ("reduce_scatter", 8, 32, 104),
    ],
    "b200_16gpu_2node_hgx-ib-ndr_3collectives_unresolved-vultr-poc.txt": [
        ("all_reduce", 16, 32, 23),
        ("all_gather", 16, 32, 64),
        ("reduce_scatter", 16, 32, 105),
    ],
}


#: Logs whose rank count busbw/algbw alone cannot settle (the printed digits allow a range at
#: this many ranks): file -> the count it gives without the log's one kept device line.
RATIO_ONLY = {
    "gb200_1440gpu_360node_20rack-nvl72-ib_allreduce_coreweave-f443305.txt": 1478,
}

#: Logs whose table alone cannot tell all_gather from alltoall (run with ``-c 0``: both
#: ``#wrong`` sides N/A); only their provenance comments name the test.
GATHER_OR_ALLTOALL = frozenset({
    "h100-sxm_16gpu_2node_gcp-a3mega-tcpxo_allgather_unresolved-slurm1790.txt",
})

_DEVICE_LINE = re.compile(r"^\s*#\s+Rank\s+\d+\s")


def body(name: str) -> str:
    """A log without its provenance header (everything before the nccl-tests output), so
    inference cannot lean on the ``COMMAND:`` comments."""
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if "nThread" in line or "out-of-place" in line or _DEVICE_LINE.match(line)
        ),
        0,
    )
    return "\n".join(lines[start:]) + "\n"
