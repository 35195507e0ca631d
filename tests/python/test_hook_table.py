"""The hook table (cuweave/_torch_native/hook_table.h): the active weave and the stream-race sanitizer as C functions
for a hook built against another library (PyTorch's dispatcher hook). Called here through ctypes, which releases the
GIL as PyTorch does, on every backend, as the hook calls it: it places as cuweave.weave() places its own operations,
checks as the sanitizer checks another library's work, keeps a race it finds until the library's call ends and raises
it once that has returned to Python, and keeps any other failure for the block's end."""

from __future__ import annotations

import ctypes
import functools
import gc
import inspect
import operator
import threading
import warnings

import numpy as np
import pytest

import cuweave as cw
from cuweave import _core
from _support import sanitizer_off

N = 4096
PLACES, CHECKS = 1, 2  # CUWEAVE_HOOK_PLACES, CUWEAVE_HOOK_CHECKS


class Range(ctypes.Structure):
    _fields_ = [("begin", ctypes.c_size_t), ("bytes", ctypes.c_size_t), ("writes", ctypes.c_int)]


class Placed(ctypes.Structure):
    _fields_ = [("stream_handle", ctypes.c_size_t), ("device", ctypes.c_int), ("stream", ctypes.c_void_p)]


class StreamRef(ctypes.Structure):
    _fields_ = [("placed", ctypes.c_void_p), ("handle", ctypes.c_size_t), ("device", ctypes.c_int),
                ("lasting", ctypes.c_int)]


RANGES = ctypes.POINTER(Range)
STREAM = ctypes.POINTER(StreamRef)


class Table(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("jobs", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))),
        ("place", ctypes.CFUNCTYPE(ctypes.c_int, RANGES, ctypes.c_size_t, ctypes.POINTER(Placed))),
        ("allocated", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p)),
        ("check", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, RANGES, ctypes.c_size_t, STREAM, ctypes.c_ulong)),
        ("handed_out", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, STREAM, ctypes.c_ulong)),
        ("stream_recorded", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, STREAM)),
        ("check_host", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, RANGES, ctypes.c_size_t, ctypes.c_ulong)),
        ("host_handed_out", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t)),
        ("raise_found", ctypes.CFUNCTYPE(ctypes.c_int)),
        ("hold_raised", ctypes.CFUNCTYPE(ctypes.c_int)),
        ("stream_synchronized", ctypes.CFUNCTYPE(ctypes.c_int, STREAM)),
    ]


@pytest.fixture
def table() -> Table:
    capsule = _core.hook_table()
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name = get_name(capsule)
    assert name == b"cuweave.hook_table"
    found = ctypes.cast(get_pointer(capsule, name), ctypes.POINTER(Table)).contents
    assert found.version == 5
    return found


def ranges(*given: tuple[int, int, bool]):
    return (Range * len(given))(*[Range(begin, size, int(writes)) for begin, size, writes in given])


def place(table: Table, *given: tuple[int, int, bool]) -> Placed:
    placed = Placed()
    assert table.place(ranges(*given), len(given), ctypes.byref(placed)) == 0
    return placed


def jobs(table: Table) -> tuple[int, int]:
    device = ctypes.c_int(-1)
    return table.jobs(ctypes.byref(device)), device.value


def span(array: cw.DeviceArray, writes: bool) -> tuple[int, int, bool]:
    return array.__cuda_array_interface__["data"][0], array.nbytes, writes


def handle(stream: cw.Stream) -> int:
    """The stream's handle as the table gives it: 0 for the legacy default stream."""
    return 0 if stream.kind == "legacy_default" else stream.__cuda_stream__()[1]


def to_race_on(library_streams: list[int]) -> tuple[cw.DeviceArray, cw.Stream, StreamRef]:
    """An array, a stream of cuweave's to read it on, and a stream of the library's to write it on."""
    x = cw.zeros(N, np.float32)
    reader = cw.Stream()
    cw.synchronize()
    return x, reader, library(library_streams[0])


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def assert_names(race: tuple, later: str, later_line: int, sum_line: int) -> None:
    """The race is between the ops.sum at `sum_line` and `later` at `later_line`."""
    (earlier_access, later_access, _, _) = race
    assert earlier_access[0] == "ops.sum" and earlier_access[3][1] == sum_line
    assert later_access[0] == later and later_access[3][1] == later_line


