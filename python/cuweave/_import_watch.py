"""Runs a function once a module has been imported: for hooks into libraries a program may import after cuweave
(PyTorch's and CuPy's, under the sanitizer and inside a weave)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


class ImportWatch(importlib.abc.MetaPathFinder):
    """Finds the module `name` through the other finders and has its loader call `imported(module)` once the
    module has executed, then leaves `sys.meta_path`. A spec only looked up (importlib.util.find_spec, as pytest's
    skip markers do) and never executed leaves the watch in place for the real import."""

    def __init__(self, name: str, imported: Callable[[ModuleType], None]) -> None:
        self._name = name
        self._imported = imported
        self._finding = False  # declines while it asks the other finders

    def start(self) -> None:
        sys.meta_path.insert(0, self)

    def stop(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != self._name or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, execute = spec.loader, spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                execute(module)
            finally:
                del loader.exec_module  # the loader's own method again
            self.stop()
            self._imported(module)

        loader.exec_module = exec_module
        return spec
