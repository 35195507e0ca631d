"""How the sanitizer reads CuPy's kernels (Note [CuPy under the sanitizer]): their parameter lists from the
sources CuPy compiles, and the bytes each launch touches from its parameter values. Runs on every backend:
the sources and values here are shaped as CuPy makes them (cupy/_core/_kernel.pyx, _reduction.pyx,
_cub_reduction.pyx, include/cupy/carray.cuh); test_cupy_sanitizer.py runs real CuPy on a GPU."""

from __future__ import annotations

import _thread
import functools
import math
import operator
import struct
import sys
import threading
import time
import types
import warnings

import numpy as np
import pytest
from _support import Gate, skip_under_compute_sanitizer

import cuweave as cw
from cuweave import _cupy_hooks, _torch_hooks
from cuweave._cupy_hooks import Parameter, ranges_of, signatures

UFUNC_SOURCE = """
#include <cupy/carray.cuh>
typedef float in0_type;
typedef float out0_type;
    extern "C" __global__ void cupy_add__float32_float32_float32(const CArray<float, 1, 1, 1> _raw_in0, const float in1, CArray<float, 1, 1, 1> _raw_out0, CIndexer<1, 1> _ind) {
      ;
      #pragma unroll 1
      CUPY_FOR(i, _ind.size()) {
        _ind.set(i);
        const in0_type &in0 = _raw_in0[_ind.get()];
        out0_type &out0 = _raw_out0[_ind.get()];
        out0 = in0 + in1;
      };
    }
"""

ELEMENTWISE_SOURCE = """
typedef double T;
typedef thrust::complex<double> C;
extern "C" __global__ void squared_diff(const CArray<T, 2, 0, 0> _raw_x, const CArray<C, 2, 0, 0> _raw_c,
                                        CArray<T, 2, 0, 0> _raw_z, CIndexer<2, 0> _ind) {
}
"""

REDUCTION_SOURCE = """
typedef float type_in0_raw;
typedef float type_out0_raw;
extern "C" __global__ void cupy_sum(const CArray<type_in0_raw, 2, 1, 1> _raw_in0, CArray<type_out0_raw, 1, 1, 1> _raw_out0, CIndexer<2, 1> _in_ind, CIndexer<1, 1> _out_ind, const int _block_stride) {
}
"""

CUB_SOURCE = """
typedef float type_in0_raw;
extern "C"
__global__ void cupy_cub_sum_pass1(const void* _raw_in0, void* _raw_out0, int _segment_size, int _array_size) {
  unsigned int _tid = threadIdx.x;
}
"""

RAW_SOURCE = """
extern "C" __global__ void scale(const float* x, float* y, float factor, int n) { }
"""


