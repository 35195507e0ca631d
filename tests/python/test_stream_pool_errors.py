"""Bad StreamPool arguments."""

from __future__ import annotations

import pytest

import cuweave as cw


@pytest.mark.parametrize("size", [0, -1])
def test_non_positive_size_is_value_error(size):
    with pytest.raises(ValueError):
        cw.StreamPool(size)


@pytest.mark.parametrize("size", [2.0, "4", None])
def test_non_int_size_is_type_error(size):
    with pytest.raises(TypeError):
        cw.StreamPool(size)


def test_unknown_priority_name_is_value_error():
    with pytest.raises(ValueError):
        cw.StreamPool(2, priority="urgent")


def test_negative_timeout_is_value_error():
    pool = cw.StreamPool(1)
    with pytest.raises(ValueError):
        pool.reserve(timeout=-1)


def test_stale_release_does_not_free_a_later_lease():
    pool = cw.StreamPool(1)
    lease = pool.reserve()
    lease.release()
    other = pool.reserve(timeout=0.5)
    try:
        try:
            lease.release()  # stale lease: may complain, must not release `other`
        except (ValueError, RuntimeError):
            pass
        assert pool.reserved_count == 1
        with pytest.raises(TimeoutError):
            pool.reserve(timeout=0.05)
    finally:
        other.release()
