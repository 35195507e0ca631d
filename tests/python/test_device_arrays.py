"""cw.DeviceArray: construction, attributes, fill, __cuda_array_interface__, to_numpy."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


@pytest.mark.parametrize(
    "shape,dtype",
    [((5,), np.float32), ((3, 4), np.int16), ((2, 3, 4), np.complex64), ((0,), np.float64), ((4, 0), np.uint8)],
)
def test_empty_attributes(stream, shape, dtype):
    d = cw.empty(shape, dtype, stream=stream)
    assert isinstance(d, cw.DeviceArray)
    assert d.shape == shape
    assert d.dtype == np.dtype(dtype)
    assert isinstance(d.dtype, np.dtype)
    assert d.ndim == len(shape)
    assert d.size == int(np.prod(shape))
    assert d.nbytes == d.size * np.dtype(dtype).itemsize
    assert d.strides == _c_strides(shape, np.dtype(dtype).itemsize)
    assert len(d) == shape[0]
    assert d.device == 0
    assert d.stream == stream
    assert d.readonly is False
    assert isinstance(d.ptr, int)
    if d.size:
        assert d.ptr != 0


def test_defaults_and_int_shape(stream):
    d = cw.empty(6, stream=stream)
    assert d.shape == (6,)
    assert d.dtype == np.float64


@pytest.mark.parametrize("dtype", ["float32", np.float32, np.dtype("float32"), "<f4"])
def test_dtype_spellings(stream, dtype):
    assert cw.empty((2,), dtype, stream=stream).dtype == np.float32


def test_repr_mentions_shape_and_dtype(stream):
    text = repr(cw.empty((3, 7), np.int32, stream=stream))
    assert "DeviceArray" in text
    assert "(3, 7)" in text
    assert "int32" in text


def test_repr_shows_the_values_read_after_the_work_that_writes_them(stream):
    written = cw.arange(6, dtype=np.float32, stream=stream)
    cw.ops.spin(0.05, stream=stream)
    cw.ops.scale(written, 2.0, out=written, stream=stream)
    text = repr(written)  # on the current stream, after the scale
    assert text.startswith("cuweave.DeviceArray([ 0.,  2.,  4.,  6.,  8., 10.], shape=(6,), dtype=float32, device=0, "
                           "stream="), text
    named = cw.zeros(2, np.int32, stream=cw.Stream(name="compute"))
    assert repr(named) == "cuweave.DeviceArray([0, 0], shape=(2,), dtype=int32, device=0, stream='compute')"
    big = repr(cw.arange(5000, dtype=np.int64, stream=stream))
    assert big.startswith("cuweave.DeviceArray([   0,    1,    2, ..., 4997, 4998, 4999], shape=(5000,), dtype=int64")


def test_repr_inside_a_capture_says_the_values_are_not_read(stream):
    x = cw.zeros(4, np.float32, stream=stream)
    with cw.capture(stream):
        with stream:
            text = repr(x)
    assert "values not read inside a capture" in text and "shape=(4,)" in text


def test_a_host_read_of_an_array_its_capturing_stream_writes_is_refused_and_the_capture_stays_valid(stream):
    # The write is captured, not run: no read can follow it. Refused before anything is queued, so the reading
    # stream does not join the capture by waiting for the capturing one.
    x = cw.zeros(4, np.float32, stream=stream)
    reader = cw.Stream()
    with cw.capture(stream, mode="relaxed") as cap:  # relaxed: waiting on another stream is allowed meanwhile
        cw.ops.fill(x, 3.0, stream=stream)
        with reader:  # the current stream is not capturing; the array's stream is
            with pytest.raises(cw.CaptureError, match="a host read of an array whose stream is capturing"):
                x.to_numpy()
            assert "values not read" in repr(x)
    cap.graph.replay(stream)
    assert np.all(x.to_numpy() == 3.0)


def test_item_float_and_int_read_one_element_after_its_writer(stream):
    one = cw.zeros(1, np.float64, stream=stream)
    cw.ops.spin(0.05, stream=stream)
    cw.ops.fill(one, 2.5, stream=stream)
    assert one.item() == 2.5 and type(one.item()) is float
    assert float(one) == 2.5 and int(cw.full(1, 7, stream=stream)) == 7
    total = cw.ops.sum(cw.ones(10, np.int64, stream=stream), stream=stream)
    assert total.item() == 10 and type(total.item()) is int
    with pytest.raises(TypeError, match="one element; this one has 3"):
        float(cw.zeros(3, stream=stream))


def test_live_arrays_do_not_overlap(stream):
    arrays = [cw.empty((1000,), np.float32, stream=stream) for _ in range(16)]
    spans = sorted((a.ptr, a.ptr + a.nbytes) for a in arrays)
    for (_, end), (start, _) in zip(spans[:-1], spans[1:], strict=True):
        assert end <= start


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16, np.float32, np.float64, np.complex64])
def test_zeros_are_zero_even_on_reused_memory(stream, dtype):
    n = (1 << 16) + 3
    dirty = cw.empty((n,), dtype, stream=stream)
    cw.ops.fill(dirty, 7, stream=stream)
    stream.synchronize()
    del dirty
    cw.collect()
    z = cw.zeros((n,), dtype, stream=stream)
    out = z.to_numpy(stream=stream)
    assert out.dtype == np.dtype(dtype)
    assert not out.view(np.uint8).any()


@pytest.mark.parametrize(
    "dtype,value",
    [
        (np.float32, 2.5),
        (np.float64, -1.0e300),
        (np.float16, 1.5),
        (np.int32, -7),
        (np.int64, 2**40 + 1),
        (np.uint8, 255),
        (np.bool_, True),
        (np.int16, 7.0),  # an integral float is cast to the integer dtype
    ],
)
def test_fill_casts_the_value_to_the_dtype(stream, dtype, value):
    d = cw.empty((1001,), dtype, stream=stream)
    cw.ops.fill(d, value, stream=stream)
    expected = np.full(1001, np.array(value).astype(dtype), dtype=dtype)
    assert np.array_equal(d.to_numpy(stream=stream), expected)


def test_fill_returns_the_array_it_wrote(stream):
    d = cw.empty((16,), np.int32, stream=stream)
    assert cw.ops.fill(d, 3, stream=stream) is d
    assert np.array_equal(d.to_numpy(stream=stream), np.full(16, 3, np.int32))


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda s: cw.ones((3, 4), stream=s), np.ones((3, 4))),
        (lambda s: cw.ones(5, np.int32, stream=s), np.ones(5, np.int32)),
        (lambda s: cw.full((2, 3), 2.5, stream=s), np.full((2, 3), 2.5)),
        (lambda s: cw.full(4, 7, stream=s), np.full(4, 7)),  # NumPy's dtype for the value: int64
        (lambda s: cw.full(4, 7, np.float32, stream=s), np.full(4, 7, np.float32)),
        (lambda s: cw.arange(10, stream=s), np.arange(10)),
        (lambda s: cw.arange(1.0, 2.0, 0.25, stream=s), np.arange(1.0, 2.0, 0.25)),
        (lambda s: cw.arange(0, 9, 3, np.int32, stream=s), np.arange(0, 9, 3, np.int32)),
    ],
)
def test_creation_functions_match_numpys(stream, make, expected):
    made = make(stream)
    assert made.shape == expected.shape and made.dtype == expected.dtype and made.stream == stream
    assert np.array_equal(made.to_numpy(stream=stream), expected)


def test_full_refuses_a_value_its_integer_dtype_cannot_hold(stream):
    with pytest.raises(ValueError, match="does not fit"):
        cw.full(3, 2.5, np.int32, stream=stream)


def test_like_functions_take_the_prototypes_shape_and_dtype(stream):
    prototype = cw.arange(12, dtype=np.float32, stream=stream)
    zeros = cw.zeros_like(prototype, stream=stream)
    assert (zeros.shape, zeros.dtype) == ((12,), np.float32)
    assert np.array_equal(zeros.to_numpy(stream=stream), np.zeros(12, np.float32))
    empty = cw.empty_like(prototype, dtype=np.int64, shape=(3, 4), stream=stream)
    assert (empty.shape, empty.dtype, empty.stream) == ((3, 4), np.int64, stream)
    with pytest.raises(TypeError, match="to_device"):
        cw.zeros_like(np.zeros(3))  # a host array: cw.to_device makes a device array of it


def test_fill_of_a_multidimensional_array(stream):
    d = cw.empty((7, 9, 3), np.float32, stream=stream)
    cw.ops.fill(d, 1.25, stream=stream)
    assert np.array_equal(d.to_numpy(stream=stream), np.full((7, 9, 3), 1.25, np.float32))


def test_to_device_keeps_shape_dtype_and_values(stream, rng):
    host = rng.standard_normal((17, 33)).astype(np.float32)
    d = cw.to_device(host, stream=stream)
    assert d.shape == host.shape
    assert d.dtype == host.dtype
    assert d.stream == stream
    back = d.to_numpy(stream=stream)
    assert type(back) is np.ndarray
    assert back.shape == host.shape
    assert np.array_equal(back, host)


def test_to_numpy_without_stream_inside_with_stream_sees_that_streams_work(stream):
    d = cw.zeros((1 << 16,), np.float32, stream=stream)
    cw.ops.spin(0.1, stream=stream)
    cw.ops.fill(d, 5.0, stream=stream)
    with stream:
        assert np.all(d.to_numpy() == 5)


def _written_after_a_spin(writer) -> cw.DeviceArray:
    """An array whose last write (7.0) is queued on `writer` behind a 0.1 s spin: a read not ordered after the
    write copies the zeros."""
    x = cw.zeros((1 << 16,), np.float32, stream=writer)
    cw.ops.spin(0.1, stream=writer)
    cw.ops.fill(x, 7.0, stream=writer)
    return x


def _host_reads_see_the_writes(writer) -> None:
    x = cw.to_device(np.arange(65536, dtype=np.float32), stream=writer)
    y = cw.ops.add(x, 1.0, stream=writer)
    assert np.array_equal(y.to_numpy()[:3], [1.0, 2.0, 3.0])
    assert np.all(_written_after_a_spin(writer).to_numpy() == 7.0)


def test_a_host_read_naming_no_stream_follows_the_write_queued_on_another_stream(stream):
    # The current stream is the legacy default stream, which does not wait for a non-blocking stream by itself.
    _host_reads_see_the_writes(stream)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_host_read_naming_no_stream_follows_the_write_in_every_explored_schedule(stream, seed):
    if cw.backend() != "sim":
        pytest.skip("schedules are explored by the simulator")
    with cw.sim.explore(seed):
        _host_reads_see_the_writes(stream)


def test_a_host_read_on_a_named_stream_is_ordered_by_that_stream_alone(stream, other_stream):
    with cw.sanitize():
        x = _written_after_a_spin(stream)
        with pytest.raises(cw.RaceError):
            x.to_numpy(stream=other_stream)  # the caller's stream, as given: nothing waits for the fill
        assert np.all(x.to_numpy() == 7.0)  # clean: ordered after the fill


def test_to_numpy_into_out(stream, rng):
    host = rng.integers(-1000, 1000, size=(64, 3), dtype=np.int64)
    d = cw.to_device(host, stream=stream)
    out = np.empty_like(host)
    result = d.to_numpy(stream=stream, out=out)
    assert np.array_equal(out, host)
    assert np.shares_memory(result, out)


# --------------------------------------------------------------------------- __cuda_array_interface__


@pytest.mark.parametrize(
    "shape,dtype,typestr",
    [((3, 4), np.float32, "<f4"), ((5,), np.uint8, "|u1"), ((2, 2), np.complex128, "<c16"), ((6,), np.bool_, "|b1")],
)
def test_cuda_array_interface(stream, shape, dtype, typestr):
    d = cw.empty(shape, dtype, stream=stream)
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3
    assert cai["shape"] == shape
    assert cai["typestr"] == typestr
    assert cai["data"] == (d.ptr, False)
    assert cai.get("strides") is None
    assert isinstance(cai["stream"], int)
    assert cai["stream"] == d.stream.handle
    assert cai["stream"] != 0  # 0 is disallowed by the protocol


def test_dlpack_device():
    d = cw.empty((4,), np.float32)
    assert d.__dlpack_device__() == (2, 0)


class CaiOnly:
    """A stranger's device buffer that speaks only __cuda_array_interface__."""

    def __init__(self, cai):
        self._cai = cai

    @property
    def __cuda_array_interface__(self):
        return self._cai


