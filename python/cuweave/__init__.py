"""cuweave: CUDA streams, events, pinned staging and device arrays for NumPy users.

Every asynchronous operation is ordered on a stream: the ``stream=`` argument, else this thread's
current stream (``with stream:``), else the legacy default stream. Everything queued work touches
(device arrays, pinned blocks, NumPy arrays, callables) stays alive until that work has completed.
"""

from __future__ import annotations

import atexit
import os

from cuweave import _core, errors, sim
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
    staging_stats,
    to_device,
    zeros,
)
from cuweave._device import Device, current_device, device_count, is_available, synchronize
from cuweave._pinned import pinned
from cuweave._timer import Timer, timer
from cuweave import _sanitize
from cuweave._sanitize import sanitize, sanitizing
from cuweave._capture import capture
from cuweave._weave import Weave, WeaveCounts, weave
from cuweave._conditionals import Condition, if_else, if_then, switch, while_loop
from cuweave import _graph_view
from cuweave.graph_function import GraphFunction, graph_function
from cuweave.kernels import compile, reads, writes
from cuweave.prefetch import prefetch
from cuweave._awaitable import event_await, transfer_await
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

_core._set_error_types(
    {
        "CaptureError": CaptureError,
        "CompileError": CompileError,
        "ContextLostError": ContextLostError,
        "CudaError": CudaError,
        "DeviceUnavailableError": DeviceUnavailableError,
        "NcclError": NcclError,
        "OutOfMemoryError": OutOfMemoryError,
        "RaceError": RaceError,
    }
)
_core._set_package_directory(os.path.dirname(os.path.abspath(__file__)) + os.sep)  # call sites skip cuweave's frames
atexit.register(_core._forget_call_sites)
_sanitize.enable_from_environment(os.environ.get("CUWEAVE_SANITIZE"))
atexit.register(_core._shutdown)
_graph_view.install()
Transfer.__await__ = transfer_await  # `await cw.copy_async(...)`
Event.__await__ = event_await  # `await stream.record()`

__version__ = "0.1.0"


def backend() -> str:
    """The active backend, ``"cuda"`` or ``"sim"``, chosen at first use: ``CUWEAVE_BACKEND`` (``cuda``,
    ``sim`` or ``auto``, the default: CUDA when a GPU is usable, else the simulator) or use_backend()."""
    return _core.backend_name()


def use_backend(name: str) -> None:
    """Chooses the backend (``"cuda"``, ``"sim"`` or ``"auto"``) before the first cuweave operation.

    Raises ValueError once another backend is in use; set ``CUWEAVE_BACKEND`` to choose at start-up.
    """
    _core.select_backend(name)


def unavailable_reason() -> str:
    """Why no CUDA GPU is usable here ("" when one is)."""
    return _core.cuda_unavailable_reason()


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
    "asarray",
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
    "errors",
    "from_dlpack",
    "graph_function",
    "if_else",
    "if_then",
    "is_available",
    "is_pinned",
    "collectives",
    "ops",
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
    "trace",
    "unavailable_reason",
    "use_backend",
    "weave",
    "while_loop",
    "writes",
    "zeros",
]
