"""Helpers shared by the test modules (imported as `_support`; pytest puts this folder on sys.path)."""

from __future__ import annotations

import gc
import time

import cuweave as cw


def exploring() -> bool:
    """True while the simulator explores schedules: queued work runs only when the host waits (a query
    may run some of it), so spins take no time and "still pending" cannot be observed."""
    return cw.backend() == "sim" and cw.sim.seed() is not None


def assert_pending(obj, message: str = "") -> None:
    """``obj`` (a Stream or Event, via ``query()``; or a Transfer, via ``done``) has not completed: a spin
    queued before it still runs. Checked where queued work takes real time (a GPU, or the simulator's
    concurrent mode, where spins sleep); skipped while the simulator explores, where the query itself may
    run queued work. Tests using it also check the data or completion, which holds in every mode."""
    if exploring():
        return
    done = obj.done if isinstance(obj, cw.Transfer) else obj.query()
    assert done is False, message or f"{obj!r} completed although a spin queued before it should still run"


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