def carray(data: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> bytes:
    """A CArray parameter's bytes, as CuPy packs them: data, size, shape, strides (in bytes)."""
    size = 1
    for extent in shape:
        size *= extent
    return struct.pack(f"<Qq{len(shape)}q{len(strides)}q", data, size, *shape, *strides)


def test_a_ufuncs_inputs_are_reads_its_outputs_writes_and_scalars_and_indexers_are_values():
    found = signatures(UFUNC_SOURCE)
    assert found == {"cupy_add__float32_float32_float32": [
        Parameter("array", writes=False, ndim=1, itemsize=4), Parameter("value"),
        Parameter("array", writes=True, ndim=1, itemsize=4), Parameter("value")]}


def test_element_types_are_read_through_typedefs_and_template_commas_do_not_split_a_parameter():
    found = signatures(ELEMENTWISE_SOURCE)["squared_diff"]
    assert found == [Parameter("array", writes=False, ndim=2, itemsize=8),
                     Parameter("array", writes=False, ndim=2, itemsize=16),
                     Parameter("array", writes=True, ndim=2, itemsize=8), Parameter("value")]


def test_a_reduction_reads_its_input_and_writes_its_output():
    found = signatures(REDUCTION_SOURCE)["cupy_sum"]
    assert [(p.kind, p.writes, p.ndim) for p in found] == [
        ("array", False, 2), ("array", True, 1), ("value", False, 0), ("value", False, 0), ("value", False, 0)]


def test_raw_pointers_are_marked_as_pointers():
    assert [p.kind for p in signatures(CUB_SOURCE)["cupy_cub_sum_pass1"]] == ["pointer", "pointer", "value", "value"]
    assert [p.kind for p in signatures(RAW_SOURCE)["scale"]] == ["pointer", "pointer", "value", "value"]


def test_a_source_without_extern_c_kernels_has_none():
    assert signatures("template <typename T> __global__ void k(T* x) {}") == {}


FLOAT32_1D = Parameter("array", ndim=1, itemsize=4)
FLOAT64_2D = Parameter("array", ndim=2, itemsize=8)


def array_span(value: bytes, parameter: Parameter) -> tuple[int, int] | None:
    """(address, bytes) a launch's one CArray argument covers; None when it covers nothing."""
    ranges = ranges_of([parameter], [value])
    assert ranges is not None, "the value does not fit the parameter"
    return ranges[0][:2] if ranges else None


def test_a_contiguous_array_spans_its_elements():
    assert array_span(carray(0x1000, (10,), (4,)), FLOAT32_1D) == (0x1000, 40)


def test_a_transposed_array_spans_from_its_first_to_its_last_element():
    # (4, 3) view of a C-contiguous (3, 4) float64 array: strides (8, 32)
    assert array_span(carray(0x2000, (4, 3), (8, 32)), FLOAT64_2D) == (0x2000, 3 * 8 + 2 * 32 + 8)


def test_a_reversed_array_spans_back_from_its_data_pointer():
    # x[::-1] of 5 float32: data points at the last element
    assert array_span(carray(0x3010, (5,), (-4,)), FLOAT32_1D) == (0x3000, 20)


def test_an_empty_array_touches_nothing():
    assert array_span(carray(0x4000, (0,), (4,)), FLOAT32_1D) is None


def test_an_unknown_element_size_is_taken_from_the_smallest_stride():
    unknown = Parameter("array", ndim=2, itemsize=0)
    assert array_span(carray(0x5000, (2, 3), (24, 8)), unknown) == (0x5000, 24 + 16 + 8)


def test_a_zero_dimensional_array_spans_one_element():
    scalar = Parameter("array", writes=True, ndim=0, itemsize=8)
    assert array_span(struct.pack("<Qq", 0x6000, 1), scalar) == (0x6000, 8)


def test_a_layout_that_is_not_one_tuple_per_parameter_is_refused_by_name():
    with pytest.raises(ValueError, match=r"list of \(array, writes, ndim, itemsize\) tuples"):
        _cupy_hooks._foreign.argument_ranges([(True, False)], [b"\0" * 32])


def test_a_launchs_ranges_come_from_its_array_parameters_in_order():
    parameters = signatures(UFUNC_SOURCE)["cupy_add__float32_float32_float32"]
    values = [carray(0x1000, (8,), (4,)), struct.pack("<f", 2.0), carray(0x9000, (8,), (4,)),
              struct.pack("<qqq", 8, 8, 0)]
    assert ranges_of(parameters, values) == [(0x1000, 32, False), (0x9000, 32, True)]


def test_values_that_do_not_fit_the_declared_parameters_give_no_ranges():
    parameters = signatures(UFUNC_SOURCE)["cupy_add__float32_float32_float32"]
    assert ranges_of(parameters, [b"\0" * 32]) is None  # too few
    short = [carray(0x1000, (8, 1), (4, 4)), b"\0" * 4, carray(0x9000, (8,), (4,)), b"\0" * 24]
    assert ranges_of(parameters, short) is None  # a 2-D array's bytes where a 1-D one is declared


@pytest.fixture
def sanitizing():
    """The sanitizer on: what it cannot check is said only then."""
    with cw.sanitize():
        yield


@pytest.fixture
def fresh_hooks(monkeypatch):
    """The hooks' module state, emptied for one test."""
    monkeypatch.setattr(_cupy_hooks, "_modules", {})
    monkeypatch.setattr(_cupy_hooks, "_warned", set())
    monkeypatch.setattr(_cupy_hooks, "_recording", False)
    monkeypatch.setattr(_cupy_hooks, "_readable_compiled", False)
    return _cupy_hooks


def fake_cupy(compiled: list) -> types.SimpleNamespace:
    """A stand-in for CuPy's compiler module: each compile returns a module with a new handle."""
    def compile_module(source, options=(), **kwargs):  # noqa: ANN001, ANN202
        compiled.append(source)
        return types.SimpleNamespace(ptr=0x100 + len(compiled))

    compiler = types.SimpleNamespace(_compile_module_with_cache=compile_module)
    legacy = types.SimpleNamespace(ptr=0)  # CuPy's current stream until one is made current
    return types.SimpleNamespace(cuda=types.SimpleNamespace(compiler=compiler, get_current_stream=lambda: legacy))


def test_each_source_cupy_compiles_is_read_under_its_modules_handle(fresh_hooks):
    compiled: list = []
    cupy = fake_cupy(compiled)
    fresh_hooks._record_compiles(cupy)
    module = cupy.cuda.compiler._compile_module_with_cache(UFUNC_SOURCE, ("-O3",), arch=None)
    assert compiled == [UFUNC_SOURCE] and module.ptr == 0x101  # CuPy still gets its module
    cupy.cuda.compiler._compile_module_with_cache(RAW_SOURCE)
    assert set(fresh_hooks._modules) == {0x101, 0x102}
    # its parameters, as the backend reads a launch's arguments: (array, writes, ndim, itemsize)
    assert fresh_hooks._wants("cupy_add__float32_float32_float32", 0x101) == [
        (True, False, 1, 4), (False, False, 0, 0), (True, True, 1, 4), (False, False, 0, 0)]
    fresh_hooks._record_compiles(cupy)  # once: not wrapped twice
    cupy.cuda.compiler._compile_module_with_cache(REDUCTION_SOURCE)
    assert len(compiled) == 3


def test_a_raw_pointer_kernel_is_not_checked_and_a_warning_says_so_once(fresh_hooks, sanitizing):
    fresh_hooks._modules[0x7] = signatures(RAW_SOURCE)
    with pytest.warns(RuntimeWarning, match="'scale': its parameters are raw pointers") as caught:
        assert fresh_hooks._wants("scale", 0x7) is None
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh_hooks._wants("scale", 0x7) is None  # said once


def test_a_cupy_kernel_compiled_before_cuweave_was_imported_is_named_in_a_warning(fresh_hooks, sanitizing):
    with pytest.warns(RuntimeWarning, match="'cupy_multiply__float32_float32_float32': it was compiled before"):
        assert fresh_hooks._wants("cupy_multiply__float32_float32_float32", 0x9) is None


def test_cuweaves_own_kernels_are_left_alone_without_a_word(fresh_hooks):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh_hooks._wants("void cuweave::cuda::fill_kernel<float>(float*, unsigned long, float)", 0) is None


def test_a_kernel_from_a_source_cuweave_did_not_read_is_named_when_the_users_code_launched_it(fresh_hooks, sanitizing):
    kernel = "void cub::DeviceReduceKernel<float>(float*, float*, int)"
    with pytest.warns(RuntimeWarning, match="not compiled by CuPy from a source cuweave read") as caught:
        assert fresh_hooks._wants(kernel, 0) is None
    assert caught[0].filename == __file__  # the user's line


def test_inside_a_weave_alone_no_kernel_is_said_to_be_unchecked(fresh_hooks):
    with warnings.catch_warnings(), cw.Stream(), cw.weave(streams=2):
        warnings.simplefilter("error")
        assert fresh_hooks._wants("void cub::DeviceReduceKernel<float>(float*, float*, int)", 0) is None
        fresh_hooks._modules[0x101] = signatures(RAW_SOURCE)
        assert fresh_hooks._wants("scale", 0x101) is None


def test_a_kernel_pytorchs_hooked_operators_launch_is_left_to_those_hooks(fresh_hooks):
    launcher = {}
    exec(compile("def launch(wants):\n    return wants('void at::native::vectorized_elementwise_kernel()', 0)\n",
                 "/env/lib/python3.12/site-packages/torch/_ops.py", "exec"), launcher)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert launcher["launch"](fresh_hooks._wants) is None


def test_a_kernel_launched_inside_a_pytorch_operator_the_cpp_hook_handles_is_left_to_it(fresh_hooks, sanitizing,
                                                                                      monkeypatch):
    # The C++ hook runs no Python code: the launch's frame is the user's line that called the operator.
    kernel = "void at::native::vectorized_elementwise_kernel<4>(int)"
    monkeypatch.setattr(_torch_hooks._native, "module", types.SimpleNamespace(running_an_operator=lambda: True))
    with warnings.catch_warnings(record=True) as caught:
        assert fresh_hooks._wants(kernel, 0) is None
    assert caught == []
    monkeypatch.setattr(_torch_hooks._native, "module", types.SimpleNamespace(running_an_operator=lambda: False))
    with pytest.warns(RuntimeWarning, match="not compiled by CuPy from a source cuweave read"):
        assert fresh_hooks._wants(kernel, 0) is None  # outside an operator: the user's own launch


def test_an_unchecked_kernel_is_said_even_where_warnings_are_errors(fresh_hooks, sanitizing):
    # Raised inside a launch's callback, the warning could only end the callback or go off later inside CuPy.
    fresh_hooks._modules[0x7] = signatures(RAW_SOURCE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        assert fresh_hooks._wants("scale", 0x7) is None
    assert len(caught) == 1 and "'scale'" in str(caught[0].message) and caught[0].filename == __file__


def test_a_race_found_at_a_launch_is_raised_again_with_its_report():
    found = cw.RaceError("race: cupy add on stream 1 and cupy multiply on stream 2")
    found.races = [("a", "b", 0, 8)]
    deferred = cw.errors._deferred(found)
    again = deferred()  # as Python makes an asynchronous exception: no arguments
    assert isinstance(again, cw.RaceError) and str(again) == str(found) and again.races == found.races
    assert type(again).__name__ == "RaceError" and deferred._cuweave_deferred  # the backend sets it again if need be


@pytest.mark.cupti
def test_the_launch_watch_turns_on_and_off_on_this_backend():
    asked, copies, orderings = [], [], []
    _cupy_hooks._core.sanitizer.foreign.watch_launches(lambda *a: asked.append(a), lambda *a: None,
                                                       lambda *a: copies.append(a), lambda *a: orderings.append(a))
    try:
        x = cw.zeros(8, "float32")
        cw.ops.fill(x, 1.0)
        y = cw.to_device(np.arange(8, dtype=np.float32))
        cw.copy_async(x, y)
        host = x.to_numpy()
        cw.default_stream().synchronize()
        cw.synchronize()
    finally:  # the watch CUWEAVE_SANITIZE keeps for the process, if on, comes back
        watching = _cupy_hooks._watching
        _cupy_hooks._core.sanitizer.foreign.watch_launches(_cupy_hooks._wants if watching else None,
                                                           _cupy_hooks._launched if watching else None,
                                                           _cupy_hooks._copied if watching else None,
                                                           _cupy_hooks._ordered if watching else None)
    assert not any("cuweave::" not in kernel for kernel, _ in asked)  # only cuweave's own kernels ran
    assert copies == [] and orderings == []  # cuweave's own copies and synchronizes are the core's to tell
    assert host.tolist() == list(range(8))


class _Told:
    """What the hooks tell the sanitizer of another library's work, kept instead of checked."""

    def __init__(self) -> None:
        self.operations: list[tuple] = []
        self.host_operations: list[tuple] = []
        self.orderings: list[tuple] = []

    def operation(self, stream, name, ranges):  # noqa: ANN001, ANN201
        self.operations.append((stream.handle, name, ranges))

    def host_operation(self, name, ranges):  # noqa: ANN001, ANN201
        self.host_operations.append((name, ranges))

    def event_recorded(self, event, stream):  # noqa: ANN001, ANN201
        self.orderings.append(("record", event, stream.kind))

    def stream_waited_event(self, stream, event):  # noqa: ANN001, ANN201
        self.orderings.append(("wait", event, stream.kind))

    def stream_synchronized(self, stream):  # noqa: ANN001, ANN201
        self.orderings.append(("synchronize stream", stream.kind))

    def event_synchronized(self, event):  # noqa: ANN001, ANN201
        self.orderings.append(("synchronize event", event))

    def device_synchronized(self, device):  # noqa: ANN001, ANN201
        self.orderings.append(("synchronize device", device))


@pytest.fixture
def told():
    """The sanitizer on, and what the hooks tell it kept (swapped in inside the block: its start and end talk to
    the real one)."""
    kept = _Told()
    with cw.sanitize():
        real, _cupy_hooks._foreign = _cupy_hooks._foreign, kept
        try:
            yield kept
        finally:
            _cupy_hooks._foreign = real


def test_a_copys_device_and_pinned_ends_are_checked_on_its_stream_and_pageable_ends_are_not(told):
    legacy = 0  # cudaMemcpy's stream
    assert _cupy_hooks._copied("cudaMemcpyAsync", 0xA000, "device", 0xB000, "pinned", 64, legacy) is None
    assert _cupy_hooks._copied("cudaMemcpy_ptds", 0xC000, "pageable", 0xA000, "device", 32, legacy) is None
    assert _cupy_hooks._copied("cudaMemcpy", 0xC000, "pageable", 0xD000, "pageable", 16, legacy) is None
    assert [(name, ranges) for _, name, ranges in told.operations] == [
        ("copy (cudaMemcpyAsync)", [(0xB000, 64, False), (0xA000, 64, True)]),
        ("copy (cudaMemcpy)", [(0xA000, 32, False)]),
    ]


def test_a_copy_made_inside_a_pytorch_operator_is_left_to_the_pytorch_hooks(told):
    # a function whose code is the PyTorch hooks' file, as their dispatch is while an operator runs
    scope: dict = {"copied": _cupy_hooks._copied}
    exec(compile("def operator():\n    return copied('cudaMemcpyAsync', 0xA000, 'device', 0xB000, 'device', 8, 0)\n",
                 _cupy_hooks._TORCH_HOOKS, "exec"), scope)
    assert scope["operator"]() is None
    assert told.operations == []


def test_a_race_found_at_a_copy_comes_back_to_be_raised_after_the_call(told):
    def racing(stream, name, ranges):  # noqa: ANN001, ANN202
        raise cw.RaceError(f"race: {name}")

    told.operation = racing
    deferred = _cupy_hooks._copied("cudaMemcpyAsync", 0xA000, "device", 0xB000, "device", 8, 0)
    assert deferred is not None and deferred._cuweave_deferred
    assert str(deferred()) == "race: copy (cudaMemcpyAsync)"


def test_an_event_record_and_a_stream_wait_another_library_made_are_told_as_ordering(told):
    per_thread = 2  # cudaStreamPerThread's handle
    _cupy_hooks._ordered("record", 0x77, 0)
    _cupy_hooks._ordered("wait", 0x77, per_thread)
    assert told.orderings == [("record", 0x77, "legacy_default"), ("wait", 0x77, "per_thread_default")]


def test_a_synchronize_another_library_made_is_told_as_the_host_waiting(told):
    _cupy_hooks._ordered("synchronize stream", 0, 0)
    _cupy_hooks._ordered("synchronize event", 0x77, 0)
    _cupy_hooks._ordered("synchronize device", 0, 0)
    assert told.orderings == [("synchronize stream", "legacy_default"), ("synchronize event", 0x77),
                              ("synchronize device", 0)]


def test_orderings_and_copies_from_a_thread_running_no_python_code_are_left_out(told, monkeypatch):
    # A library's own thread (NCCL's, say) calls in with no Python frame below the hook. A thread that
    # _thread.start_new_thread begins in C code (list, map and methodcaller) has none either; what the hook raises
    # goes to sys.unraisablehook, and `done` is set only after a hook that returned.
    raised: list = []
    monkeypatch.setattr(sys, "unraisablehook", raised.append)
    for hook, args in [(_cupy_hooks._ordered, ("record", 0x77, 0)),
                       (_cupy_hooks._ordered, ("synchronize device", 0, 0)),
                       (_cupy_hooks._copied, ("cudaMemcpyAsync", 0xA000, "device", 0xB000, "device", 8, 0))]:
        done = threading.Event()
        calls = [functools.partial(hook, *args), done.set]
        _thread.start_new_thread(list, (map(operator.methodcaller("__call__"), calls),))
        deadline = time.monotonic() + 10
        while not done.is_set() and not raised and time.monotonic() < deadline:
            time.sleep(0.001)
        assert [str(r.exc_value) for r in raised] == [], f"{hook.__name__} raised"
        assert done.is_set(), f"{hook.__name__} did not return"
    assert told.orderings == [] and told.operations == []


def test_a_pinned_block_cupy_hands_out_is_checked_as_written_by_the_host(told):
    handed = []

    def alloc_pinned_memory(size):  # noqa: ANN001, ANN202
        handed.append(size)
        return types.SimpleNamespace(ptr=0xF000 + 0x1000 * len(handed))

    pinned_memory = types.SimpleNamespace(alloc_pinned_memory=alloc_pinned_memory)
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(pinned_memory=pinned_memory,
                                                            alloc_pinned_memory=alloc_pinned_memory))
    _cupy_hooks._report_pinned_reuse(cupy)
    try:
        assert cupy.cuda.alloc_pinned_memory(512).ptr == 0x10000
        assert pinned_memory.alloc_pinned_memory(0).ptr == 0x11000  # nothing to check
    finally:
        _cupy_hooks._stop_reporting_ordering()
    assert cupy.cuda.alloc_pinned_memory is alloc_pinned_memory  # as CuPy had it, once the sanitizer is off
    assert pinned_memory.alloc_pinned_memory is alloc_pinned_memory
    assert told.host_operations == [
        ("cupy.cuda.alloc_pinned_memory (the block, handed out, is written by the host)", [(0x10000, 512, True)])]


class _CupyStream:
    """What CuPy's streams are to the hooks: objects holding a handle."""

    def __init__(self, handle: int) -> None:
        self.ptr = handle


class _CupyExternalStream(_CupyStream):
    """cupy.cuda.ExternalStream: a handle CuPy did not make."""


@pytest.fixture
def fake_cupy_streams(monkeypatch):
    """A stand-in for `cupy.cuda` as the hooks use it for streams, and an empty adoption cache."""
    cuda = types.SimpleNamespace(ExternalStream=_CupyExternalStream, current=None)
    cuda.get_current_stream = lambda: cuda.current or _CupyStream(0)  # (0: the legacy default stream)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(_cupy_hooks, "_streams", {})
    handle = cw._core.backend_calls.create_stream(0)
    yield cuda, handle
    # In CuPy's order: its stream object, and with it the adoption, goes before the handle. A live adoption of a
    # destroyed handle is one the sanitizer may still ask CUDA about, and CUDA crashes on a destroyed handle.
    cuda.current = None
    _cupy_hooks._streams.clear()
    cw._core.backend_calls.destroy_stream(handle)


def test_an_adopted_cupy_stream_is_forgotten_with_cupys_stream_object(fake_cupy_streams):
    # A destroyed stream's handle must not be asked about again, and CUDA may hand it out again.
    cuda, handle = fake_cupy_streams
    cuda.current = _CupyStream(handle)  # a launch on CuPy's current stream
    adopted = _cupy_hooks._stream(handle)
    assert _cupy_hooks._stream(handle) is adopted and adopted.handle == handle
    cuda.current = None
    del adopted
    assert handle not in _cupy_hooks._streams


def test_a_handle_cupy_did_not_make_is_adopted_for_one_use(fake_cupy_streams):
    # An ExternalStream over a cuweave or PyTorch stream: its owner may destroy the handle while CuPy's wrapper
    # lives on, and a kept adoption would have the sanitizer (and traces) ask CUDA about a destroyed stream.
    cuda, handle = fake_cupy_streams
    cuda.current = _CupyExternalStream(handle)
    assert _cupy_hooks._stream(handle).handle == handle
    assert handle not in _cupy_hooks._streams


class _CupyWrapperOfForeignStream(_CupyStream):
    """cupy.cuda.Stream.from_external(obj): CuPy's Stream class over another library's handle, holding `obj`."""

    def __init__(self, handle: int, foreign: object) -> None:
        super().__init__(handle)
        self._foreign_stream_ref = foreign


def test_a_cupy_wrapper_of_another_librarys_stream_is_adopted_for_one_use(fake_cupy_streams):
    # Its foreign owner (a cuweave stream, say) may be closed while CuPy's wrapper lives on.
    cuda, handle = fake_cupy_streams
    cuda.current = _CupyWrapperOfForeignStream(handle, object())
    assert _cupy_hooks._stream(handle).handle == handle
    assert handle not in _cupy_hooks._streams


def test_a_kept_adoption_that_cuweave_closed_is_made_again(fake_cupy_streams):
    # cuweave closes the adoptions of a stream it closes (Note [Adoptions of a handle cuweave destroys]); a stream
    # made later may have the same handle.
    cuda, handle = fake_cupy_streams
    gone = cw.Stream()
    closed = cw.Stream.from_external(gone.handle)
    gone.close()
    assert closed.closed
    _cupy_hooks._streams[handle] = closed  # as if `handle` were the closed stream's, handed out again
    cuda.current = _CupyStream(handle)
    adopted = _cupy_hooks._stream(handle)
    assert not adopted.closed and adopted.handle == handle
    assert _cupy_hooks._streams[handle] is adopted


class _Tensor:
    """What the PyTorch hooks read of a tensor to count its bytes."""

    def __init__(self, address: int, shape: tuple[int, ...], strides: tuple[int, ...], element_size: int) -> None:
        self.shape, self._strides, self._address, self._size = shape, strides, address, element_size

    def stride(self) -> tuple[int, ...]:
        return self._strides

    def data_ptr(self) -> int:
        return self._address

    def element_size(self) -> int:
        return self._size

    def is_contiguous(self) -> bool:  # row-major, as torch.contiguous_format
        expected = 1
        for extent, stride in reversed(list(zip(self.shape, self._strides))):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self._size


def test_pytorchs_tensors_and_cupys_arrays_are_counted_alike():
    # The same transposed float64 view, as a tensor (strides in elements) and as a CArray (strides in bytes).
    from cuweave._torch_hooks import _span

    assert _span(_Tensor(0x2000, (4, 3), (1, 4), 8)) == array_span(carray(0x2000, (4, 3), (8, 32)), FLOAT64_2D)
    assert _span(_Tensor(0x3010, (5,), (-1,), 4)) == (0x3000, 20)  # reversed: back from the data pointer
    # Contiguous: the data pointer and the byte count, as the strided walk gives them.
    assert _span(_Tensor(0x2000, (3, 4), (4, 1), 8)) == array_span(carray(0x2000, (3, 4), (32, 8)), FLOAT64_2D)


def test_cupy_unwatched_because_cupti_is_held_is_said_once_and_fails_no_sanitize_block(monkeypatch):
    """Under compute-sanitizer or Nsight Systems, CUPTI is another tool's for the whole process: every sanitize()
    block would meet the refusal. It is said once, as a warning shown even where warnings are errors, and the
    blocks go on checking cuweave's own work."""
    refusal = cw.CudaError("cuptiSubscribe failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)")
    compiler = types.SimpleNamespace(_compile_module_with_cache=lambda source, *a, **k: None)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(compiler=compiler)))
    monkeypatch.setattr(_cupy_hooks, "_recording", True)  # the stand-in's compiles are not wrapped
    monkeypatch.setattr(_cupy_hooks, "_unwatched_warned", False)
    monkeypatch.setattr(_cupy_hooks, "_watching", False)
    monkeypatch.setattr(_cupy_hooks, "_attached_count", 0)
    monkeypatch.setattr(_cupy_hooks._core, "backend_name", lambda: "cuda")

    def refuse(*args):
        raise refusal

    monkeypatch.setattr(_cupy_hooks._core.sanitizer.foreign, "watch_launches", refuse)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("error")  # as the suite runs: a warning that were raised would fail the block
        for _ in range(3):
            assert _cupy_hooks.attach()
            _cupy_hooks.detach()
    said = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1, said
    assert "not watched in this process" in said[0] and "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in said[0]
    assert not _cupy_hooks._watching


