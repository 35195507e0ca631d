"""cw.weave() with what only a GPU runs: compiled kernels (const parameters are reads; cw.reads/cw.writes
declare others) and PyTorch operators, placed by the same reads and writes. Under the race sanitizer."""

from __future__ import annotations

import gc
import time
import warnings

import numpy as np
import pytest

import cuweave as cw
from _support import UNDER_COMPUTE_SANITIZER, sanitizer_off

pytestmark = pytest.mark.gpu

N = 1 << 16

SCALE_INTO = r"""
extern "C" __global__ void scale_into(const float* x, float* out, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = alpha * x[i];
}
"""

# Reads `x` through a pointer that is not const: the default counts it as written.
ADD_INTO = r"""
extern "C" __global__ void add_into(float* x, float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
"""


@pytest.fixture(autouse=True)
def _sanitized():
    with cw.sanitize():
        yield


def grid(n: int) -> int:
    return (n + 255) // 256


def test_kernels_with_const_parameters_branch_and_join_like_builtin_operations():
    scale_into = cw.compile(SCALE_INTO, "scale_into")
    assert scale_into.read_only == (0,)
    x = cw.to_device(np.arange(N, dtype=np.float32))
    p, q, r = (cw.empty(N, np.float32) for _ in range(3))
    with cw.weave(streams=3) as w:
        scale_into(grid(N), 256, (x, p, 2.0, N))  # reads x: the current stream
        scale_into(grid(N), 256, (x, q, 3.0, N))  # also only reads x: another stream
        cw.ops.add(p, q, out=r)  # joins them
    assert w.counts.per_stream[:2] == (2, 1) and w.counts.waits == 2
    np.testing.assert_array_equal(r.to_numpy(), 5 * np.arange(N, dtype=np.float32))


def test_reads_and_writes_declare_what_a_launch_does_over_its_signature():
    add_into = cw.compile(ADD_INTO, "add_into")
    x = cw.to_device(np.arange(N, dtype=np.float32))
    ones = cw.to_device(np.ones(N, np.float32))
    a, b = cw.empty(N, np.float32), cw.empty(N, np.float32)
    with cw.weave(streams=3) as undeclared:
        add_into(grid(N), 256, (x, ones, a, N))
        add_into(grid(N), 256, (x, ones, b, N))  # x counts as written: after the first
    assert undeclared.counts.per_stream[0] == 2
    with cw.weave(streams=3) as declared:
        add_into(grid(N), 256, (cw.reads(x), cw.reads(ones), cw.writes(a), N))
        add_into(grid(N), 256, (cw.reads(x), cw.reads(ones), cw.writes(b), N))  # independent: another stream
    assert declared.counts.per_stream[:2] == (1, 1)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(N, dtype=np.float32) + 1)
    np.testing.assert_array_equal(b.to_numpy(), np.arange(N, dtype=np.float32) + 1)


@pytest.mark.skipif(cw.device_count() < 2, reason="needs two GPUs")
def test_a_kernel_runs_on_the_device_it_was_compiled_for_whatever_device_its_output_lives_on():
    scale_into = cw.compile(SCALE_INTO, "scale_into")  # loaded on device 0
    x = cw.to_device(np.arange(N, dtype=np.float32))
    with cw.Device(1):
        out = cw.empty(N, np.float32)
        out1 = cw.empty(N, np.float32)
    with cw.weave(streams=2) as w:
        scale_into(grid(N), 256, (x, out, 2.0, N))  # writes device 1's array through peer access, from device 0
        cw.ops.add(out, 1.0, out=out1)              # on device 1, after the kernel
        devices = [s.device for s in w.streams]
    assert sum(w.counts.per_stream[i] for i, d in enumerate(devices) if d == 0) == 1
    with cw.Device(1):
        np.testing.assert_array_equal(out1.to_numpy(), 2 * np.arange(N, dtype=np.float32) + 1)


