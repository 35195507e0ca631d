"""Everything a copy touches stays alive until it completes, whatever Python drops."""

from __future__ import annotations

import gc

import numpy as np

import cuweave as cw
from _support import Gate


N = (1 << 20) + 3


def test_dropped_pageable_source_is_copied_intact(stream, rng):
    expected = rng.standard_normal(N)
    d = cw.empty((N,), np.float64, stream=stream)
    with Gate(stream) as gate:
        cw.copy_async(d, expected.copy(), stream=stream)  # the only reference is the copy's
        gc.collect()
        # churn the host heap so a freed source would be overwritten
        junk = [np.full(N, -1.0) for _ in range(8)]
        del junk
        assert stream.query() is False  # the copy is still held behind the gate
        gate.open()
        stream.synchronize()
    assert np.array_equal(d.to_numpy(stream=stream), expected)


def test_to_device_of_a_temporary_is_copied_intact(stream, rng):
    expected = rng.integers(0, 1 << 30, size=N, dtype=np.int64)
    with Gate(stream) as gate:
        d = cw.to_device(expected.copy(), stream=stream)
        gc.collect()
        junk = [np.full(N, -1, np.int64) for _ in range(8)]
        del junk
        assert stream.query() is False  # the copy is still held behind the gate
        gate.open()
        assert np.array_equal(d.to_numpy(stream=stream), expected)


def test_dropped_pageable_destination_still_receives_the_data(stream, rng):
    expected = rng.standard_normal(N)
    d = cw.to_device(expected, stream=stream)
    cw.ops.spin(0.2, stream=stream)
    t = cw.copy_async(np.empty(N), d, stream=stream)
    gc.collect()
    t.wait()
    assert np.array_equal(t.dst, expected)


def test_dropped_device_source_and_transfer(stream, rng):
    expected = rng.integers(0, 256, size=N, dtype=np.uint8)
    src = cw.to_device(expected, stream=stream)
    dst = cw.zeros((N,), np.uint8, stream=stream)
    with Gate(stream) as gate:
        cw.copy_async(dst, src, stream=stream)
        del src
        gc.collect()
        for _ in range(8):
            junk = cw.empty((N,), np.uint8, stream=stream)
            cw.ops.fill(junk, 0x11, stream=stream)
            del junk
        assert stream.query() is False  # the copy is still held behind the gate
        gate.open()
        assert np.array_equal(dst.to_numpy(stream=stream), expected)


def test_dropped_device_destination_is_not_freed_under_the_copy(stream, rng):
    # The copy writes into dst after dst's last reference is gone; memory handed out
    # meanwhile on another stream must not receive those bytes.
    other = cw.Stream()
    try:
        host = cw.pinned_empty(N, np.uint8)  # pinned: the copy stays queued behind the gate
        host[:] = rng.integers(1, 256, size=N, dtype=np.uint8)
        dst = cw.empty((N,), np.uint8, stream=stream)
        with Gate(stream) as gate:
            cw.copy_async(dst, host, stream=stream)
            del dst
            gc.collect()
            keep = []
            for _ in range(8):
                x = cw.empty((N,), np.uint8, stream=other)
                cw.ops.fill(x, 0, stream=other)
                keep.append(x)
            other.synchronize()  # the fills are done; the copy is still held behind the gate
            assert stream.query() is False
            gate.open()
            stream.synchronize()
        for x in keep:
            assert not x.to_numpy(stream=other).any()
    finally:
        other.close()
