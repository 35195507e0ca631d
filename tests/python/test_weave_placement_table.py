"""The placement table (cuweave/_torch_native/placement_table.h): the active weave as C functions for a hook built
against another library (PyTorch's dispatcher hook). Called here through ctypes, on every backend, as the hook
calls it: it places as cuweave.weave() places its own operations, keeps objects for a capture's graph, and keeps
a failure for the weave's end."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import cuweave as cw
from cuweave import _core
from _support import sanitizer_off

N = 4096


class Range(ctypes.Structure):
    _fields_ = [("begin", ctypes.c_size_t), ("bytes", ctypes.c_size_t), ("writes", ctypes.c_int)]


class Placed(ctypes.Structure):
    _fields_ = [("stream_handle", ctypes.c_size_t), ("device", ctypes.c_int), ("captured", ctypes.c_int),
                ("stream", ctypes.c_void_p)]


RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Table(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("placing_device", ctypes.CFUNCTYPE(ctypes.c_int)),
        ("place", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Range), ctypes.c_size_t, ctypes.POINTER(Placed))),
        ("allocated", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p)),
        ("keep", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, RELEASE)),
    ]


@pytest.fixture
def table() -> Table:
    capsule = _core.weave.placement_table()
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name = get_name(capsule)
    assert name == b"cuweave.placement_table"
    found = ctypes.cast(get_pointer(capsule, name), ctypes.POINTER(Table)).contents
    assert found.version == 1
    return found


def place(table: Table, *ranges: tuple[int, int, bool]) -> Placed:
    given = (Range * len(ranges))(*[Range(begin, size, int(writes)) for begin, size, writes in ranges])
    placed = Placed()
    assert table.place(given, len(ranges), ctypes.byref(placed)) == 0
    return placed


def span(array: cw.DeviceArray, writes: bool) -> tuple[int, int, bool]:
    return array.__cuda_array_interface__["data"][0], array.nbytes, writes


def handle(stream: cw.Stream) -> int:
    """The stream's handle as the table gives it: 0 for the legacy default stream."""
    return 0 if stream.kind == "legacy_default" else stream.__cuda_stream__()[1]


def test_only_a_weave_on_this_thread_with_the_sanitizer_off_and_no_capture_places(table):
    with sanitizer_off():  # CUWEAVE_SANITIZE turns it on for the process
        assert table.placing_device() == -1
        with cw.weave(streams=2):
            assert table.placing_device() == cw.current_stream().device
            assert _core.weave.placing_device() == table.placing_device()
            with cw.sanitize():  # the sanitizer's Python hooks see the library's operators then
                assert table.placing_device() == -1
        assert table.placing_device() == -1
        stream = cw.Stream()
        with stream, cw.capture(stream), cw.weave(streams=2):  # each operator placed once: by the Python hooks
            assert table.placing_device() == -1
        with cw.weave(streams=2):
            with cw.capture(stream):
                assert table.placing_device() == -1
            assert table.placing_device() == cw.current_stream().device


def test_operations_are_placed_by_their_bytes_as_the_weaves_own(table):
    x = cw.to_device(np.arange(N, dtype=np.float32))
    p, q = cw.empty(N, np.float32), cw.empty(N, np.float32)
    cw.synchronize()
    with cw.weave(streams=3) as w:
        first = place(table, span(x, False), span(p, True))  # reads x: the current stream
        second = place(table, span(x, False), span(q, True))  # reads x too, independent: another stream
        joined = place(table, span(p, False), span(q, False), span(x, True))  # reads both: waits for the other
        streams = w.streams
    assert first.stream_handle == handle(streams[0]) and first.device == streams[0].device
    assert second.stream_handle != first.stream_handle
    assert second.stream_handle in {handle(s) for s in streams[1:]}
    assert not first.captured and not second.captured and not joined.captured
    assert w.counts.operations == 3 and w.counts.waits >= 2
    _core.weave.raise_failed_placement()  # nothing failed


def test_an_allocation_for_the_placed_operation_makes_its_users_elsewhere_wait(table):
    x = cw.to_device(np.arange(N, dtype=np.float32))
    made = cw.empty(N, np.float32)  # memory another library's allocator hands out for the next operation
    cw.synchronize()
    with cw.weave(streams=3) as w:
        reading = place(table, span(x, False))
        other = place(table, span(x, False))  # another stream: only reads x
        assert table.allocated(*span(made, True)[:2], other.stream) == 0
        user = place(table, span(made, False))  # the new memory's user follows the stream it was made on
    assert user.stream_handle == other.stream_handle != reading.stream_handle
    assert w.counts.operations >= 3


class Releases:
    """A release callback for keep(), and the objects it released so far."""

    def __init__(self) -> None:
        self.released: list[int] = []
        self.callback = RELEASE(self.released.append)


def test_a_kept_object_lives_as_long_as_the_captures_graph(table):
    releases = Releases()
    released = releases.released
    x = cw.to_device(np.arange(N, dtype=np.float32))
    stream = cw.Stream()
    cw.synchronize()
    with stream, cw.capture(stream) as capture, cw.weave(streams=2):
        placed = place(table, span(x, True))
        assert placed.captured
        assert table.keep(placed.stream, 1234, releases.callback) == 0
    assert released == []
    graph = capture.graph
    graph.replay(stream=stream)
    stream.synchronize()
    del graph, capture
    for _ in range(100):
        cw.collect()
        if released:
            break
    assert released == [1234]


def test_a_failure_is_kept_for_the_weaves_end_and_raised_once(table):
    releases = Releases()
    released = releases.released
    x = cw.to_device(np.arange(N, dtype=np.float32))
    cw.synchronize()
    with pytest.raises(ValueError, match="no capture"):
        with cw.weave(streams=2):  # with PyTorch's C++ hook attached, the block's end raises it
            placed = place(table, span(x, True))
            assert not placed.captured
            assert table.keep(placed.stream, 99, releases.callback) == -1  # no capture keeps it: released at once
            assert released == [99]
        _core.weave.raise_failed_placement()
    _core.weave.raise_failed_placement()  # raised once
    placed = Placed()
    assert table.place((Range * 1)(Range(0, 4, 0)), 1, ctypes.byref(placed)) == -1  # outside a weave
    with pytest.raises(ValueError, match="no weave is active"):
        _core.weave.raise_failed_placement()
