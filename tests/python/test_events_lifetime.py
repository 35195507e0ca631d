"""Events outlive the streams and Python references around them."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import cuweave as cw
from _support import Gate


def test_event_outlives_its_closed_stream():
    s = cw.Stream()
    with Gate(s) as gate:
        cw.ops.spin(0.001, stream=s)
        ev = s.record()
        s.close()  # with the record still queued behind the gate
        assert ev.query() is False
        gate.open()
        ev.synchronize()
    assert ev.query() is True


def test_dropped_event_still_orders_the_waiting_stream(stream):
    producer = cw.Stream()
    try:
        buf = cw.zeros((1 << 16,), np.float32, stream=producer)
        producer.synchronize()
        with Gate(producer) as gate:
            cw.ops.fill(buf, 6.0, stream=producer)
            ev = producer.record()
            stream.wait(ev)
            del ev  # while the event's record is still queued behind the gate
            gc.collect()
            assert stream.query() is False, "the waiting stream no longer waits for the dropped event"
            gate.open()
            assert np.all(buf.to_numpy(stream=stream) == 6)
    finally:
        producer.close()


@pytest.mark.real_time  # the value is checked against the spin's duration
def test_timer_result_survives_its_stream():
    s = cw.Stream()
    with cw.timer(s) as t:
        cw.ops.spin(0.05, stream=s)
    s.close()
    assert 40.0 <= t.ms <= 500.0


def test_completion_events_come_from_a_pool_and_earlier_waits_keep_their_record(stream):
    # stream.record() without an event (as copy_async's Transfer.event and to_numpy's wait) takes a pooled event
    # and gives it back when dropped; the next one re-records the same event, which must not move a wait queued on
    # the earlier record.
    idle, waiter = cw.Stream(), cw.Stream()
    try:
        with Gate(stream) as gate:
            first = stream.record()
            handle = first.handle
            waiter.wait(first)
            del first
            second = idle.record()
            assert second.handle == handle, "a dropped completion event did not go back to the pool"
            second.synchronize()  # idle has nothing queued: the re-recorded event completes at once
            assert waiter.query() is False, "re-recording a pooled event released a wait queued on its earlier record"
            gate.open()
        waiter.synchronize()
        assert second.query() is True
    finally:
        idle.close()
        waiter.close()
