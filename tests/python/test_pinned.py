"""Pinned host memory: pool-backed arrays, blocks, statistics, registration of numpy arrays."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import cuweave as cw
from _support import Gate, pinned_stats, settle


STAT_KEYS = {
    "in_use_bytes",
    "in_use_blocks",
    "cached_bytes",
    "cached_blocks",
    "hits",
    "misses",
    "peak_in_use_bytes",
}

# --------------------------------------------------------------------------- arrays


def test_pinned_empty_is_a_plain_numpy_array():
    p = cw.pinned_empty((3, 5), np.float32)
    assert type(p) is np.ndarray
    assert p.shape == (3, 5)
    assert p.dtype == np.float32
    assert p.flags.c_contiguous and p.flags.writeable and p.flags.aligned
    assert type(p.base).__name__ == "PinnedBlock"
    assert p.base.nbytes >= p.nbytes


def test_pinned_empty_defaults_and_int_shape():
    p = cw.pinned_empty(7)
    assert p.shape == (7,)
    assert p.dtype == np.float64


def test_pinned_empty_zero_size():
    p = cw.pinned_empty((0, 4), np.int16)
    assert p.shape == (0, 4)
    assert p.size == 0


def test_is_pinned_tells_pinned_from_pageable():
    p = cw.pinned_empty((1024,), np.uint8)
    assert cw.is_pinned(p) is True
    assert cw.is_pinned(p[100:200]) is True
    assert cw.is_pinned(np.empty(1024, np.uint8)) is False
    assert cw.is_pinned(np.zeros(1 << 20)) is False


def test_pinned_zeros_is_zero_even_on_a_reused_dirty_block():
    n = (1 << 20) + 17
    settle()
    dirty = cw.pinned_empty(n, np.uint8)
    dirty[:] = 0xFF
    del dirty
    settle()
    z = cw.pinned_zeros(n, np.uint8)
    assert cw.is_pinned(z)
    assert z.dtype == np.uint8 and z.shape == (n,)
    assert not z.any()


def test_pinned_array_memory_is_usable_and_independent():
    a = cw.pinned_empty(1000, np.int64)
    b = cw.pinned_empty(1000, np.int64)
    assert not np.shares_memory(a, b)
    a[:] = np.arange(1000)
    b[:] = -1
    assert np.array_equal(a, np.arange(1000))


# --------------------------------------------------------------------------- blocks


def test_block_api():
    pool = cw.pinned_pool()
    block = pool.allocate(1000)
    assert isinstance(block.ptr, int) and block.ptr != 0
    assert block.nbytes == 1000
    assert block.capacity >= 1000
    mv = memoryview(block)
    assert mv.nbytes == 1000
    assert not mv.readonly
    mv[:4] = b"abcd"
    arr = np.frombuffer(block, dtype=np.uint8)
    assert bytes(arr[:4]) == b"abcd"
    assert arr.ctypes.data == block.ptr
    assert cw.is_pinned(arr)


def test_distinct_live_blocks_do_not_overlap():
    pool = cw.pinned_pool()
    blocks = [pool.allocate(4096) for _ in range(16)]
    spans = sorted((b.ptr, b.ptr + b.nbytes) for b in blocks)
    for (_, end), (start, _) in zip(spans[:-1], spans[1:], strict=True):
        assert end <= start


# --------------------------------------------------------------------------- statistics


def test_stats_has_all_keys():
    stats = pinned_stats()
    assert STAT_KEYS <= set(stats)
    for key in STAT_KEYS:
        assert isinstance(stats[key], int) and stats[key] >= 0, key
    assert stats["peak_in_use_bytes"] >= stats["in_use_bytes"]


def test_stats_follow_allocate_and_free():
    n = (3 << 20) + 5
    settle()
    before = pinned_stats()

    p = cw.pinned_empty(n, np.uint8)
    during = pinned_stats()
    assert during["in_use_bytes"] >= before["in_use_bytes"] + n
    assert during["in_use_blocks"] == before["in_use_blocks"] + 1
    assert during["peak_in_use_bytes"] >= during["in_use_bytes"]

    del p
    settle()
    after = pinned_stats()
    assert after["in_use_bytes"] == before["in_use_bytes"]
    assert after["in_use_blocks"] == before["in_use_blocks"]
    assert after["cached_bytes"] >= during["cached_bytes"] + n
    assert after["cached_blocks"] == during["cached_blocks"] + 1


def test_second_allocation_of_a_size_hits_the_cache():
    n = (2 << 20) + 11
    settle()
    cw.pinned_pool().empty_cache()
    s0 = pinned_stats()
    p = cw.pinned_empty(n, np.uint8)
    s1 = pinned_stats()
    assert s1["misses"] == s0["misses"] + 1
    del p
    settle()
    q = cw.pinned_empty(n, np.uint8)
    s2 = pinned_stats()
    assert s2["hits"] == s1["hits"] + 1
    assert s2["misses"] == s1["misses"]
    assert cw.is_pinned(q)


def test_empty_cache_returns_bytes_and_empties_the_cache():
    settle()
    arrays = [cw.pinned_empty((1 << 20) + i, np.uint8) for i in range(3)]
    del arrays
    settle()
    assert pinned_stats()["cached_bytes"] > 0
    returned = cw.pinned_pool().empty_cache()
    assert isinstance(returned, int) and returned > 0
    stats = pinned_stats()
    assert stats["cached_bytes"] == 0
    assert stats["cached_blocks"] == 0
    assert cw.pinned_pool().empty_cache() == 0


def test_empty_cache_keeps_live_blocks():
    settle()
    p = cw.pinned_empty(1 << 20, np.uint8)
    p[:] = 7
    cw.pinned_pool().empty_cache()
    assert pinned_stats()["in_use_bytes"] >= p.nbytes
    assert np.all(p == 7)
    assert cw.is_pinned(p)


# --------------------------------------------------------------------------- registration


def test_registration_is_undone_on_exit():
    a = np.zeros(1 << 20, np.float32)
    assert cw.is_pinned(a) is False
    with cw.pinned(a):
        assert cw.is_pinned(a) is True
    assert cw.is_pinned(a) is False


def test_registration_is_undone_on_exception():
    a = np.zeros(1 << 20, np.float32)
    with pytest.raises(KeyError):
        with cw.pinned(a):
            raise KeyError("body")
    assert cw.is_pinned(a) is False
    with cw.pinned(a):  # can be registered again
        assert cw.is_pinned(a)


def test_registered_array_keeps_its_data_and_identity(rng):
    a = rng.standard_normal(1 << 18)
    copy = a.copy()
    ptr = a.ctypes.data
    with cw.pinned(a):
        assert a.ctypes.data == ptr
    assert np.array_equal(a, copy)


def test_leaving_registration_waits_for_queued_copies(stream, rng):
    a = rng.integers(0, 1 << 30, size=1 << 20, dtype=np.int32)
    expected = a.copy()
    d = cw.empty(a.shape, a.dtype, stream=stream)
    opened = threading.Event()

    def open_the_gate():
        opened.set()
        gate.open()

    with Gate(stream) as gate:
        with cw.pinned(a):
            t = cw.copy_async(d, a, stream=stream)
            assert t.done is False  # held behind the gate
            # Opened from another thread, while leaving the block below waits for the copy (it must).
            opener = threading.Timer(0.05, open_the_gate)
            opener.start()
        assert opened.is_set(), "leaving the registration did not wait for the queued copy"
    opener.join()
    # Unregistering must have waited for the copy that reads `a`, so changing `a` now cannot reach `d`.
    # (t.done may still lag: the Transfer's event is recorded after the copy, as a separate step.)
    a[:] = -1
    assert np.array_equal(d.to_numpy(stream=stream), expected)
    assert t.done is True


def test_the_pinned_pool_prints_its_use():
    block = cw.pinned_pool().allocate(3 << 20)  # held: in use while printed
    stats = cw.pinned_pool().stats()
    text = repr(cw.pinned_pool())
    assert text.startswith("<cuweave.PinnedPool in use: ")
    assert f" in {stats['in_use_blocks']} blocks, cached: " in text
    assert f"; {stats['hits']} hits, {stats['misses']} misses>" in text
    del block


def test_kept_host_read_results_hold_at_most_the_results_limit_of_pinned_memory(stream):
    pool = cw.pinned_pool()
    previous = pool.results_limit
    try:
        pool.results_limit = 48 << 20  # three 16 MB results
        settle()
        d = cw.zeros(4 << 20, np.float32, stream=stream)  # 16 MB: a size class of its own
        kept = [d.to_numpy(stream=stream) for _ in range(8)]
        assert sum(cw.is_pinned(k) for k in kept) == 3  # the first of a size is ordinary; then three fit
        assert pinned_stats()["results_in_use_bytes"] == 48 << 20
        assert pinned_stats()["results_limit_bytes"] == 48 << 20
        assert all(type(k) is np.ndarray and k.flags.writeable and (k == 0).all() for k in kept)
        del kept
        settle()
        assert pinned_stats()["results_in_use_bytes"] == 0  # released as the results go
        assert cw.is_pinned(d.to_numpy(stream=stream, pinned=True))  # asked for: not bounded
        pool.results_limit = 0
        assert not cw.is_pinned(d.to_numpy(stream=stream))
        with pytest.raises(TypeError, match="number of bytes"):
            pool.results_limit = -1
    finally:
        pool.results_limit = previous


def test_the_results_limit_comes_from_the_environment():
    script = "import cuweave as cw; print(cw.pinned_pool().results_limit)"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "CUWEAVE_PINNED_RESULTS_MB": "64"})
    assert run.stdout.strip() == str(64 << 20), run.stderr