# --- CuPy's kernels in a weave (the backend's part runs on a GPU: test_cupy_weave.py) ----------------------------

def test_a_weave_watches_launches_only_once_cupy_has_a_kernel_it_read(fresh_hooks, monkeypatch):
    """The watch costs each weave a CUPTI subscription and each launch a callback: a weave begun before CuPy compiled
    any kernel cuweave read does not watch, and begins to at that kernel's compile, before its launch."""
    compiled: list = []
    cupy = fake_cupy(compiled)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(_cupy_hooks, "_attached_count", 0)
    watches = []
    monkeypatch.setattr(_cupy_hooks, "_start", lambda: watches.append("on"))
    monkeypatch.setattr(_cupy_hooks, "_watching", False)
    fresh_hooks._record_compiles(cupy)
    with cw.weave():
        assert _cupy_hooks._attached_count == 0 and watches == []
        cupy.cuda.compiler._compile_module_with_cache(RAW_SOURCE)  # raw pointers: nothing to place
        cupy.cuda.compiler._compile_module_with_cache("// no kernel")
        assert _cupy_hooks._attached_count == 0
        cupy.cuda.compiler._compile_module_with_cache(UFUNC_SOURCE)
        assert _cupy_hooks._attached_count == 1 and watches == ["on"]
        cupy.cuda.compiler._compile_module_with_cache(REDUCTION_SOURCE)
        assert _cupy_hooks._attached_count == 1  # attached once per weave
    assert _cupy_hooks._attached_count == 0
    cupy.cuda.compiler._compile_module_with_cache(UFUNC_SOURCE)  # no weave now: nothing attaches
    assert _cupy_hooks._attached_count == 0
    with cw.weave():
        assert _cupy_hooks._attached_count == 1 and watches == ["on", "on"]  # CuPy has such kernels from the start
    assert _cupy_hooks._attached_count == 0


