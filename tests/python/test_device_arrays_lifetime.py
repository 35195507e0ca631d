"""Device memory stays alive while queued work uses it, and views keep their owners alive."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import cuweave as cw
from _support import Gate, released


N = (1 << 20) + 7


@pytest.fixture
def s1():
    s = cw.Stream()
    yield s
    s.synchronize()
    s.close()


@pytest.fixture
def s2():
    s = cw.Stream()
    yield s
    s.synchronize()
    s.close()


def test_dropped_source_of_a_queued_copy_is_not_freed_early(s1, s2, rng):
    pattern = rng.integers(0, 256, size=N, dtype=np.uint8)
    a = cw.to_device(pattern, stream=s1)
    s1.synchronize()
    b = cw.zeros((N,), np.uint8, stream=s2)

    with Gate(s2) as gate:
        cw.copy_async(b, a, stream=s2)
        del a
        gc.collect()

        for _ in range(16):
            junk = cw.empty((N,), np.uint8, stream=s1)
            cw.ops.fill(junk, 0xEE, stream=s1)
            del junk
        s1.synchronize()  # the churn has run; the copy is still held behind the gate
        assert s2.query() is False
        gate.open()
        s2.synchronize()
    assert np.array_equal(b.to_numpy(stream=s2), pattern)


def _churn(stream) -> list:
    """Allocations that would take a dropped array's memory if it were handed out too early, each filled with
    5.0 and run (a queued fill into the dropped array, held behind a gate, would overwrite one of them later)."""
    keep = []
    for _ in range(8):
        x = cw.empty((N,), np.float32, stream=stream)
        cw.ops.fill(x, 5.0, stream=stream)
        keep.append(x)
    stream.synchronize()
    return keep


def _assert_untouched(keep: list, stream) -> None:
    for x in keep:
        assert np.all(x.to_numpy(stream=stream) == 5.0)


def test_dropped_target_of_a_queued_kernel_is_not_reused_early(s1, s2):
    a = cw.empty((N,), np.float32, stream=s2)
    with Gate(s2) as gate:
        cw.ops.fill(a, 1.0, stream=s2)  # queued write into a
        del a
        gc.collect()

        keep = _churn(s1)
        assert s2.query() is False
        gate.open()
        s2.synchronize()
    _assert_untouched(keep, s1)


def test_dropped_array_of_a_closed_stream_is_not_freed_before_its_queued_work(s1):
    # Work on an array's own stream does not hold it: its free is queued behind that work. A closed stream's
    # free goes to the legacy default stream, which does not wait for a non-blocking stream's work: it must
    # wait for the event recorded as the stream closed (Note [Freeing memory whose stream was closed]).
    s = cw.Stream()
    a = cw.empty((N,), np.float32, stream=s)
    with Gate(s) as gate:
        cw.ops.fill(a, 1.0, stream=s)  # queued write into a, whose free follows s
        s.close()
        del a
        gc.collect()

        keep = _churn(s1)
        gate.open()
        cw.synchronize()
    _assert_untouched(keep, s1)


def test_memory_is_reused_after_the_work_completes(s1):
    # The deferred free must eventually happen: repeated drop/alloc cycles do not grow without bound.
    ptrs = set()
    for _ in range(20):
        a = cw.empty((N,), np.uint8, stream=s1)
        cw.ops.fill(a, 1, stream=s1)
        ptrs.add(a.ptr)
        del a
        s1.synchronize()
        cw.collect()
    assert len(ptrs) < 20


class _CaiOwner:
    """A foreign owner of device memory, speaking __cuda_array_interface__."""

    def __init__(self, backing):
        self.backing = backing

    @property
    def __cuda_array_interface__(self):
        cai = dict(self.backing.__cuda_array_interface__)
        cai["stream"] = None
        return cai


def test_asarray_keeps_the_foreign_owner_alive(s1):
    backing = cw.zeros((16,), np.float32, stream=s1)
    s1.synchronize()
    owner = _CaiOwner(backing)
    ref = weakref.ref(owner)
    view = cw.asarray(owner)
    del owner, backing
    gc.collect()
    assert ref() is not None, "the view's owner was released while the view lives"
    cw.ops.fill(view, 2.0, stream=s1)
    assert np.all(view.to_numpy(stream=s1) == 2)
    del view
    assert released(ref), "dropping the view did not release its owner"


@pytest.mark.gpu  # cupy
def test_asarray_keeps_a_cupy_array_alive(cupy, s1):
    view = cw.asarray(cupy.full((N,), 3, dtype=cupy.int32))  # the only reference is the view's
    gc.collect()
    junk = [cupy.full((N,), 9, dtype=cupy.int32) for _ in range(4)]  # would reuse freed memory
    cupy.cuda.Device().synchronize()
    assert np.all(view.to_numpy(stream=s1) == 3)
    del junk


@pytest.mark.gpu  # torch
def test_from_dlpack_keeps_a_torch_tensor_alive(torch, s1):
    view = cw.from_dlpack(torch.full((N,), 3, dtype=torch.int32, device="cuda"))
    gc.collect()
    junk = [torch.full((N,), 9, dtype=torch.int32, device="cuda") for _ in range(4)]
    torch.cuda.synchronize()
    assert np.all(view.to_numpy(stream=s1) == 3)
    del junk


@pytest.mark.gpu  # torch consumes a cuweave array through DLPack
def test_torch_view_keeps_the_cuweave_array_alive(torch, s1):
    d = cw.zeros((N,), np.int32, stream=s1)
    cw.ops.fill(d, 4, stream=s1)
    s1.synchronize()
    t = torch.from_dlpack(d)
    del d
    gc.collect()
    for _ in range(8):
        junk = cw.empty((N,), np.int32, stream=s1)
        cw.ops.fill(junk, -1, stream=s1)
        del junk
        s1.synchronize()
        cw.collect()
    assert bool((t == 4).all())
