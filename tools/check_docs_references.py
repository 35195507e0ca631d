#!/usr/bin/env python3
"""Checks that user-facing text speaks of the product only: no source-code Note, no issue, no test file, no
probe and no path outside the repository.

User-facing: README.md, the pages under docs/ (not the build), the notebooks' markdown cells, the docstrings a
user reads with help() (every public module, class, function, method and property of cuweave, the compiled
module's included) and the command line's --help. CONTRIBUTING.md is for people working on cuweave and may
name Notes and tests, but no file that does not ship with the repository.

Usage: tools/check_docs_references.py [PATH ...]   (default: the repository's user-facing text)
Each PATH (a Markdown file, a notebook or a folder of them) is checked instead, for the suite's own test.
Exit 1 with one line per reference found.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import os
import pathlib
import re
import sys
from collections.abc import Iterator

REPO = pathlib.Path(__file__).resolve().parent.parent

# What a user cannot see or has no use for, each with what to write instead.
INTERNAL = [
    (re.compile(r"Note \["), "a source-code Note: say what it says"),
    (re.compile(r"\bissues? (#?\d+|that asked)|\bthe issue\b", re.IGNORECASE), "an issue: say what was wanted"),
    (re.compile(r"\btests/(python|cpp)\b|\btest_\w+\.py\b"), "a test file: say what is checked"),
    (re.compile(r"\btools/probes\b|\bprobes?/\w"), "a probe: say what was measured"),
]
# Paths outside the repository, in any text that ships (CONTRIBUTING.md included).
OUTSIDE = [(re.compile(r"\.\./shared\b|\.\./\.library\b"), "a path outside the repository")]

SUBMODULES = ("cuweave.ops", "cuweave.collectives", "cuweave.kernels", "cuweave.prefetch", "cuweave.graph_function",
              "cuweave.tracing", "cuweave.errors", "cuweave.sim")
COMMANDS = ([], ["tour"], ["trace"], ["sanitize"])


def findings(text: str, where: str, rules) -> Iterator[str]:
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, what in rules:
            match = pattern.search(line)
            if match:
                yield f"{where}:{number}: {what} ({match.group(0)!r}): {line.strip()[:100]}"


def markdown_of(path: pathlib.Path) -> str:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    return path.read_text()


def files_under(path: pathlib.Path) -> list[pathlib.Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.suffix in (".md", ".ipynb") and "_build" not in p.parts)


def check_files(paths: list[pathlib.Path]) -> list[str]:
    found = []
    for path in paths:
        for file in files_under(path):
            found += findings(markdown_of(file), str(file.relative_to(REPO) if file.is_relative_to(REPO) else file),
                              INTERNAL + OUTSIDE)
    return found


def public_objects() -> Iterator[tuple[str, object]]:
    """Every public object a user reaches from cuweave and its public submodules, with its dotted name."""
    import cuweave

    seen: set[int] = set()
    modules = [("cuweave", cuweave)] + [(name, importlib.import_module(name)) for name in SUBMODULES]
    for module_name, module in modules:
        yield module_name, module
        names = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
        for name in names:
            value = getattr(module, name, None)
            if value is None or id(value) in seen:
                continue
            seen.add(id(value))
            yield f"{module_name}.{name}", value
            if inspect.isclass(value):
                for member, attribute in vars(value).items():
                    if not member.startswith("_") or member in ("__init__", "__call__", "__enter__", "__exit__"):
                        yield f"{module_name}.{name}.{member}", attribute


def check_docstrings() -> list[str]:
    found = []
    for name, value in public_objects():
        doc = getattr(value, "__func__", value).__doc__  # a staticmethod's or classmethod's function
        if isinstance(doc, str):
            found += findings(doc, f"docstring of {name}", INTERNAL + OUTSIDE)
    return found


def check_help() -> list[str]:
    from cuweave import __main__ as command

    found = []
    for arguments in COMMANDS:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            command.main([*arguments, "--help"])
        found += findings(out.getvalue(), f"python -m cuweave {' '.join(arguments + ['--help'])}", INTERNAL + OUTSIDE)
    return found


def main(argv: list[str]) -> int:
    if argv:
        found = check_files([pathlib.Path(p).resolve() for p in argv])
    else:
        os.environ.setdefault("CUWEAVE_BACKEND", "sim")  # docstrings read the same on every backend
        found = check_files([REPO / "README.md", REPO / "docs", REPO / "notebooks"])
        found += findings((REPO / "CONTRIBUTING.md").read_text(), "CONTRIBUTING.md", OUTSIDE)
        found += check_docstrings() + check_help()
    for line in found:
        print(line)
    if found:
        print(f"check_docs_references: {len(found)} references a user cannot follow", file=sys.stderr)
        return 1
    print("check_docs_references: user-facing text names no Note, issue, test, probe or outside path")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
