"""benchmarks/goodput_agreement.py --quick runs to the end and prints its four parts (the
figures themselves are the benchmark's, quoted in docs/goodput.md, never asserted here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_runs():
    """The quick mode exits 0 and prints the agreement table, the best-interval table and the
    Llama 3 reproduction."""
    out = subprocess.run([sys.executable, "benchmarks/goodput_agreement.py", "--quick"],
                         cwd=ROOT, check=True, capture_output=True, text=True, timeout=300).stdout
    assert "1. closed form vs the mean" in out and "2. the best interval" in out
    assert "4. Llama 3 405B" in out and "419 failures in 54 days" in out
