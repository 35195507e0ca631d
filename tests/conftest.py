"""Shared pytest configuration for the cuweave test suite.

One suite, two backends. Tests that describe semantics are unmarked and run on whichever backend is
active (``cuweave.backend()``: the simulator here and in CI, CUDA on the GPU machine); tests that need
real hardware are marked ``gpu``. The ``gpu`` marker and the warning filters are declared in
pyproject.toml (``--strict-markers``, ``filterwarnings = ["error"]``); the ``real_time`` marker is
registered here.

GPU policy:
  * ``@pytest.mark.gpu`` means "needs real CUDA hardware" (timings, bandwidth, priorities' real effect,
    torch/cupy, IPC): such tests run only when the active backend is ``cuda`` and a GPU is usable, and
    are skipped otherwise.
  * With ``CUWEAVE_REQUIRE_GPU=1`` in the environment they fail instead of skipping, so a GPU run that
    silently found no GPU (or fell back to the simulator) cannot pass.

Simulator:
  * ``@pytest.mark.real_time``: the test measures real time (a duration, an overlap, a timing). Skipped
    while the simulator explores schedules (``CUWEAVE_SIM_SEED=N``): there work runs only when the host
    waits and spins take no time. Work that must still be pending when the test looks is held by
    construction (``_support.Gate``), never by a duration, and needs no marker.
  * When exploring, every test starts from the run's seed (the scheduler is re-seeded before each test),
    so ``CUWEAVE_SIM_SEED=N pytest path::test`` replays a failing test's schedule; failing tests get a
    report section naming the seed.
  * ``@pytest.mark.conditional_nodes``: the test replays a graph with conditional nodes. compute-sanitizer fails
    on such replays in raw CUDA too (tools/probes/conditional_nodes_under_compute_sanitizer.cu): synccheck reports
    every ``__syncthreads`` in a body as a divergent barrier and stops the kernel; memcheck now and then meets an
    illegal address it does not report, in loops of many rounds; racecheck's process dies (SIGSEGV) on a loop
    whose condition is set from a sum its body computes; a woven capture holding a WHILE loop meets an unreported
    illegal or misaligned address in about one memcheck run of five (tools/probes/woven_loop_under_memcheck.py).
    Without a tool every such program runs right. So ``tools/gpu-check`` deselects these under its
    compute-sanitizer pass, and test_markers.py checks that every test replaying a conditional node is marked.
  * Timings read on the simulator warn with ``cuweave.SimulatorTimingWarning``; the warning is ignored
    in tests (unless a test sets its own filter for it).
"""

from __future__ import annotations

import faulthandler
import functools
import os
import zlib

import numpy as np
import pytest

import cuweave as cw

_REQUIRE_GPU_ENV = "CUWEAVE_REQUIRE_GPU"
_HANG_EXIT_ENV = "CUWEAVE_TEST_HANG_EXIT_S"
_hang_report = None  # where a hang's stacks go (pytest_configure)
_SEED_ENV = "CUWEAVE_SIM_SEED"
# tools/gpu-check sets it for the tests it runs under compute-sanitizer (as _support.UNDER_COMPUTE_SANITIZER).
_UNDER_COMPUTE_SANITIZER = os.environ.get("CUWEAVE_TESTS_UNDER_COMPUTE_SANITIZER") == "1"
_TIMING_WARNING = "SimulatorTimingWarning"

# Chosen once, at the first cuweave use (here): CUWEAVE_BACKEND, else auto.
_BACKEND = cw.backend()
# The simulator's mode at start-up: None (concurrent) or the seed it explores (CUWEAVE_SIM_SEED).
_START_SEED = cw.sim.seed() if _BACKEND == "sim" else None


def _gpu_available() -> bool:
    return bool(cw.is_available())


def _real_gpu() -> bool:
    """Real CUDA hardware is in use: the cuda backend with a usable GPU."""
    return _BACKEND == "cuda" and _gpu_available()


def _gpu_required() -> bool:
    return os.environ.get(_REQUIRE_GPU_ENV, "") == "1"


def _exploring() -> bool:
    return _START_SEED is not None


def _unavailable_reason() -> str:
    try:
        reason = cw.unavailable_reason()
    except Exception as exc:  # the reason is only for the message
        reason = f"<unavailable_reason() raised {exc!r}>"
    return reason or "<no reason given>"


def _why_no_gpu() -> str:
    if _BACKEND != "cuda":
        return f"the active backend is {_BACKEND!r}"
    return "cw.is_available() is False"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "real_time: measures real time (a duration, an overlap, a timing); "
        f"skipped while the simulator explores schedules ({_SEED_ENV}=N), where spins take no time",
    )
    config.addinivalue_line(
        "markers",
        "conditional_nodes: replays graphs with conditional nodes; deselected under compute-sanitizer, whose tools "
        "fail on such replays in raw CUDA too (tools/probes/conditional_nodes_under_compute_sanitizer.cu)",
    )
    config.addinivalue_line(
        "markers",
        "cupti: needs CUPTI on a GPU (a trace, the trace command, CuPy's kernels under the sanitizer); skipped under "
        "compute-sanitizer, which holds CUPTI for the whole process (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)",
    )
    global _hang_report
    if float(os.environ.get(_HANG_EXIT_ENV, "0") or 0) > 0:
        # The real stderr, copied while pytest's capture is suspended: inside a test it is captured, and a
        # process that faulthandler ends would take the captured report with it.
        _hang_report = os.fdopen(os.dup(2), "w")