ADD = "cupy_add__float32_float32_float32"


def add_launch(source: int, out: int) -> list[bytes]:
    """The parameter values of CuPy's `out = source + 2.0` over 8 floats."""
    return [carray(source, (8,), (4,)), struct.pack("<f", 2.0), carray(out, (8,), (4,)), struct.pack("<qqq", 8, 8, 0)]


def launch(module: int, stream: int, movable: bool, values: list[bytes]) -> tuple:
    """A launch of ADD as the launch watch answers it (placed where `movable`, on a thread whose weave places other
    libraries' work): (the stream handle it was moved to or None, the exception class to raise after it or None)."""
    return _cupy_hooks._foreign.launch(ADD, _cupy_hooks._wants(ADD, module), stream, movable, values,
                                       _cupy_hooks._launched)


@pytest.fixture
def cupy_module(fresh_hooks, fake_cupy_streams):
    """The handle of a module whose source the hooks read, holding ADD, and CuPy's current stream (a stream of
    its own: the legacy default stream would be ordered with the weave's streams by CUDA itself)."""
    fresh_hooks._modules[0x101] = signatures(UFUNC_SOURCE)
    cuda, handle = fake_cupy_streams
    cuda.current = _CupyStream(handle)
    cuda.compiler = types.SimpleNamespace(_compile_module_with_cache=lambda *args, **kwargs: None)
    return 0x101, handle


