"""Bad device-array arguments and refused conversions."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import cuweave as cw

# ---------------------------------------------------------------- checked before any device is touched


@pytest.mark.parametrize("bad", ["abc", object(), None])
def test_to_device_of_a_non_array_is_type_error(bad):
    with pytest.raises(TypeError):
        cw.to_device(bad)


@pytest.mark.parametrize("shape", [(-1,), -1, (3, -2)])
def test_negative_shape_is_value_error(shape):
    with pytest.raises(ValueError):
        cw.empty(shape, np.float32)


def test_object_dtype_is_type_error():
    with pytest.raises(TypeError):
        cw.empty((2,), object)


@pytest.mark.parametrize("shape", [(-1,), (2, -5)])
def test_zeros_negative_shape_is_value_error(shape):
    with pytest.raises(ValueError):
        cw.zeros(shape, np.float32)


# ---------------------------------------------------------------- need a device (any backend)


def test_to_device_of_an_object_array_is_type_error():
    with pytest.raises(TypeError):
        cw.to_device(np.array([object(), object()]))


def test_np_asarray_refuses_and_names_to_numpy(stream):
    d = cw.zeros((4,), np.float32, stream=stream)
    with pytest.raises(TypeError, match=r"to_numpy"):
        np.asarray(d)
    with pytest.raises(TypeError, match=r"to_numpy"):
        np.array(d)


def test_to_numpy_takes_keywords_only_and_names_a_wrong_one(stream):
    # A raw method (Note [Hot methods without the dispatcher]) binding its arguments as a def would.
    d = cw.zeros(4, np.float32, stream=stream)
    assert str(inspect.signature(cw.DeviceArray.to_numpy)) == "(self, /, *, stream=None, out=None, pinned=None)"
    with pytest.raises(TypeError, match=r"to_numpy\(\) takes 0 positional arguments but 1 were given"):
        d.to_numpy(stream)
    with pytest.raises(TypeError, match=r"to_numpy\(\) got an unexpected keyword argument 'stram'"):
        d.to_numpy(stram=stream)
    with pytest.raises(TypeError, match="DeviceArray"):  # the descriptor checks self
        cw.DeviceArray.to_numpy(np.zeros(4))
    assert np.array_equal(d.to_numpy(**{"stream": stream, "pinned": False}), np.zeros(4, np.float32))


def test_to_numpy_out_of_wrong_shape_is_value_error(stream):
    d = cw.zeros((4, 4), np.float32, stream=stream)
    with pytest.raises(ValueError):
        d.to_numpy(out=np.empty((16,), np.float32))
    with pytest.raises(ValueError):
        d.to_numpy(out=np.empty((4, 5), np.float32))


def test_to_numpy_out_of_wrong_dtype_is_type_error(stream):
    d = cw.zeros((4,), np.float32, stream=stream)
    with pytest.raises(TypeError):
        d.to_numpy(out=np.empty((4,), np.float64))


def test_to_numpy_into_read_only_out_is_value_error(stream):
    d = cw.zeros((4,), np.float32, stream=stream)
    out = np.ones((4,), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError):
        d.to_numpy(out=out)
    assert np.all(out == 1)


def test_to_numpy_into_non_contiguous_out_is_value_error(stream):
    d = cw.zeros((4,), np.float32, stream=stream)
    with pytest.raises(ValueError, match=r"contiguous"):
        d.to_numpy(out=np.empty((8,), np.float32)[::2])


@pytest.mark.parametrize("bad", [object(), [1, 2, 3], "abc"])
def test_asarray_of_a_non_device_object_is_type_error(bad):
    with pytest.raises(TypeError):
        cw.asarray(bad)


def test_asarray_of_a_numpy_array_is_refused():
    # host memory is not a device array: the user must copy it explicitly
    with pytest.raises((TypeError, ValueError)):
        cw.asarray(np.zeros(4))


def test_from_dlpack_of_host_memory_is_refused():
    with pytest.raises((TypeError, ValueError)):
        cw.from_dlpack(np.zeros(4))


@pytest.mark.parametrize("bad", [np.zeros(4), [1.0], object()])
def test_fill_of_a_non_device_array_is_type_error(bad):
    with pytest.raises(TypeError):
        cw.ops.fill(bad, 1.0)


def test_spin_with_wrong_start_times_dtype_is_type_error(stream):
    ts = cw.zeros((2,), np.float32, stream=stream)
    with pytest.raises(TypeError):
        cw.ops.spin(0.0001, stream=stream, start_times=ts, slot=0)


def test_spin_slot_out_of_range_is_value_error(stream):
    ts = cw.zeros((2,), np.uint64, stream=stream)
    with pytest.raises(ValueError):
        cw.ops.spin(0.0001, stream=stream, start_times=ts, slot=2)


def test_spin_negative_seconds_is_value_error(stream):
    with pytest.raises(ValueError):
        cw.ops.spin(-1.0, stream=stream)
