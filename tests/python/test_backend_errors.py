"""Error classes, and the CUDA backend where no GPU is usable.

The no-GPU checks run in a child interpreter forced onto the CUDA backend (``CUWEAVE_BACKEND=cuda``), so
they keep running on every machine without a usable GPU, whichever backend this process uses (``auto``
picks the simulator there). They are skipped where a GPU is usable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import cuweave as cw

needs_no_gpu = pytest.mark.skipif(cw.is_available(), reason="checks the CUDA backend where no GPU is usable")


def test_error_hierarchy():
    assert issubclass(cw.CuweaveError, RuntimeError)
    assert issubclass(cw.CudaError, cw.CuweaveError)
    assert issubclass(cw.DeviceUnavailableError, cw.CudaError)
    assert issubclass(cw.DeviceUnavailableError, RuntimeError)
    assert issubclass(cw.OutOfMemoryError, cw.CudaError)
    assert issubclass(cw.OutOfMemoryError, MemoryError)
    assert issubclass(cw.CallbackError, cw.CuweaveError)
    # a callback failure is not a CUDA failure
    assert not issubclass(cw.CallbackError, cw.CudaError)
    # the simulator's timing notice is a warning, not an error
    assert issubclass(cw.SimulatorTimingWarning, UserWarning)
    assert not issubclass(cw.SimulatorTimingWarning, cw.CuweaveError)


def test_errors_are_distinct_classes():
    classes = {cw.CuweaveError, cw.CudaError, cw.DeviceUnavailableError, cw.OutOfMemoryError, cw.CallbackError}
    assert len(classes) == 5


# Evaluated in the child; every one needs a GPU on the CUDA backend.
GPU_ONLY_CALLS = {
    "Stream()": "cw.Stream()",
    "Stream(priority='high')": "cw.Stream(priority='high')",
    "Event()": "cw.Event()",
    "Event(timing=True)": "cw.Event(timing=True)",
    "empty": "cw.empty((4,), np.float32)",
    "zeros": "cw.zeros((4,), np.float32)",
    "to_device": "cw.to_device(np.zeros(4, np.float32))",
    "Device(0)": "cw.Device(0)",
    "current_device": "cw.current_device()",
    "synchronize": "cw.synchronize()",
    "default_stream": "cw.default_stream()",
    "current_stream": "cw.current_stream()",
    "pinned_empty": "cw.pinned_empty((4,))",
    "pinned_zeros": "cw.pinned_zeros((4,), np.float32)",
    "pinned_pool().allocate": "cw.pinned_pool().allocate(8)",
    "pinned(array)": "cw.pinned(np.zeros(4)).__enter__()",
    "StreamPool(2)": "cw.StreamPool(2)",
}

_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import cuweave as cw

    calls = json.loads(sys.argv[1])
    raised = {}
    for label, source in calls.items():
        try:
            eval(source)
        except BaseException as err:
            raised[label] = {
                "type": type(err).__module__ + "." + type(err).__qualname__,
                "device_unavailable": isinstance(err, cw.DeviceUnavailableError),
                "cuda_error": isinstance(err, cw.CudaError),
                "runtime_error": isinstance(err, RuntimeError),
                "message": str(err),
                "code": getattr(err, "code", None),
                "name": getattr(err, "name", None),
                "call": getattr(err, "call", None),
            }
        else:
            raised[label] = None
    print(json.dumps({
        "raised": raised,
        "backend": cw.backend(),
        "is_available": cw.is_available(),
        "device_count": cw.device_count(),
        "reason": cw.unavailable_reason(),
    }))
    """
)


@pytest.fixture(scope="module")
def cuda_without_gpu():
    """What a child interpreter on the CUDA backend reports here (only run where no GPU is usable)."""
    env = dict(os.environ, CUWEAVE_BACKEND="cuda")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(GPU_ONLY_CALLS)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, f"child failed: stdout={proc.stdout!r} stderr={proc.stderr!r}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_no_gpu
@pytest.mark.parametrize("label", list(GPU_ONLY_CALLS))
def test_gpu_only_call_raises_device_unavailable(cuda_without_gpu, label):
    err = cuda_without_gpu["raised"][label]
    assert err is not None, f"{GPU_ONLY_CALLS[label]} did not raise on the CUDA backend without a GPU"
    assert err["device_unavailable"], f"raised {err['type']}: {err['message']}"
    assert err["cuda_error"] and err["runtime_error"]
    message = err["message"].strip().lower()
    assert message, "the message must say what is missing"
    assert any(word in message for word in ("driver", "gpu", "device")), err["message"]


@needs_no_gpu
def test_device_unavailable_error_carries_cuda_error_fields(cuda_without_gpu):
    err = cuda_without_gpu["raised"]["Stream()"]
    assert err is not None
    assert isinstance(err["code"], int) and err["code"] > 0
    assert isinstance(err["name"], str) and err["name"].startswith("cudaError")
    assert isinstance(err["call"], str) and err["call"].startswith("cuda")


@needs_no_gpu
def test_queries_still_answer_after_a_failed_gpu_call(cuda_without_gpu):
    # the child asks after all the failed calls above
    assert cuda_without_gpu["backend"] == "cuda"
    assert cuda_without_gpu["is_available"] is False
    assert cuda_without_gpu["device_count"] == 0
    assert cuda_without_gpu["reason"].strip() != ""


@needs_no_gpu
def test_this_process_also_finds_no_gpu():
    # whatever backend this process uses, is_available() is about a real CUDA GPU
    assert cw.is_available() is False
    assert cw.unavailable_reason().strip() != ""