def pytest_unconfigure(config):
    global _hang_report
    if _hang_report is not None:  # closed here, not left to the interpreter's exit (a ResourceWarning there)
        _hang_report.close()
        _hang_report = None


def pytest_report_header(config):
    if _BACKEND == "sim":
        mode = (
            f"exploring schedules with seed {_START_SEED}; each test starts from it; "
            f"replay with {_SEED_ENV}={_START_SEED}"
            if _exploring()
            else "concurrent"
        )
        backend = f"cuweave backend: sim (simulator, {mode})"
    else:
        backend = "cuweave backend: cuda"
    available = _gpu_available()
    devices = f"cuweave: cuda_available={available} device_count={cw.device_count()}"
    if not available:
        devices += f" reason={_unavailable_reason()!r}"
    if _real_gpu():
        gpu = "cuweave gpu tests: run"
    elif _gpu_required():
        gpu = f"cuweave gpu tests: fail ({_REQUIRE_GPU_ENV}=1 but no real GPU: {_why_no_gpu()})"
    else:
        gpu = f"cuweave gpu tests: skipped ({_why_no_gpu()})"
    return [backend, devices, gpu]


def _sets_its_own_timing_filter(item) -> bool:
    return any(
        _TIMING_WARNING in str(arg) for mark in item.iter_markers(name="filterwarnings") for arg in mark.args
    )


def pytest_collection_modifyitems(config, items):
    if _BACKEND == "sim":
        ignore_timing = pytest.mark.filterwarnings(f"ignore::cuweave.{_TIMING_WARNING}")
        for item in items:
            if not _sets_its_own_timing_filter(item):
                item.add_marker(ignore_timing)
    if _exploring():
        skip_real_time = pytest.mark.skip(
            reason=f"needs queued work to take real time; the simulator explores schedules ({_SEED_ENV}="
            f"{_START_SEED}), where work runs only when the host waits and spins take no time"
        )
        for item in items:
            if item.get_closest_marker("real_time") is not None:
                item.add_marker(skip_real_time)

    if _UNDER_COMPUTE_SANITIZER:
        skip_cupti = pytest.mark.skip(
            reason="needs CUPTI, which compute-sanitizer holds for the whole process (only one CUDA tool can attach)"
        )
        for item in items:
            if item.get_closest_marker("cupti") is not None:
                item.add_marker(skip_cupti)

    if _real_gpu():
        return
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not _gpu_required():
        # The full reason is in the report header; keep the per-test line short.
        skip = pytest.mark.skip(reason=f"needs real CUDA hardware ({_why_no_gpu()})")
        for item in gpu_items:
            item.add_marker(skip)
        return
    message = (
        f"{_REQUIRE_GPU_ENV}=1 but this test needs real CUDA hardware and {_why_no_gpu()} "
        f"(backend {_BACKEND!r}; CUDA unavailable reason: {_unavailable_reason()})"
    )
    for item in gpu_items:
        # Report a plain test failure: build no fixtures (they would need the GPU and
        # error out with a less clear message), then fail in the test's own phase.
        item.setup = lambda: None
        item.runtest = functools.partial(pytest.fail, message, pytrace=False)




@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With CUWEAVE_TEST_HANG_EXIT_S=N, a test (setup, call and teardown) that runs longer than N seconds
    prints every thread's stack and ends the process (faulthandler; exit code 1). A hang that keeps the
    GIL (which no Python-level timeout can interrupt) then names its test and line, and a checking script
    with several runs goes on to the next instead of losing its whole time budget (tools/gpu-check sets it)."""
    limit = float(os.environ.get(_HANG_EXIT_ENV, "0") or 0)
    if limit > 0 and _hang_report is not None:
        faulthandler.dump_traceback_later(limit, exit=True, file=_hang_report)
    try:
        yield
    finally:
        if limit > 0:
            faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _exploring():
        report.sections.append(
            (
                "cuweave simulator",
                f"cuweave simulator seed: {_START_SEED} (replay with {_SEED_ENV}={_START_SEED})",
            )
        )


@pytest.fixture(autouse=True)
def _backend_state_per_test():
    """When the simulator explores, each test starts from the run's seed, so a failing test's schedule
    replays on its own (a test or fixture that chose another mode is left alone). After each test the
    device is drained so leftover work cannot leak into the next test."""
    if _exploring() and cw.sim.seed() == _START_SEED:
        cw.sim.configure(_START_SEED)  # re-seeds the schedule's random generator
    yield
    if _BACKEND == "sim" or _real_gpu():
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


@pytest.fixture(params=["native", "python"])
def torch_hook(request, torch, monkeypatch):
    """Which of cuweave's hooks in PyTorch handles its operators in the test's weave and sanitize blocks: the C++ one
    in its dispatcher (built first, if need be), or the Python dispatch mode."""
    from cuweave import _torch_hooks, _torch_native

    if request.param == "native":
        module = _torch_native.wait(timeout=600)
        assert module is not None, f"the C++ hook could not be built: {_torch_native.failure()}"
    else:
        monkeypatch.setattr(_torch_hooks, "_native_hook", lambda: None)
    return request.param


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


@pytest.fixture(scope="module")
def comms():
    """Communicators of the collectives tests, one rank per device (up to four), closed after the module."""
    made = cw.collectives.communicators(range(min(cw.device_count(), 4)))
    yield made
    made.close()
