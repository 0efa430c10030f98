"""Presets vs real nccl-tests logs, uncalibrated: per log, per hardware family, overall.

Run: ``.venv/bin/python benchmarks/validate_presets.py [--fast] [--no-write] [--skip-cross]
[--only TEXT] [--rows FILE.csv] [--quick]``

Every run of every log in ``tests/data/nccl-tests`` (a log of several runs counts each run) is
predicted on the preset that matches its hardware (:data:`CASES`, the mapping table, with the
reason for each choice) under NCCL's model (``--algorithm nccl``, engine ``auto``), with no
parameter fitted to any log. It prints tables of |time error| =
``|predicted - measured| / measured``:

1. per log: median and worst |error| below 1 MiB and at 1 MiB and above;
2. per hardware family (:func:`family_of`: the GPU the log's device lines name, else its
   provenance header's ``HARDWARE:`` line) and overall: the median over all rows of the
   family's logs per band, and the log with the worst median in that band;
3. which way the predictions err (:mod:`_bias`): per family the signed median error per
   band and how many rows and runs are predicted too fast, then per family, on one node and
   across nodes, the signed median in each size band;
4. how far the runs disagree among themselves, per family (:mod:`_spread`): each run's
   out-of-place vs in-place times, and the floor that runs with the same model inputs set
   under any model's error.

A second mode (skipped by ``--skip-cross``) takes each machine with several collectives
(:data:`MACHINES`), calibrates the preset's link classes on one collective (``calibrate``, all
its sizes) and predicts the machine's other collectives, printing the median |error| on what
was not fitted. ``--fast`` keeps four sizes of each run, fits and predicts that second mode
with the analytic engine (the closed forms: fitting the pipelined schedules through the DES
takes minutes) and skips plots and docs: the tables' structure, for tests, not their figures.
Otherwise the tables (markdown) and one measured-vs-predicted plot per family
(``docs/img/validation-family-<family>.png``) are written between the
``<!-- presets:begin -->`` / ``<!-- presets:end -->`` markers of docs/validation.md.
Deterministic: the same code and logs give the same tables and PNGs.

``--only TEXT`` (repeatable) runs only the logs whose file name contains one of the texts and
writes no docs (a part of the table is not the table); ``--rows FILE.csv`` writes every
predicted row (its run, family and preset, then the columns of ``commsim validate --json``), the
evidence under the tables, to compare one change's before and after row by row.
``--quick`` is ``--fast`` on the logs of :data:`QUICK` (a log of each family, one of them a
machine of several collectives), for the test suite.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _bias import bias_table, size_table
from _common import parse_args
from _spread import SPLIT, by_family, group_table, spread_table

from commsim.nccl_tables import NcclConfig
from commsim.topology.presets import load_topology
from commsim.validation.calibrate import calibrate
from commsim.validation.measurements import Measurement, filter_rows
from commsim.validation.nccl_runs import how_driven, parse_nccl_tests_runs
from commsim.validation.nccl_tests import NcclTestsLog, read_text
from commsim.validation.plot import save_labelled_plot
from commsim.validation.validate import ValidationReport, ValidationRow, validate

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "nccl-tests"
DOC = ROOT / "docs" / "validation.md"
IMG = ROOT / "docs" / "img"
BEGIN, END = "<!-- presets:begin -->", "<!-- presets:end -->"


@dataclass(frozen=True)
class Case:
    """A log, the preset matching its hardware, and why."""

    log: str
    preset: str
    why: str
    machine: str | None = None  # logs of one machine share it (the cross-collective mode)
    algorithm: str = "nccl"  # "ring" where the run forced NCCL_ALGO=RING
    #: The NCCL release the run used, where the log's provenance header names it (its image,
    #: container or wheel) but the log does not print it; a printed ``NCCL version`` wins.
    nccl: str | None = None


CASES = (
    Case("a100-sxm4-40gb_16gpu_2node_oci-roce_allreduce_ocitutorials.txt", "oci-bm-gpu4.8x2",
         "OCI BM.GPU4.8: 8 A100 on NVSwitch, 16 x 100 Gb/s RoCEv2 ports per node (its "
         "NCCL_IB_HCA), the preset of that shape"),
    Case("a100-sxm4-40gb_8gpu_1node_allreduce_unresolved-test-fixture.txt", "dgx-a100",
         "8 A100 with DGX/HGX A100 PCI ids"),
    Case("a100-pcie-40gb_4gpu_1node_allreduce_unresolved-sm02.txt", "pcie-gen4-8gpu",
         "4 A100 PCIe, no NVLink bridge stated (so not pcie-nvbridge-8gpu; and apparently no "
         "P2P: 5 GB/s)"),
    Case("a100-sxm4-80gb_128gpu_16node_ib_allreduce_coreweave-22df9b7.txt", "dgx-a100x16",
         "16 HGX A100 nodes on InfiniBand"),
    Case("a100-sxm4-80gb_32gpu-inferred_multinode_ib-sharp_allreduce_coreweave-703d6eb.txt",
         "dgx-a100x4+sharp", "4 HGX A100 nodes (32 ranks from busbw/algbw), InfiniBand + SHARP; "
         "NCCL 2.12.0 (its image, per the README's table)", nccl="2.12"),
    Case("a100-sxm4-80gb_8gpu_1node_allreduce-g8_unresolved-thanos.txt", "dgx-a100",
         "8 A100-SXM4-80GB on NVSwitch, one process; NCCL of the nvidia-nccl-cu12 wheel of "
         "2024 (2.19-2.21, PyTorch's pins then)", nccl="2.19"),
    Case("a100-sxm4-80gb_8gpu_1node_allreduce-mpirun_unresolved-thanos.txt", "dgx-a100",
         "the same machine, 8 MPI processes", nccl="2.19"),
    Case("h100-sxm_16gpu_2node_alpha-test_allreduce_unresolved-cnh.txt", "dgx-h100x2",
         "2 x 8 H100 SXM; fabric not stated"),
    Case("h100-sxm_16gpu_2node_dgx-06-07_allreduce_unresolved-cnh.txt", "dgx-h100x2",
         "2 DGX H100; fabric not stated; noisy mid sizes"),
    Case("h100-sxm_16gpu_2node_ib-8nic_allreduce_unresolved-multinode-readme.txt", "dgx-h100x2",
         "2 x 8 H100 with 8 InfiniBand HCAs per node"),
    Case("h100-sxm_16gpu_2node_ib-ndr_allreduce-srun_nccl-tests-issue290.txt", "dgx-h100x2",
         "2 x 8 H100 (HGX), InfiniBand NDR 400 Gb/s, ConnectX-7"),
    Case("h100-sxm_16gpu_2node_ib-ndr_allreduce-ring_nccl-tests-issue290.txt", "dgx-h100x2",
         "the same 2 nodes with NCCL_ALGO=RING: predicted with the ring forced too",
         algorithm="ring"),
    Case("h100-sxm_16gpu_2node_gcp-a3mega-tcpxo_allgather_unresolved-slurm1790.txt",
         "gcp-a3-megax2", "2 GCP A3 Mega VMs (8 x 200 Gb/s GPUDirect-TCPXO each)",
         machine="GCP A3 Mega x2 (two clusters)"),
    Case("h100-sxm_16gpu_2node_gcp-a3mega-tcpxo_allreduce_lessizzmore.txt", "gcp-a3-megax2",
         "2 GCP A3 Mega VMs", machine="GCP A3 Mega x2 (two clusters)"),
    Case("h100-sxm_8gpu_1node_allreduce-nvls_nccl-tests-issue290.txt", "dgx-h100",
         "8 H100 (HGX) on NVSwitch, NVLS in use per the maintainer"),
    Case("h100-sxm_8gpu_1node_allreduce_unresolved-single-node-readme.txt", "dgx-h100",
         "8 H100 with DGX/HGX H100 PCI ids"),
    Case("h100-sxm_96gpu-inferred_multinode_ib-sharp-collnetchain_allreduce_coreweave-fb4787c.txt",
         "dgx-h100x12+sharp", "12 HGX H100 nodes (96 ranks), InfiniBand + SHARP (CollNet "
         "chain); NCCL 2.18.1 (its image)", nccl="2.18.1"),
    Case("h800_8gpu_1node_broadcast-c0-info_unresolved-nf5688m7.txt", "hgx-h800",
         "an 8-GPU HGX H800 (Inspur NF5688M7)"),
    Case("rtx4090-pcie_2gpu_1node_allreduce_kalavai-docker.txt", "geforce-gen4-8gpu",
         "GeForce RTX 4090 on PCIe, no NVLink, no P2P (NCCL's SHM transport), buses 0x1a and "
         "0x1b (one switch); NCCL 2.19 (its container, pytorch:24.01; anomalously slow runs)",
         nccl="2.19"),
    Case("rtx4090-pcie_2gpu_1node_allreduce_kalavai-k8s.txt", "geforce-gen4-2socket",
         "as above, buses 0x1a and 0xb2 (different PCIe roots: one GPU per socket)",
         nccl="2.19"),
    Case("rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker.txt", "geforce-gen4-8gpu",
         "as above, buses 0x1a, 0x1b, 0x3d, 0x3e (two switches)", nccl="2.19"),
    Case("v100-sxm2-16gb_4gpu_1node_allreduce-c0_unresolved-gdr116.txt", "dgx1-v100",
         "4 V100-SXM2, a DGX-1's first 4 (NVLink apparently unused: 7 GB/s)"),
    Case("v100-sxm2-16gb_8gpu_1node_dgx1-hybrid-cube-mesh_allreduce_unresolved-blog-2019.txt",
         "dgx1-v100", "8 V100-SXM2 in the DGX-1 hybrid cube-mesh"),
    Case("v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_5collectives_unresolved-fork-readme.txt",
         "dgx2-v100", "12 of the 16 V100 of a DGX-2 (its first 12 ranks)",
         machine="DGX-2 V100 (12 GPUs)"),
    # -- logs added for issue 14 (Volta, Ampere, PCIe cards); presets from the headers only --
    Case("a100-sxm4-40gb_8gpu_1node_nvswitch_allreduce_ocitutorials.txt", "oci-bm-gpu4.8",
         "OCI BM.GPU4.8 (the tutorial's shape): 8 A100-SXM4-40GB on NVSwitch, one node"),
    Case("a100-sxm4-40gb_16gpu_2node_aws-p4d-efa_allreduce_aws-efa-eks.txt", "aws-p4dx2",
         "2 AWS p4d.24xlarge: 8 A100-SXM4-40GB on NVSwitch, 4 x 100 Gb/s EFA with GPUDirect "
         "RDMA per node, each NIC shared by two GPUs (AWS's topology file)"),
    Case("v100-sxm2-32gb_2gpu_2node_aws-p3dn-efa_allreduce_eks-efa-examples-np2.txt",
         "aws-p3dnx2", "2 AWS p3dn.24xlarge (8 V100-SXM2-32GB each), one GPU used per node, "
         "EFA (speed not stated): the p3dn's one 100 Gb/s EFA NIC, no GPUDirect RDMA"),
    Case("v100-sxm2-32gb_2gpu_2node_aws-p3dn-efa_allreduce_eks-efa-examples-readme.txt",
         "aws-p3dnx2", "another run of the same 2 x 1 p3dn job"),
    Case("v100-sxm2-32gb_16gpu_2node_aws-p3dn-efa_allreduce_eks-efa-examples.txt",
         "aws-p3dnx2", "2 AWS p3dn.24xlarge, all 8 V100-SXM2-32GB of each, EFA; as above"),
    Case("v100-sxm2-32gb_64gpu_8node_aws-p3dn-efa_allreduce_eks-efa-examples.txt",
         "aws-p3dnx8", "8 AWS p3dn.24xlarge, all 8 V100-SXM2-32GB of each, EFA; as above"),
    Case("t4_2gpu_2node_aws-g4dn-efa_allreduce_eks-blueprints.txt", "aws-g4dn-metalx2",
         "2 AWS g4dn.metal, one T4 (PCIe Gen3, no NVLink) used on each, the instance's one "
         "100 Gb/s EFA NIC, no GPUDirect RDMA"),
    Case("l40s_2gpu_2node_socket-sriov_allreduce_nvidia-tools-image.txt", "r760xa-l40sx2",
         "2 Dell R760xa, one L40S (PCIe, no NVLink) used on each, NCCL sockets over an SR-IOV "
         "VF (NCCL_IB_DISABLE=1; the socket transport is not modelled: the preset's RoCE NIC)"),
    Case("l40s_4gpu_2node_roce-sriov_allreduce_nvidia-tools-image.txt", "r760xa-l40sx2",
         "the same 2 R760xa, two L40S used on each, NCCL's IB transport over the SR-IOV "
         "network (mlx5_2, mlx5_8), 200 Gb/s class per the README's perftest"),
    Case("a100-pcie-40gb_2gpu_2node_ib-hdr-gdr_allreduce_nccl-tests-issue293.txt",
         "r7525-a100-pciex2", "2 Dell R7525, one A100 40GB PCIe and one HDR InfiniBand NIC "
         "each (GPU and NIC on different sockets), GPUDirect RDMA forced"),
    Case("a100-pcie-40gb_2gpu_2node_ib-hdr-nps4_allreduce_nccl-tests-issue293.txt",
         "r7525-a100-pciex2", "the same 2 R7525 after the BIOS change (NPS=4), no GPUDirect "
         "RDMA"),
    Case("rtx4090-pcie_2gpu_1node_4collectives_unresolved-comprehensive.txt",
         "geforce-gen4-2socket", "2 GeForce RTX 4090 on PCIe in one box, no NVLink, NCCL's "
         "SHM transport between them (no P2P), buses 0x01 and 0x81 with different CPU "
         "affinities (one GPU per socket)", machine="2 x RTX 4090 (PCIe, SHM)"),
    Case("v100-pcie-32gb_2gpu_2node_allreduce_unresolved-nccl-notes.txt", "pcie-v100x2",
         "2 nodes, one V100 PCIe (no NVLink) used on each, interconnect not stated: one "
         "100 Gb/s NIC per node, the preset's stated assumption"),
    # -- issue 14: Hopper and Blackwell logs found later (the header of each file says why);
    # each names the preset of its machine.
    Case("gb200_72gpu_18node_nvl72-mnnvl_allreduce_coreweave-f443305.txt", "gb200-nvl72",
         "one GB200 NVL72 rack: 72 GPUs (18 nodes x 4) in one multi-node NVLink domain; NCCL "
         "2.26.2 (the README)", nccl="2.26.2"),
    Case("gb200_128gpu-inferred_2rack_nvl72-ib_allreduce_coreweave-f443305.txt",
         "gb200-nvl72x2", "two GB200 NVL72 racks on InfiniBand (Quantum-X800), 128 ranks from "
         "busbw/algbw; NCCL 2.26.2 (the README)", nccl="2.26.2"),
    Case("gb200_1440gpu_360node_20rack-nvl72-ib_allreduce_coreweave-f443305.txt",
         "gb200-nvl72x20", "20 GB200 NVL72 racks (1440 GPUs, 360 nodes x 4) on InfiniBand "
         "(Quantum-X800); NCCL 2.26.2 (the README)", nccl="2.26.2"),
    Case("gh200_8gpu_2node_alps-slingshot-ofi_allreduce_cscs-docs-image-nccl-tests.txt",
         "alps-gh200x2", "2 Alps GH200 nodes (4 GH200 each), HPE Slingshot through the AWS OFI "
         "NCCL plugin"),
    Case("gh200_8gpu_2node_alps-no-ofi-plugin_allreduce_cscs-docs-image-nccl-tests.txt",
         "alps-gh200x2", "the same 2 Alps GH200 nodes without the OFI plugin (NCCL's fallback "
         "transport not stated)"),
    Case("gh200_8gpu_2node_alps-santis-slingshot-cxi_allreduce_cscs-nccl-tests-cxi-readme.txt",
         "alps-gh200x2", "2 Alps (santis) GH200 nodes (4 GH200 each), HPE Slingshot (CXI)"),
    Case("gh200_2gpu_2node_alps-slingshot_allreduce_cscs-docs-sarus-suite.txt", "alps-gh200x2",
         "2 Alps GH200 nodes, one GPU each, HPE Slingshot"),
    Case("gh200_2gpu_2node_cray-ex-slingshot11_allreduce-wrong_nccl-tests-issue369.txt",
         "alps-gh200x2", "2 Cray EX GH200 nodes, one GPU each, Slingshot 11 (the Alps shape)"),
    Case("gh200_8gpu_2node_olivia-slingshot_allreduce-int8_nris-docs-apptainer.txt",
         "alps-gh200x2", "2 Olivia GH200 nodes (4 GH200 each), HPE Slingshot (the Alps shape)"),
    Case("h200_16gpu_2node_spectrum-x-roce_allreduce-g8_unresolved-openshift.txt", "hgx-h200x2",
         "2 x 8 H200, Spectrum-X RoCE, a 400GbE SuperNIC per rail (8 rails)"),
    Case("h200_16gpu_2node_nebius-k8s_allreduce_unresolved-runai-nebius.txt", "hgx-h200x2",
         "2 x 8 H200 (Nebius); fabric not stated"),
    Case("h200_2gpu_2node_gcp-a3ultra-gib-rdma_allgather_dranet.txt", "gcp-a3-ultrax2",
         "2 GCP A3 Ultra VMs (H200, RDMA through gIB), one GPU each"),
    Case("b200_16gpu_2node_gcp-a4-gib-rdma_allgather_dranet.txt", "gcp-a4x2",
         "2 GCP A4 VMs (8 B200 each, 8 RDMA NICs through gIB)"),
    Case("gb200_128gpu_32node_2rack-oci-gb200-v3_allreduce_oci-hpc-oke.txt", "gb200-nvl72x2",
         "32 OCI BM.GPU.GB200-v3.4 nodes (4 GB200 each) in two racks: multi-node NVLink per "
         "rack, RDMA between"),
    Case("h100-nvl_4gpu_2node_slingshot200_allreduce-bad_nccl-issue2441.txt",
         "pcie-gen5-h100nvl-slingshotx2", "2 nodes x 2 H100 NVL (PCIe cards; NVLink bridges not "
         "stated, so the PCIe preset without bridges), Slingshot-200; NCCL at the commit the "
         "issue bisects"),
    Case("h100-nvl_4gpu_2node_slingshot200_allreduce-good_nccl-issue2441.txt",
         "pcie-gen5-h100nvl-slingshotx2", "the same 2 nodes, NCCL before that commit"),
    Case("h100-nvl_4gpu_2node_slingshot200_allreduce-ldoms_nccl-issue2441.txt",
         "pcie-gen5-h100nvl-slingshotx2", "the same 2 nodes and build as '-bad', srun "
         "--cpu-bind=ldoms"),
    Case("h100-sxm_16gpu_2node_ib-ndr-8nic_allreduce_nccl-tests-issue309-xe9680.txt",
         "dgx-h100x2", "2 Dell XE9680 (HGX H100, 8 GPUs), 8 x 400 Gb/s CX-7 InfiniBand each"),
    Case("h100-sxm_32gpu_4node_vmware-ib-8nic_allreduce_nccl-tests-issue309-vm.txt",
         "dgx-h100x4", "4 VMs of 8 H100 with 8 CX-7 400 Gb/s IB NICs (\"32 GPU-NIC pairs\")"),
    Case("h100-sxm_64gpu_8node_ib-400g_allreduce_nccl-tests-issue309-gj.txt", "dgx-h100x8",
         "8 nodes x 8 H100 SXM on 400 Gb/s InfiniBand"),
    Case("h100-sxm_16gpu_2node_ib-400g_allreduce_nccl-tests-issue309-gj.txt", "dgx-h100x2",
         "2 of those nodes"),
    Case("h100-sxm_32gpu_4node_ib-400g_allreduce_nccl-tests-issue309-gj.txt", "dgx-h100x4",
         "4 of those nodes"),
    Case("h100-sxm_64gpu_8node_ib-400g_allreduce-minctas24_nccl-tests-issue309-gj.txt",
         "dgx-h100x8", "the 8 nodes with NCCL_MIN_CTAS=24 and 2 QPs per connection (not modelled)"),
    Case("h100-sxm_16gpu_2node_ib-400g_allreduce-ring-minctas24_nccl-tests-issue309-gj.txt",
         "dgx-h100x2", "2 of those nodes with NCCL_ALGO=RING (predicted with the ring forced too), "
         "NCCL_MIN_CTAS=24", algorithm="ring"),
    Case("h100-sxm_16gpu_2node_ib-8nic-doca_allreduce_nccl-tests-issue319.txt", "dgx-h100x2",
         "2 Supermicro HGX H100 (8 GPUs), 8 x 400 Gb/s CX-7 InfiniBand each (DOCA host stack)"),
    Case("h100-sxm_16gpu_2node_ib-8nic-doca_allreduce-ring-info_nccl-tests-issue319.txt",
         "dgx-h100x2", "the same 2 nodes with NCCL_ALGO=RING (predicted with the ring forced too)",
         algorithm="ring"),
    Case("h200_16gpu_2node_gcp-a3ultra-rdma_allgather-skypilot_skypilot-examples.txt",
         "gcp-a3-ultrax2", "2 GCP a3-ultragpu-8g (8 H200 each), GPUDirect-RDMA"),
    Case("h200_16gpu_2node_gcp-gib-rdma_allgather-gcp-pods_skypilot-examples.txt",
         "gcp-a3-ultrax2", "2 x 8 H200 pods of GCP's GPUDirect-RDMA test (gIB)"),
    Case("h200_16gpu_2node_oci_allreduce_unresolved-oci-hpc-guide.txt", "hgx-h200x2",
         "2 x 8 H200 in an OCI cluster; fabric not stated"),
    Case("a100-sxm4-40gb_16gpu_2node_oci-roce_allreduce_oci-hpc-oke.txt", "oci-bm-gpu4.8x2",
         "2 x 8 A100-SXM4-40GB on OCI's RoCE cluster network: the A100 40GB shape is BM.GPU4.8 "
         "(16 x 100 Gb/s RoCE ports per node)"),
    Case("b200_16gpu_2node_gcp-a4-gib-rdma_allgather_gcp-docs-vms.txt", "gcp-a4x2",
         "2 GCP A4 VMs (8 B200 each), GPUDirect RDMA over RoCE (gIB); NCCL 2.25.1 (printed)"),
    Case("b200_16gpu_2node_gcp-a4-gib-rdma_allgather_gcp-docs-gke.txt", "gcp-a4x2",
         "2 GCP A4 GKE nodes (8 B200 each), 8 RDMA NICs (gIB)"),
    Case("h200_16gpu_2node_gcp-a3ultra-gib-rdma_allgather_gcp-docs-gke.txt", "gcp-a3-ultrax2",
         "2 GCP A3 Ultra GKE nodes (8 H200 each), 8 RDMA NICs (gIB)"),
    # -- issue 14: machines with several collectives in one session (the cross mode); the
    # preset from each header only, as above.
    Case("rtx2080ti-pcie_2gpu_1node_pcie3-no-p2p_4collectives_unresolved-autodl-blog.txt",
         "geforce-gen3-2gpu", "2 GeForce RTX 2080 Ti on one PCIe Gen3 switch, no NVLink, P2P not "
         "supported (NCCL's SHM transport)", machine="2 x RTX 2080 Ti (PCIe Gen3, no P2P)"),
    Case("gtx1080-pcie_2gpu_1node_macos_5collectives_nccl-osx-readme.txt", "pcie-gen3-2gpu",
         "2 GeForce GTX 1080 (PCIe Gen3 x16) in a Mac, no NVLink, a macOS port of NCCL 2.5.7; "
         "P2P exposed (its README)", nccl="2.5.7", machine="2 x GTX 1080 (macOS NCCL port)"),
    Case("a100-sxm4-40gb_8gpu_1node_nvswitch_5collectives_superbench-fixture.txt", "dgx-a100",
         "8 A100-SXM4-40GB in one node: an HGX/DGX A100 board (NVSwitch)",
         machine="8 x A100-SXM4-40GB (superbench fixture)"),
    Case("b200_8gpu_1node_hgx-nvswitch_3collectives_unresolved-vultr-poc.txt", "hgx-b200",
         "one HGX B200 node (8 B200, NVLink5/NVSwitch)", machine="HGX B200 x1 (Vultr POC)"),
    Case("b200_16gpu_2node_hgx-ib-ndr_3collectives_unresolved-vultr-poc.txt", "hgx-b200x2",
         "2 HGX B200 nodes, 8 x 400 Gb/s NDR InfiniBand each", machine="HGX B200 x2 (Vultr POC)"),
    *(Case(f"h100-sxm_4gpu_1node_nvswitch-g4_{name}_waynehacking8-ncb.txt", "dgx-h100",
           "4 of the 8 H100 SXM of an NVSwitch box, one process driving them (-g 4)",
           machine="4 of 8 H100 SXM (-g 4, waynehacking8)")
      for name in ("allreduce", "allgather", "reducescatter")),
)
#: Logs whose runs are already counted through another file (never counted twice).
DUPLICATES = {
    "v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_allgather_unresolved-fork-readme.txt":
        "run 1 of the 5-collective DGX-2 log",
    "v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_reducescatter_unresolved-fork-readme.txt":
        "run 5 of the 5-collective DGX-2 log",
}

#: Hardware families, by the GPU names that belong to them (matched case-insensitively, first
#: family first): PCIe cards of any architecture form one family (no NVLink/NVSwitch fabric),
#: the SXM parts one per architecture.
FAMILIES = (
    ("PCIe", ("PCIe", "GeForce", "RTX", "GTX", "L40", "L40S", "L4", "A10", "A10G", "A40", "T4",
              "H100 NVL", "H200 NVL")),
    ("Volta", ("V100",)),
    ("Ampere", ("A100", "A800", "A30")),
    ("Hopper", ("H100", "H800", "H200", "H20", "GH200")),
    ("Blackwell", ("B200", "B100", "GB200")),
)
_DEVICE = re.compile(r"Rank\s+\d+\s.*device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")
_HARDWARE = re.compile(r"^#\s*HARDWARE:\s*(.*)$")


def family_of(text: str) -> str:
    """The log's hardware family: from the GPU name of its first device line, else from its
    provenance header's ``HARDWARE:`` line; "other" when neither names a known GPU."""
    names = [m.group(1) for m in map(_DEVICE.search, text.splitlines()) if m]
    names += [m.group(1) for m in map(_HARDWARE.match, text.splitlines()) if m]
    for name in names:
        for family, gpus in FAMILIES:
            if any(re.search(rf"\b{re.escape(gpu)}\b", name, re.IGNORECASE) for gpu in gpus):
                return family
    return "other"


