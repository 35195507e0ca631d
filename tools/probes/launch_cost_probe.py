#!/usr/bin/env python3
"""Where does an eager cuweave kernel launch spend its time beside raw CUDA's? (GPU only.)

    python3 tools/probes/launch_cost_probe.py [--rounds 9] [--n 20000]

Variants measured in turn within each round (so that drift of the shared host weighs on all alike), each
µs per launch = wall of n launches + the final synchronize, / n; printed: the median over rounds, and the
median of each variant's per-round ratio to raw CUDA's in-process loop.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import itertools
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import launches  # noqa: E402
import libraries  # noqa: E402
import raw_cuda  # noqa: E402

INCREMENT = launches.INCREMENT

# The same kernel binary cuweave loaded (its cubin from the kernel cache), launched by a C loop through
# cuLaunchKernel on cuweave's own stream: the least any binding of that launch can cost.
DRIVER_LOOP = r"""
#include <Python.h>
#include <cuda.h>
#include <chrono>

// The kernel loaded from the cubin; unloaded when done.
struct Loaded {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    int load(const void* cubin, const char* name) {
        if (cuModuleLoadData(&module, cubin) != CUDA_SUCCESS) return -1;
        return cuModuleGetFunction(&function, module, name) == CUDA_SUCCESS ? 0 : -2;
    }
    ~Loaded() {
        if (module) cuModuleUnload(module);
    }
};

extern "C" double driver_launch_us(const void* cubin, const char* name, CUstream stream, CUdeviceptr x, int n) {
    Loaded k;
    if (int failed = k.load(cubin, name)) return failed;
    void* args[] = {&x};
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
        if (cuLaunchKernel(k.function, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr) != CUDA_SUCCESS) return -3;
    }
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS) return -4;
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    return us;
}

// The same loop, reading `bytes` of `buffer` (64-byte lines) between launches, as an interpreter runs its own
// code and data between a binding's launches; with `launch` 0 the reads alone, to subtract.
extern "C" double driver_launch_between_reads_us(const void* cubin, const char* name, CUstream stream, CUdeviceptr x,
                                                 int n, const volatile unsigned char* buffer, size_t bytes,
                                                 int launch) {
    Loaded k;
    if (int failed = k.load(cubin, name)) return failed;
    void* args[] = {&x};
    unsigned sum = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
        for (size_t b = 0; b < bytes; b += 64) sum += buffer[b];
        if (launch && cuLaunchKernel(k.function, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr) != CUDA_SUCCESS) return -3;
    }
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS) return -4;
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    return sum == 0xFFFFFFFFu ? -5 : us;  // uses sum, so the reads stay
}

