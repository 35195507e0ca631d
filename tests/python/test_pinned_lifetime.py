"""Pinned blocks stay out of the pool while queued copies still use them."""

from __future__ import annotations

import gc

import numpy as np

import cuweave as cw
from _support import Gate, pinned_stats, settle


def test_pool_never_hands_out_a_block_an_in_flight_copy_reads(stream, rng):
    n = (4 << 20) + 123
    settle()
    pattern = rng.integers(0, 256, size=n, dtype=np.uint8)

    p = cw.pinned_empty(n, np.uint8)
    p[:] = pattern
    d = cw.empty(n, np.uint8, stream=stream)
    with Gate(stream) as gate:
        cw.copy_async(d, p, stream=stream)  # the Transfer is dropped at once
        addr = p.ctypes.data
        del p
        gc.collect()

        for _ in range(8):
            q = cw.pinned_empty(n, np.uint8)
            # The copy is held behind the gate, so its block must not come back, in every mode.
            assert stream.query() is False
            assert q.ctypes.data != addr, "pool reused a block that a queued copy still reads"
            q[:] = 0xA5  # garbage that would corrupt the copy if the block were shared
            del q
            cw.collect()  # only completed work may be released
        gate.open()
        stream.synchronize()
    assert np.array_equal(d.to_numpy(stream=stream), pattern)

    cw.collect()
    hits = pinned_stats()["hits"]
    again = cw.pinned_empty(n, np.uint8)
    assert pinned_stats()["hits"] > hits
    assert cw.is_pinned(again)


def test_pending_block_returns_to_the_pool_after_its_copy(stream, rng):
    n = (2 << 20) + 99
    settle()
    before = pinned_stats()
    src = cw.pinned_empty(n, np.uint8)
    src[:] = rng.integers(0, 256, size=n, dtype=np.uint8)
    d = cw.empty(n, np.uint8, stream=stream)
    with Gate(stream) as gate:
        cw.copy_async(d, src, stream=stream)
        del src
        gc.collect()
        cw.collect()
        pending = pinned_stats()
        assert stream.query() is False  # the copy is held behind the gate, in every mode
        assert pending["in_use_bytes"] >= before["in_use_bytes"] + n  # not yet reusable
        gate.open()
        stream.synchronize()
    cw.collect()
    done = pinned_stats()
    assert done["in_use_bytes"] == before["in_use_bytes"]
    assert done["cached_bytes"] >= before["cached_bytes"] + n


def test_views_keep_the_block_alive():
    settle()
    before = pinned_stats()["in_use_bytes"]
    p = cw.pinned_empty(1 << 20, np.uint8)
    p[:] = 3
    view = p[1000:2000]
    del p
    settle()
    assert pinned_stats()["in_use_bytes"] >= before + (1 << 20)
    assert np.all(view == 3)
    del view
    settle()
    assert pinned_stats()["in_use_bytes"] == before


def test_memoryview_keeps_the_block_alive():
    settle()
    before = pinned_stats()["in_use_bytes"]
    block = cw.pinned_pool().allocate(1 << 20)
    mv = memoryview(block)
    mv[:3] = b"xyz"
    del block
    settle()
    assert pinned_stats()["in_use_bytes"] >= before + (1 << 20)
    assert bytes(mv[:3]) == b"xyz"
    mv.release()
    del mv
    settle()
    assert pinned_stats()["in_use_bytes"] == before


def test_pinned_destination_of_a_queued_download_stays_alive(stream, rng):
    src = rng.standard_normal(1 << 18)
    d = cw.to_device(src, stream=stream)
    out = cw.pinned_empty(src.shape, src.dtype)
    with Gate(stream) as gate:
        t = cw.copy_async(out, d, stream=stream)
        del out
        gc.collect()
        # churn the pool while the download is held behind the gate
        for _ in range(8):
            junk = cw.pinned_empty(src.shape, src.dtype)
            junk[:] = -1.0
            del junk
            cw.collect()
        assert t.done is False
        gate.open()
        t.wait()
    assert np.array_equal(t.dst, src)
