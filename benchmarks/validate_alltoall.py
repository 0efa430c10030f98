"""The alltoall logs vs the presets of their machines, uncalibrated (issue 40's accuracy table).

Run: ``.venv/bin/python benchmarks/validate_alltoall.py [--no-write] [--quick]``

Each ``alltoall_perf`` log of ``tests/data/nccl-tests`` is predicted on the preset that matches
its hardware (:data:`CASES`: the preset, what the log states and what the preset assumes) as
``commsim validate nccl-tests LOG --topology PRESET`` predicts it: NCCL's model (the presets
carry an ``nccl:`` block; all-to-all is NCCL's grouped send/receive), engine ``auto``, the log's
ranks on its hosts, its ``-g`` GPUs per thread and its printed NCCL release; no parameter is
fitted to any log. Per log it prints the rows at 1 MiB and above, their median |time error|
(``|predicted - measured| / measured``) and signed median, the median over all rows, and the
busbw measured and predicted at the largest size. Without ``--no-write`` the table (markdown)
is written between the ``<!-- alltoall:begin -->`` / ``<!-- alltoall:end -->`` markers of
docs/validation.md. ``--quick`` runs two logs on four sizes each, for the test suite (its
figures mean nothing) and writes nothing. Deterministic: the same code and logs give the same
table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import parse_args, table
from validate_presets import _thin

from commsim.collectives import Collective
from commsim.topology.presets import TopologyRef
from commsim.validation.calibrate import calibrate
from commsim.validation.nccl_runs import parse_nccl_tests_runs
from commsim.validation.nccl_tests import read_nccl_tests, read_text
from commsim.validation.validate import ValidationReport, validate

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "nccl-tests"
DOC = ROOT / "docs" / "validation.md"
BEGIN, END = "<!-- alltoall:begin -->", "<!-- alltoall:end -->"
CAL_BEGIN, CAL_END = "<!-- alltoall-calibrated:begin -->", "<!-- alltoall-calibrated:end -->"
MIB = 1 << 20


@dataclass(frozen=True)
class Case:
    """An alltoall log, the preset of its machine, what the log states, what is assumed."""

    log: str
    preset: str
    states: str
    assumed: str
    #: A log of the same machine with an all_reduce run (the calibrated table), or None.
    all_reduce: str | None = None


#: What the GB300 NVL72 rows assume: the GB200 NVL72 preset, whose NVLink domain is GB300's
#: (fifth-generation NVLink, 1.8 TB/s per GPU, 130 TB/s per rack: Azure's ND GB300 v6 page,
#: MicrosoftDocs/azure-compute-docs .../nd-gb300-v6-series-summary.md, and the GB200 NVL72
#: datasheet the preset cites); their all-to-all stays inside the rack, so the NICs (GB300:
#: 800 Gb/s per GPU, the same page; GB200: 400) carry nothing.
GB300_ASSUMED = ("GB300 NVL72 has GB200's NVLink 5 (1.8 TB/s per GPU, 130 TB/s per "
                 "rack): the rack one NVLink domain at the preset's 738 GB/s per GPU "
                 "(0.82 x 900); no NIC on the path")

CASES = (
    Case("mi355x_8gpu_1node_xgmi_alltoall_alibaba-readme.txt", "mi355x-ainic",
         "8 MI355X (gfx950) on xGMI, one process (-g 8), rccl-tests",
         "xGMI full mesh, 1 link per pair at RCCL's 48 GB/s (topo.h); RCCL timed by NCCL's "
         "p2p model (arch hopper, 16 channels)"),
    Case("mi355x_16gpu_2node_ainic-roce_alltoall_alibaba-readme.txt", "mi355x-ainicx2",
         "2 x 8 MI355X, 8 AMD AI NICs (ionic) per node, RoCE, ~400 Gb/s per direction "
         "(ib_write_bw), PXN allowed, RCCL 2.27.7",
         "Pollara 400: 400 Gb/s x 0.92 per GPU; RCCL as NCCL (PXN relays over xGMI)"),
    Case("rtx6000d_16gpu_2node_cx8_alltoall_unresolved-6kd-report.txt", "rtx6000d-cx8x2",
         "2 x 8 RTX 6000D, PCIe (P2P to PHB, SHM off), 8 mlx5 HCAs per node, 1 NIC per GPU, "
         "NCCL 2.30.3",
         "NIC speed (not stated): 400 Gb/s per GPU (ConnectX-8, 2 GPUs each, RTX PRO Server "
         "design); PCIe Gen5 x16 at 44 GB/s; GPUs across sockets through the CPUs (NCCL: NICs)"),
    Case("h20-3e_4gpu_2node_vm-roce-bond_alltoall-truncated_nccl-tests-issue321.txt",
         "h20-vm2-rocex2",
         "2 VMs x 2 H20-3e, NVLink (NV18) in a VM, 2 bonded RoCE devices per VM, GDR, PXN "
         "allowed, NCCL 2.26.5; cut at 4 GiB",
         "bond speed (not stated): 2 x 200 Gb/s = 400 Gb/s per GPU (Tencent's dual-port "
         "NICs); the VM at line rate; NVSwitch port as dgx-h100"),
    Case("rtx2080ti-pcie_2gpu_1node_pcie3-no-p2p_alltoall_autodl-blog.txt",
         "geforce-gen3-2gpu",
         "2 RTX 2080 Ti under one PCIe Gen3 switch, no P2P (SHM)",
         "the existing preset (PCIe Gen3 at 11 GB/s, SHM through host memory; NCCL 2.3 "
         "tables)",
         all_reduce="rtx2080ti-pcie_2gpu_1node_pcie3-no-p2p_4collectives_unresolved-autodl-blog.txt"),
    *(Case(f"gb300_{name}_nvl72_alltoall_oci-quickstart.txt", "gb200-nvl72",
           f"{states}, NCCL 2.28.7; the guide kept only the 8 and 16 GiB rows", GB300_ASSUMED)
      for name, states in (
          ("4gpu_1node", "1 OCI BM.GPU.GB300.4 node, 4 GB300 on NVLink 5"),
          ("8gpu_2node", "2 GB300.4 nodes of one rack (8 GPUs), multi-node NVLink"),
          ("64gpu_16node", "16 GB300.4 nodes of one rack (64 GPUs), multi-node NVLink"))),
    Case("b200_8gpu_1node_hgx-nvswitch_alltoall_unresolved-vultr-poc.txt", "hgx-b200",
         "1 HGX B200 node, 8 B200 on NVLink5/NVSwitch; no preamble, NCCL not stated",
         "the existing preset (NVLink5 at 738 GB/s per GPU, 0.82 x line; NCCL 2.25)",
         all_reduce="b200_8gpu_1node_hgx-nvswitch_3collectives_unresolved-vultr-poc.txt"),
    Case("b200_16gpu_2node_hgx-ib-ndr_alltoall_unresolved-vultr-poc.txt", "hgx-b200x2",
         "2 HGX B200 nodes, 8 ConnectX-7 NDR HCAs per node (ib_write_bw 40-45 GB/s each); "
         "no preamble, NCCL not stated",
         "the existing preset (400 Gb/s x 0.92 per GPU, rail-aligned, PXN; ranks 8 per node "
         "in order; NCCL 2.25)",
         all_reduce="b200_16gpu_2node_hgx-ib-ndr_3collectives_unresolved-vultr-poc.txt"),
    Case("a100-sxm4-40gb_8gpu_1node_nvswitch_alltoall_superbench-fixture.txt", "dgx-a100",
         "8 A100-SXM4-40GB on one NVSwitch board, one process (-g 8); nccl-tests of 2020-21, "
         "NCCL not printed",
         "the existing preset (NVLink3 at NCCL's sm80 235 GB/s; NCCL 2.7)",
         all_reduce="a100-sxm4-40gb_8gpu_1node_nvswitch_5collectives_superbench-fixture.txt"),
)

#: The --quick mode's logs (the two fastest to predict).
QUICK = ("h20-3e", "rtx2080ti")


def run(case: Case, quick: bool, topology: TopologyRef | None = None,
        engine: str = "auto") -> ValidationReport:
    """``case``'s log predicted on its preset (or ``topology``), as ``commsim validate
    nccl-tests`` does."""
    log = read_nccl_tests(LOGS / case.log, partial=True)
    rows = log.measurements()
    rows = _thin(rows, 4) if quick else rows
    return validate(rows, case.preset if topology is None else topology, algorithm="nccl",
                    engine=engine, source=case.log, gpus_per_thread=log.gpus_per_thread,
                    nccl_version=log.nccl_version, protocol=log.protocol,
                    hosts=log.host_indices())


def run_calibrated(case: Case, quick: bool) -> tuple[ValidationReport, str]:
    """``case``'s log predicted on its preset calibrated (``commsim calibrate``) on the
    all_reduce run of ``case.all_reduce``, a log of the same machine, run as that log ran; and
    what the fit changed (its parameters, one line)."""
    assert case.all_reduce is not None
    runs = parse_nccl_tests_runs(read_text(LOGS / case.all_reduce), case.all_reduce)
    fit_log = next(r for r in runs if r.collective is Collective.ALL_REDUCE)
    rows = fit_log.measurements()
    fitted = calibrate(_thin(rows, 6) if quick else rows, case.preset,
                       hosts=fit_log.host_indices(), placement="log", algorithm="nccl",
                       engine="analytic" if quick else "auto", source=case.all_reduce,
                       gpus_per_thread=fit_log.gpus_per_thread,
                       nccl_version=fit_log.nccl_version, protocol=fit_log.protocol)
    report = run(case, quick, fitted.spec, "analytic" if quick else "auto")
    return report, _changed(fitted.parameters)


def _changed(parameters: dict[str, float]) -> str:
    """The fitted parameters: scales as factors (those that moved), times in µs, bandwidths
    in GB/s."""
    out = []
    for name, value in parameters.items():
        if name.endswith("_scale"):
            if abs(value - 1) > 5e-3:
                out.append(f"{name} x{value:.3g}")
        elif name.endswith("_Bps"):
            out.append(f"{name.removesuffix('_Bps')} {value / 1e9:.1f} GB/s")
        elif name.endswith("_s"):
            out.append(f"{name.removesuffix('_s')} {value * 1e6:.2f} µs")
        else:
            out.append(f"{name} {value:.3g}")
    return ", ".join(out) or "nothing"


def calibrated_rows(cases: Sequence[Case], reports: Mapping[Case, ValidationReport],
                    quick: bool) -> list[list[str]]:
    """Per log with an all_reduce run of its machine: the rows >= 1 MiB, their median |error|
    on the preset (``reports``: :func:`run`'s) and on the preset calibrated on that
    all_reduce."""
    out = [["log", "fitted on", "rows >= 1 MiB", "preset: median abs error >= 1 MiB %",
            "calibrated: median abs error >= 1 MiB %", "calibrated: signed %",
            "calibrated: all %", "fitted"]]
    for case in cases:
        if case.all_reduce is None:
            continue
        plain = [r for r in reports[case].rows if r.nbytes >= MIB]
        report, changed = run_calibrated(case, quick)
        large = [r for r in report.rows if r.nbytes >= MIB]
        out.append([case.log.removesuffix(".txt"), case.all_reduce.removesuffix(".txt")
                    + " [all_reduce]", str(len(large)),
                    _pct(_median([abs(r.error_pct) for r in plain])),
                    _pct(_median([abs(r.error_pct) for r in large])),
                    _pct(_median([r.error_pct for r in large]), signed=True),
                    _pct(_median([abs(r.error_pct) for r in report.rows])), changed])
        print(f"{case.log}: calibrated", file=sys.stderr)
    return out


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.1f}" if signed else f"{value:.1f}"


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def rows_of(cases: Sequence[Case],
            reports: Mapping[Case, ValidationReport]) -> list[list[str]]:
    """One row per log: its preset, the rows >= 1 MiB and their errors, all rows', busbw
    (``reports``: :func:`run`'s)."""
    out = [["log", "preset", "ranks", "rows >= 1 MiB", "median abs error >= 1 MiB %",
            "signed median >= 1 MiB %", "median abs error all %", "busbw largest meas / pred",
            "the log states", "assumed"]]
    for case in cases:
        report = reports[case]
        large = [r for r in report.rows if r.nbytes >= MIB]
        last = max(report.rows, key=lambda r: r.nbytes)
        out.append([case.log.removesuffix(".txt"), case.preset, str(last.ranks),
                    str(len(large)), _pct(_median([abs(r.error_pct) for r in large])),
                    _pct(_median([r.error_pct for r in large]), signed=True),
                    _pct(_median([abs(r.error_pct) for r in report.rows])),
                    f"{last.measured_busbw_Bps / 1e9:.1f} / {last.predicted_busbw_Bps / 1e9:.1f}",
                    case.states, case.assumed])
        print(f"{case.log}: done", file=sys.stderr)
    return out


def markdown(rows: list[list[str]]) -> str:
    def cells(row: list[str]) -> str:
        return "| " + " | ".join(row) + " |"

    return "\n".join([cells(rows[0]), cells(["---"] * len(rows[0])),
                      *(cells([f"`{r[0]}`", f"`{r[1]}`", *r[2:]]) for r in rows[1:])])


def write_doc(rows: list[list[str]], begin: str = BEGIN, end: str = END) -> None:
    text = DOC.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{DOC}: markers {begin} / {end} not found")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    DOC.write_text(head + "\n".join([begin, markdown(rows), end]) + tail, encoding="utf-8")
    print(f"rewrote the table at {begin} in {DOC.relative_to(ROOT)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only, write no docs")
    args = parse_args(parser, {"no_write": True}, "two logs on four sizes each", argv)
    cases = tuple(c for c in CASES if any(q in c.log for q in QUICK)) if args.quick else CASES
    reports = {case: run(case, args.quick) for case in cases}
    rows = rows_of(cases, reports)
    print(table([f"<{h}" for h in rows[0][:8]], [r[:8] for r in rows[1:]]))
    cal = calibrated_rows(cases, reports, args.quick)
    print(table([f"<{h}" for h in cal[0]], cal[1:]))
    if not args.no_write:
        write_doc(rows)
        write_doc(cal, CAL_BEGIN, CAL_END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