def test_a_declared_read_that_is_really_a_write_is_named_by_the_sanitizer():
    add_into = cw.compile(ADD_INTO, "add_into")
    s, t = cw.Stream(), cw.Stream()
    x = cw.to_device(np.arange(N, dtype=np.float32), stream=s)
    a = cw.empty(N, np.float32, stream=s)
    s.synchronize()
    add_into(grid(N), 256, (cw.reads(x), cw.reads(x), cw.writes(a), N), stream=s)
    cw.ops.sum(x, stream=t)  # reads x beside a launch declared to only read it: no race
    with pytest.raises(cw.RaceError):
        cw.ops.fill(a, 0.0, stream=t)  # races with the launch's declared write of a
    s.synchronize()
    t.synchronize()


def test_pytorch_operators_in_a_woven_function_replay_keep_their_temporaries_and_free_cleanly(torch):
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.empty_like(x)
    torch.cuda.synchronize()

    @cw.woven(streams=3)
    def step(x_view: cw.DeviceArray, out_view: cw.DeviceArray) -> None:
        doubled = torch.mul(x, 2)  # temporaries PyTorch's allocator hands out during the capture
        shifted = torch.add(x, 1)  # independent of the first: another stream
        torch.add(doubled, shifted, out=out)

    # Earlier tests' tensors that only a collection frees, and blocks recorded on other streams, which are freed once
    # their events are seen: all of them now.
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    allocated_before = torch.cuda.memory_allocated()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for shift in (0, 10, 20):
            expected = 3 * (torch.arange(N, dtype=torch.float32) + shift) + 1
            if shift:
                x.add_(10)
            torch.cuda.synchronize()
            step(cw.asarray(x), cw.asarray(out))
            cw.synchronize()
            assert torch.equal(out.cpu(), expected)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]  # every operator checked
    assert step.cache_info()["misses"] == 1 and step.cache_info()["hits"] == 2
    # The graph's temporaries stay allocated for its replays, and no longer.
    gc.collect()
    assert torch.cuda.memory_allocated() - allocated_before == 2 * x.nbytes
    # The graph's footprint holds PyTorch's writes: a write of `out` on another stream, unordered, races with the
    # replay.
    other = cw.Stream()
    step(cw.asarray(x), cw.asarray(out))
    with pytest.raises(cw.RaceError, match="replay"):
        cw.ops.fill(cw.asarray(out), 0.0, stream=other)
    other.synchronize()
    cw.synchronize()
    del step
    # Released once the graph's last replay is seen done: at a collect, which may come after this one.
    for _ in range(200):
        cw.collect()
        gc.collect()
        if torch.cuda.memory_allocated() == allocated_before:
            break
        time.sleep(0.01)
    # Under compute-sanitizer, frame objects of the calls (which hold the woven function in their locals) were still
    # alive here, so the release is asserted outside the tool only.
    assert UNDER_COMPUTE_SANITIZER or torch.cuda.memory_allocated() == allocated_before
    del x, out  # PyTorch's allocator frees the tensors the captured operators touched
    gc.collect()
    torch.cuda.synchronize()


@pytest.mark.parametrize("pytorch_work", [False, True])
def test_pytorch_work_captured_unseen_makes_the_replay_a_barrier(torch, stream, pytorch_work):
    x = cw.to_device(np.arange(N, dtype=np.float32), stream=stream)
    p = cw.empty((N,), np.float32, stream=stream)
    q = cw.empty((N,), np.float32, stream=stream)
    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    stream.synchronize()
    with sanitizer_off(), stream, cw.capture(stream) as cap:  # neither the sanitizer nor a weave sees PyTorch
        cw.ops.add(x, 1.0, out=p)
        if pytorch_work:
            with torch.cuda.stream(torch.cuda.ExternalStream(stream.__cuda_stream__()[1])):
                t.add_(1)  # a kernel captured into the same graph, unseen by cuweave
    graph = cap.graph
    with stream, cw.weave(streams=2) as w:
        cw.ops.add(x, 2.0, out=q)
        graph.replay()  # with PyTorch's kernel it may touch q: after the add, and before the next
        cw.ops.add(x, 3.0, out=q)
    assert w.counts.per_stream == ((3, 0) if pytorch_work else (2, 1))
    stream.synchronize()
    np.testing.assert_array_equal(p.to_numpy(stream=stream), np.arange(N, dtype=np.float32) + 1)
    assert float(t[0]) == (1.0 if pytorch_work else 0.0)

