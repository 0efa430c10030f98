"""Scale limits: start-up, 4096 and 65,536 ranks, and the huge inputs, each a fresh command.

Run: ``.venv/bin/python benchmarks/scale_limits.py [--repeat 3] [--only TEXT] [--quick]``

Each row is one ``commsim`` command line run in a fresh process (interpreter start, imports,
the topology, the choice, the answer): its wall time (best of ``--repeat`` for the quick
ones, one run for the long ones), the CPU time of that run (user + system: what other jobs
on a loaded machine do not inflate), peak memory, exit status, and what it printed (the
algorithm chosen, ``sym`` when the output notes a time had by symmetry, or the start of the
one-line error). ``x target`` is the wall time over the target of issue 15; the baseline row
(an interpreter that imports nothing) is measured in the same run, so the ratios compare
like with like on a loaded machine. ``--quick``: the rows of :data:`QUICK`, once.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import parse_args, table

_SCRIPT = Path(sys.executable).with_name("commsim")  # the installed console script
COMMSIM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "commsim"]
TORUS = "kind: torus\ndims: [16, 16, 16, 16]\nlink: {latency: 1us, bandwidth: 45GB/s}\n"
RUN = ["run", "all_reduce", "--size", "1GiB", "--topology"]

#: (label, argv after ``commsim``, target wall s, target MiB or None, quick: best of repeat).
CASES: list[tuple[str, list[str], float, float | None, bool]] = [
    ("--help", ["--help"], 0.15, None, True),
    ("1 KiB, dgx-h100 (8)", ["run", "all_reduce", "-t", "dgx-h100", "-s", "1KiB"], 0.5, None,
     True),
    ("x512 (4096)", [*RUN, "dgx-h100x512"], 5.0, 500, False),
    ("x8192 (65536) analytic", [*RUN, "dgx-h100x8192", "--engine", "analytic"], 1.0, 300,
     True),
    ("x8192 (65536) des", [*RUN, "dgx-h100x8192"], 10.0, None, False),
    ("x8192 analytic, no NCCL", [*RUN, "dgx-h100x8192", "--engine", "analytic", "--protocol",
                                 "none"], 10.0, None, False),
    ("x12500 (100,000)", [*RUN, "dgx-h100x12500"], 10.0, None, False),
    ("x125000 (1,000,000)", [*RUN, "dgx-h100x125000"], 1.0, None, True),
    ("x1000000 (8,000,000)", [*RUN, "dgx-h100x1000000"], 10.0, None, False),
    ("torus 16^4 (65536) des", [*RUN, "TORUS"], 10.0, None, False),
    ("torus 16^4 analytic", [*RUN, "TORUS", "--engine", "analytic"], 10.0, None, False),
]
#: The --quick mode's rows: the start-up ones and a refusal (the error's summary).
QUICK = ("--help", "1 KiB, dgx-h100 (8)", "x125000 (1,000,000)")


def _measure(command: list[str]) -> tuple[float, float, float, int, str]:
    """Wall seconds, CPU seconds, peak MiB, exit status and a short summary of one fresh
    run."""
    timed = (["/usr/bin/time", "-f", "%U %S %M", *command] if Path("/usr/bin/time").exists()
             else command)
    t0 = time.perf_counter()
    done = subprocess.run(timed, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    lines = done.stderr.strip().splitlines()
    cpu, peak = float("nan"), float("nan")
    if timed is not command and lines:
        user, system, kib = lines[-1].split()
        cpu, peak = float(user) + float(system), float(kib) / 1024
    err = [line for line in lines[:-1] if "error" in line]
    if err:
        return wall, cpu, peak, done.returncode, err[0].split("error: ")[-1][:44]
    rows = [line for line in done.stdout.splitlines() if line and not line.startswith("#")]
    sym = " sym" if "# note: symmetric" in done.stdout else ""
    picked = rows[-1].split()[1] if rows and rows[-1].split()[0].isdigit() else "(help)"
    return wall, cpu, peak, done.returncode, picked + sym


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of the quick rows")
    parser.add_argument("--only", default="", help="only rows whose label contains this")
    args = parse_args(parser, {"repeat": 1}, "the rows of QUICK, once")
    with tempfile.TemporaryDirectory() as tmp:
        torus = Path(tmp) / "torus16x4.yaml"
        torus.write_text(TORUS)
        base, base_cpu, base_mib, _, _ = min(_measure([sys.executable, "-c", "pass"])
                                             for _ in range(3))
        rows: list[list[object]] = [["python -c pass (baseline)", base, base_cpu,
                                     round(base_mib), 0, "", "", ""]]
        for label, argv, target, target_mib, quick in CASES:
            if args.only not in label or (args.quick and label not in QUICK):
                continue
            command = [*COMMSIM, *(str(torus) if a == "TORUS" else a for a in argv)]
            runs = [_measure(command) for _ in range(args.repeat if quick else 1)]
            wall, cpu, peak, status, what = min(runs)
            limit = f"{target:g} s" + (f", {target_mib:g} MiB" if target_mib else "")
            rows.append([label, wall, cpu, round(peak), status, what, limit, wall / target])
    print("commsim run all_reduce --size 1GiB --topology T (fresh process each)")
    print(table(["<case", "wall s", "cpu s", "peak MiB", "exit", "<answer", "<target",
                 "x target"], rows))


if __name__ == "__main__":
    main()
