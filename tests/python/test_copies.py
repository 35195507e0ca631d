"""Copies: exact round trips through every host/device path, and Transfer semantics."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuweave as cw
from _support import Gate


DTYPES = [
    np.uint8,
    np.int16,
    np.int32,
    np.int64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.bool_,
]
SHAPES = [
    (0,),
    (3, 0),
    (1,),
    (3,),
    (1023,),
    ((1 << 20) + 7,),
    (7, 5),
    (2, 3, 5),
    (17, 1, 33),
]

ROUND_TRIP = settings(max_examples=25, deadline=None, database=None)


def _random(dtype, shape, seed):
    """Random bit patterns (NaN payloads, negative zeros...) for any dtype; 0/1 for bool."""
    dtype = np.dtype(dtype)
    gen = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == np.bool_:
        return gen.integers(0, 2, size=shape).astype(np.bool_)
    raw = gen.integers(0, 256, size=n * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def _same_bits(got, want):
    """Exact comparison of shape, dtype and every byte; the message names the first difference."""
    got, want = np.asarray(got), np.asarray(want)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    gb = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
    wb = np.ascontiguousarray(want).reshape(-1).view(np.uint8)
    diff = np.flatnonzero(gb != wb)
    assert diff.size == 0, (
        f"{diff.size} of {wb.size} bytes differ; first at byte {diff[0]}: "
        f"got {gb[diff[0]]:#04x}, want {wb[diff[0]]:#04x}"
    )
    return True


@contextlib.contextmanager
def _fresh_stream():
    # Not a fixture: hypothesis runs the body many times per fixture setup.
    s = cw.Stream()
    try:
        yield s
    finally:
        s.synchronize()
        s.close()


case = given(
    dtype=st.sampled_from(DTYPES),
    shape=st.sampled_from(SHAPES),
    seed=st.integers(0, 2**32 - 1),
)
nonempty_case = given(
    dtype=st.sampled_from(DTYPES),
    shape=st.sampled_from([s for s in SHAPES if 0 not in s]),
    seed=st.integers(0, 2**32 - 1),
)


@ROUND_TRIP
@case
def test_pageable_round_trip(dtype, shape, seed):
    with _fresh_stream() as copy_stream:
        data = _random(dtype, shape, seed)
        d = cw.to_device(data, stream=copy_stream)
        assert d.shape == data.shape and d.dtype == data.dtype
        back = d.to_numpy(stream=copy_stream)
        assert _same_bits(back, data)


@ROUND_TRIP
@given(dtype=st.sampled_from(DTYPES), shape=st.sampled_from(SHAPES), seed=st.integers(0, 2**32 - 1),
       by_kernel=st.booleans())
def test_pinned_round_trip(dtype, shape, seed, by_kernel):
    # Pinned host -> device -> device -> pinned host, by copy engines or by kernels (Note [Copies by kernel]):
    # every alignment these dtypes and shapes give (odd sizes take the kernel's 1-byte path, 16-byte
    # multiples its widest).
    with _fresh_stream() as copy_stream:
        data = _random(dtype, shape, seed)
        src = cw.pinned_empty(shape, dtype)
        src[...] = data
        d = cw.empty(shape, dtype, stream=copy_stream)
        cw.copy_async(d, src, stream=copy_stream, by_kernel=by_kernel)
        d2 = cw.empty(shape, dtype, stream=copy_stream)
        cw.copy_async(d2, d, stream=copy_stream, by_kernel=by_kernel)
        dst = cw.pinned_empty(shape, dtype)
        t = cw.copy_async(dst, d2, stream=copy_stream, by_kernel=by_kernel)
        t.wait()
        assert _same_bits(dst, data)


@ROUND_TRIP
@case
def test_device_to_device_round_trip(dtype, shape, seed):
    with _fresh_stream() as copy_stream:
        data = _random(dtype, shape, seed)
        d1 = cw.to_device(data, stream=copy_stream)
        d2 = cw.empty(shape, dtype, stream=copy_stream)
        cw.copy_async(d2, d1, stream=copy_stream)
        assert d2.ptr != d1.ptr or d1.size == 0
        assert _same_bits(d2.to_numpy(stream=copy_stream), data)


@ROUND_TRIP
@nonempty_case
def test_registered_round_trip(dtype, shape, seed):
    with _fresh_stream() as copy_stream:
        data = _random(dtype, shape, seed)
        host = data.copy()
        with cw.pinned(host):
            assert cw.is_pinned(host)
            d = cw.to_device(host, stream=copy_stream)
            back = d.to_numpy(stream=copy_stream)
        assert _same_bits(back, data)
        assert _same_bits(host, data)  # registration did not disturb the data


@pytest.mark.parametrize("shape", [(0,), (3, 0)])
def test_registered_round_trip_of_an_empty_array(stream, shape):
    # Empty batches happen; `with cw.pinned(a):` on an empty array is expected to be a no-op.
    host = np.empty(shape, np.float32)
    with cw.pinned(host):
        d = cw.to_device(host, stream=stream)
        back = d.to_numpy(stream=stream)
    assert back.shape == shape
    assert cw.is_pinned(host) is False


@ROUND_TRIP
@case
def test_to_numpy_into_a_pinned_out(dtype, shape, seed):
    with _fresh_stream() as copy_stream:
        data = _random(dtype, shape, seed)
        d = cw.to_device(data, stream=copy_stream)
        out = cw.pinned_empty(shape, dtype)
        result = d.to_numpy(stream=copy_stream, out=out)
        assert _same_bits(out, data)
        assert _same_bits(result, data)


@ROUND_TRIP
@case
def test_copy_async_pageable_both_ways(dtype, shape, seed):
    with _fresh_stream() as copy_stream:
        data = _random(dtype, shape, seed)
        d = cw.empty(shape, dtype, stream=copy_stream)
        cw.copy_async(d, data, stream=copy_stream)
        out = np.empty(shape, dtype)
        cw.copy_async(out, d, stream=copy_stream).wait()
        assert _same_bits(out, data)


def test_a_copy_by_kernel_of_pageable_memory_goes_to_a_copy_engine(stream, rng):
    # A kernel cannot reach pageable memory: the same copy is made by the usual path.
    host = rng.standard_normal(1000)
    d = cw.empty(host.shape, host.dtype, stream=stream)
    cw.copy_async(d, host, stream=stream, by_kernel=True).wait()
    out = np.empty_like(host)
    cw.copy_async(out, d, stream=stream, by_kernel=True).wait()
    assert np.array_equal(out, host)


def test_a_copy_by_kernel_is_ordered_on_its_stream(stream, rng):
    host = cw.pinned_empty(1 << 16, np.float32)
    d = cw.zeros(host.shape, host.dtype, stream=stream)
    stream.synchronize()
    with Gate(stream) as gate:
        cw.ops.fill(d, 6.0, stream=stream)
        t = cw.copy_async(host, d, stream=stream, by_kernel=True)
        assert t.done is False, "the copy ran before the work queued ahead of it"
        gate.open()
        t.wait()
    assert np.all(host == 6)


def test_captured_copies_by_kernel_are_kernel_nodes(stream):
    host_in = cw.pinned_empty(256, np.float32)
    host_out = cw.pinned_empty(256, np.float32)
    d = cw.empty(256, np.float32, stream=stream)
    with cw.capture(stream) as cap:
        cw.copy_async(d, host_in, by_kernel=True)
        cw.ops.add(d, 1.0, out=d)
        cw.copy_async(host_out, d, by_kernel=True)
    labels = sorted(n.label for n in cap.graph.nodes if n.kind == "kernel")
    assert labels == ["add_scalar", "copy_kernel DtoH", "copy_kernel HtoD"]
    for round in range(3):  # each replay reads the pinned input anew
        host_in[:] = np.arange(256) + 10 * round
        cap.graph.replay(stream)
        stream.synchronize()
        assert np.array_equal(host_out, host_in + 1)


# --------------------------------------------------------------------------- Transfer


def test_transfer_follows_the_copy(stream, rng):
    # pinned source: a pageable one may make the CUDA copy call wait for the stream
    host = cw.pinned_empty(1 << 18, np.float64)
    host[:] = rng.standard_normal(1 << 18)
    d = cw.empty(host.shape, host.dtype, stream=stream)
    with Gate(stream) as gate:
        t = cw.copy_async(d, host, stream=stream)
        assert isinstance(t.event, cw.Event)
        assert t.dst is d
        assert t.done is False
        assert t.query() is False
        assert t.event.query() is False
        gate.open()
        t.wait()
    assert t.done is True
    assert t.query() is True
    assert t.event.query() is True
    assert np.array_equal(d.to_numpy(stream=stream), host)


def test_transfer_to_host_exposes_the_destination(stream, rng):
    host = rng.integers(0, 1 << 16, size=1000, dtype=np.int32)
    d = cw.to_device(host, stream=stream)
    out = np.zeros_like(host)
    t = cw.copy_async(out, d, stream=stream)
    t.wait()
    assert t.dst is out
    assert np.array_equal(out, host)


def test_copy_is_ordered_on_the_current_stream(stream, rng):
    host = cw.pinned_empty(1 << 16, np.float64)
    host[:] = rng.standard_normal(1 << 16)
    d = cw.empty(host.shape, host.dtype, stream=stream)
    with Gate(stream) as gate:
        with stream:
            t = cw.copy_async(d, host)
        assert t.done is False, "copy_async did not queue on the current stream"
        gate.open()
        stream.synchronize()
    assert t.done is True
    assert np.array_equal(d.to_numpy(stream=stream), host)


def test_copy_waits_for_earlier_work_on_its_stream(stream):
    src = cw.zeros((1 << 16,), np.float32, stream=stream)
    dst = cw.zeros((1 << 16,), np.float32, stream=stream)
    stream.synchronize()
    cw.ops.spin(0.1, stream=stream)
    cw.ops.fill(src, 6.0, stream=stream)
    cw.copy_async(dst, src, stream=stream)
    assert np.all(dst.to_numpy(stream=stream) == 6)


def test_pageable_source_is_captured_once_the_transfer_is_done(stream, rng):
    # A pageable source is captured by the time the Transfer is done; changing it afterwards
    # must not change the device copy.
    host = rng.standard_normal(1 << 16)
    expected = host.copy()
    d = cw.empty(host.shape, host.dtype, stream=stream)
    cw.copy_async(d, host, stream=stream).wait()
    host[:] = 0
    assert np.array_equal(d.to_numpy(stream=stream), expected)


def test_copies_on_two_streams_do_not_mix(stream, rng):
    other = cw.Stream()
    try:
        a_host = rng.standard_normal(1 << 18)
        b_host = rng.standard_normal(1 << 18)
        a = cw.to_device(a_host, stream=stream)
        b = cw.to_device(b_host, stream=other)
        a_out = np.empty_like(a_host)
        b_out = np.empty_like(b_host)
        ta = cw.copy_async(a_out, a, stream=stream)
        tb = cw.copy_async(b_out, b, stream=other)
        ta.wait()
        tb.wait()
        assert np.array_equal(a_out, a_host)
        assert np.array_equal(b_out, b_host)
    finally:
        other.synchronize()
        other.close()


def test_a_transfer_prints_whether_it_is_done_and_what_it_fills(stream):
    device = cw.empty(16, np.float32, stream=stream)
    with Gate(stream) as gate:
        transfer = cw.copy_async(device, np.ones(16, np.float32), stream=stream)
        assert repr(transfer) == "<cuweave.Transfer pending into DeviceArray shape=(16,) dtype=float32>"
        gate.open()
    transfer.wait()
    assert repr(transfer) == "<cuweave.Transfer done into DeviceArray shape=(16,) dtype=float32>"
