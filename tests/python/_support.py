"""Helpers shared by the test modules (imported as `_support`; pytest puts this folder on sys.path)."""

from __future__ import annotations

import gc
import time

import cuweave as cw


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
