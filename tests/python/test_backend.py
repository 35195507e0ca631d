"""Import, backend selection and availability queries (no GPU needed unless marked gpu)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import cuweave as cw

# Everything the package top level promises (issue 2, and the backends of issue 7).
PUBLIC_NAMES = [
    "arange",
    "empty_like",
    "full",
    "ones",
    "zeros_like",
    "CuweaveError",
    "CudaError",
    "DeviceUnavailableError",
    "CallbackError",
    "SimulatorTimingWarning",
    "backend",
    "use_backend",
    "sim",
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

OTHER_BACKEND = {"sim": "cuda", "cuda": "sim"}

on_the_simulator = pytest.mark.skipif(cw.backend() != "sim", reason="checks the simulator backend")


def _child(code: str, *, backend: str | None = None, args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Runs ``python -c code`` (or ``python -m ...`` with args) with CUWEAVE_BACKEND=backend (unset: None)."""
    env = dict(os.environ)
    env.pop("CUWEAVE_BACKEND", None)
    if backend is not None:
        env["CUWEAVE_BACKEND"] = backend
    command = [sys.executable, *args] if args else [sys.executable, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


def _simulated_devices() -> int:
    """The simulator's device count: what CUWEAVE_SIM_DEVICES asks (CI's multi-device runs ask for 3), else 1."""
    value = os.environ.get("CUWEAVE_SIM_DEVICES", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _names(text: str, word: str) -> bool:
    return re.search(rf"\b{re.escape(word)}\b", text) is not None


def test_package_imports_in_a_fresh_interpreter():
    # Must work with or without a GPU and driver.
    proc = _child("import cuweave; print('imported')", backend=os.environ.get("CUWEAVE_BACKEND"))
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


# --------------------------------------------------------------------------- choosing the backend


def test_backend_is_sim_or_cuda():
    assert cw.backend() in ("sim", "cuda")
    assert cw.backend() == cw.backend()  # chosen once


def test_backend_follows_the_environment():
    requested = os.environ.get("CUWEAVE_BACKEND") or "auto"
    expected = ("cuda" if cw.is_available() else "sim") if requested == "auto" else requested
    assert cw.backend() == expected


@pytest.mark.parametrize("setting", ["auto", None], ids=["auto", "unset"])
def test_auto_picks_cuda_exactly_when_a_gpu_is_usable(setting):
    proc = _child("import cuweave as cw; print(cw.backend(), cw.is_available())", backend=setting)
    assert proc.returncode == 0, proc.stderr
    backend, available = proc.stdout.split()
    assert available == str(cw.is_available())
    assert backend == ("cuda" if available == "True" else "sim")


def test_environment_chooses_the_simulator_even_on_a_gpu_machine():
    proc = _child("import cuweave; print(cuweave.backend()); print(cuweave.device_count())", backend="sim")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["sim", str(_simulated_devices())]


@pytest.mark.parametrize("name", ["sim", "cuda"])
def test_use_backend_before_first_use_chooses_it(name):
    proc = _child(f"import cuweave as cw; cw.use_backend({name!r}); print(cw.backend())")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [name]


def test_use_backend_of_the_active_backend_is_accepted():
    active = cw.backend()
    cw.use_backend(active)
    assert cw.backend() == active


def test_use_backend_of_the_other_backend_after_use_is_value_error():
    active = cw.backend()
    with pytest.raises(ValueError):
        cw.use_backend(OTHER_BACKEND[active])
    assert cw.backend() == active
    cw.Event()  # still usable


def test_use_backend_of_the_other_backend_after_use_names_both():
    active = cw.backend()
    other = OTHER_BACKEND[active]
    with pytest.raises(ValueError) as info:
        cw.use_backend(other)
    message = str(info.value)
    assert _names(message, active), message
    assert _names(message, other), message


@pytest.mark.parametrize("bad", ["bogus", "gpu", "Sim", ""])
def test_use_backend_of_an_unknown_name_is_value_error_naming_the_choices(bad):
    active = cw.backend()
    with pytest.raises(ValueError) as info:
        cw.use_backend(bad)
    message = str(info.value)
    assert bad in message, message
    assert _names(message, "cuda") and _names(message, "sim") and _names(message, "auto"), message
    assert cw.backend() == active


def test_use_backend_of_a_non_string_is_type_error():
    with pytest.raises(TypeError):
        cw.use_backend(1)


# --------------------------------------------------------------------------- availability


def test_is_available_answers_a_bool():
    assert isinstance(cw.is_available(), bool)
    # asking twice gives the same answer
    assert cw.is_available() == cw.is_available()


def test_device_count_counts_the_active_backends_devices():
    n = cw.device_count()
    assert isinstance(n, int)
    if cw.backend() == "sim":
        assert n == _simulated_devices()
    else:
        assert (n > 0) == cw.is_available()


def test_unavailable_reason_is_empty_iff_available():
    reason = cw.unavailable_reason()
    assert isinstance(reason, str)
    if cw.is_available():
        assert reason == ""
    else:
        assert reason.strip() != ""


@pytest.mark.parametrize("name", ["sim", "cuda"])
def test_python_dash_m_prints_the_backend(name):
    # exits 0 on both backends, with or without a GPU
    proc = _child("", backend=name, args=("-m", "cuweave"))
    assert proc.returncode == 0, f"stdout={proc.stdout!r} stderr={proc.stderr!r}"
    assert re.search(rf"\bbackend\b\W*{name}\b", proc.stdout), proc.stdout


def test_versions_are_int_pairs():
    for version in (cw.driver_version(), cw.runtime_version()):
        assert isinstance(version, tuple)
        assert len(version) == 2
        assert all(isinstance(part, int) and part >= 0 for part in version)


@pytest.mark.gpu  # versions of a real driver and CUDA runtime (the simulator reports (0, 0))
def test_versions_name_a_real_cuda():
    for major, minor in (cw.driver_version(), cw.runtime_version()):
        assert major >= 1 and minor >= 0
    # the driver must be able to run the runtime's major version
    assert cw.driver_version()[0] >= cw.runtime_version()[0]


@pytest.mark.gpu  # what the CUDA backend reports on a GPU machine
def test_device_count_positive_when_available():
    assert cw.is_available() is True
    assert cw.device_count() >= 1


# --------------------------------------------------------------------------- the simulator


@on_the_simulator
def test_simulator_device_properties_are_sensible():
    assert cw.device_count() == _simulated_devices()
    props = cw.Device(0).properties
    assert "sim" in props.name.lower(), props.name
    assert isinstance(props.multiprocessor_count, int) and props.multiprocessor_count >= 1
    assert isinstance(props.async_engine_count, int) and props.async_engine_count >= 1
    lowest, highest = props.priority_range
    assert highest < lowest, "the simulator offers no priority range: priority tests would prove nothing"
    assert props.total_memory >= 1 << 30
    cc = props.compute_capability
    assert isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(x, int) for x in cc)


@on_the_simulator
def test_sim_seed_reflects_configure():
    start = cw.sim.seed()
    try:
        cw.sim.configure(7)
        assert cw.sim.seed() == 7
        cw.sim.configure(0)
        assert cw.sim.seed() == 0
        cw.sim.configure(None)
        assert cw.sim.seed() is None
    finally:
        cw.sim.configure(start)
    assert cw.sim.seed() == start


@on_the_simulator
def test_sim_explore_sets_and_restores_the_mode():
    start = cw.sim.seed()
    with cw.sim.explore(11) as seed:
        assert seed == 11
        assert cw.sim.seed() == 11
        with cw.sim.explore(12):
            assert cw.sim.seed() == 12
        assert cw.sim.seed() == 11
    assert cw.sim.seed() == start
    with pytest.raises(KeyError):
        with cw.sim.explore(13):
            raise KeyError("body")
    assert cw.sim.seed() == start


@on_the_simulator
@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11+")
def test_sim_explore_notes_the_seed_on_an_exception():
    with pytest.raises(KeyError) as info:
        with cw.sim.explore(4242):
            raise KeyError("body")
    notes = getattr(info.value, "__notes__", [])
    assert any(_names(note, "4242") for note in notes), notes


@pytest.mark.skipif(cw.backend() != "sim", reason="simulator controls")
def test_a_negative_seed_is_value_error_and_a_float_type_error():
    with pytest.raises(ValueError, match="negative"):
        cw.sim.configure(-1)
    with pytest.raises(TypeError):
        cw.sim.configure(1.5)
