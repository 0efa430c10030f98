"""Huge inputs end with an answer or a one-line refusal, never minutes of silent work: each
runs in a fresh process under a 4 GiB address-space limit, with a generous hang guard (the
guard catches a hang; it is not a speed assertion)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from commsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LIMIT, *argv], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize(
    ("topology", "needle"),
    [
        ("dgx-h100x12500", "at most 65536 ranks"),
        ("dgx-h100x1000000", "at most 65536 ranks"),
        ("torus4d", "discrete-event engine"),
    ],
)
def test_huge_inputs_are_refused_in_one_line(tmp_path: Path, topology: str, needle: str) -> None:
    """100k and 8M ranks exceed what the topology kind builds; a 16x16x16x16 torus is built,
    but simulating its all-reduce transfer by transfer would take minutes: one line, exit 2."""
    if topology == "torus4d":
        path = tmp_path / "torus4d.yaml"
        path.write_text("kind: torus\ndims: [16, 16, 16, 16]\n"
                        "link: {latency: 1us, bandwidth: 45GB/s}\n")
        topology = str(path)
    done = _run(["run", "all_reduce", "-t", topology, "-s", "1GiB"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and needle in done.stderr and not done.stdout
