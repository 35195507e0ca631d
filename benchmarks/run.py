#!/usr/bin/env python3
"""cuweave benchmarks: cuweave beside raw CUDA C++, PyTorch and CuPy, in one run.

    python benchmarks/run.py [--json PATH] [--quick] [--rows name,name] [--gross]

Methods follow /work/shared/targets.md: a timing is the median of several repetitions after a warm-up
repetition; host costs are wall time per call over 20,000 calls; pinned copies are timed with CUDA events;
copies from and to ordinary NumPy memory, duplex copies and the prefetch pipeline are wall time including
the final synchronize.
The raw CUDA column comes from benchmarks/raw_cuda.cu, compiled with nvcc and run as a child process
before the in-process measurements. Benchmarks are never part of the test pass/fail.

Adding a row: write one function per library that returns a float (use time_per_call / gbps_of /
wall_ms), then add a Row to ROWS. See benchmarks/README.md for what each row means.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import functools
import gc
import hashlib
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

HERE = Path(__file__).resolve().parent
RAW_SOURCE = HERE / "raw_cuda.cu"

N_CALLS = 20_000            # calls per repetition for host costs
REPS = 7                    # timed repetitions (after one warm-up repetition)
QUICK_N_CALLS = 2_000       # --quick: a smoke run, not figures to quote
QUICK_REPS = 3
BLOCK_BYTES = 1 << 20       # "1 MB" pinned block
BLOCK_PAIRS = 200           # allocate + free pairs per repetition
COPY_BYTES = 256 * 2**20    # "256 MB" copies
DUPLEX_ROUNDS = 5           # h2d_d2h_duplex: rounds of one 256 MB copy each way, per repetition
PIPELINE_BATCHES = 16       # prefetch pipeline: NumPy float32 batches ...
PIPELINE_BATCH_BYTES = 64 * 2**20  # ... of 64 MB each
PIPELINE_COMPUTE_OVER_COPY = 2.5   # per-batch compute = 2.5x one batch's copy time
PIPELINE_DEPTH = 2          # cw.prefetch(depth=)
PIPELINE_MAX_REPS = 5       # the pipeline rows use min(reps, this) repetitions

PEERS = ("torch", "cupy")
LIBS = ("cuweave",) + PEERS  # measured in this process; "raw" comes from raw_cuda.cu

# Library modules, set by load_cuweave() / load_peers(); a peer stays None when skipped.
cw = None
torch = None
cupy = None


@dataclass(frozen=True)
class Config:
    n: int      # calls per repetition for host costs
    reps: int   # timed repetitions


# --------------------------------------------------------------------------- timing helpers

_call_overhead_us = 0.0  # subtracted by time_per_call; set by main() unless --gross


@contextlib.contextmanager
def gc_disabled():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def median_of(reps: int, fn: Callable[[], float]) -> float:
    """Call fn() once to warm up, then `reps` times, with the garbage collector off; median of the results."""
    with gc_disabled():
        fn()
        return statistics.median([fn() for _ in range(reps)])


def _loop_ns(fn: Callable[[], object], n: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in itertools.repeat(None, n):
        fn()
    return time.perf_counter_ns() - t0


def _empty_loop_ns(n: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in itertools.repeat(None, n):
        pass
    return time.perf_counter_ns() - t0


def per_call_us(fn: Callable[[], object], n: int) -> float:
    """One repetition of time_per_call: host µs per fn() call over n calls."""
    return _loop_ns(fn, n) / n / 1e3 - _call_overhead_us


def time_per_call(fn: Callable[[], object], n: int, reps: int) -> float:
    """Host µs per fn() call: wall time of n calls / n, median of `reps` after a warm-up repetition.

    The cost of the Python call to fn itself (calibrate_call_overhead) is subtracted unless --gross, so
    the figure is what fn's body costs when written in place in a `for` loop.
    """
    return median_of(reps, functools.partial(per_call_us, fn, n))


def calibrate_call_overhead(n: int, reps: int) -> float:
    """µs that calling an empty Python function adds to one iteration of a `for` loop."""

    def noop():
        pass

    per_call = median_of(reps, lambda: (_loop_ns(noop, n) - _empty_loop_ns(n)) / n / 1e3)
    return max(per_call, 0.0)


def gbps(nbytes: int, ms: float) -> float:
    """GB/s (1e9 bytes per second) of `nbytes` moved in `ms` milliseconds."""
    return nbytes / 1e9 / (ms / 1e3)


def gbps_of(nbytes: int, one_copy_ms: Callable[[], float], reps: int) -> float:
    """GB/s of a copy whose duration in ms one_copy_ms() returns (event-timed, or wall_ms of a call that
    includes the synchronize): the median of `reps` after a warm-up."""
    return median_of(reps, lambda: gbps(nbytes, one_copy_ms()))


# Rows whose libraries take turns within each repetition (in_turn_row). On the shared machines a row's figures
# drift from one minute to the next in every library alike (copy rates between about 71 and 93 GB/s,
# tools/probes/duplex_probe.py; a host-driven loop round between 16 and 21 us, host_loop_round_probe.py), and
# measured one library after the other, that drift decided the row.

# Builds one library's work and returns the measurement of one repetition of it.
InTurnSetup = Callable[[], Callable[[], float]]


def setup_of(build: Callable[[], object], measure: Callable[[object], float]) -> InTurnSetup:
    """The setup that builds the work with build() and measures a repetition with measure(work)."""
    return lambda: functools.partial(measure, build())


def in_turn(setups: dict[str, InTurnSetup], reps: int) -> dict[str, float | Exception]:
    """Each library's figure (or what its setup raised), the libraries taking turns within each repetition, the
    first of them rotating: a warm-up repetition, then `reps`; medians."""
    measures: dict[str, Callable[[], float]] = {}
    results: dict[str, float | Exception] = {}
    for lib, setup in setups.items():
        try:
            measures[lib] = setup()
        except Exception as exc:  # noqa: BLE001 -- reported as that library's error in the row
            results[lib] = exc
    figures: dict[str, list[float]] = {lib: [] for lib in measures}
    order = list(measures)
    with gc_disabled():
        for rep in range(reps + 1 if order else 0):
            for lib in order[rep % len(order):] + order[:rep % len(order)]:
                figure = measures[lib]()
                if rep > 0:
                    figures[lib].append(figure)
    results.update({lib: statistics.median(values) for lib, values in figures.items()})
    return results


@functools.cache
def in_turn_results(cfg: Config, setups_of: Callable[[Config], dict[str, InTurnSetup]]) -> dict:
    """in_turn over the loaded libraries of setups_of(cfg), once per row (its measures share the result)."""
    loaded = {"cuweave": cw, "torch": torch, "cupy": cupy}
    return in_turn({lib: setup for lib, setup in setups_of(cfg).items() if loaded[lib] is not None}, cfg.reps)


def in_turn_figure(cfg: Config, setups_of: Callable[[Config], dict[str, InTurnSetup]], lib: str) -> float:
    result = in_turn_results(cfg, setups_of)[lib]
    if isinstance(result, Exception):
        raise result
    return result


def wall_ms(fn: Callable[[], object]) -> float:
    """Wall ms of one fn() call. What fn returns is dropped after the clock stops, so freeing a result
    (a 256 MB NumPy array, say) is not part of the figure."""
    t0 = time.perf_counter_ns()
    result = fn()
    elapsed_ns = time.perf_counter_ns() - t0
    del result
    return elapsed_ns / 1e6


# --------------------------------------------------------------------------- event record + stream wait


def launch_cost_rep(launch: Callable[[], object], sync: Callable[[], object], cfg: Config) -> Callable[[], float]:
    """One repetition of launch_cost_us."""

    def run() -> float:
        t0 = time.perf_counter_ns()
        for _ in itertools.repeat(None, cfg.n):
            launch()
        sync()
        return (time.perf_counter_ns() - t0) / cfg.n / 1e3 - _call_overhead_us

    return run


def launch_cost_us(launch: Callable[[], object], sync: Callable[[], object], cfg: Config) -> float:
    """µs per launch: wall time of n launches and the final synchronize, / n (targets.md's method), less
    the Python call overhead of `launch` itself, as in time_per_call."""
    return median_of(cfg.reps, launch_cost_rep(launch, sync, cfg))


# --------------------------------------------------------------------------- eager tiny-kernel launch


INCREMENT = r'extern "C" __global__ void increment(float* x) { x[0] += 1.0f; }'


def cw_tiny_kernel_launch_rep(cfg: Config) -> tuple[Callable[[], float], Callable[[], None]]:
    """A kernel compiled with cw.compile (as CuPy's RawKernel) that increments one float, 1 thread: one
    repetition, and a check to call after the last."""
    kernel = cw.compile(INCREMENT, "increment")
    s = cw.Stream()
    x = cw.zeros(1, np.float32, stream=s)
    args = (x,)

    def check() -> None:
        assert x.to_numpy(stream=s)[0] > 0

    return launch_cost_rep(lambda: kernel(1, 1, args, stream=s), s.synchronize, cfg), check


def cw_tiny_kernel_launch(cfg: Config) -> float:
    rep, check = cw_tiny_kernel_launch_rep(cfg)
    result = median_of(cfg.reps, rep)
    check()
    return result


def cw_tiny_kernel_launch_paired(cfg: Config) -> dict[str, float]:
    """cw_tiny_kernel_launch in turn with raw CUDA's launch loop in this process."""
    rep, check = cw_tiny_kernel_launch_rep(cfg)
    result = paired_with_raw_here(rep, lambda: _raw_here().raw_tiny_kernel_launch_us(1, cfg.n), cfg)
    check()
    return result


def cw_tiny_builtin_launch(cfg: Config) -> float:
    """cw.ops.add(x, 1.0, out=x) on a one-element float32 array: the built-in kernel, one element."""
    s = cw.Stream()
    x = cw.zeros(1, np.float32, stream=s)
    add = cw.ops.add
    result = launch_cost_us(lambda: add(x, 1.0, out=x, stream=s), s.synchronize, cfg)
    assert x.to_numpy(stream=s)[0] > 0
    return result


def torch_tiny_kernel_launch(cfg: Config) -> float:
    x = torch.zeros(1, dtype=torch.float32, device="cuda")
    stream = torch.cuda.Stream()  # non-blocking, as torch creates them
    with torch.cuda.stream(stream):
        return launch_cost_us(lambda: x.add_(1), stream.synchronize, cfg)


def cupy_tiny_kernel_launch(cfg: Config) -> float:
    kernel = cupy.RawKernel(INCREMENT, "increment")
    x = cupy.zeros(1, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    args = (x,)
    with stream:
        return launch_cost_us(lambda: kernel((1,), (1,), args), stream.synchronize, cfg)


# --------------------------------------------------------------------------- graphs

GRAPH_NODES = 1000  # kernels in the straight-line graph (as raw_cuda.cu)
GRAPH_REPLAYS = 20  # replays of it per repetition


def replay_cost_rep(replay: Callable[[], object], sync: Callable[[], object], cfg: Config) -> Callable[[], float]:
    """One repetition of replay_cost_us."""

    def run() -> float:
        t0 = time.perf_counter_ns()
        for _ in itertools.repeat(None, cfg.n):
            replay()
        per_call = (time.perf_counter_ns() - t0) / cfg.n / 1e3
        sync()
        return per_call - _call_overhead_us

    return run


def replay_cost_us(replay: Callable[[], object], sync: Callable[[], object], cfg: Config) -> float:
    """Host µs per replay call in a loop of n (the sync after the loop is not timed), as raw_cuda.cu, less the
    Python call overhead of `replay` itself."""
    return median_of(cfg.reps, replay_cost_rep(replay, sync, cfg))


def per_node_rep(replay: Callable[[], object], sync: Callable[[], object],
                 units: int = GRAPH_NODES) -> Callable[[], float]:
    """One repetition of per_node_us."""

    def run() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(GRAPH_REPLAYS):
            replay()
        sync()
        return (time.perf_counter_ns() - t0) / (GRAPH_REPLAYS * units) / 1e3

    return run


def per_node_us(replay: Callable[[], object], sync: Callable[[], object], cfg: Config,
                units: int = GRAPH_NODES) -> float:
    """Wall µs of GRAPH_REPLAYS replays and the sync, per unit of work in a replay: per node of the
    straight-line graph, or (units=LOOP_ROUNDS) per round of a loop inside the graph."""
    return median_of(cfg.reps, per_node_rep(replay, sync, units))


def cw_increment_graph(kernels: int):
    kernel = cw.compile(INCREMENT, "increment")
    s = cw.Stream(blocking=False)
    x = cw.zeros(1, np.float32, stream=s)
    with cw.capture(s, mode="thread_local") as cap:
        for _ in range(kernels):
            kernel(1, 1, (x,))
    cap.graph.upload(s)
    return cap.graph, s, x


def cw_graph_replay(cfg: Config) -> float:
    graph, s, x = cw_increment_graph(1)
    result = replay_cost_us(functools.partial(graph.replay, s), s.synchronize, cfg)
    assert x.to_numpy(stream=s)[0] > 0
    return result


def cw_graph_replay_paired(cfg: Config) -> dict[str, float]:
    """cw_graph_replay in turn with raw CUDA's replay loop of the same graph in this process."""
    graph, s, x = cw_increment_graph(1)
    result = paired_with_raw_here(replay_cost_rep(functools.partial(graph.replay, s), s.synchronize, cfg),
                                  lambda: _raw_here().raw_graph_replay_us(1, cfg.n), cfg)
    assert x.to_numpy(stream=s)[0] > 0
    return result


def cw_graph_node(cfg: Config) -> float:
    graph, s, x = cw_increment_graph(GRAPH_NODES)
    return per_node_us(functools.partial(graph.replay, s), s.synchronize, cfg)


def cw_graph_node_paired(cfg: Config) -> dict[str, float]:
    """cw_graph_node in turn with raw CUDA's replays of the same graph in this process."""
    graph, s, x = cw_increment_graph(GRAPH_NODES)
    return paired_with_raw_here(per_node_rep(functools.partial(graph.replay, s), s.synchronize),
                                lambda: _raw_here().raw_graph_node_us(1), cfg)


def torch_increment_graph(kernels: int):
    x = torch.zeros(1, dtype=torch.float32, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # warm up, as torch's documentation asks
        x.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(kernels):
            x.add_(1)
    return graph


def torch_graph_replay(cfg: Config) -> float:
    graph = torch_increment_graph(1)
    return replay_cost_us(graph.replay, torch.cuda.synchronize, cfg)


def torch_graph_node(cfg: Config) -> float:
    graph = torch_increment_graph(GRAPH_NODES)
    return per_node_us(graph.replay, torch.cuda.synchronize, cfg)


def cupy_increment_graph(kernels: int):
    kernel = cupy.RawKernel(INCREMENT, "increment")
    x = cupy.zeros(1, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel((1,), (1,), (x,), stream=stream)  # compile and load outside the capture
    stream.synchronize()
    stream.begin_capture()
    for _ in range(kernels):
        kernel((1,), (1,), (x,), stream=stream)
    graph = stream.end_capture()
    graph.upload(stream)
    return graph, stream


def cupy_graph_replay(cfg: Config) -> float:
    graph, stream = cupy_increment_graph(1)
    return replay_cost_us(functools.partial(graph.launch, stream), stream.synchronize, cfg)


def cupy_graph_node(cfg: Config) -> float:
    graph, stream = cupy_increment_graph(GRAPH_NODES)
    return per_node_us(functools.partial(graph.launch, stream), stream.synchronize, cfg)


LOOP_ROUNDS = 1000  # rounds of the loop inside one graph per replay (as raw_cuda.cu)
HOST_LOOP_ROUNDS = 200  # rounds of the host-driven loop per repetition
COUNTDOWN = r"""
extern "C" __global__ void countdown(cudaGraphConditionalHandle handle, int* left) {
    const int now = --*left;
    cudaGraphSetConditional(handle, now > 0 ? 1u : 0u);
}
"""
DECREMENT = r'extern "C" __global__ void decrement(int* left) { --*left; }'


def cw_loop_round(cfg: Config) -> float:
    """cw.while_loop around a compiled kernel that counts down and sets the condition (cw.Condition)."""
    kernel = cw.compile(COUNTDOWN, "countdown")
    s = cw.Stream()
    start = cw.to_device(np.array([LOOP_ROUNDS], np.int32), stream=s)
    left = cw.zeros(1, np.int32, stream=s)
    with cw.capture(s) as captured:
        cw.copy_async(left, start)
        condition = cw.Condition(1)
        with cw.while_loop(condition):
            kernel(1, 1, (condition, left))
    graph = captured.graph
    result = per_node_us(functools.partial(graph.replay, s), s.synchronize, cfg, units=LOOP_ROUNDS)
    assert left.to_numpy(stream=s)[0] == 0, "the loop did not run to zero"
    return result


def host_loop_round_us(step: Callable[[], int]) -> float:
    """One repetition: wall µs per round of a loop whose every round replays a graph and reads the counter back."""
    t0 = time.perf_counter_ns()
    for _ in range(HOST_LOOP_ROUNDS):
        if step() <= 0:
            break
    return (time.perf_counter_ns() - t0) / HOST_LOOP_ROUNDS / 1e3


def cuda_core_loop_round(cfg: Config) -> float:
    """The same loop with cuda.core's conditional nodes (GraphBuilder.while_loop, a GraphCondition passed to the
    kernel), where cuda.core is installed; the counter is a cuweave array, checked after the replays."""
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    device = Device()
    device.set_current()
    stream = device.create_stream()
    source = ("typedef unsigned long long cudaGraphConditionalHandle;\n"
              'extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle, unsigned int);\n'
              'extern "C" __global__ void reset(int* left, int rounds) { *left = rounds; }\n' + COUNTDOWN)
    module = Program(source, code_type="c++", options=ProgramOptions(arch=f"sm_{device.arch}")).compile("cubin")
    left = cw.zeros(1, np.int32)
    cw.synchronize()
    pointer = np.uint64(left.__cuda_array_interface__["data"][0])
    config = LaunchConfig(grid=1, block=1)
    builder = stream.create_graph_builder()
    builder.begin_building()
    launch(builder, config, module.get_kernel("reset"), pointer, np.int32(LOOP_ROUNDS))
    condition = builder.create_condition(1)
    body = builder.while_loop(condition)
    if not body.is_building:
        body.begin_building()
    launch(body, config, module.get_kernel("countdown"), condition, pointer)
    body.end_building()
    builder.end_building()
    graph = builder.complete()
    graph.upload(stream)
    result = per_node_us(functools.partial(graph.launch, stream), stream.sync, cfg, units=LOOP_ROUNDS)
    assert left.to_numpy()[0] == 0, "the cuda.core loop did not run to zero"
    return result


@dataclass
class HostLoop:
    """What a host-driven loop round uses: the decrement kernel, its stream, the device counter, a pinned array the
    counter is read into, and a graph of one decrement."""
    kernel: object
    stream: object
    left: object
    seen: np.ndarray
    graph: object


def cw_host_loop() -> HostLoop:
    kernel = cw.compile(DECREMENT, "decrement")
    s = cw.Stream()
    left = cw.to_device(np.array([1 << 30], np.int32), stream=s)
    with cw.capture(s) as captured:
        kernel(1, 1, (left,))
    return HostLoop(kernel, s, left, cw.pinned_empty(1, np.int32), captured.graph)


def cw_loop_round_host_step() -> Callable[[], int]:
    """The loop driven from the host: replay a one-kernel graph, read the counter into pinned memory."""
    parts = cw_host_loop()
    graph, s, left, seen = parts.graph, parts.stream, parts.left, parts.seen

    def step() -> int:
        graph.replay(s)
        left.to_numpy(stream=s, out=seen)
        return int(seen[0])

    return step


def torch_loop_round_host_step() -> Callable[[], int]:
    left = torch.full((1,), 1 << 30, dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        left.sub_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        left.sub_(1)

    def step() -> int:
        graph.replay()
        return int(left.item())

    return step


def cupy_host_loop() -> HostLoop:
    import cupyx

    kernel = cupy.RawKernel(DECREMENT, "decrement")
    left = cupy.full(1, 1 << 30, dtype=cupy.int32)
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel((1,), (1,), (left,), stream=stream)
    stream.synchronize()
    stream.begin_capture()
    kernel((1,), (1,), (left,), stream=stream)
    graph = stream.end_capture()
    graph.upload(stream)
    return HostLoop(kernel, stream, left, cupyx.empty_pinned(1, np.int32), graph)


def cupy_loop_round_host_step() -> Callable[[], int]:
    parts = cupy_host_loop()
    graph, stream, left, seen = parts.graph, parts.stream, parts.left, parts.seen

    def step() -> int:
        graph.launch(stream)
        left.get(stream=stream, out=seen)  # blocking: waits for the stream
        return int(seen[0])

    return step


HOST_LOOP_STEPS = {"cuweave": cw_loop_round_host_step, "torch": torch_loop_round_host_step,
                   "cupy": cupy_loop_round_host_step}


def loop_round_host_setups(cfg: Config) -> dict[str, InTurnSetup]:
    return {lib: setup_of(make, host_loop_round_us) for lib, make in HOST_LOOP_STEPS.items()}


ROUND_TRIP_ELEMENTS = 256  # 1 KB of float32; the larger rows: 1 MB and 64 MB


def round_trip_input(elements: int = ROUND_TRIP_ELEMENTS) -> np.ndarray:
    return np.random.default_rng(7).standard_normal(elements).astype(np.float32)


def check_round_trip(result, x: np.ndarray) -> None:
    assert np.array_equal(np.asarray(result), x + np.float32(1)), "the graph round trip computed a wrong result"


def round_trip_calls(cfg: Config, elements: int) -> int:
    """Calls per repetition: cfg.n / 10 for 1 KB, fewer as copies grow (about 200 MB moved each way)."""
    return max(10, min(cfg.n // 10, (200 << 20) // (4 * elements)))


def cw_graph_function_call(elements: int) -> Callable[[], object]:
    """cw.graph_function(x + 1) called with a float32 NumPy array: staging copy, replay, wait, NumPy result."""
    f = cw.graph_function(lambda x: cw.ops.add(x, 1.0))
    x = round_trip_input(elements)
    check_round_trip(f(x), x)
    return functools.partial(f, x)


def torch_graph_function_call(elements: int) -> Callable[[], object]:
    """The same by hand with torch: pinned staging, a CUDAGraph with H2D, add, D2H, and a wait."""
    pinned_in = torch.empty(elements, dtype=torch.float32).pin_memory()
    pinned_out = torch.empty(elements, dtype=torch.float32).pin_memory()
    static_in = torch.empty(elements, dtype=torch.float32, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        static_out = static_in + 1
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_in.copy_(pinned_in, non_blocking=True)
        static_out = static_in + 1
        pinned_out.copy_(static_out, non_blocking=True)
    in_view, out_view = pinned_in.numpy(), pinned_out.numpy()
    x = round_trip_input(elements)

    def call():
        np.copyto(in_view, x)
        graph.replay()
        torch.cuda.current_stream().synchronize()
        return out_view

    check_round_trip(call(), x)
    return call


def cupy_graph_function_call(elements: int) -> Callable[[], object]:
    """The same by hand with CuPy: pinned staging, a captured graph with H2D, add, D2H, and a wait."""
    nbytes = elements * 4
    in_view = np.frombuffer(cupy.cuda.alloc_pinned_memory(nbytes), np.float32, elements)
    out_view = np.frombuffer(cupy.cuda.alloc_pinned_memory(nbytes), np.float32, elements)
    static_in = cupy.empty(elements, dtype=cupy.float32)
    static_out = cupy.empty_like(static_in)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        cupy.add(static_in, 1, out=static_out)  # compile outside the capture
    stream.synchronize()
    # CuPy refuses set()/get() during capture, so the copies are raw cudaMemcpyAsync calls.
    memcpy = cupy.cuda.runtime.memcpyAsync
    default = cupy.cuda.runtime.memcpyDefault
    stream.begin_capture()
    memcpy(static_in.data.ptr, in_view.ctypes.data, nbytes, default, stream.ptr)
    with stream:
        cupy.add(static_in, 1, out=static_out)
    memcpy(out_view.ctypes.data, static_out.data.ptr, nbytes, default, stream.ptr)
    graph = stream.end_capture()
    x = round_trip_input(elements)

    def call():
        np.copyto(in_view, x)
        graph.launch(stream)
        stream.synchronize()
        return out_view

    check_round_trip(call(), x)
    return call


GRAPH_FUNCTION_CALLS = {"cuweave": cw_graph_function_call, "torch": torch_graph_function_call,
                        "cupy": cupy_graph_function_call}


def graph_function_setups(cfg: Config, elements: int) -> dict[str, InTurnSetup]:
    per_call = functools.partial(per_call_us, n=round_trip_calls(cfg, elements))
    return {lib: setup_of(functools.partial(make, elements), per_call) for lib, make in GRAPH_FUNCTION_CALLS.items()}


def graph_function_row(title: str, elements: int) -> Row:
    return in_turn_row(title, "us", None, None, functools.partial(graph_function_setups, elements=elements),
                       GRAPH_FUNCTION_CALLS)


def cw_record_wait_pair() -> Callable[[], None]:
    ev, a, b = cw.Event(), cw.Stream(), cw.Stream()

    def pair():
        a.record(ev)
        b.wait(ev)

    return pair


def cw_record_wait(cfg: Config) -> float:
    return time_per_call(cw_record_wait_pair(), cfg.n, cfg.reps)


def python_method_pair() -> Callable[[], None]:
    """Two calls of C methods with about the calling conventions of record and wait (METH_FASTCALL, METH_O) that do
    next to nothing (lookups in an empty dict): what any Python binding of the pair pays before its own work."""
    key, table = object(), {}

    def pair():
        table.get(key)
        table.__contains__(key)

    return pair


def cupy_runtime_record_wait_pair() -> Callable[[], None]:
    """cudaEventRecord + cudaStreamWaitEvent through CuPy's Cython runtime functions, handles as ints: the thinnest
    Python binding of the two calls there is (no objects, no checks beyond CUDA's)."""
    ev = cupy.cuda.Event(disable_timing=True)
    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    record, wait = cupy.cuda.runtime.eventRecord, cupy.cuda.runtime.streamWaitEvent
    event, first, second = ev.ptr, a.ptr, b.ptr

    def pair():
        record(event, first)
        wait(second, event, 0)

    pair.keep = (ev, a, b)  # the handles stay valid while the loop runs
    return pair


def cw_record_wait_paired(cfg: Config) -> dict[str, float]:
    """cw_record_wait in turn with raw CUDA's record + wait loop in this process; beside it, Python's floor for the
    pair, the thinnest binding of it (CuPy's runtime functions), cuweave's one-call form, b.wait(a), and raw CUDA's
    loop through the driver's entry points, which cuweave calls (Note [Hot calls through the driver])."""
    pair, floor = cw_record_wait_pair(), python_method_pair()
    result = paired_with_raw_here(lambda: _loop_ns(pair, cfg.n) / cfg.n / 1e3 - _call_overhead_us,
                                  lambda: _raw_here().raw_event_record_wait_us(1, cfg.n), cfg)
    result[PYTHON_FLOOR] = time_per_call(floor, cfg.n, cfg.reps)
    if cupy is not None:
        result[THINNEST_BINDING] = time_per_call(cupy_runtime_record_wait_pair(), cfg.n, cfg.reps)
    a, b = cw.Stream(), cw.Stream()
    result[ONE_CALL_WAIT] = time_per_call(functools.partial(b.wait, a), cfg.n, cfg.reps)
    result[RAW_THROUGH_DRIVER] = _raw_here().raw_event_record_wait_driver_us(cfg.reps, cfg.n)
    return result


def torch_record_wait(cfg: Config) -> float:
    ev, a, b = torch.cuda.Event(), torch.cuda.Stream(), torch.cuda.Stream()

    def pair():
        ev.record(a)
        b.wait_event(ev)

    return time_per_call(pair, cfg.n, cfg.reps)


def cupy_record_wait(cfg: Config) -> float:
    ev = cupy.cuda.Event(disable_timing=True)
    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)

    def pair():
        ev.record(a)
        b.wait_event(ev)

    return time_per_call(pair, cfg.n, cfg.reps)


# --------------------------------------------------------------------------- `with stream:` enter + exit


def cw_with_stream(cfg: Config) -> float:
    s = cw.Stream()

    def enter_exit():
        with s:
            pass

    return time_per_call(enter_exit, cfg.n, cfg.reps)


def torch_with_stream(cfg: Config) -> float:
    s = torch.cuda.Stream()

    def enter_exit():
        with torch.cuda.stream(s):
            pass

    return time_per_call(enter_exit, cfg.n, cfg.reps)


def cupy_with_stream(cfg: Config) -> float:
    s = cupy.cuda.Stream(non_blocking=True)

    def enter_exit():
        with s:
            pass

    return time_per_call(enter_exit, cfg.n, cfg.reps)


# --------------------------------------------------------------------------- pinned 1 MB block / array
# The warm-up repetition of median_of fills each library's cache, so the timed repetitions hit it.


def cw_pinned_block(cfg: Config) -> float:
    pool = cw.pinned_pool()

    def alloc_free():
        blk = pool.allocate(BLOCK_BYTES)
        del blk

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cw_pinned_array(cfg: Config) -> float:
    def alloc_free():
        arr = cw.pinned_empty((BLOCK_BYTES,), np.uint8)
        del arr

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def torch_pinned_tensor(cfg: Config) -> float:
    def alloc_free():
        t = torch.empty(BLOCK_BYTES, dtype=torch.uint8, pin_memory=True)
        del t

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cupy_pinned_block(cfg: Config) -> float:
    def alloc_free():
        mem = cupy.cuda.alloc_pinned_memory(BLOCK_BYTES)
        del mem

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cupy_pinned_array(cfg: Config) -> float:
    import cupyx

    def alloc_free():
        arr = cupyx.empty_pinned((BLOCK_BYTES,), dtype=np.uint8)
        del arr

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


# --------------------------------------------------------------------------- pinned H2D / D2H, 256 MB
# Each: pinned host buffer + device buffer, one non-blocking stream, the copy bracketed by timing events.


def cw_copy_gbps(cfg: Config, h2d: bool) -> float:
    s = cw.Stream()
    host = cw.pinned_empty((COPY_BYTES,), np.uint8)
    dev = cw.empty((COPY_BYTES,), np.uint8, stream=s)
    start, end = cw.Event(timing=True), cw.Event(timing=True)
    dst, src = (dev, host) if h2d else (host, dev)

    def one_copy_ms():
        start.record(s)
        cw.copy_async(dst, src, stream=s)
        end.record(s)
        end.synchronize()
        return start.elapsed_time(end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


def torch_copy_gbps(cfg: Config, h2d: bool) -> float:
    s = torch.cuda.Stream()
    host = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dst, src = (dev, host) if h2d else (host, dev)

    def one_copy_ms():
        start.record(s)
        with torch.cuda.stream(s):
            dst.copy_(src, non_blocking=True)
        end.record(s)
        end.synchronize()
        return start.elapsed_time(end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


def cupy_copy_gbps(cfg: Config, h2d: bool) -> float:
    rt = cupy.cuda.runtime
    s = cupy.cuda.Stream(non_blocking=True)
    host = cupy.cuda.alloc_pinned_memory(COPY_BYTES)
    dev = cupy.empty(COPY_BYTES, dtype=cupy.uint8)
    cupy.cuda.Device().synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()  # timing enabled by default
    if h2d:
        dst, src, kind = dev.data.ptr, host.ptr, rt.memcpyHostToDevice
    else:
        dst, src, kind = host.ptr, dev.data.ptr, rt.memcpyDeviceToHost

    def one_copy_ms():
        start.record(s)
        rt.memcpyAsync(dst, src, COPY_BYTES, kind, s.ptr)
        end.record(s)
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


# --------------------------------------------------------------------------- NumPy <-> device, 256 MB, wall
# From / to ordinary (pageable) NumPy memory: wall time of one call including the synchronize, so host-side
# staging counts. The source array is made (and every page touched) once, outside the timing.


@functools.cache
def host_float64() -> np.ndarray:
    """The 256 MB ordinary float64 NumPy array of the numpy_to_device rows."""
    return np.arange(COPY_BYTES // 8, dtype=np.float64)


@contextlib.contextmanager
def host_copy(threads: int) -> Iterator[Callable[[], None]]:
    """One copy of the numpy_to_device array into pinned memory (NumPy's copyto, which releases the GIL) by
    `threads` threads, each taking one slice: what limits the staged path, whose copy threads do the same work."""
    a = host_float64()
    pinned = cw.pinned_empty(a.shape, a.dtype)
    bounds = np.linspace(0, a.size, threads + 1).astype(int)
    slices = [slice(begin, end) for begin, end in zip(bounds[:-1], bounds[1:])]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:

        def copy():
            list(pool.map(lambda part: np.copyto(pinned[part], a[part]), slices))

        copy()
        yield copy


def host_memcpy_gbps(threads: int = 1) -> float:
    """This host's NumPy -> pinned copy rate with `threads` threads (host_copy)."""
    with host_copy(threads) as copy:
        return gbps_of(COPY_BYTES, lambda: wall_ms(copy), 3)


def describe_copy_thread_tuning(direction: str, tuning: dict, pool_threads: int) -> str:
    """One line on how many copy threads a staged direction chose as it ran, and what each count copied."""
    rates = ", ".join(f"{c['threads']}: {c['gb_per_s']:.1f}" if c["samples"] else f"{c['threads']}: -"
                      for c in tuning["candidates"])
    state = "settled" if tuning["settled"] else "still trying counts"
    return (f"{direction.replace('_', ' ')}: uses {tuning['threads']} of {pool_threads} copy threads, chosen as "
            f"transfers ran ({state}); host copy GB/s by thread count, medians of recent 64 MB segments: {rates}")


def cw_staged_copy() -> Callable[[], None]:
    """One cw.copy_async of the numpy_to_device array into a preallocated device array, and its synchronize."""
    a, s = host_float64(), cw.Stream()
    dev = cw.empty(a.shape, a.dtype, stream=s)

    def copy():
        cw.copy_async(dev, a, stream=s)
        s.synchronize()

    return copy


def cw_numpy_to_device(cfg: Config) -> float:
    """Into a preallocated device array: the copy alone (the allocating to_device is numpy_to_device_alloc)."""
    return gbps_of(COPY_BYTES, functools.partial(wall_ms, cw_staged_copy()), cfg.reps)


def cw_numpy_to_device_in_turn(cfg: Config) -> dict[str, float]:
    """cw_numpy_to_device, and in turn with it within each repetition what bounds it: this host's NumPy -> pinned
    copy, and a pinned -> device copy (wall time with the synchronize, as the staged row). The host's copy is
    the faster of two thread counts each repetition: the pool's, and the count the staged copies chose as they
    ran (Note [Copy threads chosen as transfers run]). The target (>= 0.8x pinned H2D where the host's copy
    allows it) compares figures taken at the same moments: measured minutes apart, a shared host's drift made
    the host's copy look slower than the staged path it bounds (tools/probes/numpy_to_device_order_probe.py)."""
    staged, s = cw_staged_copy(), cw.Stream()
    pinned_source = cw.pinned_empty((COPY_BYTES,), np.uint8)
    pinned_target = cw.empty((COPY_BYTES,), np.uint8, stream=s)

    def pinned():
        cw.copy_async(pinned_target, pinned_source, stream=s)
        s.synchronize()

    def rate(copy: Callable[[], None]) -> float:
        return gbps(COPY_BYTES, wall_ms(copy))

    staged()  # a segment or more for the tuner before its choice is read
    stats = cw.staging_stats()
    counts = sorted({stats["copy_threads"], stats["to_device"]["threads"]})
    with contextlib.ExitStack() as stack, gc_disabled():
        host_copies = [stack.enter_context(host_copy(threads)) for threads in counts]
        staged(), pinned()  # warm-up (host_copy warmed itself up)
        reps = [(rate(staged), max(rate(copy) for copy in host_copies), rate(pinned)) for _ in range(cfg.reps)]
    return {"cuweave": statistics.median(r[0] for r in reps),
            HOST_COPY_IN_TURN: statistics.median(r[1] for r in reps),
            PINNED_H2D_IN_TURN: statistics.median(r[2] for r in reps),
            STAGED_OVER_HOST_COPY: statistics.median(r[0] / r[1] for r in reps),
            STAGED_OVER_PINNED: statistics.median(r[0] / r[2] for r in reps),
            HOST_COPY_OVER_PINNED: statistics.median(r[1] / r[2] for r in reps)}


def cw_numpy_to_device_alloc(cfg: Config) -> float:
    a, s = host_float64(), cw.Stream()

    def copy():
        dev = cw.to_device(a, stream=s)
        s.synchronize()
        return dev

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def torch_numpy_to_device(cfg: Config) -> float:
    a = host_float64()
    dev = torch.empty(a.shape, dtype=torch.float64, device="cuda")
    stream = torch.cuda.current_stream()
    stream.synchronize()

    def copy():
        dev.copy_(torch.from_numpy(a))
        stream.synchronize()

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def torch_numpy_to_device_alloc(cfg: Config) -> float:
    a, stream = host_float64(), torch.cuda.current_stream()

    def copy():
        dev = torch.from_numpy(a).to("cuda")
        stream.synchronize()
        return dev

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def torch_numpy_to_device_pin(cfg: Config) -> float:
    """pin_memory() (a host copy into torch's cached pinned memory, timed) + an async copy + sync."""
    a, stream = host_float64(), torch.cuda.current_stream()

    def copy():
        dev = torch.from_numpy(a).pin_memory().to("cuda", non_blocking=True)
        stream.synchronize()
        return dev

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def cupy_numpy_to_device(cfg: Config) -> float:
    a, stream = host_float64(), cupy.cuda.get_current_stream()

    def copy():
        dev = cupy.asarray(a)
        stream.synchronize()
        return dev

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def cw_device_to_numpy(cfg: Config, pinned: bool | None) -> float:
    """d.to_numpy(): a new NumPy array, returned once the copy is complete. pinned=None (the default): on
    pooled pinned memory once the size recurs (from the second call on, i.e. after the warm-up repetition);
    pinned=True: always pinned; pinned=False: always ordinary (pageable) memory."""
    s = cw.Stream()
    dev = cw.zeros((COPY_BYTES // 8,), np.float64, stream=s)
    return gbps_of(COPY_BYTES, lambda: wall_ms(lambda: dev.to_numpy(stream=s, pinned=pinned)), cfg.reps)


def torch_device_to_numpy(cfg: Config, pinned: bool) -> float:
    dev = torch.zeros(COPY_BYTES // 8, dtype=torch.float64, device="cuda")
    stream = torch.cuda.current_stream()
    stream.synchronize()

    def to_pinned():
        host = torch.empty(dev.shape, dtype=dev.dtype, pin_memory=True)
        host.copy_(dev, non_blocking=True)
        stream.synchronize()
        return host.numpy()

    return gbps_of(COPY_BYTES, lambda: wall_ms(to_pinned if pinned else lambda: dev.cpu().numpy()), cfg.reps)


def cupy_device_to_numpy(cfg: Config, pinned: bool) -> float:
    import cupyx

    dev = cupy.zeros(COPY_BYTES // 8, dtype=cupy.float64)
    cupy.cuda.get_current_stream().synchronize()

    def to_pinned():
        host = cupyx.empty_pinned(dev.shape, dtype=dev.dtype)
        dev.get(out=host)  # blocking
        return host

    return gbps_of(COPY_BYTES, lambda: wall_ms(to_pinned if pinned else lambda: cupy.asnumpy(dev)), cfg.reps)


# --------------------------------------------------------------------------- H2D and D2H at once
# DUPLEX_ROUNDS rounds of one 256 MB pinned -> device copy on stream `up` and one 256 MB device -> pinned copy
# on stream `down`, queued alternately; GB/s total = 2 * DUPLEX_ROUNDS * 256 MB / wall incl. both syncs.
# The libraries take turns within each repetition (in_turn_row).

DUPLEX_TOTAL_BYTES = 2 * DUPLEX_ROUNDS * COPY_BYTES


def cw_duplex_rounds() -> Callable[[], None]:
    up, down = cw.Stream(), cw.Stream()
    host_in, host_out = cw.pinned_empty((COPY_BYTES,), np.uint8), cw.pinned_empty((COPY_BYTES,), np.uint8)
    dev_in, dev_out = cw.empty((COPY_BYTES,), np.uint8, stream=up), cw.zeros((COPY_BYTES,), np.uint8, stream=down)

    def rounds():
        for _ in range(DUPLEX_ROUNDS):
            cw.copy_async(dev_in, host_in, stream=up)
            cw.copy_async(host_out, dev_out, stream=down)
        up.synchronize()
        down.synchronize()

    return rounds


def torch_duplex_rounds() -> Callable[[], None]:
    up, down = torch.cuda.Stream(), torch.cuda.Stream()
    host_in = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    host_out = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    dev_in = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dev_out = torch.zeros(COPY_BYTES, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()

    def rounds():
        for _ in range(DUPLEX_ROUNDS):
            with torch.cuda.stream(up):
                dev_in.copy_(host_in, non_blocking=True)
            with torch.cuda.stream(down):
                host_out.copy_(dev_out, non_blocking=True)
        up.synchronize()
        down.synchronize()

    return rounds


def cupy_duplex_rounds() -> Callable[[], None]:
    rt = cupy.cuda.runtime
    up, down = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    host_in, host_out = cupy.cuda.alloc_pinned_memory(COPY_BYTES), cupy.cuda.alloc_pinned_memory(COPY_BYTES)
    dev_in, dev_out = cupy.empty(COPY_BYTES, dtype=cupy.uint8), cupy.zeros(COPY_BYTES, dtype=cupy.uint8)
    cupy.cuda.Device().synchronize()

    def rounds():
        for _ in range(DUPLEX_ROUNDS):
            rt.memcpyAsync(dev_in.data.ptr, host_in.ptr, COPY_BYTES, rt.memcpyHostToDevice, up.ptr)
            rt.memcpyAsync(host_out.ptr, dev_out.data.ptr, COPY_BYTES, rt.memcpyDeviceToHost, down.ptr)
        up.synchronize()
        down.synchronize()

    return rounds


DUPLEX_ROUNDS_OF = {"cuweave": cw_duplex_rounds, "torch": torch_duplex_rounds, "cupy": cupy_duplex_rounds}


def duplex_rate(rounds: Callable[[], None]) -> float:
    return gbps(DUPLEX_TOTAL_BYTES, wall_ms(rounds))


def duplex_setups(cfg: Config) -> dict[str, InTurnSetup]:
    return {lib: setup_of(make, duplex_rate) for lib, make in DUPLEX_ROUNDS_OF.items()}


# --------------------------------------------------------------------------- prefetch pipeline
# PIPELINE_BATCHES ordinary NumPy float32 batches of 64 MB, made once. Per-batch "compute" is cw.ops.spin,
# a 1-block kernel that busy-waits compute_s = 2.5x one batch's copy time (cw.to_device + sync, median),
# calibrated once and used for every library. Each variant is the wall time of the whole pass including
# the final synchronize, median of min(reps, PIPELINE_MAX_REPS) after a warm-up pass:
#   serial        for each batch: copy it, then compute, in order on one stream (no host wait in between)
#   copy_only     every copy, no compute
#   compute_only  every compute, no copy
#   prefetched    copies overlapped with compute (cw.prefetch; for PyTorch a hand-written side-stream prefetcher)
# overlap efficiency = max(copy_only, compute_only) / prefetched: 1.0 hides the shorter of the two entirely.

pipeline_calibration: dict[str, float] = {}  # filled by pipeline_compute_s, printed and written to --json


@functools.cache
def pipeline_batches() -> tuple[np.ndarray, ...]:
    n = PIPELINE_BATCH_BYTES // np.dtype(np.float32).itemsize
    return tuple(np.full(n, i, dtype=np.float32) for i in range(PIPELINE_BATCHES))


def pipeline_reps(cfg: Config) -> int:
    return min(cfg.reps, PIPELINE_MAX_REPS)


@functools.cache
def pipeline_compute_s(cfg: Config) -> float:
    """Per-batch compute in seconds: PIPELINE_COMPUTE_OVER_COPY x the median wall time of one batch's
    cw.to_device + synchronize."""
    s, batch = cw.Stream(), pipeline_batches()[0]

    def one_copy():
        dev = cw.to_device(batch, stream=s)
        s.synchronize()
        return dev

    copy_ms = median_of(cfg.reps, lambda: wall_ms(one_copy))
    compute_ms = PIPELINE_COMPUTE_OVER_COPY * copy_ms
    pipeline_calibration.update(batch_copy_ms=copy_ms, compute_ms=compute_ms)
    return compute_ms / 1e3


def cw_pipeline_passes(compute_s: float) -> dict[str, Callable[[], None]]:
    batches, consumer = pipeline_batches(), cw.Stream()

    def serial():
        for batch in batches:
            _on_device = cw.to_device(batch, stream=consumer)  # dropped at the next one, in stream order
            cw.ops.spin(compute_s, stream=consumer)  # stands for a kernel that reads it
        consumer.synchronize()

    def copy_only():
        for batch in batches:
            cw.to_device(batch, stream=consumer)
        consumer.synchronize()

    def compute_only():
        for _ in batches:
            cw.ops.spin(compute_s, stream=consumer)
        consumer.synchronize()

    def prefetched():
        with consumer, cw.prefetch(batches, depth=PIPELINE_DEPTH) as loader:
            for _on_device in loader:  # each batch is ordered before the current stream, `consumer`
                cw.ops.spin(compute_s)
        consumer.synchronize()

    return {"serial": serial, "copy_only": copy_only, "compute_only": compute_only, "prefetched": prefetched}


def torch_pipeline_passes(compute_s: float) -> dict[str, Callable[[], None]]:
    """Copies: torch.from_numpy(batch).pin_memory() then .to("cuda", non_blocking=True). Compute: the same
    cuweave spin, launched on torch's current stream (adopted with cw.Stream.from_external)."""
    batches, side = pipeline_batches(), torch.cuda.Stream()
    main = torch.cuda.current_stream()
    on_main = cw.Stream.from_external(main)

    def load(batch):
        return torch.from_numpy(batch).pin_memory().to("cuda", non_blocking=True)

    def serial():
        for batch in batches:
            _on_device = load(batch)
            cw.ops.spin(compute_s, stream=on_main)
        main.synchronize()

    def copy_only():
        for batch in batches:
            load(batch)
        main.synchronize()

    def compute_only():
        for _ in batches:
            cw.ops.spin(compute_s, stream=on_main)
        main.synchronize()

    def prefetched():
        # Batch i+1 is pinned and copied on `side` while batch i computes on `main`.
        with torch.cuda.stream(side):
            ahead = load(batches[0])
        for i in range(len(batches)):
            main.wait_stream(side)
            current = ahead
            current.record_stream(main)  # allocated on `side`, used on `main`
            cw.ops.spin(compute_s, stream=on_main)  # queued before the next load's host work
            if i + 1 < len(batches):
                with torch.cuda.stream(side):
                    ahead = load(batches[i + 1])
        main.synchronize()

    return {"serial": serial, "copy_only": copy_only, "compute_only": compute_only, "prefetched": prefetched}


PIPELINE_PASSES = {"cuweave": cw_pipeline_passes, "torch": torch_pipeline_passes}


@functools.cache
def pipeline_results(lib: str, cfg: Config) -> dict[str, float]:
    """Every pipeline figure of one library, measured once and shared by the pipeline rows: ms per pass,
    and the overlap efficiencies of the prefetched and the serial pass."""
    passes = PIPELINE_PASSES[lib](pipeline_compute_s(cfg))
    ms = {name: median_of(pipeline_reps(cfg), functools.partial(wall_ms, run)) for name, run in passes.items()}
    floor = max(ms["copy_only"], ms["compute_only"])
    return {**ms, "overlap_efficiency": floor / ms["prefetched"], "serial_efficiency": floor / ms["serial"]}


def pipeline_figure(cfg: Config, lib: str, key: str) -> float:
    return pipeline_results(lib, cfg)[key]



_raw_in_process = None  # raw_cuda.cu as a shared library, loaded into this process once


def _raw_here():
    global _raw_in_process
    if _raw_in_process is None:
        import ctypes

        library, note = build_raw_helper(cw.Device(0).properties.name, shared=True)
        if library is None:
            raise RuntimeError(note)
        _raw_in_process = ctypes.CDLL(str(library))
        _raw_in_process.raw_graph_node_us.restype = ctypes.c_double
        _raw_in_process.raw_graph_node_us.argtypes = [ctypes.c_int]
        _raw_in_process.raw_tiny_kernel_launch_us.restype = ctypes.c_double
        _raw_in_process.raw_tiny_kernel_launch_us.argtypes = [ctypes.c_int, ctypes.c_int]
        _raw_in_process.raw_graph_replay_us.restype = ctypes.c_double
        _raw_in_process.raw_graph_replay_us.argtypes = [ctypes.c_int, ctypes.c_int]
        _raw_in_process.raw_event_record_wait_us.restype = ctypes.c_double
        _raw_in_process.raw_event_record_wait_us.argtypes = [ctypes.c_int, ctypes.c_int]
        _raw_in_process.raw_event_record_wait_driver_us.restype = ctypes.c_double
        _raw_in_process.raw_event_record_wait_driver_us.argtypes = [ctypes.c_int, ctypes.c_int]
    return _raw_in_process


def paired_with_raw_here(cw_rep: Callable[[], float], raw_rep: Callable[[], float], cfg: Config) -> dict[str, float]:
    """cuweave beside raw_cuda.cu's same loop inside this process (ctypes), one repetition of each in turn,
    cfg.reps pairs after a warm-up pair: what earlier rows did to the process
    (tools/probes/graph_node_process_state.py) and the shared host's drift from moment to moment weigh on
    both alike. Returns cuweave's median, raw's median and the median of the per-pair ratios (a raw
    repetition is its library call's own warm-up repetition and one timed one, on a fresh stream)."""
    with gc_disabled():
        cw_rep()
        raw_rep()
        pairs = [(cw_rep(), raw_rep()) for _ in range(cfg.reps)]
    return {"cuweave": statistics.median(ours for ours, _ in pairs),
            IN_PROCESS_RAW: statistics.median(raw for _, raw in pairs),
            PAIRED_RATIO: statistics.median(ours / raw for ours, raw in pairs)}


# --------------------------------------------------------------------------- the rows


HIGHER_IS_BETTER_UNITS = ("GB/s", "ratio")
# Measurements shown below the table: raw CUDA inside the benchmark's process (graph_node, graph_replay,
# tiny_kernel_launch, record_wait), and cuda.core where it has a counterpart (loop_round).
IN_PROCESS_RAW = "raw in this process"
PAIRED_RATIO = "cuweave / raw in this process, paired"
# record_wait's figures beside the pair: what Python itself costs per pair, the thinnest binding of it, and
# cuweave's one-call form (stream.wait(other_stream): record + wait in one call).
PYTHON_FLOOR = "two do-nothing C method calls"
THINNEST_BINDING = "CuPy runtime functions"
ONE_CALL_WAIT = "cuweave b.wait(a)"
RAW_THROUGH_DRIVER = "raw CUDA through the driver"
# numpy_to_device's figures taken in turn with it (cw_numpy_to_device_in_turn).
HOST_COPY_IN_TURN = "host NumPy -> pinned copy, in turn"
PINNED_H2D_IN_TURN = "pinned H2D wall, in turn"
STAGED_OVER_HOST_COPY = "cuweave / host copy, per rep"
STAGED_OVER_PINNED = "cuweave / pinned H2D, per rep"
HOST_COPY_OVER_PINNED = "host copy / pinned H2D, per rep"
CUDA_CORE = "cuda.core"
EXTRA_COLUMNS = (IN_PROCESS_RAW, CUDA_CORE)  # "us" and "ms" rows: lower is better


@dataclass(frozen=True)
class Row:
    title: str
    unit: str                   # "us" or "ms" (lower is better), "GB/s" or "ratio" (higher is better)
    target: float | None        # the cuweave target, None where this issue sets none
    raw_key: str | None         # key in raw_cuda's JSON; None where raw CUDA has no counterpart
    measure: dict[str, Callable[[Config], float]] = field(default_factory=dict)  # lib -> measurement

    @property
    def higher_is_better(self) -> bool:
        return self.unit in HIGHER_IS_BETTER_UNITS


def in_turn_row(title: str, unit: str, target: float | None, raw_key: str | None,
                setups_of: Callable[[Config], dict[str, InTurnSetup]], libraries: dict) -> Row:
    """A row whose libraries take turns within each repetition (in_turn)."""
    return Row(title, unit, target, raw_key,
               {lib: functools.partial(in_turn_figure, setups_of=setups_of, lib=lib) for lib in libraries})


def pipeline_row(title: str, unit: str, target: float | None, key: str) -> Row:
    """A row showing one figure of pipeline_results (measured once per library, shared by these rows)."""
    return Row(title, unit, target, None,
               {lib: functools.partial(pipeline_figure, lib=lib, key=key) for lib in PIPELINE_PASSES})


ROWS: dict[str, Row] = {
    "record_wait": Row(
        "event record + stream wait, per pair", "us", 0.40, "event_record_wait_us",
        {"cuweave": cw_record_wait_paired, "torch": torch_record_wait, "cupy": cupy_record_wait}),
    "with_stream": Row(
        "`with stream:` enter + exit", "us", 0.35, None,
        {"cuweave": cw_with_stream, "torch": torch_with_stream, "cupy": cupy_with_stream}),
    "pinned_block": Row(
        "pinned 1 MB block alloc + free (raw: uncached)", "us", 0.5, "pinned_block_1mb_us",
        {"cuweave": cw_pinned_block, "torch": torch_pinned_tensor, "cupy": cupy_pinned_block}),
    "pinned_array": Row(
        "pinned 1 MB array alloc + free (raw: uncached)", "us", None, "pinned_block_1mb_us",
        {"cuweave": cw_pinned_array, "torch": torch_pinned_tensor, "cupy": cupy_pinned_array}),
    "pinned_h2d": Row(
        "pinned H2D copy, 256 MB", "GB/s", 53.0, "pinned_h2d_gbps",
        {"cuweave": functools.partial(cw_copy_gbps, h2d=True),
         "torch": functools.partial(torch_copy_gbps, h2d=True),
         "cupy": functools.partial(cupy_copy_gbps, h2d=True)}),
    "pinned_d2h": Row(
        "pinned D2H copy, 256 MB", "GB/s", 53.0, "pinned_d2h_gbps",
        {"cuweave": functools.partial(cw_copy_gbps, h2d=False),
         "torch": functools.partial(torch_copy_gbps, h2d=False),
         "cupy": functools.partial(cupy_copy_gbps, h2d=False)}),
    "numpy_to_device": Row(
        "NumPy (pageable) -> device, 256 MB, into a preallocated array, wall", "GB/s", 45.0, "pageable_h2d_gbps",
        {"cuweave": cw_numpy_to_device_in_turn, "torch": torch_numpy_to_device, "cupy": cupy_numpy_to_device}),
    "numpy_to_device_alloc": Row(
        "NumPy (pageable) -> new device array, 256 MB, wall", "GB/s", None, "pageable_h2d_gbps",
        {"cuweave": cw_numpy_to_device_alloc, "torch": torch_numpy_to_device_alloc, "cupy": cupy_numpy_to_device}),
    "numpy_to_device_torch_pin": Row(
        "NumPy -> device via torch pin_memory(), 256 MB, wall", "GB/s", None, None,
        {"torch": torch_numpy_to_device_pin}),
    "device_to_numpy": Row(
        "device -> new NumPy array (default call), 256 MB, wall", "GB/s", 45.0, "pageable_d2h_gbps",
        {"cuweave": functools.partial(cw_device_to_numpy, pinned=None),
         "torch": functools.partial(torch_device_to_numpy, pinned=False),
         "cupy": functools.partial(cupy_device_to_numpy, pinned=False)}),
    "device_to_numpy_ordinary": Row(
        "device -> new NumPy array in ordinary memory (cuweave pinned=False), 256 MB, wall", "GB/s", None,
        "pageable_d2h_gbps",
        {"cuweave": functools.partial(cw_device_to_numpy, pinned=False),
         "torch": functools.partial(torch_device_to_numpy, pinned=False),
         "cupy": functools.partial(cupy_device_to_numpy, pinned=False)}),
    "device_to_numpy_pinned": Row(
        "device -> new NumPy array on pooled pinned memory, 256 MB, wall", "GB/s", None, None,
        {"cuweave": functools.partial(cw_device_to_numpy, pinned=True),
         "torch": functools.partial(torch_device_to_numpy, pinned=True),
         "cupy": functools.partial(cupy_device_to_numpy, pinned=True)}),
    "h2d_d2h_duplex": in_turn_row(
        "H2D + D2H at once, 256 MB each way x 5 rounds, pinned, total", "GB/s", 95.0, "duplex_gbps", duplex_setups,
        DUPLEX_ROUNDS_OF),
    "pipeline_serial_ms": pipeline_row("pipeline: copy then compute, batch by batch", "ms", None, "serial"),
    "pipeline_copy_only_ms": pipeline_row(f"pipeline: the {PIPELINE_BATCHES} copies alone", "ms", None, "copy_only"),
    "pipeline_compute_only_ms": pipeline_row(
        f"pipeline: the {PIPELINE_BATCHES} computes alone", "ms", None, "compute_only"),
    "pipeline_prefetched_ms": pipeline_row("pipeline: prefetched (torch: side-stream)", "ms", None, "prefetched"),
    "overlap_efficiency": pipeline_row(
        "max(copy only, compute only) / prefetched", "ratio", 0.95, "overlap_efficiency"),
    "overlap_efficiency_serial": pipeline_row(
        "max(copy only, compute only) / serial", "ratio", None, "serial_efficiency"),
    "tiny_kernel_launch": Row(
        "tiny kernel launch, wall incl. sync", "us", 2.9, "tiny_kernel_launch_us",
        {"cuweave": cw_tiny_kernel_launch_paired, "torch": torch_tiny_kernel_launch,
         "cupy": cupy_tiny_kernel_launch}),
    "tiny_builtin_launch": Row(
        "built-in kernel launch (cw.ops.add, 1 element), wall incl. sync", "us", None, "tiny_kernel_launch_us",
        {"cuweave": cw_tiny_builtin_launch, "torch": torch_tiny_kernel_launch, "cupy": cupy_tiny_kernel_launch}),
    "graph_replay": Row(
        "1-node graph replay call", "us", 1.6, "graph_replay_us",
        {"cuweave": cw_graph_replay_paired, "torch": torch_graph_replay, "cupy": cupy_graph_replay}),
    "graph_node": Row(
        "1000-node graph, per node, wall incl. sync", "us", 0.75, "graph_node_us",
        {"cuweave": cw_graph_node_paired, "torch": torch_graph_node, "cupy": cupy_graph_node}),
    "loop_round": Row(
        "loop inside one graph (while node), per round of a countdown kernel", "us", None, "loop_round_us",
        {"cuweave": cw_loop_round, CUDA_CORE: cuda_core_loop_round}),
    "loop_round_host": in_turn_row(
        "the same loop driven from the host (replay a round, read the counter), per round", "us", None, None,
        loop_round_host_setups, HOST_LOOP_STEPS),
    "graph_function": graph_function_row(
        "graph round trip, 1 KB NumPy in and out (cw.graph_function; peers by hand)", ROUND_TRIP_ELEMENTS),
    "graph_function_1mb": graph_function_row("the same round trip, 1 MB in and out", 1 << 18),
    "graph_function_64mb": graph_function_row("the same round trip, 64 MB in and out", 1 << 24),
}


# --------------------------------------------------------------------------- loading the libraries


def load_cuweave() -> None:
    """Import cuweave (installed, else from the source tree's python/); exit 2 if it cannot use a GPU."""
    global cw
    try:
        import cuweave
    except Exception as first:  # noqa: BLE001 -- an extension that fails to load raises more than ImportError
        source_tree = HERE.parent / "python"
        if not (source_tree / "cuweave" / "__init__.py").is_file():
            _give_up(f"cannot import cuweave: {type(first).__name__}: {first}")
        sys.path.insert(0, str(source_tree))
        try:
            import cuweave
        except Exception as second:  # noqa: BLE001
            _give_up(f"cannot import cuweave (installed: {first}; from {source_tree}: {second})")
    backend = cuweave.backend()
    if backend != "cuda" or not cuweave.is_available() or cuweave.device_count() < 1:
        reason = (cuweave.unavailable_reason()
                  or f"backend is {backend!r}, device_count() is {cuweave.device_count()}")
        _give_up(f"cuweave has no usable GPU: {reason}")
    cw = cuweave


def _give_up(message: str) -> None:
    print(f"benchmarks: {message}", file=sys.stderr)
    sys.exit(2)


def _load_torch():
    import torch as module

    if not module.cuda.is_available():
        return module, "torch.cuda.is_available() is False"
    return module, ""


def _load_cupy():
    import cupy as module

    try:
        count = module.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 -- CUDARuntimeError without a driver
        return module, f"cupy sees no CUDA device: {exc}"
    return module, "" if count > 0 else "cupy sees no CUDA device"


def load_peers(versions: dict[str, str]) -> dict[str, str]:
    """Import the peers that can run; returns {peer: why it is skipped}. Fills versions as a side effect."""
    skipped = {}
    for name, loader in (("torch", _load_torch), ("cupy", _load_cupy)):
        try:
            module, reason = loader()
        except Exception as exc:  # noqa: BLE001 -- a broken install should skip the column, not the run
            skipped[name] = f"import {name} failed: {type(exc).__name__}: {exc}"
            continue
        versions[name] = getattr(module, "__version__", "unknown")
        if reason:
            skipped[name] = reason
        else:
            globals()[name] = module
    return skipped


def synchronize(lib: str) -> None:
    """Wait for all work of this library on the device, so one measurement does not run into the next."""
    if lib == "cuweave":
        cw.synchronize()
    elif lib == "torch":
        torch.cuda.synchronize()
    elif lib == "cupy":
        cupy.cuda.Device().synchronize()


def machine_info(versions: dict[str, str]) -> dict:
    props = cw.Device(0).properties
    return {
        "gpu": props.name,
        "compute_capability": list(getattr(props, "compute_capability", ())),
        "multiprocessor_count": getattr(props, "multiprocessor_count", None),
        "total_memory": getattr(props, "total_memory", None),
        "driver_version": "%d.%d" % tuple(cw.driver_version()),
        "runtime_version": "%d.%d" % tuple(cw.runtime_version()),
        "cuweave": getattr(cw, "__version__", "unknown"),
        "numpy": np.__version__,
        **versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


# --------------------------------------------------------------------------- the raw CUDA helper


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cuweave-bench"
    try:
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="cuweave-bench-"))


def build_raw_helper(gpu_name: str, source: Path = RAW_SOURCE, shared: bool = False) -> tuple[Path | None, str]:
    """Compile raw_cuda.cu (or `source`; cached by source, nvcc and GPU) into an executable, or with `shared` into a
    shared library (its main renamed); returns (the file or None, note)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        candidate = Path(cuda_home) / "bin" / "nvcc"
        nvcc = str(candidate) if candidate.is_file() else None
    if nvcc is None:
        return None, "nvcc not found (PATH, CUDA_HOME)"
    flags = ["-shared", "-Xcompiler", "-fPIC", "-Dmain=raw_cuda_main"] if shared else []
    key = hashlib.sha256(source.read_bytes() + nvcc.encode() + gpu_name.encode() + str(flags).encode()).hexdigest()[:16]
    out_dir = _cache_dir()
    exe = out_dir / f"{source.stem}-{key}{'.so' if shared else ''}"
    if exe.is_file():
        return exe, f"cached {exe}"
    failures = []
    for arch in ("native", "sm_90"):
        tmp = out_dir / f"{source.stem}-{key}.{os.getpid()}.tmp"
        cmd = [nvcc, "-O2", "-std=c++17", f"-arch={arch}", *flags, str(source), "-o", str(tmp)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failures.append(f"-arch={arch}: {exc}")
            continue
        # Without a visible GPU, nvcc warns and builds its default arch for -arch=native: use sm_90 then.
        if proc.returncode == 0 and "Cannot find valid GPU" not in proc.stderr:
            os.replace(tmp, exe)
            return exe, f"built with -arch={arch}"
        tmp.unlink(missing_ok=True)
        failures.append(f"-arch={arch}: rc {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return None, "nvcc failed: " + " | ".join(failures)


def run_raw_helper(exe: Path, cfg: Config) -> tuple[dict | None, str]:
    """Run the compiled helper; returns (its JSON object or None, note)."""
    cmd = [str(exe), "--reps", str(cfg.reps), "--n", str(cfg.n)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"raw_cuda did not run: {exc}"
    if proc.returncode != 0:
        return None, f"raw_cuda exited {proc.returncode}: {proc.stderr.strip()[-500:]}"
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]), "ok"
    except (IndexError, ValueError) as exc:
        return None, f"raw_cuda printed no JSON ({exc}): {proc.stdout[-200:]!r}"


# --------------------------------------------------------------------------- measuring and reporting


@dataclass
class Result:
    values: dict[str, float] = field(default_factory=dict)   # lib (or "raw") -> value
    errors: dict[str, str] = field(default_factory=dict)     # lib -> exception text


def measure_row(row: Row, cfg: Config, usable: set[str], raw: dict | None) -> Result:
    result = Result()
    if raw is not None and raw.get(row.raw_key) is not None:
        result.values["raw"] = raw[row.raw_key]
    for lib, fn in row.measure.items():
        if lib not in usable and lib not in EXTRA_COLUMNS:
            continue
        try:
            value = fn(cfg)
            synchronize(lib)
            # A paired measurement returns its figures by name (paired_with_raw_here).
            result.values.update(value if isinstance(value, dict) else {lib: value})
        except Exception as exc:  # noqa: BLE001 -- report it in the table and keep measuring
            result.errors[lib] = f"{type(exc).__name__}: {exc}"
    return result


def best_peer(row: Row, result: Result) -> tuple[str, float] | None:
    peers = [(lib, result.values[lib]) for lib in PEERS if lib in result.values]
    if not peers:
        return None
    pick = max if row.higher_is_better else min
    return pick(peers, key=lambda item: item[1])


def meets_target(row: Row, result: Result) -> bool | None:
    value = result.values.get("cuweave")
    if value is None or row.target is None:
        return None
    return value >= row.target if row.higher_is_better else value <= row.target


def summarize(row: Row, result: Result) -> dict:
    """The derived numbers of one row: ratios of cuweave to raw and to the best peer, and the target check."""
    cw_value = result.values.get("cuweave")
    raw_value = result.values.get("raw")
    peer = best_peer(row, result)
    return {
        "cuweave_over_raw": cw_value / raw_value if cw_value is not None and raw_value else None,
        "cuweave_over_raw_paired": result.values.get(PAIRED_RATIO),
        "best_peer": peer[0] if peer else None,
        "cuweave_over_best_peer": cw_value / peer[1] if cw_value is not None and peer and peer[1] else None,
        "meets_target": meets_target(row, result),
    }


def fmt_value(value: float) -> str:
    magnitude = abs(value)
    digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 3
    return f"{value:.{digits}f}"


def cell(row: Row, result: Result, lib: str, unavailable: dict[str, str]) -> str:
    if lib in result.values:
        return fmt_value(result.values[lib])
    if lib in result.errors:
        return "err"
    has_counterpart = row.raw_key is not None if lib == "raw" else lib in row.measure
    if not has_counterpart:
        return "-"
    return "n/a" if lib in unavailable else "-"


def print_table(rows: dict[str, Row], results: dict[str, Result], unavailable: dict[str, str]) -> None:
    header = ["row", "unit", "cuweave", "raw CUDA", "PyTorch", "CuPy", "target",
              "cuweave/raw", "cuweave/raw here", "cuweave/best peer", "meets target"]
    lines = []
    for name, row in rows.items():
        result = results[name]
        derived = summarize(row, result)
        target = "-" if row.target is None else (">= " if row.higher_is_better else "<= ") + f"{row.target:g}"
        ratio_raw = derived["cuweave_over_raw"]
        ratio_paired = derived["cuweave_over_raw_paired"]
        ratio_peer = derived["cuweave_over_best_peer"]
        meets = derived["meets_target"]
        lines.append([
            name, row.unit,
            *(cell(row, result, lib, unavailable) for lib in ("cuweave", "raw", "torch", "cupy")),
            target,
            "-" if ratio_raw is None else f"{ratio_raw:.3g}",
            "-" if ratio_paired is None else f"{ratio_paired:.3g}",
            "-" if ratio_peer is None else f"{ratio_peer:.3g} ({derived['best_peer']})",
            "-" if meets is None else ("yes" if meets else "no"),
        ])
    widths = [max(len(str(r[i])) for r in [header] + lines) for i in range(len(header))]

    def render(cells):
        return "| " + " | ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + " |"

    print(render(header))
    print("|" + "|".join(("-" * (w + 2)) if i < 2 else ("-" * (w + 1) + ":") for i, w in enumerate(widths)) + "|")
    for line in lines:
        print(render(line))
    print("us and ms rows: lower is better, a ratio < 1 favours cuweave; "
          "GB/s and ratio rows: higher is better, a ratio > 1 favours cuweave.")
    print("cuweave/raw: against raw_cuda.cu run as a fresh process before; cuweave/raw here: the median of the "
          "per-pair ratios to raw CUDA measured in this process in turn with cuweave (same process state, same "
          "moment; details below the table).")
    for name in rows:
        for lib, error in results[name].errors.items():
            print(f"error: {name} / {lib}: {error}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write every number and the machine info here")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_REPS} reps of {QUICK_N_CALLS} calls: a smoke run, not figures to quote")
    parser.add_argument("--rows", metavar="NAME,NAME", help="only these rows: " + ", ".join(ROWS))
    parser.add_argument("--gross", action="store_true",
                        help="keep the Python call overhead in host costs instead of subtracting it")
    args = parser.parse_args(argv)
    if args.rows:
        args.rows = [name.strip() for name in args.rows.split(",") if name.strip()]
        unknown = [name for name in args.rows if name not in ROWS]
        if unknown or not args.rows:
            parser.error(f"unknown row(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(ROWS)}")
    else:
        args.rows = list(ROWS)
    return args


def main(argv: list[str] | None = None) -> int:
    global _call_overhead_us
    args = parse_args(argv)
    cfg = Config(n=QUICK_N_CALLS, reps=QUICK_REPS) if args.quick else Config(n=N_CALLS, reps=REPS)
    rows = {name: ROWS[name] for name in args.rows}

    load_cuweave()
    gpu_name = cw.Device(0).properties.name

    # The raw helper runs first, alone on the GPU, before the in-process measurements.
    raw, raw_note = None, "not needed for these rows"
    if any(row.raw_key for row in rows.values()):
        exe, raw_note = build_raw_helper(gpu_name)
        if exe is not None:
            raw, raw_note = run_raw_helper(exe, cfg)
    unavailable = {} if raw is not None else {"raw": raw_note}

    versions: dict[str, str] = {}
    unavailable.update(load_peers(versions))
    usable = {lib for lib in LIBS if lib not in unavailable}

    overhead = calibrate_call_overhead(10 * cfg.n, cfg.reps)
    _call_overhead_us = 0.0 if args.gross else overhead

    results = {name: measure_row(row, cfg, usable, raw) for name, row in rows.items()}

    machine = machine_info(versions)
    print(f"cuweave {machine['cuweave']} on {machine['gpu']} (driver {machine['driver_version']}, "
          f"runtime {machine['runtime_version']}); numpy {machine['numpy']}, torch {versions.get('torch', '-')}, "
          f"cupy {versions.get('cupy', '-')}, python {machine['python']}")
    print(f"{cfg.reps} reps (median, after a warm-up rep) of {cfg.n} calls"
          f"{' -- QUICK RUN, not figures to quote' if args.quick else ''}; "
          f"Python call overhead {overhead * 1e3:.1f} ns/call "
          f"{'kept (--gross)' if args.gross else 'subtracted from host costs'}")
    print(f"raw CUDA: {raw_note if raw is None else 'ok (' + str(raw.get('device')) + ')'}")
    for lib, reason in unavailable.items():
        if lib != "raw":
            print(f"{lib} skipped: {reason}")
    print()
    print_table(rows, results, unavailable)
    for name, result in results.items():
        here, ours = result.values.get(IN_PROCESS_RAW), result.values.get("cuweave")
        if here is not None and ours is not None:
            print(f"{name}: raw CUDA measured in this process in turn with cuweave, {cfg.reps} pairs: {here:.3f} us; "
                  f"cuweave {ours:.3f} us; median of the per-pair ratios {result.values[PAIRED_RATIO]:.3f}x raw "
                  "(the table's raw column is a fresh process run before)")
        floor = result.values.get(PYTHON_FLOOR)
        if floor is not None and here is not None:
            print(f"{name}: two C method calls that do next to nothing (dict.get, dict.__contains__) cost {floor:.3f} "
                  f"us in the same loop; raw + that = {here + floor:.3f} us = {(here + floor) / here:.3f}x raw, the "
                  "least a Python binding of the pair can reach here")
        thinnest = result.values.get(THINNEST_BINDING)
        if thinnest is not None and here is not None:
            print(f"{name}: the same two CUDA calls through CuPy's Cython runtime functions (eventRecord, "
                  f"streamWaitEvent; handles as ints, no objects): {thinnest:.3f} us = {thinnest / here:.3f}x raw")
        one_call = result.values.get(ONE_CALL_WAIT)
        if one_call is not None and here is not None:
            print(f"{name}: cuweave's one-call form b.wait(a) (records a pooled event on a, b waits for it): "
                  f"{one_call:.3f} us = {one_call / here:.3f}x raw")
        through_driver = result.values.get(RAW_THROUGH_DRIVER)
        if through_driver is not None and here is not None and ours is not None:
            print(f"{name}: raw CUDA's loop through the driver (cuEventRecord, cuStreamWaitEvent, as cuweave "
                  f"calls them): {through_driver:.3f} us = {through_driver / here:.3f}x raw; "
                  f"cuweave = {ours / through_driver:.3f}x that")
        core = result.values.get(CUDA_CORE)
        if core is not None and ours is not None:
            print(f"{name}: cuda.core {core:.3f} us; cuweave {ours:.3f} us = {ours / core:.3f}x cuda.core")
        elif CUDA_CORE in result.errors:
            print(f"{name}: cuda.core not measured: {result.errors[CUDA_CORE]}")
    if any(name.startswith("numpy_to_device") for name in rows) and cw is not None:
        stats = cw.staging_stats()
        threads = stats["copy_threads"]
        print(f"staging (NumPy<->device through pinned slots): {threads} copy threads, {stats['slots']} slots of "
              f"{stats['slot_bytes'] >> 20} MB; this host copies NumPy into pinned memory at "
              f"{host_memcpy_gbps():.1f} GB/s with one thread (measured now)")
        for direction in ("to_device", "to_host"):
            print(f"staging {describe_copy_thread_tuning(direction, stats[direction], threads)}")
    in_turn = results.get("numpy_to_device", Result()).values
    if HOST_COPY_IN_TURN in in_turn and "cuweave" in in_turn:
        reach = in_turn[HOST_COPY_OVER_PINNED]
        print(f"numpy_to_device: in turn with it, {cfg.reps} repetitions: this host's NumPy -> pinned copy "
              f"{in_turn[HOST_COPY_IN_TURN]:.1f} GB/s (the faster of the pool's and the chosen thread count; bounds "
              f"the staged path), pinned -> device {in_turn[PINNED_H2D_IN_TURN]:.1f} GB/s (wall, bounds the link); "
              f"cuweave {in_turn['cuweave']:.1f} GB/s = {in_turn[STAGED_OVER_HOST_COPY]:.3f}x the host's copy, "
              f"{in_turn[STAGED_OVER_PINNED]:.3f}x pinned (medians of per-repetition ratios); the host's copy "
              f"reaches {reach:.3f}x pinned, so 0.8x pinned is {'within' if reach >= 0.8 else 'beyond'} this "
              "host's reach")
    if pipeline_calibration:
        print(f"pipeline: {PIPELINE_BATCHES} NumPy float32 batches of {PIPELINE_BATCH_BYTES >> 20} MB; one batch's "
              f"cw.to_device + sync took {pipeline_calibration['batch_copy_ms']:.3f} ms, so per-batch compute "
              f"(cw.ops.spin) is {pipeline_calibration['compute_ms']:.3f} ms ({PIPELINE_COMPUTE_OVER_COPY}x); "
              f"{pipeline_reps(cfg)} reps; cuweave prefetch depth {PIPELINE_DEPTH}")

    if args.json:
        report = {
            "machine": machine,
            "settings": {"reps": cfg.reps, "n_calls": cfg.n, "quick": args.quick,
                         "call_overhead_us": overhead, "call_overhead_subtracted": not args.gross,
                         "block_bytes": BLOCK_BYTES, "block_pairs": BLOCK_PAIRS, "copy_bytes": COPY_BYTES,
                         "duplex_rounds": DUPLEX_ROUNDS,
                         "pipeline": {"batches": PIPELINE_BATCHES, "batch_bytes": PIPELINE_BATCH_BYTES,
                                      "compute_over_copy": PIPELINE_COMPUTE_OVER_COPY, "depth": PIPELINE_DEPTH,
                                      "reps": pipeline_reps(cfg), **pipeline_calibration}},
            "raw_cuda": {"note": raw_note, "results": raw},
            "staging": cw.staging_stats() if cw is not None else None,
            "skipped": unavailable,
            "rows": {
                name: {"title": row.title, "unit": row.unit, "higher_is_better": row.higher_is_better,
                       "target": row.target, "values": results[name].values, "errors": results[name].errors,
                       **summarize(row, results[name])}
                for name, row in rows.items()
            },
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nwrote {args.json}")

    return 1 if any("cuweave" in result.errors for result in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
