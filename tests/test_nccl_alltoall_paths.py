"""NCCL's all-to-all (grouped send/receive) on direct GPU links and on PCIe, as the alltoall
presets found it: a send crosses only its pair's links, and PXN needs NVLink."""

from __future__ import annotations

import pytest

from commsim.api import simulate

MIB = 1 << 20


@pytest.mark.parametrize(("preset", "ranks", "pair_Bps"), [
    ("alps-gh200", 4, 6 * 20.6e9),  # NVLink4 mesh, 6 links per pair
    ("mi355x-ainic", 8, 48e9),      # xGMI mesh, 1 link per pair
])
def test_a_send_crosses_only_its_pairs_links(preset: str, ranks: int, pair_Bps: float) -> None:
    """On a mesh of direct links, each peer's block goes over the links of its pair, not over
    the GPU's whole NVLink (a ring's channels spread there; point-to-point does not)."""
    result = simulate("all_to_all", preset, 128 * MIB)
    assert result.algorithm == "all_pairs"
    floor = 128 * MIB / ranks / pair_Bps
    assert floor <= result.time_s <= floor * 1.1


@pytest.mark.parametrize(("preset", "algorithm"), [
    ("dgx-h100x2", "pxn"),        # NVSwitch inside a host: PXN relays over NVLink
    ("mi355x-ainicx2", "pxn"),    # xGMI (typed NVLink by RCCL)
    ("r760xa-l40sx2", "all_pairs"),  # PCIe only: no PXN (NCCL's paths.cc)
    ("rtx6000d-cx8x2", "all_pairs"),
])
def test_pxn_only_across_hosts_whose_gpus_share_nvlink(preset: str, algorithm: str) -> None:
    assert simulate("all_to_all", preset, 64 * MIB).algorithm == algorithm
