"""Stream-ordered host callbacks (launch_host_func(..., ordered=True)): later work on the stream waits
until the callable has returned, as with CUDA's own host functions (Note [Stream-ordered host callbacks])."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _support import UNDER_COMPUTE_SANITIZER, Gate

import cuweave as cw

pytestmark = pytest.mark.skipif(
    UNDER_COMPUTE_SANITIZER, reason="holds streams with ordered callbacks: launches block under compute-sanitizer"
)


def test_later_work_waits_for_the_callback_to_return(stream):
    release = threading.Event()
    log = []

    def callback():
        release.wait()
        log.append("callback")

    stream.launch_host_func(callback, ordered=True)
    after = stream.record()
    # Pending by construction: the callback cannot return before the test releases it.
    assert not after.query() and not stream.query()
    release.set()
    after.synchronize()
    assert log == ["callback"]


def test_work_after_the_callback_sees_what_it_wrote(stream):
    host = cw.pinned_zeros(1 << 14, np.float32)
    values = np.arange(1 << 14, dtype=np.float32)
    device = cw.empty(values.shape, values.dtype, stream=stream)
    # The callback fills the pinned buffer; the copy queued after it must read the filled values.
    stream.launch_host_func(np.copyto, host, values, ordered=True)
    cw.copy_async(device, host, stream=stream)
    assert np.array_equal(device.to_numpy(stream=stream), values)


def test_a_callback_that_raises_still_releases_the_stream(stream):
    def fail():
        raise RuntimeError("from the callback")

    stream.launch_host_func(fail, ordered=True)
    after = stream.record()
    after.synchronize()  # would never return if the raise kept the stream waiting
    with pytest.raises(cw.CallbackError) as info:
        stream.synchronize()
    assert isinstance(info.value.__cause__, RuntimeError)


def test_other_streams_are_not_held(stream):
    other = cw.Stream()
    with Gate(stream, by="ordered_callback"):
        done = cw.to_device(np.ones(8, np.float32), stream=other)
        other.synchronize()  # returns although `stream` is held
        assert np.array_equal(done.to_numpy(stream=other), np.ones(8, np.float32))
        assert not stream.query()
    stream.synchronize()


def test_ordered_callbacks_keep_their_order_with_unordered_ones(stream):
    log = []
    for i in range(6):
        stream.launch_host_func(log.append, i, ordered=i % 2 == 0)
    stream.synchronize()
    assert log == list(range(6))


def test_a_thread_holding_the_gil_while_enqueueing_does_not_deadlock(stream):
    # The callable needs the GIL, which this thread holds while it queues thousands of operations behind
    # it: more than CUDA's queue takes, so a launch blocks until the callback has run (Note [Enqueueing
    # behind a held stream]: cuweave then releases the GIL around its enqueues).
    seen = []
    stream.launch_host_func(seen.append, "ran", ordered=True)
    d = cw.zeros(256, np.float32, stream=stream)
    for _ in range(5000):
        cw.ops.add(d, d, out=d, stream=stream)
    stream.synchronize()
    assert seen == ["ran"]


def test_the_callback_may_not_synchronize_its_own_stream(stream):
    errors = []

    def callback():
        try:
            stream.synchronize()
        except ValueError as error:
            errors.append(str(error))

    stream.launch_host_func(callback, ordered=True)
    stream.synchronize()
    assert len(errors) == 1 and "its own stream" in errors[0]


def test_ordered_callbacks_cannot_be_captured(stream):
    with pytest.raises(ValueError, match="ordered=False"):
        with cw.capture(stream):
            stream.launch_host_func(print, ordered=True)


def test_ordered_must_be_a_keyword(stream):
    seen = []
    stream.launch_host_func(seen.append, True)  # a positional True is the callable's argument
    stream.synchronize()
    assert seen == [True]


def test_using_memory_of_a_closed_stream_held_by_a_callback_does_not_wait_for_it(stream):
    # Using `data` on another stream moves its free into that stream's order, after the closed stream's
    # work. That must not be a host wait: the callback holding the closed stream needs the GIL this thread has.
    closing = cw.Stream()
    reader = cw.Stream()
    data = cw.zeros(1024, np.float32, stream=closing)
    closing.synchronize()
    # The race is the point (CUWEAVE_SANITIZE=1 runs would report it). The block comes first: with CuPy imported, a
    # process's first block waits for the GPU's queued work, which the gate would hold forever.
    with cw.sanitize(on_race="ignore"), Gate(closing, by="ordered_callback"):
        cw.ops.fill(data, 7.0, stream=closing)
        done = closing.record()
        closing.close()
        # Returns at once: a copy into pinned memory does not wait (what it reads races with the held fill,
        # by the user's choice). Moving data's free onto `reader` must not wait for the closed stream either.
        cw.copy_async(cw.pinned_empty(1024, np.float32), data, stream=reader)
        assert not done.query()
    done.synchronize()
    assert np.array_equal(data.to_numpy(stream=reader), np.full(1024, 7.0, np.float32))


def test_a_callback_that_runs_before_its_launch_returns_still_orders_later_work(stream):
    # On an idle stream the callback can run, and return, before launch_host_func has queued the stream's
    # wait for it (Note [The wait is queued before the flag is raised]); once, that left a wait on a freed
    # flag. Many quick rounds open that window; each must still order the copy after the callback.
    host = cw.pinned_zeros(64, np.int64)
    device = cw.zeros(64, np.int64, stream=stream)
    out = cw.pinned_zeros(64, np.int64)
    for round_ in range(200):
        stream.synchronize()  # idle, so the host function runs at once

        def write(value=round_):
            host[:] = value

        stream.launch_host_func(write, ordered=True)
        cw.copy_async(device, host, stream=stream)
        cw.copy_async(out, device, stream=stream)
        stream.synchronize()
        assert out[0] == round_ and out[-1] == round_
