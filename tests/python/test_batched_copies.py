"""cuweave.to_device_batch: a list of NumPy arrays copied in one submission (Note [Batched copies]): the bytes of
every array, stream order before and after, pageable sources read before the call returns, sources kept alive,
one by one where CUDA refuses a batch (a capture, the legacy default stream), and the backend's batch call
refused where CUDA refuses it."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import cuweave as cw

BIG = (2 << 20) // 4  # float32 elements of a pageable array large enough to go through the staging ring


def some_arrays(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    pinned = cw.pinned_empty((64, 32), np.int32)
    pinned[...] = rng.integers(-100, 100, pinned.shape)
    return [
        rng.standard_normal(16384).astype(np.float32),  # 64 KB, pageable: in the batch
        rng.standard_normal(BIG).astype(np.float32),  # pageable, staged
        pinned,  # pinned: in the batch, read in stream order
        np.arange(7, dtype=np.uint8),
        np.zeros((0, 3), np.float64),  # nothing to copy
        np.array(2.5),  # 0-d
    ]


def test_every_array_arrives_byte_for_byte_with_its_shape_and_dtype(stream):
    hosts = some_arrays()
    arrays = cw.to_device_batch(hosts, stream=stream)
    assert [a.shape for a in arrays] == [h.shape for h in hosts]
    assert [a.dtype for a in arrays] == [h.dtype for h in hosts]
    for array, host in zip(arrays, hosts):
        np.testing.assert_array_equal(array.to_numpy(stream=stream), host)


def test_the_batch_runs_after_the_work_before_it_and_before_the_work_after_it(stream):
    # A pinned source written on the device before the batch: read in stream order, the batch copies the new values.
    source = cw.pinned_empty(1024, np.float32)
    source[:] = 0
    staged = cw.to_device(np.full(1024, 7.0, np.float32), stream=stream)
    cw.ops.spin(0.02, stream=stream)
    cw.copy_async(source, staged, stream=stream)
    small = np.arange(1024, dtype=np.float32)
    arrays = cw.to_device_batch([source, small], stream=stream)
    doubled = cw.ops.scale(arrays[1], 2.0, stream=stream)  # after the batch on its stream
    np.testing.assert_array_equal(arrays[0].to_numpy(stream=stream), 7.0)
    np.testing.assert_array_equal(doubled.to_numpy(stream=stream), small * 2)


def test_pageable_sources_are_read_before_the_call_returns(stream):
    small, large = np.ones(1000, np.float32), np.ones(BIG, np.float32)
    cw.ops.spin(0.02, stream=stream)  # the copies queue behind this
    arrays = cw.to_device_batch([small, large], stream=stream)
    small[:] = 5.0  # later host writes do not reach the device, as with to_device
    large[:] = 5.0
    for array in arrays:
        np.testing.assert_array_equal(array.to_numpy(stream=stream), 1.0)


def test_sources_dropped_at_once_stay_alive_until_the_copies_ran(stream):
    cw.ops.spin(0.02, stream=stream)
    pinned = cw.pinned_empty(4096, np.float64)
    pinned[:] = 3.0
    arrays = cw.to_device_batch([pinned, np.full(4096, 4.0)], stream=stream)
    del pinned  # its block goes back to the pool only once the batch has read it
    reused = cw.pinned_empty(4096, np.float64)
    reused[:] = -1.0
    np.testing.assert_array_equal(arrays[0].to_numpy(stream=stream), 3.0)
    np.testing.assert_array_equal(arrays[1].to_numpy(stream=stream), 4.0)


def test_a_batch_queued_while_a_host_function_holds_another_stream(stream, other_stream):
    # While an ordered host function holds a stream, cuweave queues work with the GIL released (the function may
    # need it): the batch reads every Python object it needs before that.
    gate = threading.Event()
    other_stream.launch_host_func(gate.wait, ordered=True)
    try:
        arrays = cw.to_device_batch([np.arange(10.0), np.ones((2, 3), np.int8)], stream=stream)
    finally:
        gate.set()
    np.testing.assert_array_equal(arrays[0].to_numpy(stream=stream), np.arange(10.0))
    np.testing.assert_array_equal(arrays[1].to_numpy(stream=stream), np.ones((2, 3), np.int8))


def test_captured_the_copies_become_nodes_that_copy_at_every_replay(stream):
    sources = [cw.pinned_empty(256, np.float32) for _ in range(3)]
    for i, source in enumerate(sources):
        source[:] = i
    with cw.capture(stream) as cap:
        arrays = cw.to_device_batch(sources, stream=stream)
    for source in sources:
        source += 10.0
    cap.graph.replay(stream)
    for i, array in enumerate(arrays):
        np.testing.assert_array_equal(array.to_numpy(stream=stream), i + 10.0)


def test_on_the_legacy_default_stream_the_copies_go_one_by_one():
    hosts = [np.arange(100, dtype=np.int64), np.arange(200, dtype=np.int16)]
    arrays = cw.to_device_batch(hosts, stream=cw.default_stream())
    for array, host in zip(arrays, hosts):
        np.testing.assert_array_equal(array.to_numpy(), host)


def test_on_the_current_stream_by_default(stream):
    with stream:
        (array,) = cw.to_device_batch((np.arange(5.0),))
    np.testing.assert_array_equal(array.to_numpy(stream=stream), np.arange(5.0))


def test_an_empty_list_copies_nothing(stream):
    assert cw.to_device_batch([], stream=stream) == []


@pytest.mark.parametrize("bad, says", [
    (np.arange(3.0), "list or tuple of NumPy arrays"),
    ("abc", "list or tuple"),
    ([np.arange(3), "no"], "numpy.ndarray"),
    ([np.array([object()])], "Python objects"),
    ([np.arange(12.0).reshape(3, 4)[:, ::2]], "not C-contiguous"),
])
def test_what_is_not_a_list_of_host_arrays_is_refused_naming_it(stream, bad, says):
    with pytest.raises(TypeError if "contiguous" not in says else ValueError, match=says):
        cw.to_device_batch(bad, stream=stream)


def test_a_device_array_in_the_list_is_refused(stream):
    with pytest.raises(TypeError, match="already a GPU array"):
        cw.to_device_batch([cw.zeros(3, np.float32, stream=stream)], stream=stream)


def test_the_backend_refuses_a_batch_where_cuda_does(stream):
    """CUDA's rules for cudaMemcpyBatchAsync, kept by the simulator: no copies, the legacy default stream, a
    capturing stream (a graph has no node for a batch; the capture goes on). cuweave copies one by one in the last
    two cases."""
    calls = cw._core.backend_calls
    pinned = cw.pinned_empty(64, np.float32)
    pinned[:] = 1.5
    device = cw.empty(64, np.float32, stream=stream)
    stream.synchronize()
    one = [(device.__cuda_array_interface__["data"][0], pinned.ctypes.data, pinned.nbytes)]
    with pytest.raises(cw.CudaError) as empty:
        calls.copy_batch([], stream)
    assert empty.value.name == "cudaErrorInvalidValue"
    with pytest.raises(cw.CudaError) as legacy:
        calls.copy_batch(one, cw.default_stream())
    assert legacy.value.name == "cudaErrorInvalidValue"
    calls.copy_batch(one, stream)  # allowed on a stream of one's own
    np.testing.assert_array_equal(device.to_numpy(stream=stream), 1.5)
    handle = stream.handle
    calls.begin_capture(handle)
    try:
        with pytest.raises(cw.CudaError) as captured:
            calls.copy_batch(one, stream)
        assert captured.value.name == "cudaErrorStreamCaptureUnsupported"
        calls.copy(one[0][0], one[0][1], one[0][2], stream)  # the capture goes on: one copy is captured
    finally:
        calls.end_capture(handle)  # raises had the refusal invalidated the capture (it did not, on an H200)


def test_inside_a_weave_the_batch_is_one_operation_placed_like_any_other():
    hosts = [np.arange(64, dtype=np.float32), np.full(8, 3, np.int32)]
    with cw.weave() as w:
        arrays = cw.to_device_batch(hosts)
        doubled = cw.ops.scale(arrays[0], 2.0)
    assert w.counts.operations >= 2
    np.testing.assert_array_equal(doubled.to_numpy(), hosts[0] * 2)
    np.testing.assert_array_equal(arrays[1].to_numpy(), hosts[1])
