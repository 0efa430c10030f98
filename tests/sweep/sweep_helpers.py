"""Shared data of the sweep tests: a small grid (cheap points, a few that cannot run) and the
files it names. (A module of its own: ``conftest`` is not importable by name from every test
folder.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

RING8 = {"kind": "ring", "ranks": 8, "link": {"latency": "1us", "bandwidth": "100GB/s"}}

DDP: dict[str, Any] = {
    "kind": "ddp",
    "layers": 2,
    "forward_time": "1ms",
    "backward_time": "10ms",
    "grad_bytes": "4MiB",
    "bucket_bytes": "4MiB",
    "algorithm": "ring",
    "optimizer_time": 0,
}

GRID_YAML = """\
topologies: [dgx-h100x2, ring8.yaml]
ranks: [4, 12]
engine: [des, analytic]
collectives: [all_reduce, all_gather]
algorithms: [ring, double_binary_tree, rabenseifner, auto]
sizes: [1KiB, "64KiB:1MiB:16"]
workloads: [ddp.yaml, {name: small-ddp, kind: ddp, layers: 1, forward_time: 1ms,
            backward_time: 2ms, grad_bytes: 1MiB, bucket_bytes: 1MiB, optimizer_time: 0}]
"""


def write_grid(folder: Path, text: str = GRID_YAML, name: str = "grid.yaml") -> Path:
    """The grid file and the files it names (ring8.yaml, ddp.yaml), in ``folder``."""
    import yaml

    (folder / "ring8.yaml").write_text(yaml.safe_dump(RING8))
    (folder / "ddp.yaml").write_text(yaml.safe_dump(DDP))
    path = folder / name
    path.write_text(text)
    return path
