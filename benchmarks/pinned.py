"""Pinned host memory: a 1 MB block, and a 1 MB array, allocated and freed."""

from __future__ import annotations

import numpy as np

import libraries
from rows import Row
from timing import Config, time_per_call

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())

BLOCK_BYTES = 1 << 20       # "1 MB" pinned block
BLOCK_PAIRS = 200           # allocate + free pairs per repetition


# --------------------------------------------------------------------------- pinned 1 MB block / array
# The warm-up repetition of median_of fills each library's cache, so the timed repetitions hit it.


def cw_pinned_block(cfg: Config) -> float:
    pool = cw.pinned_pool()

    def alloc_free():
        blk = pool.allocate(BLOCK_BYTES)
        del blk

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cw_pinned_array(cfg: Config) -> float:
    def alloc_free():
        arr = cw.pinned_empty((BLOCK_BYTES,), np.uint8)
        del arr

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def torch_pinned_tensor(cfg: Config) -> float:
    def alloc_free():
        t = torch.empty(BLOCK_BYTES, dtype=torch.uint8, pin_memory=True)
        del t

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cupy_pinned_block(cfg: Config) -> float:
    def alloc_free():
        mem = cupy.cuda.alloc_pinned_memory(BLOCK_BYTES)
        del mem

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cupy_pinned_array(cfg: Config) -> float:
    import cupyx

    def alloc_free():
        arr = cupyx.empty_pinned((BLOCK_BYTES,), dtype=np.uint8)
        del arr

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


ROWS: dict[str, Row] = {
    "pinned_block": Row(
        "pinned 1 MB block alloc + free (raw: uncached)", "us", 0.5, "pinned_block_1mb_us",
        {"cuweave": cw_pinned_block, "torch": torch_pinned_tensor, "cupy": cupy_pinned_block}),
    "pinned_array": Row(
        "pinned 1 MB array alloc + free (raw: uncached)", "us", None, "pinned_block_1mb_us",
        {"cuweave": cw_pinned_array, "torch": torch_pinned_tensor, "cupy": cupy_pinned_array}),
}