def test_inside_a_weave_a_cupy_launch_is_moved_to_the_stream_the_weave_chooses(cupy_module):
    module, cupys_stream = cupy_module
    with cw.Stream(), cw.weave(streams=4) as weave:
        first, error = launch(module, cupys_stream, True, add_launch(0x1000, 0x2000))
        _cupy_hooks._foreign.launch_queued()
        second, _ = launch(module, cupys_stream, True, add_launch(0x3000, 0x4000))
        _cupy_hooks._foreign.launch_queued()
        woven = {stream.handle for stream in weave._state.streams}
        assert error is None and {first, second} <= woven and first != second  # independent: side by side
        # a launch whose stream the backend cannot change stays where it was called, and the weave places nothing
        assert launch(module, cupys_stream, False, add_launch(0x5000, 0x6000)) == (None, None)
        assert weave.counts.operations == 2
    # outside a weave, with the sanitizer off, a launch is neither placed nor checked
    assert launch(module, cupys_stream, True, add_launch(0x1000, 0x2000)) == (None, None)


@pytest.fixture
def busy(cupy_module):
    """Called inside the test's blocks, keeps CuPy's stream busy for the rest of the test (a stream found idle has
    all its work done, for the sanitizer). Held before the blocks, it would never be let go: a block's first watch
    of CuPy's launches in a process (CUPTI's subscription) waits for the GPU's queued work."""
    skip_under_compute_sanitizer()
    latches = []
    yield lambda: latches.append(cw.HostLatch(_cupy_hooks._stream(cupy_module[1])))
    for latch in latches:
        latch.release()


