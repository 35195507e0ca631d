"""Every notebook in notebooks/ runs top to bottom (code cells in one namespace, as a kernel would)
and is stored with its outputs stripped."""

from __future__ import annotations

import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def _code_cells(path: pathlib.Path) -> list[dict]:
    return [cell for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    for cell in _code_cells(path):
        assert cell["outputs"] == [] and cell["execution_count"] is None, f"strip outputs of {path.name}"


# gpu: the notebook demonstrates a race, GPU timings and pinned-vs-pageable bandwidth on real hardware.
@pytest.mark.gpu
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    namespace: dict[str, object] = {"__name__": "__main__"}
    for index, cell in enumerate(_code_cells(path)):
        source = "".join(cell["source"])
        assert not source.lstrip().startswith(("%", "!")), "notebooks here use plain Python only"
        exec(compile(source, f"{path.name}[code cell {index}]", "exec"), namespace)  # noqa: S102
