"""Runtime-compiled kernels: compile, cache, launch with checked arguments, and clear errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import cuweave as cw
from _support import Gate

VECTOR_ADD = r"""
extern "C" __global__ void vector_add(const float* x, const float* y, float* out, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + alpha * y[i];
}
"""

TEMPLATE = r"""
template <typename T>
__global__ void scale(T* data, T factor, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        data[i] *= factor;
    }
}
"""

INCREMENT = r'extern "C" __global__ void increment(float* x) { x[0] += 1.0f; }'

SHARED_REVERSE = r"""
extern "C" __global__ void reverse_block(const int* in, int* out) {
    extern __shared__ int buffer[];
    buffer[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = buffer[blockDim.x - 1 - threadIdx.x];
}
"""


@pytest.fixture
def kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUWEAVE_CACHE_DIR", str(tmp_path))
    cw.kernels._memory.clear()
    return tmp_path


def test_const_pointer_parameters_are_found_in_the_signature():
    assert cw.kernels.read_only_parameters(VECTOR_ADD, "vector_add") == (0, 1)
    assert cw.kernels.read_only_parameters(TEMPLATE, "scale<double>") == ()
    assert cw.kernels.read_only_parameters(SHARED_REVERSE, "reverse_block") == (0,)
    source = """
    // __global__ void k(const float* decoy)
    template <int N> __global__ void __launch_bounds__(256)
    k(float const* a, float* const b, const Pair<float, int>* c, const float* const d, int n, const int m) {}
    """
    assert cw.kernels.read_only_parameters(source, "k<4>") == (0, 2, 3)
    assert cw.kernels.read_only_parameters("#define K(n) __global__ void n(float* x)\nK(k)", "k") is None


def test_compile_checks_its_arguments_before_anything_else():
    with pytest.raises(TypeError):
        cw.compile(b"bytes source", "k")
    with pytest.raises(TypeError, match="list of strings"):
        cw.compile("source", "k", options="-DX=1")


@pytest.mark.skipif(cw.backend() != "sim", reason="the simulator's refusal")
def test_the_simulator_refuses_runtime_compiled_kernels_by_name():
    with pytest.raises(cw.DeviceUnavailableError) as info:
        cw.compile(VECTOR_ADD, "vector_add")
    assert info.value.name == "cudaErrorNotSupported"
    assert "simulator" in str(info.value) and "cuweave.ops" in str(info.value)


@pytest.mark.gpu
def test_vector_add_launches_with_mixed_arguments(stream, kernel_cache, rng):
    kernel = cw.compile(VECTOR_ADD, "vector_add")
    assert kernel.parameter_sizes == [8, 8, 8, 4, 4]
    n = 10_007
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    with stream:
        out = cw.empty(n, np.float32)
        kernel((n + 255) // 256, 256, (cw.to_device(x), cw.to_device(y), out, 0.5, n))
        got = out.to_numpy()
    assert np.allclose(got, x + np.float32(0.5) * y, rtol=1e-6)


@pytest.mark.gpu
def test_compile_declares_const_parameters_read_only_and_others_can_be_declared(kernel_cache):
    kernel = cw.compile(VECTOR_ADD, "vector_add")
    assert kernel.read_only == (0, 1)
    kernel.read_only = [2]
    assert kernel.read_only == (2,)
    with pytest.raises(ValueError, match="parameter 5 does not exist: the kernel has 5 parameters"):
        kernel.read_only = (5,)
    with pytest.raises(TypeError, match="indices"):
        kernel.read_only = ("out",)
    assert kernel.read_only == (2,)


@pytest.mark.gpu
def test_template_kernels_by_name_expression_and_numpy_scalars(stream, kernel_cache):
    kernel = cw.compile(TEMPLATE, "scale<double>")
    data = np.arange(1000.0)
    with stream:
        d = cw.to_device(data)
        kernel(4, 128, (d, np.float64(3.0), np.uint64(1000)))
        assert np.array_equal(d.to_numpy(), data * 3.0)


@pytest.mark.gpu
def test_dynamic_shared_memory(stream, kernel_cache):
    kernel = cw.compile(SHARED_REVERSE, "reverse_block")
    values = np.arange(256, dtype=np.int32)
    with stream:
        out = cw.empty(256, np.int32)
        kernel(1, 256, (cw.to_device(values), out), shared_mem=256 * 4)
        assert np.array_equal(out.to_numpy(), values[::-1])


@pytest.mark.gpu
def test_compile_errors_carry_the_compiler_log(kernel_cache):
    with pytest.raises(cw.CompileError) as info:
        cw.compile('extern "C" __global__ void broken(float* x) { x[0] = undefined_name; }', "broken")
    assert "undefined_name" in info.value.log
    assert "broken" in str(info.value)


@pytest.mark.gpu
def test_kernels_are_cached_in_memory_and_on_disk(kernel_cache):
    before = cw.kernels.cache_info()
    cw.compile(VECTOR_ADD, "vector_add")
    cw.compile(VECTOR_ADD, "vector_add")
    cw.kernels._memory.clear()  # as a new process would start
    cw.compile(VECTOR_ADD, "vector_add")
    cw.compile(VECTOR_ADD, "vector_add", options=["-DDIFFERENT=1"])  # other options: another binary
    after = cw.kernels.cache_info()
    assert after["compiles"] - before["compiles"] == 2
    assert after["memory_hits"] - before["memory_hits"] == 1
    assert after["disk_hits"] - before["disk_hits"] == 1
    assert len(list(kernel_cache.glob("*.cubin"))) == 2


@pytest.mark.gpu
def test_a_corrupt_cache_file_is_compiled_again(kernel_cache):
    cw.compile(VECTOR_ADD, "vector_add")
    for path in kernel_cache.glob("*.cubin"):
        path.write_bytes(b"garbage")
    cw.kernels._memory.clear()
    before = cw.kernels.cache_info()["compiles"]
    kernel = cw.compile(VECTOR_ADD, "vector_add")
    assert cw.kernels.cache_info()["compiles"] == before + 1
    assert kernel.parameter_sizes == [8, 8, 8, 4, 4]


@pytest.mark.gpu
def test_arguments_are_checked_against_the_parameters(stream, kernel_cache):
    kernel = cw.compile(VECTOR_ADD, "vector_add")
    d = cw.zeros(4, np.float32, stream=stream)
    with pytest.raises(TypeError, match="takes 5 arguments"):
        kernel(1, 4, (d, d, d, 1.0))
    with pytest.raises(TypeError, match="4 bytes"):
        kernel(1, 4, (d, d, d, np.float64(1.0), 4))
    with pytest.raises(ValueError, match="does not fit"):
        kernel(1, 4, (d, d, d, 1.0, 2**40))
    with pytest.raises(TypeError, match="to_device"):
        kernel(1, 4, (np.zeros(4, np.float32), d, d, 1.0, 4))
    with pytest.raises(TypeError, match="pointer"):
        kernel(1, 4, (d, d, d, d, 4))
    with pytest.raises(ValueError, match="between 1"):
        kernel(0, 4, (d, d, d, 1.0, 4))
    with pytest.raises(ValueError, match="1 to 3"):
        kernel((1, 2, 3, 4), 4, (d, d, d, 1.0, 4))
    with pytest.raises(TypeError):
        kernel("1", 4, (d, d, d, 1.0, 4))


@pytest.mark.gpu
def test_arrays_dropped_after_launch_live_until_the_kernel_ran(kernel_cache):
    kernel = cw.compile(VECTOR_ADD, "vector_add")
    producer, launcher = cw.Stream(), cw.Stream()
    n = 1 << 20
    x = cw.to_device(np.full(n, 2.0, np.float32), stream=producer)  # allocated on another stream
    producer.synchronize()
    out = cw.empty(n, np.float32, stream=launcher)
    with Gate(launcher) as gate:
        kernel(n // 256, 256, (x, x, out, 1.0, n), stream=launcher)
        del x  # the kernel has not run yet: it is held behind the gate
        for _ in range(8):  # reuse memory on the array's first stream
            cw.ops.fill(cw.empty(n, np.float32, stream=producer), -1.0, stream=producer)
        producer.synchronize()  # the churn has run; the kernel is still held
        assert launcher.query() is False
        gate.open()
        assert (out.to_numpy(stream=launcher) == 4.0).all()


@pytest.mark.gpu
def test_a_launch_the_gpu_refuses_names_the_driver_call_and_leaves_the_stream_usable(stream, kernel_cache):
    kernel = cw.compile(VECTOR_ADD, "vector_add")
    d = cw.zeros(4, np.float32, stream=stream)
    with pytest.raises(cw.CudaError) as info:
        kernel(1, 4096, (d, d, d, 1.0, 4), stream=stream)  # more threads per block than any GPU has
    assert info.value.call == "cuLaunchKernelEx", info.value.call
    assert info.value.name == "cudaErrorInvalidValue"
    kernel(1, 4, (d, d, d, 1.0, 4), stream=stream)
    assert np.array_equal(d.to_numpy(stream=stream), np.zeros(4, np.float32))


def _first_call_in_a_new_thread(call) -> None:
    """Runs `call` as the first CUDA call of a new thread; re-raises what it raised."""
    raised = []

    def run():
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            raised.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if raised:
        raise raised[0]


@pytest.mark.gpu
def test_a_launch_a_record_and_a_wait_work_as_a_new_thread_s_first_cuda_call(kernel_cache):
    # They go to the CUDA driver (Note [Hot calls through the driver]), which, unlike the runtime, makes no
    # context current on a thread's first call.
    kernel = cw.compile(INCREMENT, "increment")
    first, second, third = cw.Stream(), cw.Stream(), cw.Stream()
    x = cw.zeros(1, np.float32, stream=first)
    event = cw.Event()
    with Gate(first) as gate:  # holds everything below until the waits are queued
        _first_call_in_a_new_thread(lambda: kernel(1, 1, (x,), stream=first))
        _first_call_in_a_new_thread(lambda: first.record(event))
        _first_call_in_a_new_thread(lambda: second.wait(event))
        _first_call_in_a_new_thread(lambda: kernel(1, 1, (x,), stream=second))
        _first_call_in_a_new_thread(lambda: third.wait(second))
        assert third.query() is False
        gate.open()
    assert x.to_numpy(stream=third)[0] == 2.0  # both increments ran, in order, before third read x


# Each kernel of a chain reads what the previous one wrote, after waiting for it (programmatic dependent launch).
DEPENDENT_STEP = r"""
extern "C" __global__ void dependent_step(const float* previous, float* out, int n) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = previous[i] + 1.0f;
}
"""


@pytest.mark.gpu
def test_a_chain_of_programmatic_launches_is_exact_eagerly_and_captured(stream, kernel_cache):
    kernel = cw.compile(DEPENDENT_STEP, "dependent_step")
    assert kernel.programmatic is False
    with pytest.raises(TypeError, match="programmatic"):
        kernel.programmatic = 1
    kernel.programmatic = True
    n = 1 << 16
    buffers = [cw.zeros(n, np.float32, stream=stream), cw.zeros(n, np.float32, stream=stream)]

    def chain(steps: int) -> None:
        for step in range(steps):
            kernel((n + 255) // 256, 256, (buffers[step % 2], buffers[(step + 1) % 2], n), stream=stream)

    chain(100)  # ends in buffers[0]
    assert np.all(buffers[0].to_numpy(stream=stream) == 100.0)
    with cw.capture(stream) as cap:
        chain(100)
    for _ in range(3):
        cap.graph.replay(stream)
    assert np.all(buffers[0].to_numpy(stream=stream) == 400.0)
