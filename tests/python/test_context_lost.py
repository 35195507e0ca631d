"""After an error that poisons the CUDA context, the first exception says the context is unusable and
the process must restart, every later failing call says the same naming the original error and call,
and the process still exits cleanly (Note [Sticky errors]). Run in a child process: the context of the
process that meets such an error is gone for good."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cuweave as cw

CHILD = Path(__file__).parent / "data" / "context_lost.py"


def test_context_lost_error_is_a_cuda_error_with_the_first_failure():
    assert issubclass(cw.ContextLostError, cw.CudaError)
    assert cw.ContextLostError.first_call == "" and cw.ContextLostError.first_name == ""


@pytest.mark.gpu
def test_an_illegal_address_is_named_as_lost_context_then_and_on_every_later_failing_call():
    child = subprocess.run(
        [sys.executable, str(CHILD)], capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )
    lines = child.stdout.splitlines()
    assert child.returncode == 0, f"exit {child.returncode}; stdout:\n{child.stdout}\nstderr:\n{child.stderr}"
    # synchronize() waits by polling (Note [Interruptible waits]): the call that met the error is the query.
    assert lines[0] == "first cudaErrorIllegalAddress cudaStreamQuery cudaErrorIllegalAddress cudaStreamQuery"
    assert "unusable" in lines[1] and "restart the process" in lines[1], lines[1]
    assert lines[2:] == [
        "later to_device cudaErrorIllegalAddress cudaStreamQuery",
        "later synchronize cudaErrorIllegalAddress cudaStreamQuery",
        "later record cudaErrorIllegalAddress cudaStreamQuery",
        "exiting",
    ], child.stdout
    assert "Traceback" not in child.stderr and "terminate" not in child.stderr, child.stderr
