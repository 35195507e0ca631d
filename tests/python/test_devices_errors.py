"""Bad device ordinals."""

from __future__ import annotations

import pytest

import cuweave as cw


@pytest.mark.parametrize("offset", [0, 1, 100])
def test_ordinal_past_the_end_is_value_error(offset):
    n = cw.device_count()
    with pytest.raises(ValueError) as info:
        cw.Device(n + offset)
    assert str(n + offset) in str(info.value)


def test_negative_ordinal_is_value_error():
    with pytest.raises(ValueError):
        cw.Device(-1)


@pytest.mark.parametrize("bad", ["0", 0.0, [0]])
def test_non_int_ordinal_is_type_error(bad):
    with pytest.raises(TypeError):
        cw.Device(bad)