def test_the_hook_places_inside_a_weave_without_a_capture_and_checks_while_the_sanitizer_is_on(table):
    with sanitizer_off():  # CUWEAVE_SANITIZE turns it on for the process
        assert jobs(table)[0] == 0
        with cw.weave(streams=2):
            assert jobs(table) == (PLACES, cw.current_stream().device)
            assert _core.weave.placing_device() == cw.current_stream().device
            with cw.sanitize():
                assert jobs(table) == (PLACES | CHECKS, cw.current_stream().device)
        with cw.sanitize():
            assert jobs(table)[0] == CHECKS
        assert jobs(table)[0] == 0 and _core.weave.placing_device() == -1
        stream = cw.Stream()
        with stream, cw.capture(stream), cw.weave(streams=2):  # each operator placed once: by the Python hooks
            assert jobs(table)[0] == 0 and _core.hook_steps_aside()
        with cw.weave(streams=2):
            with cw.capture(stream):
                assert jobs(table)[0] == 0
            assert jobs(table)[0] == PLACES and not _core.hook_steps_aside()


def test_operations_are_placed_by_their_bytes_as_the_weaves_own(table):
    x = cw.to_device(np.arange(N, dtype=np.float32))
    p, q = cw.empty(N, np.float32), cw.empty(N, np.float32)
    cw.synchronize()
    with cw.weave(streams=3) as w:
        first = place(table, span(x, False), span(p, True))  # reads x: the current stream
        second = place(table, span(x, False), span(q, True))  # reads x too, independent: another stream
        place(table, span(p, False), span(q, False), span(x, True))  # reads both: waits for the other
        streams = w.streams
    assert first.stream_handle == handle(streams[0]) and first.device == streams[0].device
    assert second.stream_handle != first.stream_handle
    assert second.stream_handle in {handle(s) for s in streams[1:]}
    assert w.counts.operations == 3 and w.counts.waits >= 2
    _core.raise_hook_failure()  # nothing failed


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


@pytest.fixture
def library_streams():
    """Two streams another library made, as their CUDA handles (adopted by the table at each call: not lasting)."""
    handles = [_core.backend_calls.create_stream(0) for _ in range(2)]
    yield handles
    cw.synchronize()
    gc.collect()  # a RaceError's traceback may keep a frame holding an adoption
    for made in handles:
        _core.backend_calls.destroy_stream(made)


def library(made: int, lasting: bool = False) -> StreamRef:
    return StreamRef(None, made, cw.current_stream().device, int(lasting))


def test_a_race_the_check_finds_is_kept_until_the_call_ends_and_raised_as_it_returns_naming_both_call_sites(
        table, library_streams):
    x, reader, on = to_race_on(library_streams)
    with sanitizer_off(), cw.sanitize():
        cw.ops.sum(x, stream=reader); sum_line = here()  # noqa: E702
        with pytest.raises(cw.RaceError) as info:
            check_line = here() + 1
            found = table.check(b"torch add_.Tensor", ranges(span(x, True)), 1, ctypes.byref(on), 0)
            # Kept, not raised yet: Python code the library runs before its call ends would meet it.
            assert found == 1
            for _ in range(1000):
                pass
            table.raise_found()  # the library's call ends
            pytest.fail("the race was not raised as the call returned")
        # What the check reads is checked for good: the same write again is ordered after the first.
        assert table.check(b"torch add_.Tensor", ranges(span(x, True)), 1, ctypes.byref(on), 0) == 0
    assert_names(info.value.races[0], "torch add_.Tensor", check_line, sum_line)
    (_, later, begin, end) = info.value.races[0]
    assert later[2] == "write" and (begin, end - begin) == span(x, True)[:2]
    _core.raise_hook_failure()  # a race is not a failure of the hook


