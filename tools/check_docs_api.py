#!/usr/bin/env python3
"""Checks that the built API reference documents every public name, reading the site's objects.inv.

Public: every name in ``cuweave.__all__`` and, for each public submodule, every name in its ``__all__``
(a module without one: the names not starting with ``_`` that the module itself defines). A name counts as
documented when the inventory holds it under that path, or holds the very same object under another path:
``cuweave.kernels.compile`` is documented as ``cuweave.compile``, and ``cuweave.prefetch`` (the class)
as ``cuweave.prefetch.prefetch``, since the module of that name takes its path. A public submodule must be
in the inventory as a module.

Usage: tools/check_docs_api.py [BUILD_DIR]   (default: docs/_build/html)
"""

from __future__ import annotations

import importlib
import os
import pathlib
import sys

from sphinx.util.inventory import InventoryFile

os.environ["CUWEAVE_BACKEND"] = "sim"  # as in docs/conf.py, before cuweave is imported

import cuweave  # noqa: E402

SUBMODULES = ("cuweave.ops", "cuweave.collectives", "cuweave.kernels", "cuweave.prefetch",
              "cuweave.graph_function", "cuweave.tracing", "cuweave.errors", "cuweave.sim")
_MISSING = object()


def public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module_name]


def resolve(path: str) -> object:
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute, _MISSING)
        return obj
    return _MISSING


def main(argv: list[str]) -> int:
    build = pathlib.Path(argv[0] if argv else pathlib.Path(__file__).resolve().parents[1] / "docs/_build/html")
    with open(build / "objects.inv", "rb") as stream:
        inventory = InventoryFile.load(stream, str(build), lambda base, uri: uri)
    by_role = getattr(inventory, "data", inventory)  # a mapping of role to entries in every Sphinx version
    python = {role: set(entries) for role, entries in by_role.items() if role.startswith("py:")}
    modules = python.get("py:module", set())
    documented = set().union(*(entries for role, entries in python.items() if role != "py:module"))
    documented_ids = {id(obj) for obj in map(resolve, documented) if obj is not _MISSING}

    missing, checked = [], 0
    for module_name in ("cuweave", *SUBMODULES):
        module = importlib.import_module(module_name)
        for name in public_names(module_name):
            checked += 1
            path, obj = f"{module_name}.{name}", getattr(module, name)
            if isinstance(obj, type(cuweave)):
                found = obj.__name__ in modules
            elif callable(obj):  # a class or function may be documented under another of its names
                found = path in documented or id(obj) in documented_ids
            else:  # data (KINDS): only under its own name, as equal values are not the same name
                found = path in documented
            if not found:
                missing.append(path)
    for module_name in SUBMODULES:
        checked += 1
        if module_name not in modules:
            missing.append(f"{module_name} (the module)")
    if missing:
        print(f"{len(missing)} public name(s) missing from the API reference (docs/api):")
        print("\n".join(f"  {path}" for path in missing))
        return 1
    print(f"the API reference documents all {checked} public names")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
