"""ImportWatch: a hook that runs once a library is imported after cuweave (PyTorch's, CuPy's)."""

from __future__ import annotations

import importlib
import importlib.util
import sys

from cuweave._import_watch import ImportWatch


def test_the_hook_runs_once_the_module_has_executed_even_after_a_lookup_that_did_not_import_it(tmp_path, monkeypatch):
    (tmp_path / "watched_library.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "watched_library", raising=False)
    seen = []
    watch = ImportWatch("watched_library", lambda module: seen.append(module.VALUE))
    watch.start()
    try:
        assert importlib.util.find_spec("watched_library") is not None  # as pytest's skip markers look it up
        assert seen == [] and watch in sys.meta_path  # only looked up: still watching
        module = importlib.import_module("watched_library")
        assert seen == [42] and module.VALUE == 42
        assert watch not in sys.meta_path  # done: later imports never meet it
        importlib.reload(module)
        assert seen == [42]
    finally:
        watch.stop()
        sys.modules.pop("watched_library", None)


def test_other_modules_pass_the_watch_untouched(tmp_path, monkeypatch):
    (tmp_path / "unwatched_library.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    watch = ImportWatch("watched_library", seen.append)
    watch.start()
    try:
        assert importlib.import_module("unwatched_library").VALUE == 1
        assert seen == [] and watch in sys.meta_path
    finally:
        watch.stop()
        sys.modules.pop("unwatched_library", None)
