"""Built-in kernels: element-wise arithmetic equals NumPy bit for bit, sums are deterministic and match
NumPy, and bad operands are refused with a clear error."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuweave as cw

TYPES = [np.float32, np.float64, np.int32, np.int64]


def _operands(dtype, size, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return [(rng.standard_normal(size) * 1e3).astype(dtype) for _ in range(2)]
    info = np.iinfo(dtype)
    return [rng.integers(info.min, info.max, size=size, dtype=dtype, endpoint=True) for _ in range(2)]


def _scalar(dtype, seed):
    rng = np.random.default_rng(seed + 1)
    return float(rng.standard_normal() * 10) if np.dtype(dtype).kind == "f" else int(rng.integers(-1000, 1000))


CASES = settings(max_examples=25, deadline=None)
CASE = given(dtype=st.sampled_from(TYPES), size=st.integers(0, 5000), seed=st.integers(0, 2**32 - 1))


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


# Element-wise operations of two operands: cuweave's and NumPy's (integers wrap around, as NumPy's do).
ELEMENTWISE = pytest.mark.parametrize(("operation", "numpy_operation"),
                                      [(cw.ops.add, np.add), (cw.ops.multiply, np.multiply)],
                                      ids=["add", "multiply"])


@ELEMENTWISE
@CASES
@CASE
def test_elementwise_of_two_arrays_equals_numpy(operation, numpy_operation, dtype, size, seed):
    x, y = _operands(dtype, size, seed)
    with cw.Stream() as s:
        _same(operation(cw.to_device(x), cw.to_device(y)).to_numpy(stream=s), numpy_operation(x, y))


@ELEMENTWISE
@CASES
@CASE
def test_elementwise_with_a_scalar_equals_numpy(operation, numpy_operation, dtype, size, seed):
    x, _ = _operands(dtype, size, seed)
    a = _scalar(dtype, seed)
    with cw.Stream() as s:
        _same(operation(cw.to_device(x), a).to_numpy(stream=s), numpy_operation(x, dtype(a)))


@CASES
@CASE
def test_scale_in_place_equals_numpy(dtype, size, seed):
    x, _ = _operands(dtype, size, seed)
    a = _scalar(dtype, seed)
    with cw.Stream() as s:
        d = cw.to_device(x)
        assert cw.ops.scale(d, a, out=d) is d
        _same(d.to_numpy(stream=s), dtype(a) * x)


@CASES
@CASE
def test_axpy_equals_numpy_without_fused_multiply_add(dtype, size, seed):
    x, y = _operands(dtype, size, seed)
    a = _scalar(dtype, seed)
    with cw.Stream() as s:
        dy = cw.to_device(y)
        assert cw.ops.axpy(a, cw.to_device(x), dy, out=dy) is dy
        _same(dy.to_numpy(stream=s), dtype(a) * x + y)


@CASES
@CASE
def test_sum_matches_numpy_and_repeats_exactly(dtype, size, seed):
    x, _ = _operands(dtype, size, seed)
    with cw.Stream() as s:
        d = cw.to_device(x)
        first = cw.ops.sum(d).to_numpy(stream=s)
        again = cw.ops.sum(d).to_numpy(stream=s)
    want = x.sum(dtype=np.int64 if np.dtype(dtype).kind == "i" else dtype)
    assert first.shape == () and first.dtype == want.dtype
    assert first.tobytes() == again.tobytes(), "the same input must give the same sum"
    if np.dtype(dtype).kind == "i":
        assert first == want
    else:  # float32 sums accumulate in float64, which is more exact than NumPy's float32 sum
        exact = x.astype(np.float64).sum()
        tolerance = 1e-3 if dtype is np.float32 else 1e-9
        assert abs(float(first) - exact) <= tolerance * max(1.0, np.abs(x).astype(np.float64).sum())


def test_operations_given_no_out_return_a_new_array_and_leave_their_operands_alone(stream):
    x = cw.to_device(np.arange(4, dtype=np.float32), stream=stream)
    y = cw.to_device(np.ones(4, np.float32), stream=stream)
    scaled = cw.ops.scale(x, 3.0, stream=stream)
    updated = cw.ops.axpy(2.0, x, y, stream=stream)
    added = cw.ops.add(x, y, stream=stream)
    multiplied = cw.ops.multiply(x, y, stream=stream)
    assert len({id(a) for a in (x, y, scaled, updated, added, multiplied)}) == 6
    assert all(a.stream == stream for a in (scaled, updated, added, multiplied))
    assert np.array_equal(scaled.to_numpy(), np.arange(4, dtype=np.float32) * 3)
    assert np.array_equal(updated.to_numpy(), np.arange(4, dtype=np.float32) * 2 + 1)
    assert np.array_equal(added.to_numpy(), np.arange(4, dtype=np.float32) + 1)
    assert np.array_equal(multiplied.to_numpy(), np.arange(4, dtype=np.float32))
    assert np.array_equal(x.to_numpy(), np.arange(4, dtype=np.float32))  # untouched
    assert np.array_equal(y.to_numpy(), np.ones(4, np.float32))


def test_out_parameter_and_aliasing(stream):
    x = np.arange(10, dtype=np.float32)
    with stream:
        dx = cw.to_device(x)
        out = cw.empty(10, np.float32)
        assert cw.ops.add(dx, dx, out=out) is out
        cw.ops.add(dx, 1.0, out=dx)  # in place
        assert np.array_equal(out.to_numpy(), x + x)
        assert np.array_equal(dx.to_numpy(), x + 1)
        assert cw.ops.multiply(dx, dx, out=dx) is dx  # in place, each element read before it is written
        assert np.array_equal(dx.to_numpy(), (x + 1) * (x + 1))


def test_copy_between_device_arrays(stream):
    x = np.arange(1000, dtype=np.int64)
    with stream:
        dst = cw.zeros(1000, np.int64)
        assert cw.ops.copy(dst, cw.to_device(x)) is dst
        assert np.array_equal(dst.to_numpy(), x)


def test_ops_are_ordered_on_their_stream():
    a, b = cw.Stream(), cw.Stream()
    d = cw.zeros(1 << 16, np.float32, stream=a)
    for _ in range(10):
        cw.ops.add(d, 1.0, out=d, stream=a)
    b.wait(a.record())
    total = cw.ops.sum(d, stream=b)
    assert total.to_numpy(stream=b) == 10.0 * (1 << 16)


def test_ops_given_a_stream_of_a_stream_subclass_run_on_it():
    # A subclass instance takes the general path from stream= to its Stream; the sanitizer would name a read
    # on `mine` of bytes an op queued elsewhere wrote.
    class Named(cw.Stream):
        pass

    mine = Named()
    with cw.sanitize():
        d = cw.zeros(1 << 10, np.float32, stream=mine)
        for _ in range(3):
            cw.ops.add(d, 1.0, out=d, stream=mine)
        assert cw.ops.sum(d, stream=mine).to_numpy(stream=mine) == 3.0 * (1 << 10)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: cw.ops.add(cw.zeros(3, np.int32), 1.5), ValueError, "whole numbers"),
        (lambda: cw.ops.add(cw.zeros(3, np.int32), 2**40), ValueError, "does not fit"),
        (lambda: cw.ops.add(cw.zeros(3, np.float32), cw.zeros(3, np.float64)), TypeError, "float64"),
        (lambda: cw.ops.add(cw.zeros(3, np.float32), cw.zeros(4, np.float32)), ValueError, "shape"),
        (lambda: cw.ops.multiply(cw.zeros(3, np.int64), 0.5), ValueError, "whole numbers"),
        (lambda: cw.ops.multiply(cw.zeros(3, np.float32), cw.zeros(3, np.int32)), TypeError, "int32"),
        (lambda: cw.ops.multiply(cw.zeros(3, np.float32), cw.zeros((3, 1), np.float32)), ValueError, "broadcast"),
        (lambda: cw.ops.scale(cw.zeros(3, np.uint8), 2), TypeError, "uint8"),
        (lambda: cw.ops.scale(cw.zeros(3, np.float32), "2"), TypeError, "real number"),
        (lambda: cw.ops.add(np.zeros(3), 1.0), TypeError, "to_device"),
        (lambda: cw.ops.copy(cw.zeros(3), cw.zeros(3, np.float32)), TypeError, "dtype"),
    ],
)
def test_bad_operands_are_refused(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_arguments_bind_as_for_a_python_function(stream):
    # The functions skip pybind11's dispatcher (Note [Hot functions without the dispatcher]): by position,
    # by keyword, by keywords built at run time, and the defaults, as a def with the signature would bind.
    x = cw.to_device(np.arange(4, dtype=np.float32), stream=stream)
    assert str(inspect.signature(cw.ops.add)) == "(x, y, *, out=None, stream=None)"
    assert str(inspect.signature(cw.ops.axpy)) == "(alpha, x, y, *, out=None, stream=None)"
    assert str(inspect.signature(cw.ops.copy)) == "(dst, src, *, stream=None)"
    assert "a new array when out is None" in cw.ops.scale.__doc__
    with stream:  # stream=None: the current stream
        assert np.array_equal(cw.ops.add(x, 1.0).to_numpy(), np.arange(1, 5, dtype=np.float32))
    options = {"out": x, "stream": stream}
    assert cw.ops.add(y=1.0, x=x, **options) is x
    assert cw.ops.scale(x, alpha=2.0, out=x, stream=stream) is x
    assert cw.ops.axpy(1.0, x, y=x, out=x, stream=stream) is x
    assert np.array_equal(x.to_numpy(stream=stream), np.arange(1, 5, dtype=np.float32) * 4)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda x: cw.ops.add(x), "add() missing required argument 'y'"),
        (lambda x: cw.ops.add(x, 1.0, x), "add() takes 2 positional arguments but 3 were given"),
        (lambda x: cw.ops.add(x, 1.0, output=x), "add() got an unexpected keyword argument 'output'"),
        (lambda x: cw.ops.add(x, 1.0, x=x), "add() got multiple values for argument 'x'"),
        (lambda x: cw.ops.axpy(1.0, x), "axpy() missing required argument 'y'"),
        (lambda x: cw.ops.copy(x, x, x), "copy() takes 2 positional arguments but 3 were given"),
        (lambda x: cw.ops.scale(x, 2.0, **{"out": x, "strem": None}), "scale() got an unexpected keyword argument"),
    ],
)
def test_calls_that_do_not_fit_the_signature_raise_type_error_naming_the_problem(call, words, stream):
    x = cw.zeros(4, np.float32, stream=stream)
    with pytest.raises(TypeError) as info:
        call(x)
    assert str(info.value).startswith(words), str(info.value)


class _ForeignArray:
    """A GPU array of another library, seen only through __cuda_array_interface__."""

    def __init__(self, array):
        self.__cuda_array_interface__ = array.__cuda_array_interface__


def test_foreign_arrays_are_written_and_a_cuweave_view_of_them_returned(stream):
    backing = cw.zeros(4, np.float32, stream=stream)
    stream.synchronize()
    foreign = _ForeignArray(backing)
    result = cw.ops.add(cw.to_device(np.ones(4, np.float32), stream=stream), 2.0, out=foreign, stream=stream)
    assert isinstance(result, cw.DeviceArray) and result is not backing
    assert result.ptr == backing.ptr
    assert np.array_equal(backing.to_numpy(stream=stream), np.full(4, 3.0, np.float32))
    assert cw.ops.scale(foreign, 2.0, out=foreign, stream=stream).ptr == backing.ptr
    assert np.array_equal(backing.to_numpy(stream=stream), np.full(4, 6.0, np.float32))
