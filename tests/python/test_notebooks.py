"""Every notebook in notebooks/ runs top to bottom in a real Jupyter kernel (nbclient + ipykernel, the
test extras), on whichever backend is active, and is stored with its outputs stripped.

A failing cell fails the test with the cell and its traceback. The kernel inherits the environment, so
CUWEAVE_BACKEND and CUWEAVE_SIM_SEED reach it; notebooks check real-hardware effects only on a GPU.
"""

from __future__ import annotations

import json
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def _code_cells(path: pathlib.Path) -> list[dict]:
    return [cell for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 8


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    for cell in _code_cells(path):
        assert cell["outputs"] == [] and cell["execution_count"] is None, f"strip outputs of {path.name}"
        source = "".join(cell["source"])
        assert not source.lstrip().startswith(("%", "!")), "notebooks here use plain Python only"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_a_kernel(path, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})  # the kernel's working folder
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # Each notebook draws at least one timeline (a trace shows itself as HTML with its chart, or a figure).
    rich = [o for o in outputs if o.output_type in ("display_data", "execute_result")
            and ({"image/png", "text/html"} & set(o.get("data", {})))]
    assert rich, f"{path.name} displayed no chart or table"
