"""Import, backend selection and availability queries (CPU-only unless marked gpu)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import cuweave as cw

# Everything the issue-2 contract promises at the package top level.
PUBLIC_NAMES = [
    "CuweaveError",
    "CudaError",
    "DeviceUnavailableError",
    "CallbackError",
    "backend",
    "is_available",
    "device_count",
    "unavailable_reason",
    "driver_version",
    "runtime_version",
    "Device",
    "current_device",
    "synchronize",
    "Stream",
    "default_stream",
    "per_thread_default_stream",
    "current_stream",
    "StreamPool",
    "Event",
    "timer",
    "pinned_empty",
    "pinned_zeros",
    "pinned_pool",
    "pinned",
    "is_pinned",
    "empty",
    "zeros",
    "DeviceArray",
    "to_device",
    "asarray",
    "from_dlpack",
    "copy_async",
    "ops",
    "collect",
]


def test_package_imports_in_a_fresh_interpreter():
    # Must work with or without a GPU and driver.
    proc = subprocess.run(
        [sys.executable, "-c", "import cuweave; print('imported')"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "imported" in proc.stdout


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_public_name_is_exported(name):
    assert hasattr(cw, name), f"cuweave.{name} is missing"


def test_dunder_all_lists_only_existing_names():
    names = list(getattr(cw, "__all__", []))
    assert names, "cuweave.__all__ is empty or missing"
    missing = [n for n in names if not hasattr(cw, n)]
    assert missing == []
    assert len(names) == len(set(names)), "duplicate names in __all__"


def test_dunder_all_covers_the_contract():
    missing = sorted(set(PUBLIC_NAMES) - set(cw.__all__))
    assert missing == []


def test_ops_has_the_builtin_kernels():
    assert callable(cw.ops.fill)
    assert callable(cw.ops.spin)


def test_backend_is_cuda():
    assert cw.backend() == "cuda"


def test_is_available_answers_a_bool():
    assert isinstance(cw.is_available(), bool)
    # asking twice gives the same answer
    assert cw.is_available() == cw.is_available()


def test_device_count_is_zero_iff_unavailable():
    n = cw.device_count()
    assert isinstance(n, int)
    assert n >= 0
    assert (n == 0) == (not cw.is_available())


def test_unavailable_reason_is_empty_iff_available():
    reason = cw.unavailable_reason()
    assert isinstance(reason, str)
    if cw.is_available():
        assert reason == ""
    else:
        assert reason.strip() != ""


def test_python_dash_m_prints_backend():
    proc = subprocess.run(
        [sys.executable, "-m", "cuweave"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"stdout={proc.stdout!r} stderr={proc.stderr!r}"
    assert cw.backend() in proc.stdout


@pytest.mark.gpu
def test_versions_are_int_pairs():
    for version in (cw.driver_version(), cw.runtime_version()):
        assert isinstance(version, tuple)
        assert len(version) == 2
        major, minor = version
        assert isinstance(major, int) and isinstance(minor, int)
        assert major >= 1 and minor >= 0
    # the driver must be able to run the runtime's major version
    assert cw.driver_version()[0] >= cw.runtime_version()[0]


@pytest.mark.gpu
def test_device_count_positive_when_available():
    assert cw.is_available() is True
    assert cw.device_count() >= 1