def test_a_call_site_the_thread_met_before_names_the_race_as_a_new_one_does(table):
    # The first check from a line reads its call site under the GIL; the later ones from this thread's frames without
    # it (the legacy default stream needs no adoption either).
    x = cw.zeros(N, np.float32)
    reader = cw.Stream()
    cw.synchronize()
    legacy = StreamRef(None, 0, cw.current_stream().device, 1)
    found = []
    with sanitizer_off(), cw.sanitize():
        for step in range(4):
            if step == 3:
                reader.wait(cw.default_stream().record())  # after the earlier writes
                cw.ops.sum(x, stream=reader); sum_line = here()  # noqa: E702
            try:
                table.check(b"torch fill_.Scalar", ranges(span(x, True)), 1, ctypes.byref(legacy), 0); check_line = here()  # noqa: E501, E702
                table.raise_found()
            except cw.RaceError as error:
                found.append((step, error))
    assert [step for step, _ in found] == [3]
    assert_names(found[0][1].races[0], "torch fill_.Scalar", check_line, sum_line)


def test_a_race_found_on_a_thread_working_for_another_is_raised_in_that_one(table, library_streams):
    x, reader, on = to_race_on(library_streams)
    answers = []
    waiting = threading.get_ident()  # as a backward() call waits for autograd's thread

    def work() -> None:
        answers.append(table.check(b"torch mul_.Tensor", ranges(span(x, True)), 1, ctypes.byref(on), waiting))
        answers.append(table.raise_found())

    with sanitizer_off(), cw.sanitize():
        cw.ops.sum(x, stream=reader)
        worker = threading.Thread(target=work)
        with pytest.raises(cw.RaceError) as info:
            worker.start()
            worker.join()
            for _ in range(1000):  # raised at the thread's next check for pending work (not always join's own)
                pass
            pytest.fail("the race was not raised in the waiting thread")
    worker.join()
    assert answers == [1, 0]  # the working thread went on
    assert info.value.races[0][1][0] == "torch mul_.Tensor"


@pytest.mark.parametrize("warnings_are_errors", [False, True])
def test_on_race_warn_warns_in_the_call_and_a_warning_made_an_error_is_raised_as_it_returns(table, library_streams,
                                                                                          warnings_are_errors):
    x, reader, on = to_race_on(library_streams)
    with sanitizer_off(), cw.sanitize(on_race="warn"), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("error" if warnings_are_errors else "always", cw.RaceWarning)
        cw.ops.sum(x, stream=reader)
        if warnings_are_errors:
            with pytest.raises(cw.RaceWarning, match="torch fill_.Scalar"):
                assert table.check(b"torch fill_.Scalar", ranges(span(x, True)), 1, ctypes.byref(on), 0) == 1
                table.raise_found()
                pytest.fail("the warning made an error was not raised as the call returned")
        else:
            assert table.check(b"torch fill_.Scalar", ranges(span(x, True)), 1, ctypes.byref(on), 0) == 0
    warned = [w for w in seen if issubclass(w.category, cw.RaceWarning) and "torch fill_.Scalar" in str(w.message)]
    assert len(warned) == (0 if warnings_are_errors else 1)


def test_the_check_of_an_operation_the_weave_placed_is_on_the_placed_stream(table):
    x = cw.zeros(N, np.float32)
    cw.synchronize()
    with sanitizer_off(), cw.sanitize(), cw.weave(streams=3):
        first = place(table, span(x, True))
        on = StreamRef(first.stream, first.stream_handle, first.device, 1)
        assert table.check(b"torch fill_.Scalar", ranges(span(x, True)), 1, ctypes.byref(on), 0) == 0
        second = place(table, span(x, False))  # after the write: the weave ordered it
        on = StreamRef(second.stream, second.stream_handle, second.device, 1)
        assert table.check(b"torch sum.default", ranges(span(x, False)), 1, ctypes.byref(on), 0) == 0
    _core.raise_hook_failure()


