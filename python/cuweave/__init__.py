"""cuweave: CUDA streams, events, pinned staging and device arrays for NumPy users.

Every asynchronous operation is ordered on a stream: the ``stream=`` argument, else this thread's
current stream (``with stream:``), else the legacy default stream. Everything queued work touches
(device arrays, pinned blocks, NumPy arrays, callables) stays alive until that work has completed.
"""

from __future__ import annotations

from cuweave import _startup, errors, sim
from cuweave._backend import backend, unavailable_reason, use_backend
from cuweave._core import (
    DeviceArray,
    Kernel,
    DeviceProperties,
    Event,
    Graph,
    GraphNode,
    HostLatch,
    HostRegistration,
    PinnedBlock,
    PinnedPool,
    SMPartition,
    SMResources,
    Stream,
    StreamLease,
    StreamPool,
    Transfer,
    asarray,
    ascontiguousarray,
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
    staging_stats,
    to_device,
    to_device_batch,
    zeros,
)
from cuweave._creation import arange, empty_like, full, ones, zeros_like
from cuweave._device import Device, current_device, device_count, is_available, synchronize
from cuweave._pinned import pinned
from cuweave._timer import Timer, timer
from cuweave._sanitize import sanitize, sanitizing
from cuweave._capture import capture
from cuweave._weave import Weave, WeaveCounts, weave
from cuweave.woven import WovenFunction, woven
from cuweave._conditionals import Condition, if_else, if_then, switch, while_loop
from cuweave.graph_function import GraphFunction, graph_function
from cuweave.kernels import compile, reads, writes
from cuweave.prefetch import prefetch
from cuweave._range import Range, range  # noqa: A004  (cuweave.range, as NVTX names it)
from cuweave.tracing import CallSite, Lane, Trace, TraceEvent, trace
from cuweave.errors import (
    CallbackError,
    CaptureError,
    CompileError,
    ContextLostError,
    CudaError,
    CuweaveError,
    DeviceUnavailableError,
    GraphCacheWarning,
    NcclError,
    OutOfMemoryError,
    RaceError,
    RaceWarning,
    SimulatorTimingWarning,
)

from cuweave import ops  # noqa: E402  (uses _core)
from cuweave import collectives  # noqa: E402  (uses _core)

_startup.install()

__version__ = "0.1.0"


__all__ = [
    "CallSite",
    "CallbackError",
    "CaptureError",
    "CompileError",
    "Condition",
    "ContextLostError",
    "CudaError",
    "CuweaveError",
    "Device",
    "DeviceArray",
    "DeviceProperties",
    "DeviceUnavailableError",
    "Event",
    "Graph",
    "GraphCacheWarning",
    "GraphFunction",
    "GraphNode",
    "HostLatch",
    "HostRegistration",
    "Kernel",
    "Lane",
    "NcclError",
    "OutOfMemoryError",
    "PinnedBlock",
    "PinnedPool",
    "RaceError",
    "RaceWarning",
    "Range",
    "SMPartition",
    "SMResources",
    "SimulatorTimingWarning",
    "Stream",
    "StreamLease",
    "StreamPool",
    "Timer",
    "Trace",
    "TraceEvent",
    "Transfer",
    "Weave",
    "WeaveCounts",
    "WovenFunction",
    "arange",
    "asarray",
    "ascontiguousarray",
    "backend",
    "capture",
    "collect",
    "compile",
    "copy_async",
    "current_device",
    "current_stream",
    "default_stream",
    "device_count",
    "driver_version",
    "empty",
    "empty_like",
    "errors",
    "from_dlpack",
    "full",
    "graph_function",
    "if_else",
    "if_then",
    "is_available",
    "is_pinned",
    "collectives",
    "ops",
    "ones",
    "per_thread_default_stream",
    "pinned",
    "pinned_empty",
    "pinned_pool",
    "pinned_zeros",
    "prefetch",
    "range",
    "reads",
    "runtime_version",
    "sanitize",
    "sanitizing",
    "sim",
    "staging_stats",
    "switch",
    "synchronize",
    "timer",
    "to_device",
    "to_device_batch",
    "trace",
    "unavailable_reason",
    "use_backend",
    "weave",
    "woven",
    "while_loop",
    "writes",
    "zeros",
    "zeros_like",
]
