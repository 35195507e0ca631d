"""Bad stream arguments and use after close."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw

# ---------------------------------------------------------------- checked before any device is touched


@pytest.mark.parametrize("bad", [1.5, -0.5, b"high", [0], object()])
def test_priority_of_wrong_type_is_type_error(bad):
    with pytest.raises(TypeError):
        cw.Stream(priority=bad)


@pytest.mark.parametrize("bad", ["urgent", "HIGHEST", ""])
def test_unknown_priority_name_is_value_error(bad):
    with pytest.raises(ValueError) as info:
        cw.Stream(priority=bad)
    msg = str(info.value)
    # the message should name the accepted names
    assert "high" in msg and "low" in msg


# ---------------------------------------------------------------- need the device's range (any backend)


@pytest.mark.parametrize("side", ["below_highest", "above_lowest"])
def test_int_priority_outside_the_range_is_value_error_naming_it(side):
    lowest, highest = cw.Device(0).properties.priority_range
    bad = highest - 1 if side == "below_highest" else lowest + 1
    with pytest.raises(ValueError) as info:
        cw.Stream(priority=bad)
    msg = str(info.value)
    assert str(lowest) in msg and str(highest) in msg, msg


def test_stream_on_missing_device_is_value_error():
    with pytest.raises(ValueError):
        cw.Stream(device=cw.device_count())


@pytest.mark.parametrize("bad", [object(), "stream", 1.5, None])
def test_from_external_rejects_non_streams(bad):
    with pytest.raises(TypeError):
        cw.Stream.from_external(bad)


@pytest.mark.parametrize("bad", [object(), 1.5, "event"])
def test_wait_on_a_non_event_is_type_error(stream, bad):
    with pytest.raises(TypeError):
        stream.wait(bad)


# ---------------------------------------------------------------- closed streams


def _with_block(s):
    with s:
        pass


USES_AFTER_CLOSE = {
    "query": lambda s: s.query(),
    "synchronize": lambda s: s.synchronize(),
    "record": lambda s: s.record(),
    "wait": lambda s: s.wait(cw.Event()),
    "launch_host_func": lambda s: s.launch_host_func(lambda: None),
    "with": _with_block,
    "spin": lambda s: cw.ops.spin(0.0001, stream=s),
    "empty": lambda s: cw.empty((4,), np.float32, stream=s),
    "to_device": lambda s: cw.to_device(np.zeros(4, np.float32), stream=s),
    "event.record": lambda s: cw.Event().record(s),
    "other.wait": lambda s: cw.default_stream().wait(s),
}


@pytest.mark.parametrize("use", list(USES_AFTER_CLOSE.values()), ids=list(USES_AFTER_CLOSE))
def test_use_after_close_is_value_error(use):
    s = cw.Stream()
    s.close()
    assert s.closed is True
    with pytest.raises(ValueError, match="closed"):
        use(s)
    # a failed `with` must not leave the closed stream current
    assert cw.current_stream() == cw.default_stream()
