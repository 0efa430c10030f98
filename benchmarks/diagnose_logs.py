"""Diagnosis of the nccl-tests logs of tests/data: does ``--diagnose`` name what the docs found?

Run: ``.venv/bin/python benchmarks/diagnose_logs.py [--quick] [--only TEXT]``

Each log of :data:`LOGS_DIAGNOSED` is diagnosed (:func:`commsim.validation.diagnose.diagnose`)
on the preset ``benchmarks/validate_presets.py`` maps it to (its ``CASES``: preset, forced
algorithm, NCCL release), as it ran (its ranks on their hosts, ``nGpus``, ``NCCL_PROTO``),
engine ``auto``, every run of the log together, as ``commsim validate nccl-tests LOG
--placement log --diagnose`` does. What the docs say of each log (docs/validation.md: a cause
found by hand, "anomalous" without one, or clean) is written here beside it, never read from
the diagnosis. The table: the log, its preset, what the docs say, the diagnosis's top cause
(the best variant other than the preset as it is) with its median |error|, the healthy
preset's, the verdict (the rule of ``commsim.validation.diagnose``) and whether it matches:
``yes`` (the verdict is the documented cause, and then the second where the docs name two,
or healthy for a clean log, or not healthy for a log the docs call anomalous without naming
why), ``yes (2nd)`` (the documented cause is the
second cause the diagnosis finds, on the rows the first leaves), ``cause only`` (the top
cause is the documented one, but it does not explain the log clearly enough for the rule),
``no``.
``--quick`` diagnoses four one-host or fast logs on four sizes each: the table's structure,
for the test suite, not its figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from validate_presets import CASES, LOGS, Case, _thin, text_table

from commsim.validation.diagnose import Diagnosis, diagnose
from commsim.validation.nccl_runs import how_driven, parse_nccl_tests_runs
from commsim.validation.nccl_tests import read_text

#: The causes of a network "below its NICs' rate", the docs' finding where they name no
#: mechanism: NICs slower than their rate, fewer of them in use, or NCCL's socket transport
#: (TCP streams where RDMA would run at the NICs' rate).
NETWORK = ("slow-nics", "fewer-nics", "socket")


@dataclass(frozen=True)
class Diagnosed:
    """A log and what the docs say of it: the causes that name it (empty: clean, or
    anomalous without a named cause when ``anomalous``)."""

    log: str
    docs: str
    causes: tuple[str, ...] = ()
    anomalous: bool = False
    #: A second cause the docs name (on other rows), which ``yes`` asks the diagnosis to find
    #: after the first.
    also: tuple[str, ...] = ()


LOGS_DIAGNOSED = (
    # what the docs call anomalous, and why
    Diagnosed("a100-pcie-40gb_4gpu_1node_allreduce_unresolved-sm02", "no P2P (host memory)",
              ("p2p-off",)),
    Diagnosed("v100-sxm2-16gb_4gpu_1node_allreduce-c0_unresolved-gdr116",
              "NVLink unused (PCIe/SHM path)", ("nvlink-unused", "p2p-off")),
    Diagnosed("gh200_8gpu_2node_alps-no-ofi-plugin_allreduce_cscs-docs-image-nccl-tests",
              "no network plugin (socket)", ("socket",)),
    Diagnosed("l40s_2gpu_2node_socket-sriov_allreduce_nvidia-tools-image",
              "socket transport (NCCL_IB_DISABLE)", ("socket",)),
    Diagnosed("h100-sxm_16gpu_2node_ib-ndr_allreduce-srun_nccl-tests-issue290",
              "below its NICs' rate", NETWORK),
    Diagnosed("h100-sxm_16gpu_2node_ib-ndr_allreduce-ring_nccl-tests-issue290",
              "below its NICs' rate", NETWORK),
    # its floor, 60 us at -g 8, is 1.5x the 39 us of the dgx-06-07 pair run by the same
    # author with the same command (docs/validation.md: a slow host at the small sizes)
    Diagnosed("h100-sxm_16gpu_2node_alpha-test_allreduce_unresolved-cnh",
              "slow host (small), below its NICs' rate (large)", ("host-launch",),
              also=NETWORK),
    Diagnosed("h100-sxm_16gpu_2node_dgx-06-07_allreduce_unresolved-cnh",
              "below its NICs' rate", NETWORK),
    Diagnosed("a100-sxm4-40gb_16gpu_2node_oci-roce_allreduce_ocitutorials",
              "below its NICs' rate", NETWORK),
    Diagnosed("a100-sxm4-80gb_128gpu_16node_ib_allreduce_coreweave-22df9b7",
              "below its NICs' rate", NETWORK),
    Diagnosed("rtx4090-pcie_2gpu_1node_allreduce_kalavai-docker", "anomalous, why not stated",
              anomalous=True),
    Diagnosed("rtx4090-pcie_2gpu_1node_allreduce_kalavai-k8s", "anomalous, why not stated",
              anomalous=True),
    Diagnosed("rtx4090-pcie_4gpu_1node_allreduce_kalavai-docker", "anomalous, why not stated",
              anomalous=True),
    Diagnosed("rtx4090-pcie_2gpu_1node_4collectives_unresolved-comprehensive",
              "anomalous, why not stated", anomalous=True),
    # what the docs call clean (docs/validation.md: "where the cluster is clean")
    Diagnosed("h100-sxm_8gpu_1node_allreduce-nvls_nccl-tests-issue290", "clean"),
    Diagnosed("h100-sxm_8gpu_1node_allreduce_unresolved-single-node-readme", "clean"),
    Diagnosed("h100-sxm_16gpu_2node_ib-8nic_allreduce_unresolved-multinode-readme", "clean"),
    Diagnosed("h100-sxm_16gpu_2node_ib-ndr-8nic_allreduce_nccl-tests-issue309-xe9680", "clean"),
    Diagnosed("h100-sxm_16gpu_2node_ib-400g_allreduce_nccl-tests-issue309-gj", "clean"),
    Diagnosed("h100-sxm_16gpu_2node_gcp-a3mega-tcpxo_allgather_unresolved-slurm1790", "clean"),
    Diagnosed("h200_16gpu_2node_nebius-k8s_allreduce_unresolved-runai-nebius", "clean"),
    Diagnosed("h200_16gpu_2node_oci_allreduce_unresolved-oci-hpc-guide", "clean"),
    Diagnosed("gh200_8gpu_2node_alps-slingshot-ofi_allreduce_cscs-docs-image-nccl-tests",
              "clean"),
    Diagnosed("gh200_8gpu_2node_alps-santis-slingshot-cxi_allreduce_cscs-nccl-tests-cxi-readme",
              "clean"),
    Diagnosed("a100-sxm4-80gb_8gpu_1node_allreduce-mpirun_unresolved-thanos", "clean"),
    Diagnosed("a100-sxm4-40gb_8gpu_1node_nvswitch_allreduce_ocitutorials", "clean"),
    Diagnosed("h100-nvl_4gpu_2node_slingshot200_allreduce-good_nccl-issue2441", "clean"),
    Diagnosed("h800_8gpu_1node_broadcast-c0-info_unresolved-nf5688m7", "clean"),
)
#: The --quick mode's logs: one host or two ranks, a few seconds in all.
QUICK = ("sm02", "gdr116", "allreduce-ring_nccl-tests-issue290", "allreduce-nvls_nccl-tests")


def case_of(log: str) -> Case:
    """validate_presets' case of ``log`` (its preset, algorithm and NCCL release)."""
    return next(case for case in CASES if case.log == f"{log}.txt")


