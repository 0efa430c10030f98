"""Run every benchmark the docs quote and write its output into the doc: ``make bench``.

Run: ``.venv/bin/python benchmarks/run_all.py [--check] [--only TEXT] [DOC.md ...]``

A block of README.md or docs/*.md marked ``<!-- docs-test: benchmark (REASON) -->`` shows a
benchmark's command (``$ .venv/bin/python benchmarks/NAME.py ...``) and what it printed. This
runs each such command again, in doc order, and replaces the shown output with the new one
(keeping a ``...`` trim where the doc had one), the way ``tests/docs_blocks.py`` rewrites the
simulated outputs. ``--check`` lists the blocks whose output changed without writing. The
figures are timings: run on an otherwise idle machine (docs/performance.md says which machine
took the quoted ones). Takes about 10 minutes on a 2-core machine, most of it the
``scaling.py`` and ``des_scale.py --sizes`` sweeps and the real gloo runs of
``gloo_accuracy.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from docs_blocks import DOCS, rewrite, run_doc  # noqa: E402

#: Seconds one benchmark command may take (a loaded 2-core machine is slow).
TIMEOUT_S = 3600


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="docs to regenerate (default: all)")
    parser.add_argument("--check", action="store_true", help="list changed outputs only")
    parser.add_argument("--only", default="", help="only blocks whose commands contain this")
    args = parser.parse_args(argv)
    for path in [p.resolve() for p in args.files] or DOCS:
        outcomes = []
        try:
            for outcome in run_doc(path, benchmarks=True, timeout_s=TIMEOUT_S, only=args.only):
                print(f"{outcome.block.where}: {'same' if outcome.ok else 'changed'}", flush=True)
                outcomes.append(outcome)
        finally:  # a benchmark that fails still leaves the ones before it written
            if not args.check:
                for changed in rewrite(outcomes):
                    print(f"rewrote {changed.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
