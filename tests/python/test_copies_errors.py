"""Refused copies: host to host, mismatches, non-contiguous and read-only buffers."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw

# ---------------------------------------------------------------- checked before any device is touched


def test_host_to_host_is_type_error_naming_it():
    with pytest.raises(TypeError) as info:
        cw.copy_async(np.zeros(3), np.zeros(3))
    assert "host" in str(info.value).lower(), str(info.value)


@pytest.mark.parametrize("bad", [[1.0, 2.0], "abc", None, object()])
def test_non_array_arguments_are_type_errors(bad):
    with pytest.raises(TypeError):
        cw.copy_async(bad, np.zeros(2))
    with pytest.raises(TypeError):
        cw.copy_async(np.zeros(2), bad)


# ---------------------------------------------------------------- need a device (any backend)


@pytest.mark.parametrize("direction", ["h2d", "d2h", "d2d"])
def test_mismatched_shape_is_value_error(stream, direction):
    d4 = cw.zeros((4,), np.float32, stream=stream)
    d5 = cw.zeros((5,), np.float32, stream=stream)
    h5 = np.zeros((5,), np.float32)
    dst, src = {"h2d": (d4, h5), "d2h": (h5, d4), "d2d": (d4, d5)}[direction]
    with pytest.raises(ValueError):
        cw.copy_async(dst, src, stream=stream)


def test_same_size_different_shape_is_value_error(stream):
    d = cw.zeros((2, 6), np.float32, stream=stream)
    with pytest.raises(ValueError):
        cw.copy_async(d, np.zeros((3, 4), np.float32), stream=stream)


@pytest.mark.parametrize("direction", ["h2d", "d2h", "d2d"])
def test_mismatched_dtype_is_type_error(stream, direction):
    df = cw.zeros((4,), np.float32, stream=stream)
    di = cw.zeros((4,), np.int32, stream=stream)
    hi = np.zeros((4,), np.int32)
    dst, src = {"h2d": (df, hi), "d2h": (hi, df), "d2d": (df, di)}[direction]
    with pytest.raises(TypeError):
        cw.copy_async(dst, src, stream=stream)


def test_non_contiguous_host_source_names_ascontiguousarray(stream):
    a = np.arange(20, dtype=np.float32)
    d = cw.empty((10,), np.float32, stream=stream)
    with pytest.raises(ValueError, match=r"ascontiguousarray"):
        cw.copy_async(d, a[::2], stream=stream)


def test_non_contiguous_host_destination_names_ascontiguousarray(stream):
    out = np.zeros(20, dtype=np.float32)
    d = cw.zeros((10,), np.float32, stream=stream)
    with pytest.raises(ValueError, match=r"ascontiguousarray"):
        cw.copy_async(out[::2], d, stream=stream)


def test_fortran_ordered_host_array_is_refused(stream):
    a = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    d = cw.empty((3, 4), np.float64, stream=stream)
    with pytest.raises(ValueError, match=r"ascontiguousarray"):
        cw.copy_async(d, a, stream=stream)


def test_read_only_host_destination_is_value_error(stream):
    d = cw.zeros((4,), np.float32, stream=stream)
    out = np.ones((4,), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError):
        cw.copy_async(out, d, stream=stream)
    assert np.all(out == 1)


def test_read_only_host_source_is_fine(stream):
    src = np.arange(4, dtype=np.float32)
    src.flags.writeable = False
    d = cw.empty((4,), np.float32, stream=stream)
    cw.copy_async(d, src, stream=stream).wait()
    assert np.array_equal(d.to_numpy(stream=stream), src)


def test_copy_on_a_closed_stream_is_value_error():
    s = cw.Stream()
    d = cw.zeros((4,), np.float32, stream=s)
    s.synchronize()
    s.close()
    with pytest.raises(ValueError, match="closed"):
        cw.copy_async(d, np.zeros(4, np.float32), stream=s)


def test_copy_on_a_non_stream_is_type_error(stream):
    d = cw.zeros((4,), np.float32, stream=stream)
    with pytest.raises(TypeError):
        cw.copy_async(d, np.zeros(4, np.float32), stream="s")
