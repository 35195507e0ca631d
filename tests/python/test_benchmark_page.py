"""The documentation's benchmark page is what benchmarks/page.py makes from the committed JSON of a GPU run: the
machine once, and every row of benchmarks/run.py beside raw CUDA and the peers."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGE_SCRIPT = REPO / "benchmarks" / "page.py"
RESULTS = REPO / "benchmarks" / "results" / "h200"
PAGE = REPO / "docs" / "benchmarks.md"


def _render(results: pathlib.Path, page: pathlib.Path) -> str:
    run = subprocess.run([sys.executable, str(PAGE_SCRIPT), str(results), str(page)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    return page.read_text()


def test_the_committed_page_is_rendered_from_the_committed_results(tmp_path):
    assert _render(RESULTS, tmp_path / "page.md") == PAGE.read_text(), (
        "docs/benchmarks.md is stale: python benchmarks/page.py benchmarks/results/h200 docs/benchmarks.md")


def test_the_page_names_its_machine_and_date_once_and_has_every_row_beside_raw_cuda_and_the_peers():
    machine = json.loads((RESULTS / "bench.json").read_text())["machine"]
    text = PAGE.read_text()
    one_run = text.split("## Several GPUs")[0]  # that section is a run of its own, on its own machine
    assert one_run.count(machine["time_utc"][:10]) == 1
    assert one_run.count(machine["gpu"]) == 1
    rows = json.loads((RESULTS / "bench.json").read_text())["rows"]
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("| row | unit |")))
    end = lines.index("", start)
    table = lines[start:end]
    assert [cell.strip() for cell in table[0].strip("|").split("|")][2:6] == ["cuweave", "raw CUDA", "PyTorch", "CuPy"]
    assert len(table) == 2 + len(rows)
    for name, row in rows.items():
        (line,) = [line for line in table if line.startswith(f"| `{name}` |")]
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[1] == row["unit"]
        if "cuweave" in row["values"] and "raw" in row["values"]:
            ratio = row["values"]["cuweave"] / row["values"]["raw"]
            assert abs(float(cells[6]) - ratio) <= 0.006 * ratio, line


def test_sections_follow_the_results_present(tmp_path):
    shutil.copy(RESULTS / "bench.json", tmp_path / "bench.json")
    text = _render(tmp_path, tmp_path / "page.md")
    assert "## Per-call costs and copies" in text
    assert "## The weave" not in text and "## Traces" not in text  # their JSON is not in that folder


def test_the_several_gpus_section_has_every_row_of_its_run_beside_its_reference():
    multi = json.loads((RESULTS / "bench-multi-gpu.json").read_text())
    section = PAGE.read_text().split("## Several GPUs")[1]
    assert f"{len(multi['devices'])} × {multi['devices'][0]}" in section
    for name, row in multi["rows"].items():
        (line,) = [line for line in section.splitlines() if line.startswith(f"| `{name}` |")]
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert float(cells[5].split()[0]) == float(f"{row['ratio']:.3g}"), line


def test_without_a_two_gpu_run_the_section_says_how_to_measure(tmp_path):
    shutil.copy(RESULTS / "bench.json", tmp_path / "bench.json")
    text = _render(tmp_path, tmp_path / "page.md")
    assert "it needs two GPUs, and its figures are not part of this run" in text