@dataclass(frozen=True)
class Result:
    """One run of one log, predicted on its preset."""

    label: str
    case: Case
    preset: str
    family: str
    log: NcclTestsLog
    report: ValidationReport
    nodes: int  # hosts the run spanned: its device lines, else the preset's first ranks


def _thin(rows: list[Measurement], keep: int) -> list[Measurement]:
    """``keep`` sizes spread over the run (the --fast mode)."""
    sizes = sorted({r.nbytes for r in rows})
    if len(sizes) <= keep:
        return rows
    step = (len(sizes) - 1) / (keep - 1)
    chosen = [(n, n) for n in sorted({sizes[round(i * step)] for i in range(keep)})]
    return filter_rows(rows, sizes=chosen)


def run_cases(fast: bool, cases: Sequence[Case] = CASES) -> list[Result]:
    """Every run of every case, predicted (uncalibrated) on its preset."""
    results = []
    for case in cases:
        start = time.perf_counter()
        text = read_text(LOGS / case.log)
        runs = parse_nccl_tests_runs(text, case.log)
        preset = case.preset
        for log in runs:
            rows = log.measurements()
            rows = _thin(rows, 4) if fast else rows
            label = case.log.removesuffix(".txt")
            if len(runs) > 1:
                label += f" [{log.collective.value}]"
            # as the log ran: its ranks on their hosts, its nGpus GPUs per host thread (-g),
            # its NCCL release and the protocol its NCCL_PROTO restricted it to
            report = validate(rows, preset, algorithm=case.algorithm, engine="auto",
                              source=case.log, gpus_per_thread=log.gpus_per_thread,
                              nccl_version=log.nccl_version or case.nccl,
                              protocol=log.protocol, hosts=log.host_indices())
            hosts = (log.host_indices()
                     or load_topology(preset).with_ranks(log.ranks).rank_hosts() or (0,))
            results.append(Result(label, case, preset, family_of(text), log, report,
                                  len(set(hosts))))
        print(f"{case.log}: {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return results


#: The --quick mode's logs: one per family, the RTX 4090 one with four collectives (the
#: cross-collective table), the B200 one across two nodes.
QUICK = (
    "rtx4090-pcie_2gpu_1node_4collectives_unresolved-comprehensive",
    "v100-sxm2-16gb_4gpu_1node_allreduce-c0_unresolved-gdr116",
    "a100-sxm4-40gb_8gpu_1node_allreduce_unresolved-test-fixture",
    "h100-sxm_8gpu_1node_allreduce_unresolved-single-node-readme",
    "b200_16gpu_2node_gcp-a4-gib-rdma_allgather_dranet",
)


def select_cases(texts: Sequence[str]) -> tuple[Case, ...]:
    """The cases whose log file name contains one of ``texts`` (every case without any)."""
    if not texts:
        return CASES
    return tuple(case for case in CASES if any(text in case.log for text in texts))


def write_rows(results: Sequence[Result], path: Path) -> None:
    """Every predicted row of ``results`` as CSV: run, family, preset, then the row's
    ``--json`` columns."""
    rows = [{"run": res.label, "family": res.family, "preset": res.preset, **row.to_dict()}
            for res in results for row in res.report.rows]
    with path.open("w", newline="", encoding="utf-8") as out:
        if rows:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


# -- statistics --------------------------------------------------------------------------------
def _band(rows: Sequence[ValidationRow], large: bool) -> list[float]:
    return [abs(r.error_pct) for r in rows if (r.nbytes >= SPLIT) == large]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def log_table(results: list[Result]) -> list[list[str]]:
    """Per log: median and worst |error| per band."""
    table = [["log", "family", "preset", "collective", "ranks", "rows",
              "< 1 MiB median %", "worst %", ">= 1 MiB median %", "worst %"]]
    for res in results:
        small, large = _band(res.report.rows, False), _band(res.report.rows, True)
        table.append([res.label, res.family, res.preset, res.log.collective.value,
                      str(res.log.ranks), str(len(res.report.rows)),
                      _pct(_median(small)), _pct(max(small, default=None)),
                      _pct(_median(large)), _pct(max(large, default=None))])
    return table


def _worst_log(results: list[Result], large: bool) -> str:
    scored = [(_median(_band(r.report.rows, large)), r.label) for r in results]
    known = [(m, label) for m, label in scored if m is not None]
    if not known:
        return "–"
    value, label = max(known)
    return f"{label} ({value:.1f})"


def family_table(results: list[Result], families: Sequence[str]) -> list[list[str]]:
    """Per family and overall: the median over all rows per band, and the worst log."""
    table = [["family", "logs", "rows", "< 1 MiB median %", "worst log (its median %)",
              ">= 1 MiB median %", "worst log (its median %)"]]
    for family, members in by_family(results, families):
        rows = [row for r in members for row in r.report.rows]
        table.append([family, str(len(members)), str(len(rows)),
                      _pct(_median(_band(rows, False))), _worst_log(members, False),
                      _pct(_median(_band(rows, True))), _worst_log(members, True)])
    return table


def model_inputs(res: Result) -> tuple[object, ...]:
    """What the model is told of a run: two runs that agree here get the same predictions."""
    return (res.preset, res.log.collective.value, res.log.ranks, res.log.host_indices(),
            res.log.gpus_per_thread, res.log.nccl_version or res.case.nccl, res.case.algorithm)


# -- the cross-collective mode ---------------------------------------------------------------
def cross_table(results: list[Result], fast: bool) -> list[list[str]]:
    """Per machine with several collectives: calibrate on one, predict the others."""
    table = [["machine", "preset", "fitted on", "predicted", "rows",
              "< 1 MiB median %", ">= 1 MiB median %", "all %"]]
    machines: dict[str, list[Result]] = {}
    for res in results:
        if res.case.machine is not None:
            machines.setdefault(res.case.machine, []).append(res)
    for machine, members in machines.items():
        collectives = {r.log.collective for r in members}
        if len(collectives) < 2:
            continue
        fit_on = min(collectives, key=lambda c: (c.value != "all_reduce", c.value))
        fit_rows = [row for r in members if r.log.collective is fit_on
                    for row in r.log.measurements()]
        check = [row for r in members if r.log.collective is not fit_on
                 for row in r.log.measurements()]
        check = _thin(check, 8) if fast else check
        fit_log = next(r.log for r in members if r.log.collective is fit_on)
        # both as the logs ran (their nGpus GPUs per host thread), as the uncalibrated mode
        gpus, version, protocol = how_driven(
            [r.log for r in members], (r.log.nccl_version or r.case.nccl for r in members))
        engine = "analytic" if fast else "auto"
        fitted = calibrate(_thin(fit_rows, 6) if fast else fit_rows, members[0].preset,
                           hosts=fit_log.host_indices(), placement="log", algorithm="nccl",
                           engine=engine, source=machine, gpus_per_thread=fit_log.gpus_per_thread,
                           nccl_version=version, protocol=protocol)
        hosts = {r.log.host_indices() for r in members if r.log.collective is not fit_on}
        report = validate(check, fitted.spec, algorithm="nccl", engine=engine,
                          gpus_per_thread=gpus,
                          nccl_version=version, protocol=protocol,
                          hosts=hosts.pop() if len(hosts) == 1 else None)
        small, large = _band(report.rows, False), _band(report.rows, True)
        table.append([machine, members[0].preset, fit_on.value,
                      ", ".join(sorted(c.value for c in collectives - {fit_on})),
                      str(len(report.rows)), _pct(_median(small)), _pct(_median(large)),
                      _pct(report.median_abs_error_pct)])
    return table


# -- output -----------------------------------------------------------------------------------
def text_table(table: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(table: list[list[str]]) -> str:
    def cells(row: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"

    return "\n".join([cells(table[0]), "|" + "---|" * len(table[0]),
                      *(cells(row) for row in table[1:])])


def _slug(family: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", family.lower()).strip("-")


def write_plots(results: list[Result]) -> list[tuple[str, Path]]:
    """One measured-vs-predicted plot per family (a panel per log run)."""
    IMG.mkdir(parents=True, exist_ok=True)
    written = []
    for family, _ in (*FAMILIES, ("other", ())):
        members = [r for r in results if r.family == family]
        if not members:
            continue
        path = IMG / f"validation-family-{_slug(family)}.png"
        panels = [(f"{r.label}\non {r.preset}", list(r.report.rows)) for r in members]
        save_labelled_plot(panels, path, title=f"{family}: measured (dots) vs predicted "
                           "(line), uncalibrated presets")
        written.append((family, path))
    return written


def mapping_table(results: list[Result]) -> list[list[str]]:
    """Per log: its preset, the algorithm, the NCCL release predicted with, and why."""
    table = [["log", "preset", "algorithm", "NCCL", "why"]]
    for case in CASES:
        logs = [r.log for r in results if r.case is case]
        printed = next((log.nccl_version for log in logs if log.nccl_version), None)
        release = (f"{printed} (printed)" if printed else case.nccl or
                   f"{NcclConfig.of(load_topology(case.preset)).version} (preset)")
        table.append([case.log.removesuffix(".txt"), f"`{case.preset}`", case.algorithm,
                      release, case.why])
    for log, why in DUPLICATES.items():
        table.append([log.removesuffix(".txt"), "not counted", "–", "–", why])
    return table


def write_doc(tables: dict[str, str], plots: list[tuple[str, Path]]) -> None:
    images = [f"![{family}](img/{path.name})" for family, path in plots]
    parts = [BEGIN, "", "**Per hardware family** (rows pooled; the worst log by its own median):",
             "", tables["family"], "",
             "**Which way the predictions err** (signed error: negative is too fast):", "",
             tables["bias"], "", "**Where by size** (signed median error %, rows in brackets; "
             "one node, or ranks across several):", "", tables["sizes"], "",
             "**How far the runs disagree among themselves** (no prediction; "
             "[below](#the-floor-under-any-models-error)):", "", tables["spread"], "",
             tables["groups"], "", "**Per log:**", "", tables["log"], ""]
    if "cross" in tables:
        parts += ["**Calibrated on one collective of a machine, the others predicted:**", "",
                  tables["cross"], ""]
    parts += ["**Which preset for which log:**", "", tables["mapping"], "",
              "**Measured vs predicted, per family:**", "", *images, "", END]
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC}: markers {BEGIN} / {END} not found")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + "\n".join(parts) + tail, encoding="utf-8")
    print(f"rewrote the tables of {DOC.relative_to(ROOT)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true",
                        help="four sizes per run, no plots, no docs (the structure, for tests)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--skip-cross", action="store_true",
                        help="skip the calibrate-on-one-collective mode")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="only the logs whose file name contains TEXT (repeatable); "
                             "writes no docs")
    parser.add_argument("--rows", type=Path, metavar="FILE.csv",
                        help="write every predicted row to FILE.csv")
    args = parse_args(parser, {"fast": True}, "--fast on a log of each family (QUICK)", argv)
    if args.quick and not args.only:
        args.only = list(QUICK)
    cases = select_cases(args.only)
    if not cases:
        print(f"validate_presets: error: --only {' '.join(map(repr, args.only))} matches no "
              f"log in {LOGS.relative_to(ROOT)}", file=sys.stderr)
        return 2
    results = run_cases(args.fast, cases)
    if args.rows is not None:
        write_rows(results, args.rows)
    families = [name for name, _ in FAMILIES] + ["other"]
    tables = {"log": log_table(results), "family": family_table(results, families),
              "bias": bias_table(results, families), "sizes": size_table(results, families),
              "spread": spread_table(results, families, model_inputs),
              "groups": group_table(results, model_inputs)}
    if not args.skip_cross:
        tables["cross"] = cross_table(results, args.fast)
    print("uncalibrated presets, |time error| per log")
    print(text_table(tables["log"]))
    print("\nper hardware family (rows pooled) and overall")
    print(text_table(tables["family"]))
    print("\nwhich way the predictions err (signed error: negative is too fast)")
    print(text_table(tables["bias"]))
    print("\nsigned median error % (rows) by size, on one node and across nodes")
    print(text_table(tables["sizes"]))
    print("\nhow far the runs disagree among themselves (no prediction)")
    print(text_table(tables["spread"]))
    if "cross" in tables:
        print("\ncalibrated on one collective of a machine, the other collectives predicted")
        print(text_table(tables["cross"]))
    if not (args.fast or args.no_write or args.only):
        plots = write_plots(results)
        markdown = {k: markdown_table(v) for k, v in tables.items()}
        markdown["mapping"] = markdown_table(mapping_table(results))
        write_doc(markdown, plots)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
