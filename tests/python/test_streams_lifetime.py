"""Stream lifetimes: closing with queued work, adopted owners kept alive, arrays keep their stream."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import cuweave as cw
from _support import Gate, released


def test_close_with_queued_work_still_completes_it():
    reader = cw.Stream()
    try:
        buf = cw.zeros((1 << 16,), np.float32, stream=reader)
        reader.synchronize()
        s = cw.Stream()
        with Gate(s) as gate:
            cw.ops.fill(buf, 7.0, stream=s)
            filled = s.record()
            s.close()  # must neither drop nor wait for the queued work: it returns with the fill held
            assert filled.query() is False
            gate.open()
            cw.synchronize()
        assert filled.query() is True
        assert np.all(buf.to_numpy(stream=reader) == 7)
    finally:
        reader.close()


def test_dropping_a_stream_with_queued_work_still_completes_it():
    reader = cw.Stream()
    try:
        buf = cw.zeros((1 << 16,), np.float32, stream=reader)
        reader.synchronize()
        s = cw.Stream()
        with Gate(s) as gate:
            cw.ops.fill(buf, 5.0, stream=s)
            filled = s.record()
            del s  # with the fill held behind the gate
            gc.collect()
            assert filled.query() is False
            gate.open()
            cw.synchronize()
        assert filled.query() is True
        assert np.all(buf.to_numpy(stream=reader) == 5)
    finally:
        reader.close()


def test_device_array_keeps_its_stream_usable():
    s = cw.Stream()
    d = cw.zeros((16,), np.float32, stream=s)
    del s
    gc.collect()
    assert d.stream.closed is False
    cw.ops.fill(d, 3.0, stream=d.stream)
    d.stream.synchronize()
    assert np.all(d.to_numpy() == 3)


class _Owner:
    """Stands for a peer's stream object: owns a cuweave stream until it dies."""

    def __init__(self):
        self.inner = cw.Stream()

    def __cuda_stream__(self):
        return (0, self.inner.handle)


def test_from_external_keeps_the_foreign_object_alive():
    owner = _Owner()
    ref = weakref.ref(owner)
    ext = cw.Stream.from_external(owner)
    del owner
    gc.collect()
    assert ref() is not None, "the adopted stream's owner was released"
    cw.ops.spin(0.01, stream=ext)
    ext.synchronize()
    assert ext.query() is True
    del ext
    assert released(ref), "dropping the adopted stream did not release its owner"


@pytest.mark.gpu  # cupy
def test_from_external_keeps_a_cupy_stream_alive(cupy):
    cs = cupy.cuda.Stream(non_blocking=True)
    handle = cs.ptr
    ext = cw.Stream.from_external(cs)
    del cs
    gc.collect()
    cw.ops.spin(0.01, stream=ext)  # a destroyed stream handle would raise a CudaError here
    ext.synchronize()
    assert ext.handle == handle
