"""A raising callback surfaces as CallbackError at the next synchronize; bad arguments."""

from __future__ import annotations

import pytest

import cuweave as cw


class Boom(Exception):
    pass


def _raise(msg):
    raise Boom(msg)


def test_callback_exception_surfaces_at_synchronize_with_cause(stream):
    after = []
    cw.ops.spin(0.01, stream=stream)
    stream.launch_host_func(_raise, "bad callback")
    stream.launch_host_func(after.append, "later")
    with pytest.raises(cw.CallbackError) as info:
        stream.synchronize()
    err = info.value
    assert isinstance(err, cw.CuweaveError)
    assert isinstance(err.__cause__, Boom)
    assert str(err.__cause__) == "bad callback"
    assert after == ["later"], "callbacks after the failing one must still run"
    # reported once: the stream is usable again
    stream.synchronize()
    cw.ops.spin(0.001, stream=stream)
    stream.synchronize()


def test_callback_error_is_reported_on_its_own_stream_only(stream):
    other = cw.Stream()
    try:
        stream.launch_host_func(_raise, "here")
        other.launch_host_func(lambda: None)
        other.synchronize()  # must not raise: the failure belongs to `stream`
        with pytest.raises(cw.CallbackError):
            stream.synchronize()
    finally:
        other.close()


def test_callback_error_message_names_the_callback(stream):
    def my_named_callback():
        raise ValueError("inner detail")

    stream.launch_host_func(my_named_callback)
    with pytest.raises(cw.CallbackError) as info:
        stream.synchronize()
    assert isinstance(info.value.__cause__, ValueError)
    assert "my_named_callback" in str(info.value) or "inner detail" in str(info.value)


# The second error may be reported through sys.unraisablehook; that is allowed here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_first_of_several_callback_errors_is_reported(stream):
    stream.launch_host_func(_raise, "first")
    stream.launch_host_func(_raise, "second")
    with pytest.raises(cw.CallbackError) as info:
        stream.synchronize()
    assert str(info.value.__cause__) == "first"
    try:  # whether the second is reported later is not specified; drain it
        stream.synchronize()
    except cw.CallbackError:
        pass


@pytest.mark.parametrize("bad", [None, 3, "print"])
def test_non_callable_is_type_error(stream, bad):
    with pytest.raises(TypeError):
        stream.launch_host_func(bad)
