"""The notebooks in notebooks/: each executes without error, and none is committed with outputs.

Each notebook runs in a fresh kernel of *this* interpreter (a kernelspec written to a temporary
directory whose argv starts with ``sys.executable``, found through ``JUPYTER_PATH``), with
``notebooks/`` as its working directory and the Agg backend.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
KERNEL = "commsim-test-python3"
CELL_TIMEOUT_S = 120


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 5


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A kernelspec that launches this interpreter, visible through JUPYTER_PATH."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "commsim tests",
        "language": "python",
    }))
    with pytest.MonkeyPatch.context() as mp:
        previous = os.environ.get("JUPYTER_PATH")
        mp.setenv("JUPYTER_PATH", str(root) + (os.pathsep + previous if previous else ""))
        mp.setenv("MPLBACKEND", "Agg")
        from jupyter_client.kernelspec import KernelSpecManager

        assert KernelSpecManager().get_kernel_spec(KERNEL).argv[0] == sys.executable
        yield KERNEL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path: Path, kernel_name: str) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=kernel_name,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    started = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    elapsed = time.perf_counter() - started
    errors = [
        out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    print(f"{path.name}: executed in {elapsed:.1f} s")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.get("outputs") == [], f"{path.name} cell {index} has outputs"
        assert cell.get("execution_count") is None, f"{path.name} cell {index} was executed"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
