"""What importing cuweave sets up once: the core's error types, the call sites it names (skipping cuweave's own
frames), the sanitizer asked for by CUWEAVE_SANITIZE and the shutdown order at exit."""

from __future__ import annotations

import atexit
import os

from cuweave import _core, _cupy_hooks, _sanitize, sim
from cuweave.errors import (
    CaptureError,
    CompileError,
    ContextLostError,
    CudaError,
    DeviceUnavailableError,
    NcclError,
    OutOfMemoryError,
    RaceError,
)


def install() -> None:
    """Called once, by cuweave/__init__.py."""
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
    package_directory = os.path.dirname(os.path.abspath(__file__)) + os.sep
    _core._set_package_directory(package_directory)  # call sites skip cuweave's frames
    atexit.register(_core._forget_call_sites)
    _cupy_hooks.record_from_import()  # before the sanitizer can be on: CuPy's kernels are read as compiled
    _sanitize.enable_from_environment(os.environ.get("CUWEAVE_SANITIZE"))
    sim.faults_from_environment(os.environ.get(sim.FAULTS_ENV))
    atexit.register(_core._shutdown)