@pytest.mark.parametrize("told", [True, False], ids=["told", "not told"])
def test_a_launch_moved_after_unmoved_work_on_cupys_stream_waits_for_that_work(cupy_module, busy, told):
    # The sanitizer judges: a cuBLAS-like kernel the weave cannot read writes the bytes the moved launch writes.
    module, handle = cupy_module
    with cw.sanitize(), cw.Stream(), cw.weave(streams=4) as weave:
        busy()
        held = [cw.HostLatch(stream) for stream in weave._state.streams]
        try:
            first, _ = launch(module, handle, True, add_launch(0x5000, 0x6000))
            _cupy_hooks._foreign.launch_queued()
            _cupy_hooks._foreign.operation(_cupy_hooks._stream(handle), "gemm", [(0x1000, 32, True)])
            if told:
                _cupy_hooks._foreign.unmoved(handle)
            # continues the first launch's chain: on its stream, which followed CuPy's stream before the gemm
            second, race = launch(module, handle, True, add_launch(0x6000, 0x1000))
            _cupy_hooks._foreign.launch_queued()
        finally:
            for latch in held:
                latch.release()
    assert second == first
    assert (race is None) == told


def test_the_first_launch_moved_off_a_stream_follows_its_earlier_work(cupy_module, busy):
    module, handle = cupy_module
    with cw.sanitize(), cw.Stream(), cw.weave(streams=4):
        busy()
        _cupy_hooks._foreign.operation(_cupy_hooks._stream(handle), "memset", [(0x1000, 32, True)])  # cupy.zeros
        placed, race = launch(module, handle, True, add_launch(0x1000, 0x2000))
        _cupy_hooks._foreign.launch_queued()
    assert race is None


