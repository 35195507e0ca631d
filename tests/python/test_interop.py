"""Interop with torch and cupy through DLPack and __cuda_array_interface__ (skipped if absent)."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw
from _support import Gate

pytestmark = pytest.mark.gpu


def test_torch_from_dlpack_sees_the_values(torch, stream, rng):
    host = rng.standard_normal((32, 16)).astype(np.float32)
    d = cw.to_device(host, stream=stream)
    t = torch.from_dlpack(d)
    assert t.device.type == "cuda" and t.device.index == 0
    assert tuple(t.shape) == host.shape
    assert t.dtype == torch.float32
    assert t.data_ptr() == d.ptr
    assert np.array_equal(t.cpu().numpy(), host)


def test_torch_writes_are_seen_by_cuweave(torch, stream):
    d = cw.zeros((1000,), np.float32, stream=stream)
    t = torch.from_dlpack(d)
    t.fill_(7.0)
    torch.cuda.synchronize()
    assert np.all(d.to_numpy(stream=stream) == 7)


def test_cuweave_from_dlpack_of_torch_shares_memory(torch, stream):
    t = torch.arange(1000, device="cuda", dtype=torch.int32)
    a = cw.from_dlpack(t)
    assert a.ptr == t.data_ptr()
    assert a.shape == (1000,)
    assert a.dtype == np.int32
    t.mul_(3)  # write via the peer
    torch.cuda.synchronize()
    assert np.array_equal(a.to_numpy(stream=stream), np.arange(1000, dtype=np.int32) * 3)


def test_cuweave_asarray_of_torch_shares_memory(torch, stream):
    t = torch.zeros((10, 10), device="cuda", dtype=torch.float64)
    a = cw.asarray(t)
    assert a.ptr == t.data_ptr()
    assert a.shape == (10, 10)
    t.add_(2.5)
    torch.cuda.synchronize()
    assert np.all(a.to_numpy(stream=stream) == 2.5)


def test_cuweave_writes_are_seen_by_torch(torch, stream):
    t = torch.zeros(4096, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    a = cw.from_dlpack(t)
    cw.ops.fill(a, 3.0, stream=stream)
    stream.synchronize()
    assert bool((t == 3.0).all())


def test_cupy_asarray_shares_memory(cupy, stream):
    x = cupy.arange(1000, dtype=cupy.float32)
    a = cw.asarray(x)
    assert a.ptr == x.data.ptr
    assert a.shape == (1000,)
    assert a.dtype == np.float32
    x += 5  # write via the peer
    cupy.cuda.Device().synchronize()
    assert np.array_equal(a.to_numpy(stream=stream), np.arange(1000, dtype=np.float32) + 5)


def test_cupy_reads_a_cuweave_array(cupy, stream, rng):
    host = rng.integers(0, 1 << 20, size=(50, 7), dtype=np.int64)
    d = cw.to_device(host, stream=stream)
    x = cupy.asarray(d)  # via __cuda_array_interface__ (v3 stream: cupy orders itself after d's stream)
    assert x.data.ptr == d.ptr
    assert np.array_equal(cupy.asnumpy(x), host)


def test_cupy_from_dlpack_of_cuweave(cupy, stream, rng):
    host = rng.standard_normal(333)
    d = cw.to_device(host, stream=stream)
    x = cupy.from_dlpack(d)
    assert x.data.ptr == d.ptr
    assert np.array_equal(cupy.asnumpy(x), host)


def test_cuweave_from_dlpack_of_cupy(cupy, stream):
    x = cupy.full((3, 5), 4, dtype=cupy.int16)
    a = cw.from_dlpack(x)
    assert a.ptr == x.data.ptr
    assert a.shape == (3, 5)
    cupy.cuda.Device().synchronize()
    assert np.all(a.to_numpy(stream=stream) == 4)


def test_dlpack_round_trip_preserves_dtypes(torch, stream):
    pairs = [
        (np.float16, torch.float16),
        (np.float32, torch.float32),
        (np.float64, torch.float64),
        (np.int8, torch.int8),
        (np.int16, torch.int16),
        (np.int32, torch.int32),
        (np.int64, torch.int64),
        (np.uint8, torch.uint8),
        (np.bool_, torch.bool),
        (np.complex64, torch.complex64),
    ]
    for np_dtype, torch_dtype in pairs:
        d = cw.zeros((4,), np_dtype, stream=stream)
        stream.synchronize()
        t = torch.from_dlpack(d)
        assert t.dtype == torch_dtype, np_dtype
        back = cw.from_dlpack(t)
        assert back.dtype == np.dtype(np_dtype)
        assert back.ptr == d.ptr


def test_dlpack_with_a_consumer_stream_orders_the_producer(torch, stream):
    # __dlpack__(stream=consumer) must make the consumer wait for work queued on the array's stream. An
    # ordering check, not a pending one: without the wait the sum reads zeros, however long the spin takes.
    d = cw.zeros((1 << 16,), np.float32, stream=stream)
    stream.synchronize()
    cw.ops.spin(0.1, stream=stream)
    cw.ops.fill(d, 8.0, stream=stream)
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        t = torch.from_dlpack(d)  # torch passes its current stream to __dlpack__
        total = t.sum()
    consumer.synchronize()  # item() copies on torch's default stream, which a non-blocking stream's sum does not order
    assert float(total.item()) == 8.0 * (1 << 16)


def test_dlpack_consumer_is_pending_while_the_producer_is_held(torch, stream):
    # The same rule seen as pending work: while the producer's stream is held, the consumer's sum waits.
    d = cw.zeros((1 << 16,), np.float32, stream=stream)
    stream.synchronize()
    consumer = torch.cuda.Stream()
    with Gate(stream) as gate:
        cw.ops.fill(d, 8.0, stream=stream)
        with torch.cuda.stream(consumer):
            t = torch.from_dlpack(d)  # torch passes its current stream to __dlpack__
            total = t.sum()
        producer_pending = stream.query() is False
        consumer_pending = consumer.query() is False
        gate.open()
        assert producer_pending, "the gate did not hold the producer's stream"
        assert consumer_pending, "the consumer's stream does not wait for the producer's fill"
        consumer.synchronize()  # item() copies on torch's default stream, which does not wait for `consumer`
        assert float(total.item()) == 8.0 * (1 << 16)