@pytest.mark.parametrize("recorded", [False, True])
def test_a_block_handed_out_again_while_another_stream_reads_it_is_named_unless_recorded_on_that_stream(
        table, library_streams, recorded):
    producer, consumer = (library(made) for made in library_streams)
    block = cw.zeros(N, np.float32)
    cw.synchronize()
    block_range = span(block, True)[:2]
    with sanitizer_off(), cw.sanitize():
        assert table.handed_out(*block_range, ctypes.byref(producer), 0) == 0
        assert table.check(b"copy batch 1", ranges((*block_range, True)), 1, ctypes.byref(producer), 0) == 0
        cw.Stream.from_external(library_streams[1]).wait(cw.Stream.from_external(library_streams[0]).record())
        assert table.check(b"forward batch 1", ranges((*block_range, False)), 1, ctypes.byref(consumer), 0) == 0
        if recorded:  # record_stream(consumer): the allocator hands the block out after the consumer's use
            assert table.stream_recorded(block_range[0], ctypes.byref(consumer)) == 0
        _core.sanitizer.foreign.freed(block_range[0])
        assert table.handed_out(*block_range, ctypes.byref(producer), 0) == 0
        if recorded:
            assert table.check(b"copy batch 2", ranges((*block_range, True)), 1, ctypes.byref(producer), 0) == 0
            return
        with pytest.raises(cw.RaceError, match="handed the block out again"):
            assert table.check(b"copy batch 2", ranges((*block_range, True)), 1, ctypes.byref(producer), 0) == 1
            table.raise_found()
            pytest.fail("the reuse was not raised")


def test_a_host_read_of_a_copys_result_before_waiting_for_it_is_named(table, library_streams):
    pinned = cw.pinned_empty(N, np.float32)
    pinned_range = (pinned.__array_interface__["data"][0], pinned.nbytes)
    on = library(library_streams[0])
    with sanitizer_off(), cw.sanitize():
        assert table.host_handed_out(*pinned_range) == 0  # a block PyTorch's host allocator hands out: no past
        assert table.check(b"torch copy_.default", ranges((*pinned_range, True)), 1, ctypes.byref(on), 0) == 0
        with pytest.raises(cw.RaceError, match="the host read these bytes"):
            assert table.check_host(b"torch sum.default", ranges((*pinned_range, False)), 1, 0) == 1
            table.raise_found()
            pytest.fail("the host's read was not raised")
        cw.Stream.from_external(library_streams[0]).synchronize()
        _core.sanitizer.foreign.stream_synchronized(cw.Stream.from_external(library_streams[0]))
        assert table.check_host(b"torch sum.default", ranges((*pinned_range, False)), 1, 0) == 0


def test_a_synchronize_told_after_a_calls_write_orders_that_write_before_other_streams(table, library_streams):
    # A blocking copy's new output is told as the call ends, after the synchronize inside it: told again, that
    # synchronize orders the output's write before what any stream does next.
    x, reader, on = to_race_on(library_streams)
    y = cw.zeros(N, np.float32)
    cw.synchronize()
    with sanitizer_off(), cw.sanitize():
        assert table.check(b"torch _to_copy.default", ranges(span(x, True)), 1, ctypes.byref(on), 0) == 0
        with pytest.raises(cw.RaceError, match="torch _to_copy.default"):
            cw.ops.sum(x, stream=reader)  # nothing ordered the write before it
        assert table.check(b"torch _to_copy.default", ranges(span(y, True)), 1, ctypes.byref(on), 0) == 0
        assert table.stream_synchronized(ctypes.byref(on)) == 0
        cw.ops.sum(y, stream=reader)  # clean: the host waited for the write, and queued the sum after
        reader.synchronize()


def test_the_legacy_default_stream_is_named_by_handle_zero(table):
    x = cw.zeros(N, np.float32)
    cw.synchronize()
    legacy = StreamRef(None, 0, cw.current_stream().device, 1)
    with sanitizer_off(), cw.sanitize():
        assert table.check(b"torch fill_.Scalar", ranges(span(x, True)), 1, ctypes.byref(legacy), 0) == 0
        with pytest.raises(cw.RaceError) as info:
            cw.ops.sum(x, stream=cw.Stream())  # nothing orders the legacy default stream's write before it
    assert "legacy default stream" in str(info.value)