@pytest.mark.parametrize("joined", [True, False], ids=["joined", "not joined"])
def test_cupys_stream_follows_a_launch_moved_off_it_once_the_launch_is_queued(cupy_module, busy, joined):
    module, handle = cupy_module
    with cw.sanitize(), cw.Stream(), cw.weave(streams=4) as weave:
        busy()
        held = [cw.HostLatch(stream) for stream in weave._state.streams]  # the kernel still to run, wherever placed
        try:
            placed, _ = launch(module, handle, True, add_launch(0x1000, 0x2000))
            if joined:
                _cupy_hooks._foreign.launch_queued()
            cupys_stream = _cupy_hooks._stream(handle)
            if joined:  # CuPy's next work there, say a copy of the result to the host, follows the kernel
                _cupy_hooks._foreign.operation(cupys_stream, "copy", [(0x2000, 32, False)])
            else:
                with pytest.raises(cw.RaceError):
                    _cupy_hooks._foreign.operation(cupys_stream, "copy", [(0x2000, 32, False)])
        finally:
            for latch in held:
                latch.release()


# --- CuPy in a weave under a capture (cuweave.woven, or cuweave.weave() inside cuweave.capture()) -----------------

def test_in_a_captured_weave_cupys_work_is_captured_and_its_stream_joins_back(cupy_module):
    module, handle = cupy_module
    cupys = _cupy_hooks._stream(handle)  # adopted before the capture: CUDA refuses to describe a stream that joined it
    destination = cw.zeros(64, dtype=np.uint8)
    cw.current_stream().synchronize()
    with cw.Stream() as stream:
        with cw.capture(stream) as cap, cw.weave(streams=4) as weave:
            cw._core.backend_calls.fill_bytes(destination.ptr, 64, 7, cupys)  # CuPy's own work: a memset, say
            placed, error = launch(module, handle, True, add_launch(0x1000, 0x2000))
            _cupy_hooks._foreign.launch_queued()
            assert error is None and placed in {s.handle for s in weave._state.streams}
        assert weave._captured_cupy  # so the capture could end: every stream it forked joined back
        np.testing.assert_array_equal(destination.to_numpy(), np.zeros(64, np.uint8))  # captured, not run
        assert "fill" in [node.label for node in cap.graph.nodes]
        cap.graph.replay(stream)
        stream.synchronize()
    np.testing.assert_array_equal(destination.to_numpy(), np.full(64, 7, np.uint8))