// The same loop, calling a Python callable between launches (loaded with ctypes.PyDLL, so the GIL is held):
// the interpreter's own work between launches, with no binding; with `launch` 0 the calls alone, to subtract.
extern "C" double driver_launch_between_python_calls_us(const void* cubin, const char* name, CUstream stream,
                                                        CUdeviceptr x, int n, PyObject* callable, int launch) {
    Loaded k;
    if (int failed = k.load(cubin, name)) return failed;
    void* args[] = {&x};
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
        PyObject* result = PyObject_CallNoArgs(callable);
        if (result == nullptr) return -6;
        Py_DECREF(result);
        if (launch && cuLaunchKernel(k.function, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr) != CUDA_SUCCESS) return -3;
    }
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS) return -4;
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    return us;
}
"""


def driver_loop(cache: Path):
    """(cubin bytes of the kernel cw.compile left in `cache`, the compiled C loop)."""
    (cubin,) = cache.glob("*.cubin")
    folder = Path(tempfile.mkdtemp())
    (folder / "loop.cpp").write_text(DRIVER_LOOP)
    subprocess.run(["nvcc", "-O2", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", f"-I{sysconfig.get_path('include')}",
                    str(folder / "loop.cpp"), "-lcuda", "-o", str(folder / "loop.so")], check=True)
    loop = ctypes.PyDLL(str(folder / "loop.so"))  # keeps the GIL held: one loop calls into Python
    loop.driver_launch_us.restype = ctypes.c_double
    loop.driver_launch_us.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int]
    loop.driver_launch_between_reads_us.restype = ctypes.c_double
    loop.driver_launch_between_reads_us.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint64,
                                                    ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    loop.driver_launch_between_python_calls_us.restype = ctypes.c_double
    loop.driver_launch_between_python_calls_us.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                                                           ctypes.c_uint64, ctypes.c_int, ctypes.py_object,
                                                           ctypes.c_int]
    return cubin.read_bytes(), loop


def per_launch_us(launch, sync, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in itertools.repeat(None, n):
        launch()
    sync()
    return (time.perf_counter_ns() - t0) / n / 1e3


def enqueue_only_us(launch, sync, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in itertools.repeat(None, n):
        launch()
    t = (time.perf_counter_ns() - t0) / n / 1e3
    sync()
    return t


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--n", type=int, default=20000)
    args = parser.parse_args()
    libraries.load_cuweave()
    cw = libraries.cw
    import cupy

    library, note = raw_cuda.build_raw_helper(cw.Device(0).properties.name, shared=True)
    raw = ctypes.CDLL(str(library))
    raw.raw_tiny_kernel_launch_us.restype = ctypes.c_double
    raw.raw_tiny_kernel_launch_us.argtypes = [ctypes.c_int, ctypes.c_int]

    cache = Path(tempfile.mkdtemp())
    os.environ["CUWEAVE_CACHE_DIR"] = str(cache)
    kernel = cw.compile(INCREMENT, "increment")
    s = cw.Stream()
    x = cw.zeros(1, np.float32, stream=s)
    cubin, loop = driver_loop(cache)
    stream_handle = s.__cuda_stream__()[1]
    args_array = (x,)
    args_pointer = (x.ptr,)
    ck = cupy.RawKernel(INCREMENT, "increment")
    cx = cupy.zeros(1, dtype=cupy.float32)
    cs = cupy.cuda.Stream(non_blocking=True)
    cargs = (cx,)

    def noop():
        pass

    scratch = np.ones(1 << 20, np.uint8)

    def between_python_calls(n, work):
        runs = [loop.driver_launch_between_python_calls_us(cubin, kernel.name.encode(), stream_handle, x.ptr, n, work,
                                                           launch) for launch in (1, 0)]
        return runs[0] - runs[1] if min(runs) >= 0 else min(runs)

    def between_reads(n, kb):
        reads = [loop.driver_launch_between_reads_us(cubin, kernel.name.encode(), stream_handle, x.ptr, n,
                                                     scratch.ctypes.data, kb << 10, launch) for launch in (1, 0)]
        return reads[0] - reads[1] if min(reads) >= 0 else min(reads)

    def in_stream(n):
        with s:
            return per_launch_us(lambda: kernel(1, 1, args_array), s.synchronize, n)

    variants = {
        "raw CUDA (C loop, runtime API)": lambda n: raw.raw_tiny_kernel_launch_us(1, n),
        "raw C loop, cuLaunchKernel, cw's module + stream": lambda n: loop.driver_launch_us(
            cubin, kernel.name.encode(), stream_handle, x.ptr, n),
        **{f"raw C loop, cuLaunchKernel, {kb} KB read between launches (reads subtracted)": functools.partial(
            between_reads, kb=kb) for kb in (64, 256, 1024)},
        "raw C loop, cuLaunchKernel, an empty Python call between launches (calls subtracted)": functools.partial(
            between_python_calls, work=noop),
        "raw C loop, cuLaunchKernel, a Python loop iteration's work between (subtracted)": functools.partial(
            between_python_calls, work=lambda: (kernel.name, args_array[0], s.__cuda_stream__)),
        "empty Python call": lambda n: per_launch_us(noop, noop, n),
        "cw kernel(1, 1, (x,), stream=s)": lambda n: per_launch_us(lambda: kernel(1, 1, args_array, stream=s),
                                                                   s.synchronize, n),
        "cw kernel, pointer int arg": lambda n: per_launch_us(lambda: kernel(1, 1, args_pointer, stream=s),
                                                              s.synchronize, n),
        "cw kernel in `with s:`": in_stream,
        "cw enqueue only (no sync in time)": lambda n: enqueue_only_us(lambda: kernel(1, 1, args_array, stream=s),
                                                                       s.synchronize, n),
        "cupy RawKernel": lambda n: per_launch_us(lambda: ck((1,), (1,), cargs, stream=cs), cs.synchronize, n),
    }
    for name, measure in variants.items():
        if measure(args.n // 10) < 0:  # warm up
            raise SystemExit(f"{name} failed")
    results = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, measure in variants.items():
            results[name].append(measure(args.n))
    raw_runs = results["raw CUDA (C loop, runtime API)"]
    print(f"device: {cw.Device(0).properties.name}; {args.rounds} rounds of {args.n} launches")
    for name, runs in results.items():
        ratios = [a / b for a, b in zip(runs, raw_runs)]
        print(f"{name:50s} median {statistics.median(runs):7.3f} us  min {min(runs):7.3f}  "
              f"ratio to raw (per round, median) {statistics.median(ratios):6.3f}  "
              f"range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