def test_asarray_of_a_cai_object_is_a_zero_copy_view(stream, rng):
    host = rng.standard_normal(1000)
    owner = cw.to_device(host, stream=stream)
    stream.synchronize()
    cai = dict(owner.__cuda_array_interface__)
    cai["stream"] = None  # no stream to synchronize with
    view = cw.asarray(CaiOnly(cai))
    assert view.ptr == owner.ptr
    assert view.shape == owner.shape
    assert view.dtype == owner.dtype
    cw.ops.fill(owner, 9.0, stream=stream)
    stream.synchronize()
    assert np.all(view.to_numpy(stream=stream) == 9)  # same memory


def test_asarray_respects_a_read_only_cai(stream):
    owner = cw.zeros((10,), np.float32, stream=stream)
    stream.synchronize()
    cai = dict(owner.__cuda_array_interface__)
    cai["data"] = (owner.ptr, True)
    cai["stream"] = None
    view = cw.asarray(CaiOnly(cai))
    assert view.readonly is True
    with pytest.raises(ValueError):
        cw.copy_async(view, np.ones(10, np.float32), stream=stream)


def test_asarray_of_a_device_array_is_that_memory(stream):
    d = cw.zeros((8,), np.int32, stream=stream)
    a = cw.asarray(d)
    assert a.ptr == d.ptr
    assert a.shape == d.shape and a.dtype == d.dtype


def test_from_dlpack_of_a_device_array_round_trips(stream, rng):
    host = rng.integers(0, 100, size=(4, 5), dtype=np.int32)
    d = cw.to_device(host, stream=stream)
    stream.synchronize()
    e = cw.from_dlpack(d)
    assert e.ptr == d.ptr
    assert e.shape == (4, 5)
    assert np.array_equal(e.to_numpy(stream=stream), host)
