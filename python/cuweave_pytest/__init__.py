"""cuweave's pytest plugin, registered through the ``pytest11`` entry point ``cuweave``:

- ``pytest --cuweave-sanitize`` runs every test (its fixtures included) under ``cuweave.sanitize()``: a test
  whose GPU work races fails, its report naming both operations and both call sites;
- ``pytest --cuweave-trace DIR`` writes one Perfetto trace per test, ``DIR/<test id>.json``.

A separate package, so that loading the plugin costs nothing in test runs that do not ask for it: cuweave
itself is imported only when one of the options is given.
"""

from __future__ import annotations

import contextlib
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("cuweave", "cuweave: the stream-race sanitizer and traces of GPU work")
    group.addoption("--cuweave-sanitize", action="store_true", default=False,
                    help="run each test under cuweave.sanitize(): a race between streams fails the test and names "
                         "both call sites")
    group.addoption("--cuweave-trace", metavar="DIR", default=None,
                    help="write a Perfetto trace of each test's GPU work to DIR/<test id>.json")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
    sanitize = item.config.getoption("cuweave_sanitize")
    trace_dir = item.config.getoption("cuweave_trace")
    if not sanitize and not trace_dir:
        yield
        return
    import cuweave as cw

    with contextlib.ExitStack() as scope:
        trace = scope.enter_context(cw.trace()) if trace_dir else None
        if sanitize:
            scope.enter_context(cw.sanitize())
        yield  # setup, call and teardown: a RaceError fails the phase it is raised in
    if trace is not None:
        folder = pathlib.Path(trace_dir)
        folder.mkdir(parents=True, exist_ok=True)
        trace.export(folder / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', item.nodeid).strip('_')}.json")