def test_a_failure_is_kept_for_the_blocks_end_and_raised_once(table):
    placed = Placed()
    assert table.place(ranges((0, 4, False)), 1, ctypes.byref(placed)) == -1  # outside a weave
    assert table.place(ranges((0, 4, False)), 1, ctypes.byref(placed)) == -1  # the first failure is the one kept
    with pytest.raises(ValueError, match="no weave is active"):
        _core.raise_hook_failure()
    _core.raise_hook_failure()  # raised once


def test_a_race_python_has_not_raised_yet_is_held_through_the_next_call_and_raised_as_it_ends(table, library_streams):
    # Python looks for the race after a function call returns, not after an operator's syntax (a + b): there the
    # library's next call begins with it still pending, and takes it back, so that the Python code the library runs
    # inside (PyTorch's GPU trace callbacks, which drop what they raise) does not meet it.
    x, reader, on = to_race_on(library_streams)
    call = operator.methodcaller("__call__")
    with sanitizer_off(), cw.sanitize():
        cw.ops.sum(x, stream=reader); sum_line = here()  # noqa: E702
        assert table.check(b"torch add_.Tensor", ranges(span(x, True)), 1, ctypes.byref(on), 0) == 1
        check_line = here() - 1
        # One call ends and the next begins with no Python between them, as after `a + b`.
        assert list(map(call, [table.raise_found, table.hold_raised])) == [0, 1]
        for _ in range(1000):  # taken back: nothing is raised here
            pass
        with pytest.raises(cw.RaceError) as info:
            table.raise_found()  # that call ends
            pytest.fail("the race taken back was not raised as the call ended")
        assert table.hold_raised() == 0  # Python raised it: nothing is taken back
        # Raised once: the block ends cleanly.
        _core.raise_hook_failure()
    assert_names(info.value.races[0], "torch add_.Tensor", check_line, sum_line)


def test_python_code_a_library_runs_outside_its_calls_runs_with_a_pending_race_held_back(table, library_streams):
    # As a block is freed at a del, PyTorch runs its GPU trace callbacks outside any operator, and drops what they
    # raise: they run with the race held back, and it is raised after them.
    x, reader, on = to_race_on(library_streams)
    ran = []

    def callbacks(*args: int) -> None:
        try:
            ran.append(args)
        except cw.RaceError:
            ran.append("met the race")

    held = functools.partial(_core.call_holding_raised, callbacks)
    call = operator.methodcaller("__call__")
    with sanitizer_off(), cw.sanitize():
        cw.ops.sum(x, stream=reader)
        assert table.check(b"torch add_.Tensor", ranges(span(x, True)), 1, ctypes.byref(on), 0) == 1
        with pytest.raises(cw.RaceError, match="torch add_.Tensor"):
            # The call ends, and the callbacks run with no Python between them.
            list(map(call, [table.raise_found, functools.partial(held, 1, 2)]))
            pytest.fail("the race held back was not set again")
        assert ran == [(1, 2)]
        held(3)  # nothing pending: the call alone
        assert ran == [(1, 2), (3,)]
        _core.raise_hook_failure()


def test_a_race_kept_and_never_raised_by_the_hook_is_raised_as_the_block_ends(table, library_streams):
    x, reader, on = to_race_on(library_streams)
    with sanitizer_off(), cw.sanitize():
        cw.ops.sum(x, stream=reader)
        assert table.check(b"torch add_.Tensor", ranges(span(x, True)), 1, ctypes.byref(on), 0) == 1
        with pytest.raises(cw.RaceError, match="torch add_.Tensor"):
            _core.raise_hook_failure()  # as the block ends, where no call ended to raise it
        assert table.raise_found() == 0  # raised once
        _core.raise_hook_failure()
