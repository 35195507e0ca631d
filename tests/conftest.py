"""Shared pytest configuration for the cuweave test suite.

Markers and warning filters are declared in pyproject.toml (``gpu`` marker,
``--strict-markers``, ``filterwarnings = ["error"]``); nothing is registered here.

GPU policy:
  * Tests marked ``@pytest.mark.gpu`` are skipped when ``cuweave.is_available()``
    is False.
  * With ``CUWEAVE_REQUIRE_GPU=1`` in the environment they fail instead of
    skipping, so a GPU run that silently found no GPU cannot pass.
"""

from __future__ import annotations

import functools
import os
import zlib

import numpy as np
import pytest

import cuweave as cw

_REQUIRE_GPU_ENV = "CUWEAVE_REQUIRE_GPU"


def _gpu_available() -> bool:
    return bool(cw.is_available())


def _gpu_required() -> bool:
    return os.environ.get(_REQUIRE_GPU_ENV, "") == "1"


def _unavailable_reason() -> str:
    try:
        reason = cw.unavailable_reason()
    except Exception as exc:  # the reason is only for the message
        reason = f"<unavailable_reason() raised {exc!r}>"
    return reason or "<no reason given>"


def pytest_report_header(config):
    available = _gpu_available()
    line = f"cuweave: backend={cw.backend()!r} available={available} device_count={cw.device_count()}"
    if not available:
        line += f" reason={_unavailable_reason()!r}"
    if _gpu_required():
        line += f" ({_REQUIRE_GPU_ENV}=1: gpu tests fail without a GPU)"
    return line


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not _gpu_required():
        # The full reason is in the report header; keep the per-test line short.
        skip = pytest.mark.skip(reason="needs a GPU (cuweave.is_available() is False)")
        for item in gpu_items:
            item.add_marker(skip)
        return
    message = (
        f"{_REQUIRE_GPU_ENV}=1 but cuweave reports no usable GPU "
        f"(cw.is_available() is False; reason: {_unavailable_reason()})"
    )
    for item in gpu_items:
        # Report a plain test failure: build no fixtures (they would need the GPU and
        # error out with a less clear message), then fail in the test's own phase.
        item.setup = lambda: None
        item.runtest = functools.partial(pytest.fail, message, pytrace=False)


@pytest.fixture(autouse=True)
def _device_quiet_after_gpu_test(request):
    """After a gpu test, drain the device so leftover work cannot leak into the next test."""
    yield
    if request.node.get_closest_marker("gpu") is not None and _gpu_available():
        cw.synchronize()


def _owned_stream():
    s = cw.Stream()
    try:
        yield s
    finally:
        if not s.closed:
            s.synchronize()
            s.close()


@pytest.fixture
def stream():
    """A fresh owned cw.Stream, closed after the test (unless the test closed it)."""
    yield from _owned_stream()


@pytest.fixture
def other_stream():
    """A second fresh owned cw.Stream."""
    yield from _owned_stream()


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's node id (stable across runs)."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _import_peer(name: str):
    """Import an optional peer library (torch / cupy) or skip the test."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:  # absent, or present but unusable here
        pytest.skip(f"{name} is not importable: {exc}")


@pytest.fixture
def torch():
    """The torch module with CUDA usable, else the test is skipped."""
    mod = _import_peer("torch")
    if not mod.cuda.is_available():
        pytest.skip("torch has no usable CUDA device")
    return mod


@pytest.fixture
def cupy():
    """The cupy module with a usable device, else the test is skipped."""
    mod = _import_peer("cupy")
    try:
        if mod.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("cupy sees no CUDA device")
    except Exception as exc:  # cupy raises its own CUDARuntimeError
        pytest.skip(f"cupy cannot use CUDA: {exc}")
    return mod
