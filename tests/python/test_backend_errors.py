"""Error classes, and GPU-only calls without a GPU (skipped on a GPU machine)."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw

needs_no_gpu = pytest.mark.skipif(cw.is_available(), reason="checks behaviour when no GPU is usable")


def test_error_hierarchy():
    assert issubclass(cw.CuweaveError, RuntimeError)
    assert issubclass(cw.CudaError, cw.CuweaveError)
    assert issubclass(cw.DeviceUnavailableError, cw.CudaError)
    assert issubclass(cw.DeviceUnavailableError, RuntimeError)
    assert issubclass(cw.CallbackError, cw.CuweaveError)
    # a callback failure is not a CUDA failure
    assert not issubclass(cw.CallbackError, cw.CudaError)


def test_errors_are_distinct_classes():
    classes = {cw.CuweaveError, cw.CudaError, cw.DeviceUnavailableError, cw.CallbackError}
    assert len(classes) == 4


GPU_ONLY_CALLS = {
    "Stream()": lambda: cw.Stream(),
    "Stream(priority='high')": lambda: cw.Stream(priority="high"),
    "Event()": lambda: cw.Event(),
    "Event(timing=True)": lambda: cw.Event(timing=True),
    "empty": lambda: cw.empty((4,), np.float32),
    "zeros": lambda: cw.zeros((4,), np.float32),
    "to_device": lambda: cw.to_device(np.zeros(4, np.float32)),
    "Device(0)": lambda: cw.Device(0),
    "pinned_empty": lambda: cw.pinned_empty((4,)),
    "pinned_zeros": lambda: cw.pinned_zeros((4,), np.float32),
    "StreamPool(2)": lambda: cw.StreamPool(2),
}


@needs_no_gpu
@pytest.mark.parametrize("call", list(GPU_ONLY_CALLS.values()), ids=list(GPU_ONLY_CALLS))
def test_gpu_only_call_raises_device_unavailable(call):
    with pytest.raises(cw.DeviceUnavailableError) as info:
        call()
    err = info.value
    assert isinstance(err, cw.CudaError)
    assert isinstance(err, RuntimeError)
    assert str(err).strip() != "", "the message must say what is missing"


@needs_no_gpu
def test_device_unavailable_error_carries_cuda_error_fields():
    with pytest.raises(cw.DeviceUnavailableError) as info:
        cw.Stream()
    err = info.value
    assert isinstance(err.code, int)
    assert isinstance(err.name, str)
    assert isinstance(err.call, str)


@needs_no_gpu
def test_queries_still_answer_after_a_failed_gpu_call():
    with pytest.raises(cw.DeviceUnavailableError):
        cw.Stream()
    assert cw.is_available() is False
    assert cw.device_count() == 0
    assert cw.backend() == "cuda"
