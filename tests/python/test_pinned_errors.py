"""Bad pinned-memory arguments."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw


@pytest.mark.parametrize("shape", [(-3,), -3, (2, -1)])
def test_negative_shape_is_value_error(shape):
    with pytest.raises(ValueError):
        cw.pinned_empty(shape)


def test_registering_twice_is_value_error():
    a = np.zeros(1 << 16, np.uint8)
    with cw.pinned(a):
        with pytest.raises(ValueError):
            with cw.pinned(a):
                pass
        assert cw.is_pinned(a) is True  # the failed second attempt undid nothing
    assert cw.is_pinned(a) is False


def test_registering_a_non_contiguous_array_is_value_error():
    a = np.zeros(1 << 16, np.uint8)
    with pytest.raises(ValueError):
        with cw.pinned(a[::2]):
            pass


def test_registering_a_read_only_array_is_value_error():
    a = np.zeros(1 << 16, np.uint8)
    a.flags.writeable = False
    with pytest.raises(ValueError):
        with cw.pinned(a):
            pass


@pytest.mark.parametrize("bad", [[1, 2, 3], b"bytes", object()])
def test_registering_a_non_array_is_type_error(bad):
    with pytest.raises(TypeError):
        with cw.pinned(bad):
            pass


def test_pool_allocate_negative_is_value_error():
    with pytest.raises(ValueError):
        cw.pinned_pool().allocate(-1)
