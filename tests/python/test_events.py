"""Events: record/query/synchronize, cross-stream waits, timing, cw.timer, IPC."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cuweave as cw
from _support import Gate


def _zeroed(stream, n=1 << 18):
    buf = cw.zeros((n,), np.float32, stream=stream)
    stream.synchronize()
    return buf


def test_default_event_flags():
    ev = cw.Event()
    assert ev.timing is False
    assert ev.blocking is False
    assert ev.interprocess is False
    assert ev.device == 0
    assert isinstance(ev.handle, int) and ev.handle != 0


@pytest.mark.parametrize(
    "kwargs",
    [dict(timing=True), dict(blocking=True), dict(interprocess=True), dict(timing=True, blocking=True)],
)
def test_event_flags_are_kept(kwargs):
    ev = cw.Event(**kwargs)
    for name in ("timing", "blocking", "interprocess"):
        assert getattr(ev, name) is kwargs.get(name, False)


@pytest.mark.parametrize("blocking", [False, True])
def test_record_query_synchronize_follow_the_work(stream, blocking):
    ev = cw.Event(blocking=blocking)
    with Gate(stream) as gate:
        cw.ops.spin(0.001, stream=stream)
        ev.record(stream)
        assert ev.query() is False  # behind the closed gate
        assert ev.query() is False  # a query does not move it on
        gate.open()
        ev.synchronize()
    assert ev.query() is True
    assert stream.query() is True  # the event was the stream's last work


def test_event_marks_only_work_before_it(stream):
    ev = stream.record()
    with Gate(stream):
        cw.ops.spin(0.001, stream=stream)
        ev.synchronize()  # must not wait for the gate and the spin queued after the record
        assert ev.query() is True
        assert stream.query() is False
    stream.synchronize()
    assert stream.query() is True


def test_record_without_stream_uses_the_current_stream(stream, other_stream):
    buf = _zeroed(stream)
    ev = cw.Event()
    with Gate(stream) as gate:
        with stream:
            cw.ops.fill(buf, 5.0, stream=stream)
            ev.record()
        assert ev.query() is False, "the event was not recorded on the current stream"
        # only if the event follows the fill on `stream` does waiting on it order other_stream after the fill
        other_stream.wait(ev)
        assert other_stream.query() is False
        gate.open()
        assert np.all(buf.to_numpy(stream=other_stream) == 5)
    assert ev.query() is True


def test_re_recording_moves_the_event(stream):
    ev = stream.record()
    ev.synchronize()
    assert ev.query() is True
    with Gate(stream) as gate:
        cw.ops.spin(0.001, stream=stream)
        ev.record(stream)
        assert ev.query() is False  # now marks the held work, no longer the completed record
        gate.open()
        stream.synchronize()
    assert ev.query() is True


def test_event_wait_orders_another_stream(stream, other_stream):
    buf = _zeroed(stream)
    with Gate(stream) as gate:
        cw.ops.fill(buf, 2.0, stream=stream)
        ev = stream.record()
        ev.wait(other_stream)  # returns at once: no host sync
        assert stream.query() is False
        assert other_stream.query() is False, "other_stream is not behind the event"
        gate.open()
        assert np.all(buf.to_numpy(stream=other_stream) == 2)


def test_event_wait_without_stream_orders_the_current_stream(stream, other_stream):
    buf = _zeroed(stream)
    with Gate(stream) as gate:
        cw.ops.fill(buf, 4.0, stream=stream)
        ev = stream.record()
        with other_stream:
            ev.wait()
        assert other_stream.query() is False, "the wait was not queued on the current stream"
        gate.open()
        assert np.all(buf.to_numpy(stream=other_stream) == 4)


def test_stream_wait_on_other_stream(stream, other_stream):
    buf = _zeroed(stream)
    with Gate(stream) as gate:
        cw.ops.fill(buf, 3.0, stream=stream)
        other_stream.wait(stream)
        assert stream.query() is False
        assert other_stream.query() is False, "other_stream is not behind the stream it waits on"
        gate.open()
        other_stream.synchronize()
        assert stream.query() is True, "waiting stream finished before the stream it waited on"
        assert np.all(buf.to_numpy(stream=other_stream) == 3)


# --------------------------------------------------------------------------- timing


@pytest.mark.gpu  # a timing value: GPU time of a spin
def test_elapsed_time_around_a_spin(stream):
    start, end = cw.Event(timing=True), cw.Event(timing=True)
    start.record(stream)
    cw.ops.spin(0.05, stream=stream)
    end.record(stream)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert 40.0 <= ms <= 500.0, ms


def test_elapsed_time_of_completed_events_is_a_non_negative_float(stream):
    start, end = cw.Event(timing=True), cw.Event(timing=True)
    start.record(stream)
    cw.ops.spin(0.001, stream=stream)
    end.record(stream)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert 0.0 <= ms < 10_000.0, ms


@pytest.mark.real_time  # the sign needs the events apart in time
def test_elapsed_time_is_signed_by_order(stream):
    start, end = cw.Event(timing=True), cw.Event(timing=True)
    start.record(stream)
    cw.ops.spin(0.05, stream=stream)
    end.record(stream)
    end.synchronize()
    assert end.elapsed_time(start) < 0 < start.elapsed_time(end)


@pytest.mark.gpu  # a timing value: GPU time of a spin
def test_timer_on_a_stream(stream):
    with cw.timer(stream) as t:
        cw.ops.spin(0.05, stream=stream)
    ms = t.ms  # waits for the end event
    assert isinstance(ms, float)
    assert 40.0 <= ms <= 500.0, ms


@pytest.mark.real_time  # on another stream the timer would measure ~0 ms, not the spin
def test_timer_defaults_to_the_current_stream(stream):
    with stream:
        with cw.timer() as t:
            cw.ops.spin(0.05)
    assert 40.0 <= t.ms <= 500.0, t.ms


@pytest.mark.real_time
def test_timer_measures_only_its_stream(stream, other_stream):
    cw.ops.spin(0.2, stream=other_stream)  # long work elsewhere must not count
    with cw.timer(stream) as t:
        cw.ops.spin(0.001, stream=stream)
    assert t.ms < 150.0, t.ms


def test_timer_does_not_hide_the_exception(stream):
    with pytest.raises(KeyError, match="body"):
        with cw.timer(stream):
            raise KeyError("body")


@pytest.mark.filterwarnings("ignore::cuweave.SimulatorTimingWarning")
def test_a_timer_prints_whether_it_ran_and_its_time(stream):
    timer = cw.timer(stream)
    assert repr(timer) == "<cuweave.Timer, not run>"
    with Gate(stream) as gate:
        with timer:
            cw.ops.fill(cw.empty(16, np.float32, stream=stream), 1.0, stream=stream)
        assert repr(timer).endswith("its work still running>")
        gate.open()
    stream.synchronize()
    assert re.fullmatch(r"<cuweave\.Timer on <cuweave\.Stream .*>: \d+\.\d{3} ms>", repr(timer)), repr(timer)


# --------------------------------------------------------------------------- IPC


@pytest.mark.gpu  # IPC events need a GPU (the simulator raises cudaErrorNotSupported)
def test_ipc_handle_is_bytes():
    ev = cw.Event(interprocess=True)
    handle = ev.ipc_handle()
    assert isinstance(handle, bytes)
    assert len(handle) == 64  # sizeof(cudaIpcEventHandle_t)


@pytest.mark.gpu  # IPC events need a GPU
def test_ipc_event_is_waited_on_in_another_process(stream):
    ev = cw.Event(interprocess=True)
    cw.ops.spin(1.5, stream=stream)
    ev.record(stream)
    child = textwrap.dedent(
        f"""
        import cuweave as cw
        ev = cw.Event.from_ipc_handle(bytes.fromhex({ev.ipc_handle().hex()!r}))
        assert ev.interprocess is True
        ev.synchronize()
        print("DONE", ev.query())
        """
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    # The child's synchronize waited for our spin, so it is finished by now.
    parent_done = stream.query()
    assert proc.returncode == 0, proc.stderr
    assert "DONE True" in proc.stdout
    assert parent_done is True
