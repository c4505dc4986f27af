"""Every notebook in notebooks/ runs top to bottom without error, and is stored without outputs.

Each runs in a fresh ipykernel (nbclient) with the notebook folder as working directory, as a
reader would run it. The repository root is put on the kernel's PYTHONPATH so the checkout
under test is imported even when an older editable install is around.
"""

import os
import time
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SECONDS_PER_NOTEBOOK = 60  # each runs in ~5-15 s on 2 cores; the budget of all five is ~2 min


def test_there_are_five_teaching_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=SECONDS_PER_NOTEBOOK,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    began = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the failing cell
    assert time.perf_counter() - began < SECONDS_PER_NOTEBOOK
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
