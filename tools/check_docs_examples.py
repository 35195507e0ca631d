#!/usr/bin/env python3
"""Runs the examples of the documentation's pages on the simulator: every ```python block of each Markdown
page under docs/ (notebooks are executed by the site's build instead), the page's blocks in order in one
fresh interpreter, as a reader would paste them. A failing block fails the check, naming the page and line.

The environment passes through (tools/docs also runs the pages with CUWEAVE_SANITIZE=1 and CUWEAVE_SIM_SEED),
except that CUWEAVE_BACKEND is always the simulator.

A block meant to be read but not run (one process per GPU under mpirun, a program's outline) is written as
```{code-block} python instead, which this check leaves alone.

Usage: tools/check_docs_examples.py [PAGE.md ...]   (default: every page under docs/)
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
# An opening fence of exactly ```python (MyST directives such as ```{code-block} python do not match).
_PYTHON_FENCE = re.compile(r"^```python\s*$")


def python_blocks(page: pathlib.Path) -> list[tuple[int, str]]:
    """The page's ```python blocks, each with the line number of its first line of code."""
    blocks, lines = [], page.read_text().splitlines()
    index = 0
    while index < len(lines):
        if _PYTHON_FENCE.match(lines[index]):
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            blocks.append((index + 2, "\n".join(lines[index + 1 : end]) + "\n"))
            index = end
        index += 1
    return blocks


def program(page: pathlib.Path, blocks: list[tuple[int, str]]) -> str:
    """One script running the blocks in order in one namespace; a failure names the page and the line."""
    parts = ["import sys, traceback", "_namespace = {'__name__': '__main__'}"]
    for line, code in blocks:
        # Padding with blank lines makes tracebacks give the page's own line numbers.
        source = "\n" * (line - 1) + code
        parts.append(
            f"try:\n    exec(compile({source!r}, {str(page)!r}, 'exec'), _namespace)\n"
            "except BaseException:\n"
            f"    print('block at {page.name}:{line} failed:', file=sys.stderr)\n"
            "    traceback.print_exc()\n    sys.exit(1)"
        )
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    pages = [pathlib.Path(p).resolve() for p in argv] or sorted(
        p for p in DOCS.rglob("*.md") if "_build" not in p.parts and "notebooks" not in p.parts)
    # The simulator, whatever the machine: the pages' examples are checked where the site is built.
    env = dict(os.environ, CUWEAVE_BACKEND="sim")
    failures = 0
    for page in pages:
        blocks = python_blocks(page)
        if not blocks:
            continue
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:  # whatever an example writes goes away with it
            result = subprocess.run([sys.executable, "-c", program(page, blocks)], env=env, cwd=folder,
                                    capture_output=True, text=True, timeout=300)
        seconds = time.perf_counter() - started
        relative = page.relative_to(DOCS.parent) if page.is_relative_to(DOCS.parent) else page
        if result.returncode == 0:
            print(f"ok    {relative}: {len(blocks)} blocks, {seconds:.1f} s")
        else:
            failures += 1
            print(f"FAIL  {relative}: exit code {result.returncode}\n{result.stdout}{result.stderr}")
    print(f"{failures} page(s) failed" if failures else "every page's examples ran")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
