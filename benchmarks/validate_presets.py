"""Presets vs real nccl-tests logs: regenerate the tables and plots of docs/validation.md.

Run: ``.venv/bin/python benchmarks/validate_presets.py [--skip-calibration]``

For every log in ``tests/data/nccl-tests`` (copies of the shared logs, provenance included) it
runs what ``commsim validate nccl-tests LOG --topology PRESET`` runs (NCCL's algorithms and
protocols, ``--algorithm nccl``; ``auto`` engine), writes the plot to
``docs/img/validation-<log>.png``, and, unless skipped, calibrates the preset's link classes
on the even-numbered sizes and checks them on the odd-numbered ones (``calibrate --sizes``,
then ``validate --sizes``). The tables between the ``<!-- presets:begin -->`` and
``<!-- presets:end -->`` markers of docs/validation.md are rewritten; nothing else is.
Deterministic: the same code gives the same tables and PNGs.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from commsim.units import format_size
from commsim.validation.calibrate import calibrate
from commsim.validation.measurements import filter_rows
from commsim.validation.nccl_tests import read_nccl_tests
from commsim.validation.plot import save_plot
from commsim.validation.validate import ValidationReport, validate

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "nccl-tests"
DOC = ROOT / "docs" / "validation.md"
IMG = ROOT / "docs" / "img"
BEGIN, END = "<!-- presets:begin -->", "<!-- presets:end -->"


@dataclass(frozen=True)
class Case:
    """A log, the preset it is compared with, and why that preset."""

    log: str
    preset: str
    why: str


CASES = (
    Case("a100-sxm4-40gb_16gpu_2node_oci-roce_allreduce_ocitutorials.txt", "dgx-a100x2",
         "OCI BM.GPU4.8 = 8 A100 on NVSwitch with 200 Gb/s of RDMA per GPU, as a DGX A100"),
    Case("a100-sxm4-80gb_128gpu_16node_ib_allreduce_coreweave-22df9b7.txt", "dgx-a100x16",
         "16 HGX A100 nodes on InfiniBand"),
    Case("a100-sxm4-80gb_32gpu-inferred_multinode_ib-sharp_allreduce_coreweave-703d6eb.txt",
         "dgx-a100x4+sharp",
         "4 HGX A100 nodes (32 ranks from busbw/algbw) on InfiniBand + SHARP"),
    Case("h100-sxm_16gpu_2node_alpha-test_allreduce_unresolved-cnh.txt", "dgx-h100x2",
         "2 x 8 H100 SXM; fabric not stated"),
    Case("h100-sxm_16gpu_2node_gcp-a3mega-tcpxo_allgather_unresolved-slurm1790.txt",
         "gcp-a3-megax2", "2 GCP A3 Mega VMs (8 x 200 Gb/s GPUDirect-TCPXO each)"),
    Case("h100-sxm_16gpu_2node_gcp-a3mega-tcpxo_allreduce_lessizzmore.txt", "gcp-a3-megax2",
         "2 GCP A3 Mega VMs"),
    Case("h100-sxm_96gpu-inferred_multinode_ib-sharp-collnetchain_allreduce_coreweave-fb4787c.txt",
         "dgx-h100x12+sharp",
         "12 HGX H100 nodes (96 ranks from busbw/algbw), InfiniBand + SHARP (CollNet chain)"),
    Case("rtx4090-pcie_2gpu_1node_allreduce_kalavai-docker.txt", "pcie-gen4-8gpu",
         "PCIe-only GPUs; the closest preset (see the text: these runs are anomalous)"),
    Case("rtx4090-pcie_2gpu_1node_allreduce_kalavai-k8s.txt", "pcie-gen4-8gpu", "as above"),
    Case("rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker.txt", "pcie-gen4-8gpu", "as above"),
    Case("v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_allgather_unresolved-fork-readme.txt",
         "dgx2-v100", "12 of the 16 V100 of a DGX-2 (its first 12 ranks)"),
    Case("v100-sxm3-32gb_12gpu_1node_dgx2-nvswitch_reducescatter_unresolved-fork-readme.txt",
         "dgx2-v100", "as above"),
)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _human(nbytes: int) -> str:
    """``format_size`` when exact, else ~GiB/MiB/KiB (the DGX-2 logs' sizes are multiples of
    12 x 4 bytes)."""
    exact = format_size(nbytes)
    if not exact.endswith("B") or exact.endswith("iB") or nbytes < 1024:
        return exact
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"~{nbytes / scale:.0f}{unit}"
    return exact


def _stem(log: str) -> str:
    return log.removesuffix(".txt")


def _calibrated(case: Case, rows: list, hosts: tuple[int, ...] | None) -> ValidationReport:
    """Fit the preset's link classes on the even-numbered sizes, check on the odd ones."""
    sizes = sorted({r.nbytes for r in rows})
    fit = [(n, n) for n in sizes[0::2]]
    check = [(n, n) for n in sizes[1::2]]
    calibration = calibrate(
        filter_rows(rows, sizes=fit), case.preset, hosts=hosts, algorithm="nccl",
        source=case.log,
    )
    return validate(filter_rows(rows, sizes=check), calibration.spec, algorithm="nccl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-calibration", action="store_true")
    args = parser.parse_args(argv)
    IMG.mkdir(parents=True, exist_ok=True)
    summary = [
        "| log | collective, ranks | preset | sizes | before: plain ring, all % | before: "
        "plain tree, all % | NCCL model: median \\|error\\| % < 1 MiB | ≥ 1 MiB | all | "
        "calibrated on half, checked on the other half: all % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    sections: list[str] = []
    for case in CASES:
        start = time.perf_counter()
        log = read_nccl_tests(LOGS / case.log)
        rows = log.measurements()
        report = validate(rows, case.preset, algorithm="nccl", source=case.log)
        image = IMG / f"validation-{_stem(case.log)}.png"
        save_plot(report, image, title=f"{case.log} on {case.preset}")
        fitted = None if args.skip_calibration else _calibrated(case, rows, log.host_indices())
        plain = {
            name: validate(rows, case.preset, algorithm=name, protocol="none", source=case.log)
            for name in ("ring", "double_binary_tree")
            if name == "ring" or log.collective.value == "all_reduce"
        }
        tree = plain.get("double_binary_tree")
        sizes = f"{_human(min(r.nbytes for r in rows))}–{_human(max(r.nbytes for r in rows))}"
        summary.append(
            f"| [{_stem(case.log)}](#{_stem(case.log).lower()}) | {log.collective.value}, "
            f"{log.ranks} | `{case.preset}` | {sizes} | "
            f"{_pct(plain['ring'].median_abs_error_pct)} | "
            f"{_pct(tree.median_abs_error_pct) if tree else '–'} | "
            f"{_pct(report.median_abs_error_pct_below_1MiB)} | "
            f"{_pct(report.median_abs_error_pct_above_1MiB)} | "
            f"{_pct(report.median_abs_error_pct)} | "
            f"{'–' if fitted is None else _pct(fitted.median_abs_error_pct)} |"
        )
        engines = ", ".join(sorted({r.engine for r in report.rows}))
        lines = [
            f"#### {_stem(case.log)}",
            "",
            f"{case.why}. Inferred: {'; '.join(log.notes)}. Engine: {engines}.",
            "",
            "```",
            f"commsim validate nccl-tests tests/data/nccl-tests/{case.log} "
            f"--topology {case.preset} --plot {image.relative_to(ROOT)}",
            "```",
            "",
            "| | < 1 MiB | ≥ 1 MiB | all |",
            "|---|---|---|---|",
            *(
                f"| median \\|error\\| %, before: plain {name} (`--protocol none`) | "
                f"{_pct(r.median_abs_error_pct_below_1MiB)} | "
                f"{_pct(r.median_abs_error_pct_above_1MiB)} | {_pct(r.median_abs_error_pct)} |"
                for name, r in plain.items()
            ),
            f"| median \\|error\\| %, NCCL model (preset) | "
            f"{_pct(report.median_abs_error_pct_below_1MiB)} | "
            f"{_pct(report.median_abs_error_pct_above_1MiB)} | "
            f"{_pct(report.median_abs_error_pct)} |",
        ]
        if fitted is not None:
            lines.append(
                f"| median \\|error\\| %, calibrated (odd sizes) | "
                f"{_pct(fitted.median_abs_error_pct_below_1MiB)} | "
                f"{_pct(fitted.median_abs_error_pct_above_1MiB)} | "
                f"{_pct(fitted.median_abs_error_pct)} |"
            )
        largest = max(report.rows, key=lambda r: r.nbytes)
        lines += [
            "",
            f"Largest size {_human(largest.nbytes)}: measured "
            f"{largest.measured_busbw_Bps / 1e9:.1f} GB/s busbw, predicted "
            f"{largest.predicted_busbw_Bps / 1e9:.1f} GB/s ({largest.algorithm}), error "
            f"{largest.error_pct:+.1f}%.",
            "",
            f"![{case.log}](img/{image.name})",
            "",
        ]
        sections.append("\n".join(lines))
        print(f"{case.log}: {time.perf_counter() - start:.1f}s", file=sys.stderr)
    generated = "\n".join(
        [BEGIN, "", *summary, "", *sections, END]
    )
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC}: markers {BEGIN} / {END} not found")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + generated + tail, encoding="utf-8")
    print(f"rewrote the tables of {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
