"""The exceptions cuweave raises.

Bad input raises the built-in ``TypeError`` (wrong kind of object) or ``ValueError`` (wrong value,
size, shape or state, including use of a closed Stream or Event); waiting too long raises
``TimeoutError``. Failures of the GPU runtime raise the types below.
"""

from __future__ import annotations


class CuweaveError(RuntimeError):
    """Base class of cuweave's own errors."""


class CudaError(CuweaveError):
    """A CUDA call failed.

    Attributes:
        code: the CUDA error code (an int, e.g. 700).
        name: the CUDA error name (e.g. ``"cudaErrorIllegalAddress"``).
        call: the CUDA function that failed (e.g. ``"cudaStreamSynchronize"``).
    """

    code: int = -1
    name: str = ""
    call: str = ""


class DeviceUnavailableError(CudaError):
    """A GPU-only operation was asked for where no usable GPU or driver exists.

    The message says what is missing; ``cuweave.is_available()`` answers without raising.
    """


class ContextLostError(CudaError):
    """The process's CUDA context is unusable after a sticky error; only a new process can use the GPU.

    Some errors poison the context: an illegal memory access in a kernel, a kernel's trap or assert,
    a hardware fault. CUDA then fails every later call with the same error. cuweave raises this type
    for the call that met the error and for every later failing call, so the cause is never lost.

    Attributes:
        first_call: the CUDA call that first met the sticky error (e.g. ``"cudaStreamSynchronize"``);
            CudaError's attributes describe this call.
        first_name: its error name (e.g. ``"cudaErrorIllegalAddress"``).

    Save what you need and restart the process (in Jupyter: restart the kernel).
    """

    first_call: str = ""
    first_name: str = ""


class OutOfMemoryError(CudaError, MemoryError):
    """The device (or pinned host memory) is out of memory."""


class CaptureError(CudaError):
    """An operation is not allowed while a stream is being captured, or a capture could not end.

    Raised for a synchronize of the capturing stream, a fork never joined back, the legacy default
    stream used beside a blocking capturing stream, a wait for an event recorded outside the capture,
    and the end of a capture that an earlier illegal operation invalidated. ``name`` is CUDA's error
    name (e.g. ``"cudaErrorStreamCaptureUnjoined"``); the stream is usable afterwards.
    """


class NcclError(CudaError):
    """An NCCL call failed, or NCCL could not be loaded (``name`` ``"NCCL_NOT_FOUND"``: install the
    ``nvidia-nccl-cu13`` wheel or set ``CUWEAVE_NCCL=/path/to/libnccl.so.2``).

    ``name`` is NCCL's error name (e.g. ``"ncclInvalidArgument"``), ``call`` the NCCL function (e.g.
    ``"ncclAllReduce"``); the message adds NCCL's own description of what went wrong.
    """


class GraphCacheWarning(UserWarning):
    """A graph function or woven function keeps meeting new signatures (shapes, dtypes, values) and evicts graphs
    from its cache."""


class CompileError(CuweaveError):
    """Runtime compilation of a kernel failed. ``log`` holds the compiler's messages."""

    log: str = ""


class CallbackError(CuweaveError):
    """A host callback raised; ``__cause__`` is the original exception.

    Raised by the next ``Stream.synchronize()`` of the stream the callback was launched on.
    """


class RaceError(CuweaveError):
    """The stream-race sanitizer (``cuweave.sanitize()``, ``CUWEAVE_SANITIZE=1``) found two operations that
    touch the same bytes, at least one writing, with nothing ordering them. The message names both
    operations, their streams, the bytes and both call sites; the operation that would race is not queued.

    ``races`` lists each as ``(earlier, later, begin, end)``, where ``earlier`` and ``later`` are
    ``(operation, stream, "read" | "write" | "free", (file, line, function) or None)``.
    """

    races: list = []


class RaceWarning(UserWarning):
    """A race the sanitizer found while running with ``on_race="warn"``: the message is RaceError's."""


class SimulatorTimingWarning(UserWarning):
    """Timings were read on the host simulator: they are host-clock times, not GPU timings (said once)."""


__all__ = [
    "CallbackError",
    "CaptureError",
    "CompileError",
    "ContextLostError",
    "CudaError",
    "CuweaveError",
    "DeviceUnavailableError",
    "GraphCacheWarning",
    "OutOfMemoryError",
    "RaceError",
    "RaceWarning",
    "SimulatorTimingWarning",
]


def _deferred(error: BaseException) -> type[BaseException]:
    """A class that, made with no arguments, is `error` again (its type, arguments and attributes): how a race
    found inside another library's call (a CuPy launch, a PyTorch operator) is raised in the calling thread once
    that call has returned to Python (set as the thread's asynchronous exception; raised inside the call, it would
    end there). Should it go off inside one of the hooks' callbacks first, the hook sets it again
    (`_cuweave_deferred`). The class notes that it was made (`_cuweave_raised`): from Python 3.12 on, it is made as
    Python raises it, which tells the hook table whether it is still pending."""
    base = type(error)

    def __init__(self: BaseException) -> None:
        base.__init__(self, *error.args)
        self.__dict__.update(error.__dict__)
        type(self)._cuweave_raised = True

    return type(base.__name__, (base,), {"__init__": __init__, "__module__": base.__module__,
                                         "__qualname__": base.__qualname__, "_cuweave_deferred": True,
                                         "_cuweave_raised": False})
