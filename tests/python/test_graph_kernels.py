"""Graphs on a GPU: runtime-compiled kernels captured and added as nodes (with new arguments by exec
update), a straight-line graph of 1,000 kernels, and kernels of PyTorch and CuPy captured into a cuweave
graph through the stream protocol."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw

pytestmark = pytest.mark.gpu

AXPB = r"""
extern "C" __global__ void axpb(float* y, const float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""

INCREMENT = r"""
extern "C" __global__ void increment(float* value) { value[0] += 1.0f; }
"""


def test_a_captured_compiled_kernel_replays_like_its_eager_launch(stream, rng):
    axpb = cw.compile(AXPB, "axpb")
    n = 10_000
    x = cw.to_device(rng.standard_normal(n).astype(np.float32), stream=stream)
    eager = cw.empty(n, np.float32, stream=stream)
    captured = cw.empty(n, np.float32, stream=stream)
    axpb((n + 255) // 256, 256, (eager, x, np.float32(1.5), -2.0, n), stream=stream)
    with cw.capture(stream) as cap:
        axpb((n + 255) // 256, 256, (captured, x, np.float32(1.5), -2.0, n))
    cap.graph.replay(stream)
    assert np.array_equal(captured.to_numpy(stream=stream), eager.to_numpy(stream=stream))
    assert [node.label for node in cap.graph.nodes] == ["axpb"]


def test_kernel_node_arguments_change_by_exec_update(stream):
    axpb = cw.compile(AXPB, "axpb")
    x = cw.to_device(np.arange(64, dtype=np.float32), stream=stream)
    y = cw.zeros(64, np.float32, stream=stream)
    y2 = cw.zeros(64, np.float32, stream=stream)
    g = cw.Graph()
    node = g.add_kernel(axpb, 1, 64, (y, x, 2.0, 1.0, 64))
    g.replay(stream)
    assert np.array_equal(y.to_numpy(stream=stream), np.arange(64, dtype=np.float32) * 2 + 1)
    g.set_arguments(node, (y2, x, -1.0, 0.5, 64))
    g.replay(stream)
    assert g.last_refresh == "updated"
    assert np.array_equal(y2.to_numpy(stream=stream), -np.arange(64, dtype=np.float32) + 0.5)
    with pytest.raises(TypeError, match="takes 5 arguments"):
        g.set_arguments(node, (y2, x))


def test_a_straight_line_graph_of_1000_kernels(stream):
    increment = cw.compile(INCREMENT, "increment")
    value = cw.zeros(1, np.float32, stream=stream)
    with cw.capture(stream) as cap:
        for _ in range(1000):
            increment(1, 1, (value,))
    assert len(cap.graph) == 1000
    for _ in range(3):
        cap.graph.replay(stream)
    assert value.to_numpy(stream=stream)[0] == 3000


def test_pytorch_kernels_captured_into_a_cuweave_graph(torch, stream):
    a = torch.arange(4096, device="cuda", dtype=torch.float32)
    b = torch.full((4096,), 3.0, device="cuda")
    out = torch.empty_like(a)
    torch.add(a, b, out=out).mul_(2)  # warm up outside the capture
    torch.cuda.synchronize()
    torch_stream = torch.cuda.ExternalStream(stream.__cuda_stream__()[1])
    with cw.capture(stream) as cap:
        with torch.cuda.stream(torch_stream):
            torch.add(a, b, out=out)
            out.mul_(2)
    assert cap.graph.kinds["kernel"] == 2
    for k in range(3):
        a.fill_(float(k))
        torch.cuda.synchronize()
        cap.graph.replay(stream)
        stream.synchronize()
        assert torch.equal(out, torch.full_like(out, (k + 3.0) * 2))
    # Rebinding reaches pointers inside PyTorch's by-value kernel arguments.
    out2 = torch.zeros_like(out)
    torch.cuda.synchronize()  # the zeros are written on torch's stream, which the replay's stream does not wait for
    cap.graph.rebind({cw.asarray(out): cw.asarray(out2)})
    cap.graph.replay(stream)
    stream.synchronize()
    assert torch.equal(out2, torch.full_like(out, (2 + 3.0) * 2))


def test_cupy_kernels_captured_into_a_cuweave_graph(cupy, stream):
    a = cupy.arange(4096, dtype=cupy.float32)
    out = cupy.empty_like(a)
    cupy.multiply(a, 3, out=out)  # compile outside the capture
    cupy.add(out, 1, out=out)
    cupy.cuda.runtime.deviceSynchronize()
    cupy_stream = cupy.cuda.Stream.from_external(stream)  # the __cuda_stream__ protocol
    with cw.capture(stream) as cap:
        with cupy_stream:
            cupy.multiply(a, 3, out=out)
            cupy.add(out, 1, out=out)
    for k in range(3):
        a.fill(k)
        cupy.cuda.runtime.deviceSynchronize()
        cap.graph.replay(stream)
        stream.synchronize()
        assert bool((out == k * 3 + 1).all())


def test_a_graph_keeps_the_code_of_kernels_it_captured_loaded(stream):
    import gc

    binary, lowered, _ = cw._core.compile_kernel(INCREMENT, "increment", [])
    kernel = cw.Kernel(binary, lowered)  # not in cw.compile's cache: only the graph keeps it
    value = cw.zeros(1, np.float32, stream=stream)
    with cw.capture(stream) as cap:
        kernel(1, 1, (value,))
    explicit = cw.Graph()
    explicit.add_kernel(kernel, 1, 1, (value,))
    del kernel
    gc.collect()
    cap.graph.replay(stream)
    explicit.replay(stream)
    assert value.to_numpy(stream=stream)[0] == 2
