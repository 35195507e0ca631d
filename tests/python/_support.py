"""Helpers shared by the test modules (imported as `_support`; pytest puts this folder on sys.path)."""

from __future__ import annotations

import faulthandler
import gc
import os
import sys
import threading
import time

import numpy as np
import pytest

import cuweave as cw


def exploring() -> bool:
    """True while the simulator explores schedules: queued work runs only when the host waits (a query
    may run some of it), so spins take no time and "still pending" cannot be observed."""
    return cw.backend() == "sim" and cw.sim.seed() is not None


UNDER_COMPUTE_SANITIZER = os.environ.get("CUWEAVE_TESTS_UNDER_COMPUTE_SANITIZER") == "1"


def skip_under_compute_sanitizer(
    reason: str = "pauses a stream until the test releases it: launches block under compute-sanitizer",
) -> None:
    """Skips a test that cannot run under compute-sanitizer (tools/gpu-check --sanitize sets the variable);
    by default one that pauses a stream until the test lets it go: under the tool a kernel launch waits for
    the kernel, so a launch behind the paused work would block the very thread that must release it."""
    if UNDER_COMPUTE_SANITIZER:
        pytest.skip(reason)


# AddressSanitizer or ThreadSanitizer loaded (tools/host-sanitizers): their allocators keep freed memory in
# quarantine, so a process's resident memory grows whatever it frees.
UNDER_HOST_SANITIZER = any(tool in os.environ.get("LD_PRELOAD", "") for tool in ("asan", "tsan"))


class Gate:
    """Pauses a stream's later work until the test opens it. What is queued behind it is pending by
    construction, on every backend and in every simulator mode, for as long as the test likes. Use as a
    context manager, so that a failing test still opens it.

    By default the pause is a cw.HostLatch: the stream waits for a flag in host memory and no thread is
    busy meanwhile, so host callbacks on other streams still run. ``by="ordered_callback"`` pauses with a
    stream-ordered host callback instead (what the ordered-callback tests exercise): once its turn has come
    it keeps cuweave's one callback thread busy, so host callbacks on every stream wait for it too.

    A safety net, not a duration the test relies on: should the code under test wait for the paused work
    (a regression that would otherwise hang the suite), the gate lets go after ``deadline_s`` and leaving
    the ``with`` block fails the test. It cannot rescue a wait that keeps the GIL: letting go needs it."""

    def __init__(self, stream, *, by: str = "latch", deadline_s: float = 120.0) -> None:
        skip_under_compute_sanitizer()
        # Garbage of earlier tests is collected now, not while the stream is paused: a collection inside the block
        # (gc.collect(), or one an allocation starts) may free a peer's memory, and a cudaFree waits for the
        # whole device, this paused stream included (seen: a hang in gc.collect() with CuPy and PyTorch loaded).
        gc.collect()
        self._open = threading.Event()
        self._deadline_s = deadline_s
        self.expired = False
        if by == "latch":
            self._latch = cw.HostLatch(stream)
            self._watchdog = threading.Thread(target=self._pause, daemon=True)
            self._watchdog.start()
        elif by == "ordered_callback":
            self._latch = None
            stream.launch_host_func(self._pause, ordered=True)
        else:
            raise ValueError(f"Gate(by={by!r}): expected 'latch' or 'ordered_callback'")

    def _pause(self) -> None:
        if not self._open.wait(self._deadline_s):
            self.expired = True
            # Where the test's thread waits for the paused work, before letting it go (the failure report shows
            # this captured output): the wait itself ends with the release.
            print(f"the gate's deadline ({self._deadline_s} s) passed; every thread's stack:", file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        if self._latch is not None:
            self._latch.release()

    def open(self) -> None:
        self._open.set()
        if self._latch is not None:
            self._latch.release()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.open()
        if exc_type is None and self.expired:
            raise AssertionError(
                f"the gate let go after its {self._deadline_s} s deadline: something waited for the work it paused"
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


class sanitizer_off:
    """Turns the sanitizer off for a while, every level of it (sanitize() blocks nest, and CUWEAVE_SANITIZE adds
    one), and back on after with on_race="raise"."""

    def __enter__(self):
        self._levels = 0
        while cw._core.sanitizer.enabled():
            cw._core.sanitizer.disable()
            self._levels += 1
        return self

    def __exit__(self, *exc):
        for _ in range(self._levels):
            cw._core.sanitizer.enable("raise")
        return False


def settle() -> None:
    """Finish all queued work and return everything finished to its pool."""
    gc.collect()
    cw.synchronize()
    cw.collect()
    gc.collect()


def pinned_stats() -> dict:
    return cw.pinned_pool().stats()


# The collectives tests use every device there is, up to four: one rank per device.
RANKS = min(cw.device_count(), 4)
needs_two = pytest.mark.skipif(RANKS < 2, reason="needs two devices (CUWEAVE_SIM_DEVICES=2 on the simulator)")


# The start of a rank's script in a test of several processes: its rank (argv[1]) and the file (argv[2])
# through which rank 0 hands the others a new communicator id, which `uid` then holds.
SHARED_ID = r"""
import os, sys, time, pathlib
import numpy as np
import cuweave as cw
rank, path = int(sys.argv[1]), pathlib.Path(sys.argv[2])
if rank == 0:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(cw.collectives.unique_id())
    tmp.rename(path)
while not path.exists():
    time.sleep(0.01)
uid = path.read_bytes()
"""


def run_ranks(rank_main) -> list:
    """rank_main(rank) on one thread per rank (RANKS of them); returns their results, raising the first
    exception a thread raised, and fails if a thread is still running after two minutes."""
    results: list = [None] * RANKS
    errors: list = []

    def run(rank):
        try:
            results[rank] = rank_main(rank)
        except BaseException as error:  # noqa: BLE001  (reported by the main thread)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(RANKS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a rank's thread hangs"
    if errors:
        raise errors[0]
    return results


def svg_lanes(svg) -> list[tuple[str, int]]:
    """(label, kernel bars) of each lane of a timeline SVG (Trace.svg(), or a path to one), top to bottom. Parsing
    it also checks that it is well-formed XML, its labels escaped."""
    import pathlib
    import xml.etree.ElementTree as ElementTree

    text = pathlib.Path(svg).read_text(encoding="utf-8") if isinstance(svg, pathlib.Path) else str(svg)
    root = ElementTree.fromstring(text)
    namespace = "{http://www.w3.org/2000/svg}"
    lanes = [g for g in root.iter(f"{namespace}g") if g.get("class") == "lane"]
    return [(g.get("data-label"), sum(1 for bar in g if bar.get("class") == "bar kernel")) for g in lanes]
