"""User-facing text speaks of the product only: tools/check_docs_references.py passes on the tree and fails on
each kind of internal reference planted in a page."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CHECK = REPO / "tools" / "check_docs_references.py"


def run_check(*paths: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *map(str, paths)], capture_output=True, text=True,
                          timeout=120)


def test_the_trees_user_facing_text_passes():
    result = run_check()
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("line, kind", [
    ("Streams are ordered as Note [Weaving] says.", "a source-code Note"),
    ("This page is what issue 41 asked for.", "an issue"),
    ("Each rule is checked (`tests/python/test_device_rules.py`).", "a test file"),
    ("Measured by `tools/probes/duplex_probe.py`.", "a probe"),
    ("The targets are in `../shared/targets.md`.", "a path outside the repository"),
])
def test_a_planted_reference_fails_the_check_naming_its_line(tmp_path, line, kind):
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\nSome text.\n{line}\n")
    result = run_check(page)
    assert result.returncode == 1
    assert f"page.md:4: {kind}" in result.stdout, result.stdout


def test_a_notebooks_markdown_is_checked_and_its_code_is_not(tmp_path):
    import json

    notebook = tmp_path / "demo.ipynb"
    cells = [{"cell_type": "code", "source": ["# Note [Weaving] in a code comment is the code's business\n"],
              "metadata": {}, "outputs": [], "execution_count": None},
             {"cell_type": "markdown", "source": ["As issue 12 asked.\n"], "metadata": {}}]
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    result = run_check(notebook)
    assert result.returncode == 1
    assert "demo.ipynb:1: an issue" in result.stdout
    assert "Note" not in result.stdout
