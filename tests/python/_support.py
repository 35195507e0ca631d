"""Helpers shared by the test modules (imported as `_support`; pytest puts this folder on sys.path)."""

from __future__ import annotations

import gc
import os
import threading
import time

import pytest

import cuweave as cw


def exploring() -> bool:
    """True while the simulator explores schedules: queued work runs only when the host waits (a query
    may run some of it), so spins take no time and "still pending" cannot be observed."""
    return cw.backend() == "sim" and cw.sim.seed() is not None


UNDER_COMPUTE_SANITIZER = os.environ.get("CUWEAVE_TESTS_UNDER_COMPUTE_SANITIZER") == "1"


def skip_under_compute_sanitizer() -> None:
    """Skips a test that holds a stream with a stream-ordered callback. Under compute-sanitizer a kernel
    launch waits for the kernel, so a launch behind the held work blocks the thread that holds the GIL
    while the callback that would release the stream needs it (tools/gpu-check --sanitize sets the variable)."""
    if UNDER_COMPUTE_SANITIZER:
        pytest.skip("holds a stream with an ordered callback: launches block under compute-sanitizer")


class Gate:
    """Holds a stream's later work until the test opens it: a stream-ordered host callback that waits for
    a threading.Event. What is queued behind it is pending by construction, on every backend and in
    every simulator mode, for as long as the test likes. Use as a context manager, so that a failing
    test still opens it.

    The gate is itself a host callback: once its turn has come it keeps cuweave's one callback thread
    busy, so host callbacks on every stream wait for it too (and so does whatever waits for them: a
    stream's synchronize() with callbacks queued, cw.synchronize()). Open it before waiting for those.

    A safety net, not a duration the test relies on: should the code under test wait for the held work
    (a regression that would otherwise hang the suite), the gate lets go after ``deadline_s`` and leaving
    the ``with`` block fails the test. It cannot rescue a wait that keeps the GIL: the gate's callback needs
    the GIL to return."""

    def __init__(self, stream, *, deadline_s: float = 120.0) -> None:
        skip_under_compute_sanitizer()
        self._open = threading.Event()
        self._deadline_s = deadline_s
        self.expired = False
        stream.launch_host_func(self._hold, ordered=True)

    def _hold(self) -> None:
        if not self._open.wait(self._deadline_s):
            self.expired = True

    def open(self) -> None:
        self._open.set()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.open()
        if exc_type is None and self.expired:
            raise AssertionError(
                f"the gate let go after its {self._deadline_s} s deadline: something waited for the work it held"
            )


def released(ref, tries: int = 100) -> bool:
    """True once the weakly referenced object dies after completed work is collected (release may be
    deferred to the next collect)."""
    for _ in range(tries):
        cw.collect()
        gc.collect()
        if ref() is None:
            return True
        time.sleep(0.01)
    return False


def settle() -> None:
    """Finish all queued work and return everything finished to its pool."""
    gc.collect()
    cw.synchronize()
    cw.collect()
    gc.collect()


def pinned_stats() -> dict:
    return cw.pinned_pool().stats()