def test_outside_a_capture_cupys_stream_joins_nothing(cupy_module):
    module, handle = cupy_module
    with cw.Stream(), cw.weave(streams=4) as weave:
        placed, _ = launch(module, handle, True, add_launch(0x1000, 0x2000))
        _cupy_hooks._foreign.launch_queued()
    assert placed is not None and not weave._captured_cupy


def test_in_a_captured_weave_a_cupy_launch_on_the_legacy_default_stream_is_refused_by_name(cupy_module):
    module, _ = cupy_module
    sys.modules["cupy"].cuda.current = None  # CuPy on the legacy default stream, which CUDA cannot capture
    with pytest.raises(ValueError, match="legacy default stream.*cupy.cuda.Stream"):  # noqa: PT012
        with cw.Stream() as stream, cw.capture(stream), cw.weave(streams=4):
            launch(module, 0, True, add_launch(0x1000, 0x2000))


def test_a_woven_functions_replays_follow_cupys_stream_which_follows_them(cupy_module):
    _, handle = cupy_module
    cupys = _cupy_hooks._stream(handle)
    destination = cw.zeros(64, dtype=np.uint8)

    @cw.woven
    def fill(array):
        cw._core.backend_calls.fill_bytes(array.ptr, 64, 7, cupys)  # CuPy's work on its stream, captured
        return None

    with cw.Stream() as stream:
        fill(destination)  # captured, and replayed once
        stream.synchronize()
        np.testing.assert_array_equal(destination.to_numpy(), np.full(64, 7, np.uint8))
        cw.ops.fill(destination, 0)
        stream.synchronize()
        with Gate(cupys):  # CuPy's earlier work, still running: the replay waits for it
            fill(destination)
            assert not stream.query()
        stream.synchronize()
        np.testing.assert_array_equal(destination.to_numpy(), np.full(64, 7, np.uint8))
        with Gate(stream):  # the replay, still to run: CuPy's later work waits for it
            fill(destination)
            assert not cupys.query()
        cupys.synchronize()
        assert stream.query()

