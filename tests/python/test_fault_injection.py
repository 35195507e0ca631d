"""Faults injected by the simulator (cuweave.sim.inject_faults, CUWEAVE_SIM_FAULTS): each kind fails its calls as
CUDA, NCCL or CUPTI would, with cuweave's error naming the failed call; a seed replays the same faults; the
library gives back what it holds after a failure. tools/fault-sweep runs whole programs under many seeds."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cuweave as cw

pytestmark = pytest.mark.skipif(cw.backend() != "sim", reason="faults are injected by the simulator")

FAULTS = pathlib.Path(__file__).parent.parent / "faults"


@pytest.fixture(autouse=True)
def _faults_stop():
    yield
    cw.sim.inject_faults(None)


def run_python(code: str, **environment: str) -> subprocess.CompletedProcess:
    """A program in a process of its own (a lost context is lost for good)."""
    env = dict(os.environ, CUWEAVE_BACKEND="sim", **environment)
    if "CUWEAVE_SIM_FAULTS" not in environment:
        env.pop("CUWEAVE_SIM_FAULTS", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120)


def outcomes(seed: int) -> tuple[list, list]:
    """A fixed sequence of allocations and launches under `seed`: what each step did, and the faults logged."""
    cw.sim.inject_faults(seed, 0.3, kinds=["allocation", "launch"])
    seen = []
    for i in range(30):
        try:
            cw.ops.fill(cw.zeros(16, np.float32), float(i))
            seen.append("ok")
        except cw.CudaError as error:
            seen.append(error.name)
    faults = cw.sim.injected_faults()
    cw.sim.inject_faults(None)
    cw.synchronize()
    return seen, faults


def test_a_seed_replays_the_same_faults_and_another_seed_others():
    first, faults = outcomes(5)
    assert outcomes(5) == (first, faults)
    assert {"cudaErrorMemoryAllocation", "cudaErrorLaunchOutOfResources", "ok"} <= set(first)
    assert outcomes(6)[0] != first
    assert all(kind in ("allocation", "launch") for kind, _ in faults)


def test_an_injected_allocation_failure_is_an_out_of_memory_error_naming_the_call():
    cw.sim.inject_faults(1, 1.0, kinds=["allocation"])
    with pytest.raises(cw.OutOfMemoryError) as info:
        cw.zeros(16, np.float32)
    assert info.value.call == "cudaMallocFromPoolAsync" and info.value.name == "cudaErrorMemoryAllocation"
    assert "injected fault" in str(info.value)
    assert cw.sim.injected_faults() == [("allocation", "cudaMallocFromPoolAsync")]
    cw.sim.inject_faults(None)
    assert (cw.ops.fill(x := cw.zeros(16, np.float32), 2.0) or x).to_numpy().tolist() == [2.0] * 16


def test_an_injected_launch_failure_queues_nothing_and_later_launches_run(stream):
    x = cw.to_device(np.arange(16, dtype=np.float32), stream=stream)
    stream.synchronize()
    cw.sim.inject_faults(1, 1.0, kinds=["launch"])
    with pytest.raises(cw.CudaError) as info:
        cw.ops.fill(x, 7.0, stream=stream)
    assert info.value.call == "cudaLaunchKernel" and info.value.name == "cudaErrorLaunchOutOfResources"
    cw.sim.inject_faults(None)
    assert x.to_numpy(stream=stream).tolist() == list(range(16))  # the refused fill never ran
    cw.ops.fill(x, 3.0, stream=stream)
    assert x.to_numpy(stream=stream).tolist() == [3.0] * 16


def test_an_injected_graph_launch_failure_names_cuda_graph_launch(stream):
    x = cw.zeros(16, np.float32, stream=stream)
    with stream, cw.capture(stream) as cap:
        cw.ops.add(x, 1.0, out=x)
    cw.sim.inject_faults(2, 1.0, kinds=["launch"])
    with pytest.raises(cw.CudaError) as info:
        cap.graph.replay(stream)
    assert info.value.call == "cudaGraphLaunch"
    cw.sim.inject_faults(None)
    cap.graph.replay(stream)
    assert x.to_numpy(stream=stream).tolist() == [1.0] * 16  # one replay ran, the refused one did not


def test_a_trace_that_cannot_attach_cupti_says_another_tool_holds_it():
    cw.sim.inject_faults(3, 1.0, kinds=["tool_attach"])
    with pytest.raises(cw.CudaError) as info:
        with cw.trace():
            pass
    assert info.value.call == "cuptiSubscribe" and "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in str(info.value)
    cw.sim.inject_faults(None)
    with cw.trace() as timeline:
        cw.ops.fill(cw.zeros(4, np.float32), 1.0)
    assert any(event.kind == "kernel" for event in timeline.events)


def test_an_injected_nccl_failure_is_an_nccl_error_naming_the_call():
    comms = cw.collectives.communicators([0], timeout=20)
    x = cw.to_device(np.ones(16, np.float32))
    cw.sim.inject_faults(4, 1.0, kinds=["collective"])
    with pytest.raises(cw.NcclError) as info:
        comms.all_reduce([x])
    assert info.value.call == "ncclAllReduce"
    cw.sim.inject_faults(None)
    comms.close()


def test_a_rank_that_never_arrives_fails_the_collective_at_the_communicators_timeout():
    comms = cw.collectives.communicators([0], timeout=1)
    x = cw.to_device(np.ones(16, np.float32))
    cw.synchronize()
    cw.sim.inject_faults(5, 1.0, kinds=["absent_rank"])
    comms.all_reduce([x])  # returns: the call was made, its part never arrives
    cw.sim.inject_faults(None)
    with pytest.raises(cw.NcclError) as info:
        cw.synchronize()
    assert info.value.call == "ncclAllReduce" and info.value.name == "ncclTimeout"
    assert "not done within 1 s" in str(info.value)
    assert cw.sim.injected_faults() == []  # the log starts afresh with each inject_faults()


def test_a_sticky_fault_loses_the_context_and_every_later_call_names_it():
    run = run_python("""
        import numpy as np, cuweave as cw
        x = cw.zeros(16, np.float32)
        cw.synchronize()
        cw.sim.inject_faults(1, 1.0, kinds=["sticky_fault"])
        cw.ops.fill(x, 1.0)          # queued: the kernel faults as it runs
        for step in ("synchronize", "zeros"):
            try:
                cw.synchronize() if step == "synchronize" else cw.zeros(4, np.float32)
            except cw.ContextLostError as error:
                print(step, error.call, error.name, error.first_call, "injected fault" in str(error))
    """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "synchronize cudaDeviceSynchronize cudaErrorIllegalAddress cudaDeviceSynchronize True",
        "zeros cudaMallocFromPoolAsync cudaErrorIllegalAddress cudaDeviceSynchronize True",
    ]


def test_nothing_queued_behind_a_sticky_fault_runs_on_its_device():
    # As on a GPU: a copy queued behind the faulting kernel never writes its destination, a host function behind
    # it is never called, and work on another stream ordered after it does not run either.
    run = run_python("""
        import numpy as np, cuweave as cw
        s, t = cw.Stream(), cw.Stream()
        x = cw.to_device(np.arange(1024, dtype=np.float32), stream=s)
        into = cw.pinned_empty(1024, np.float32)
        into[:] = -1
        s.synchronize()
        cw.sim.inject_faults(1, 1.0, kinds=["sticky_fault"])
        latch = cw.HostLatch(s)          # holds s until everything below is queued
        cw.ops.add(x, 1.0, out=x, stream=s)   # faults as it runs
        cw.copy_async(into, x, stream=s)
        called = []
        s.launch_host_func(lambda: called.append("s"))
        t.wait(s.record())
        cw.ops.fill(x, 5.0, stream=t)
        t.launch_host_func(lambda: called.append("t"))
        latch.release()
        for stream in (s, t):
            try:
                stream.synchronize()
            except cw.ContextLostError as error:
                print(error.name)
        print((into == -1).all(), called)
    """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["cudaErrorIllegalAddress", "cudaErrorIllegalAddress", "True []"]


def test_the_environment_variable_injects_from_start_up_and_a_bad_value_says_the_form():
    run = run_python("""
        import numpy as np, cuweave as cw
        try:
            cw.zeros(4, np.float32)
        except cw.OutOfMemoryError as error:
            print("refused", error.call)
    """, CUWEAVE_SIM_FAULTS="3:1.0")
    assert run.returncode == 0 and run.stdout.strip() == "refused cudaMallocFromPoolAsync", run.stderr
    bad = run_python("import cuweave", CUWEAVE_SIM_FAULTS="three")
    assert bad.returncode != 0 and "expected <seed>[:<rate>]" in bad.stderr


@pytest.mark.parametrize("arguments", [dict(seed_value=1, rate=0.0), dict(seed_value=1, rate=1.5),
                                       dict(seed_value=-1), dict(seed_value=1, kinds=["oom"])])
def test_inject_faults_refuses_what_it_cannot_mean(arguments):
    with pytest.raises(ValueError):
        cw.sim.inject_faults(**arguments)


def test_prefetch_closes_its_stream_when_the_wait_at_its_end_fails():
    # Found by the fault sweep: a prefetch whose closing wait raised (here: after a lost context) left its stream
    # open, or its lease on cuweave's copy-stream pool out, until garbage collection. Here the pool's four streams
    # are taken, so the prefetch has a stream of its own.
    run = run_python("""
        import numpy as np, cuweave as cw
        batches = [np.full(1024, i, np.float32) for i in range(4)]
        holding = [cw.prefetch(batches, depth=2) for _ in range(4)]
        it = cw.prefetch(batches, depth=2)
        first = next(iter(it))
        cw.synchronize()
        cw.sim.inject_faults(1, 1.0, kinds=["sticky_fault"])
        # On the prefetch's own stream, so that its closing wait meets the fault in every schedule the
        # simulator may explore (work on another stream may run only after that wait).
        cw.ops.fill(first, 1.0, stream=it._state.stream)
        try:
            it.close()
        except cw.ContextLostError:
            print("raised")
        print("closed", it._state.stream.closed)
    """)
    assert run.stdout.splitlines() == ["raised", "closed True"], run.stderr[-2000:]


def _runner():
    spec = importlib.util.spec_from_file_location("run_program", FAULTS / "run_program.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sweep_counts_what_a_program_leaves_behind_and_judges_its_error():
    runner = _runner()
    before = {"memory": {"device": 1, "pinned": 0, "registered": 0}, "threads": ["MainThread"], "native_threads": 3}
    after = {"memory": {"device": 3, "pinned": 1, "registered": 0}, "threads": ["MainThread", "stuck"],
             "native_threads": 4}
    found = runner.leaks(before, after, {}, context_lost=False)
    assert any("2 device" in f for f in found) and any("1 pinned" in f for f in found)
    assert any("stuck" in f for f in found) and any("native" in f for f in found)
    assert not any("device" in f for f in runner.leaks(before, after, {}, context_lost=True))
    injected = [("allocation", "cudaMallocFromPoolAsync")]
    assert runner.check_error(AssertionError("x"), injected) != []  # wrong results in silence
    assert runner.check_error(KeyError("x"), injected) != []
    assert runner.check_error(cw.CuweaveError("x"), []) != []  # an error with no fault behind it
    assert runner.check_error(cw.CuweaveError("x"), injected) == []
