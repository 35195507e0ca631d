"""The host's reads and writes of pinned memory that another library's copies touch on its streams, as PyTorch's
hooks report them (stand-ins here: the calls those hooks make): a read of a GPU-to-CPU copy's result before the
host waited for the copy is named, with the copy, both lines and the fix; a read after a synchronize is not, nor
a block the allocator hands out afresh. Every backend."""

from __future__ import annotations

import gc
import inspect

import numpy as np
import pytest

import cuweave as cw
from cuweave import _core

N = 1 << 12


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


@pytest.fixture
def torch_like_stream():
    """A stream another library made, adopted as PyTorch's hooks adopt it: its owner reports its synchronizes."""
    handle = _core.backend_calls.create_stream(0)
    adopted = cw.Stream.from_external(handle)
    _core.sanitizer.foreign.synchronizes_reported(adopted)
    yield adopted
    adopted.synchronize()
    del adopted
    gc.collect()
    _core.backend_calls.destroy_stream(handle)


@pytest.fixture
def pinned_bytes():
    """Pinned host memory, as (address, bytes)."""
    block = cw.pinned_empty(N, np.float32)
    yield block.__array_interface__["data"][0], block.nbytes


def _copied_to_host(stream, pinned) -> int:
    """A GPU-to-CPU copy into the pinned bytes queued on `stream` without waiting (non_blocking=True); its line."""
    _core.sanitizer.foreign.operation(stream, "torch copy_.default", [(*pinned, True)], synchronizes_reported=True)
    return here() - 1


def test_a_host_read_of_a_copys_result_before_waiting_for_it_names_the_copy_and_the_fix(torch_like_stream,
                                                                                      pinned_bytes):
    with cw.sanitize():
        copy_line = _copied_to_host(torch_like_stream, pinned_bytes)
        with pytest.raises(cw.RaceError) as info:
            read_line = here() + 1
            _core.sanitizer.foreign.host_operation("torch Tensor.tolist", [(*pinned_bytes, False)])
    (earlier, later, begin, end) = info.value.races[0]
    assert earlier[0] == "torch copy_.default" and earlier[2] == "write" and earlier[3][1] == copy_line
    assert later[0] == "torch Tensor.tolist" and later[1] == "the host" and later[2] == "read"
    assert later[3][1] == read_line and (begin, end - begin) == pinned_bytes
    message = str(info.value)
    assert "the host read these bytes while the first could still write them" in message
    assert "synchronize" in message  # the fix


def test_a_host_write_over_a_copys_source_before_it_ran_is_named(torch_like_stream, pinned_bytes):
    with cw.sanitize():
        _core.sanitizer.foreign.operation(torch_like_stream, "torch _to_copy.default", [(*pinned_bytes, False)],
                                          synchronizes_reported=True)
        with pytest.raises(cw.RaceError) as info:
            _core.sanitizer.foreign.host_operation("torch fill_.Scalar", [(*pinned_bytes, True)])
    assert "the host changed these bytes while the first could still read them" in str(info.value)


@pytest.mark.parametrize("order", ["stream synchronize", "event synchronize", "device synchronize"])
def test_a_host_read_after_the_host_waited_for_the_copy_is_clean(torch_like_stream, pinned_bytes, order):
    with cw.sanitize():
        _copied_to_host(torch_like_stream, pinned_bytes)
        if order == "stream synchronize":
            _core.sanitizer.foreign.stream_synchronized(torch_like_stream)
        elif order == "event synchronize":
            event = 0x5EED
            _core.sanitizer.foreign.event_recorded(event, torch_like_stream)
            _core.sanitizer.foreign.event_synchronized(event)
        else:
            torch_like_stream.synchronize()
            cw.synchronize()
        _core.sanitizer.foreign.host_operation("torch sum.default", [(*pinned_bytes, False)])


def test_a_pinned_block_handed_out_afresh_forgets_the_copies_of_its_previous_holder(torch_like_stream,
                                                                                   pinned_bytes):
    # PyTorch's host allocator hands a pinned block out again only once the copies that used it are done.
    with cw.sanitize():
        _copied_to_host(torch_like_stream, pinned_bytes)
        _core.sanitizer.host_allocated(*pinned_bytes)
        _core.sanitizer.foreign.host_operation("torch fill_.Scalar", [(*pinned_bytes, True)])
    with cw.sanitize():  # without the hand-out, the same write is named
        _copied_to_host(torch_like_stream, pinned_bytes)
        with pytest.raises(cw.RaceError):
            _core.sanitizer.foreign.host_operation("torch fill_.Scalar", [(*pinned_bytes, True)])


def test_host_reads_of_bytes_no_stream_touched_are_clean(torch_like_stream, pinned_bytes):
    # Another pinned tensor, reported as PyTorch's hooks report each one made: its block's past is forgotten (on
    # the simulator, whose device memory is host memory, bytes never reported may hold a freed array's past).
    other = cw.pinned_empty(N, np.float32)
    other_bytes = (other.__array_interface__["data"][0], other.nbytes)
    with cw.sanitize():
        _core.sanitizer.host_allocated(*other_bytes)
        _copied_to_host(torch_like_stream, pinned_bytes)
        _core.sanitizer.foreign.host_operation("torch sum.default", [(*other_bytes, False)])
