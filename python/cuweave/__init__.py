"""cuweave: CUDA streams, events, pinned staging and device arrays for NumPy users.

Every asynchronous operation is ordered on a stream: the ``stream=`` argument, else this thread's
current stream (``with stream:``), else the legacy default stream. Everything queued work touches
(device arrays, pinned blocks, NumPy arrays, callables) stays alive until that work has completed.
"""

from __future__ import annotations

import atexit

from cuweave import _core, errors
from cuweave._core import (
    DeviceArray,
    DeviceProperties,
    Event,
    HostRegistration,
    PinnedBlock,
    PinnedPool,
    Stream,
    StreamLease,
    StreamPool,
    Transfer,
    asarray,
    collect,
    copy_async,
    current_stream,
    default_stream,
    driver_version,
    empty,
    from_dlpack,
    is_pinned,
    per_thread_default_stream,
    pinned_empty,
    pinned_pool,
    pinned_zeros,
    runtime_version,
    to_device,
    unavailable_reason,
    zeros,
)
from cuweave._device import Device, current_device, device_count, is_available, synchronize
from cuweave._pinned import pinned
from cuweave._timer import Timer, timer
from cuweave.errors import CallbackError, CudaError, CuweaveError, DeviceUnavailableError, OutOfMemoryError

from cuweave import ops  # noqa: E402  (uses _core)

_core._set_error_types(
    {
        "CudaError": CudaError,
        "DeviceUnavailableError": DeviceUnavailableError,
        "OutOfMemoryError": OutOfMemoryError,
    }
)
atexit.register(_core._shutdown)

__version__ = "0.1.0"


def backend() -> str:
    """The active backend: ``"cuda"``."""
    return _core.backend_name()


__all__ = [
    "CallbackError",
    "CudaError",
    "CuweaveError",
    "Device",
    "DeviceArray",
    "DeviceProperties",
    "DeviceUnavailableError",
    "Event",
    "HostRegistration",
    "OutOfMemoryError",
    "PinnedBlock",
    "PinnedPool",
    "Stream",
    "StreamLease",
    "StreamPool",
    "Timer",
    "Transfer",
    "asarray",
    "backend",
    "collect",
    "copy_async",
    "current_device",
    "current_stream",
    "default_stream",
    "device_count",
    "driver_version",
    "empty",
    "errors",
    "from_dlpack",
    "is_available",
    "is_pinned",
    "ops",
    "per_thread_default_stream",
    "pinned",
    "pinned_empty",
    "pinned_pool",
    "pinned_zeros",
    "runtime_version",
    "synchronize",
    "timer",
    "to_device",
    "unavailable_reason",
    "zeros",
]