def run(item: Diagnosed, quick: bool) -> Diagnosis:
    """The diagnosis of one log, as ``validate --placement log --diagnose`` makes it."""
    case = case_of(item.log)
    runs = parse_nccl_tests_runs(read_text(LOGS / case.log), case.log)
    rows = [row for log in runs for row in log.measurements()]
    rows = _thin(rows, 4) if quick else rows
    gpus, version, protocol = how_driven(runs)
    hosts = {log.host_indices() for log in runs}
    return diagnose(rows, case.preset, algorithm=case.algorithm, engine="auto",
                    source=case.log, gpus_per_thread=gpus, nccl_version=version or case.nccl,
                    protocol=protocol, hosts=hosts.pop() if len(hosts) == 1 else None,
                    placement="log")


def matches(item: Diagnosed, diagnosis: Diagnosis) -> str:
    """``yes``, ``yes (2nd)``, ``cause only`` or ``no`` (the module docstring)."""
    top = _top(diagnosis)
    found = [c.cause for c in diagnosis.causes]
    if item.causes:
        if found and found[0] in item.causes and (
                not item.also or any(c in item.also for c in found[1:])):
            return "yes"
        if any(c in item.causes for c in found):
            return "yes (2nd)"
        return "cause only" if top.cause in item.causes else "no"
    if item.anomalous:
        return "yes" if diagnosis.verdict != "healthy" else "no"
    return "yes" if diagnosis.verdict == "healthy" else "no"


def _top(diagnosis: Diagnosis):  # type: ignore[no-untyped-def]
    causes = [f for f in diagnosis.findings if f.cause != "healthy"]
    return causes[0] if causes else diagnosis.findings[0]


def _named(finding) -> str:  # type: ignore[no-untyped-def]
    return f"{finding.cause} ({finding.level})" if finding.level else finding.cause


def table(items: tuple[Diagnosed, ...], quick: bool) -> list[list[str]]:
    rows = [["log", "preset", "the docs say", "top cause", "its median %", "healthy median %",
             "verdict", "matches"]]
    for item in items:
        start = time.perf_counter()
        diagnosis = run(item, quick)
        top = _top(diagnosis)
        rows.append([item.log, case_of(item.log).preset, item.docs, _named(top),
                     f"{top.median_abs_error_pct:.1f}",
                     f"{diagnosis.healthy.median_abs_error_pct:.1f}",
                     " + ".join(_named(c) for c in diagnosis.causes) or diagnosis.verdict,
                     matches(item, diagnosis)])
        print(f"{item.log}: {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="four logs, four sizes each: the structure, for tests")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="only the logs whose name contains TEXT (repeatable)")
    args = parser.parse_args(argv)
    items = LOGS_DIAGNOSED
    if args.quick:
        items = tuple(i for i in items if any(q in i.log for q in QUICK))
    if args.only:
        items = tuple(i for i in items if any(t in i.log for t in args.only))
    rows = table(items, args.quick)
    print(text_table(rows))
    counted = rows[1:]
    anomalous = [r for r in counted if r[2] != "clean"]
    clean = [r for r in counted if r[2] == "clean"]
    print(f"\nanomalous logs: {sum(r[-1] == 'yes' for r in anomalous)} of {len(anomalous)} "
          f"matched, {sum(r[-1] == 'yes (2nd)' for r in anomalous)} as the second cause, "
          f"{sum(r[-1] == 'cause only' for r in anomalous)} by the top cause only; "
          f"clean logs: {sum(r[-1] == 'yes' for r in clean)} of {len(clean)} healthy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
