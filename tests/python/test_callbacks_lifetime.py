"""Callables and their arguments live until the callback has run, and are released after."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import cuweave as cw
from _support import Gate, released


class Payload:
    def __init__(self, tag="payload"):
        self.tag = tag


class CallableObject:
    def __init__(self, log):
        self.log = log

    def __call__(self, payload):
        self.log.append(("called", payload.tag))


def test_dropped_callable_and_arguments_live_until_the_call(stream):
    log = []
    fn = CallableObject(log)
    payload = Payload("mine")
    fn_ref, payload_ref = weakref.ref(fn), weakref.ref(payload)

    with Gate(stream) as gate:
        stream.launch_host_func(fn, payload)
        del fn, payload
        gc.collect()
        cw.collect()  # only completed work may release what it holds
        gc.collect()
        assert log == []  # the callback is held behind the gate
        assert fn_ref() is not None and payload_ref() is not None, "released before the callback ran"
        gate.open()
        stream.synchronize()
    assert log == [("called", "mine")]  # the callable ran, with its argument

    assert released(fn_ref), "callable still referenced after it ran"
    assert released(payload_ref), "argument still referenced after the callback ran"


def test_closure_state_survives_until_the_call(stream):
    results = []

    def make():
        state = {"value": 42}
        return lambda: results.append(state["value"])

    with Gate(stream) as gate:
        stream.launch_host_func(make())
        gc.collect()  # the closure and its cell are referenced only by the queued callback
        assert results == []
        gate.open()
        stream.synchronize()
    assert results == [42]


def test_failed_callback_releases_its_arguments(stream):
    payload = Payload()
    ref = weakref.ref(payload)

    def bad(p):
        raise RuntimeError("fails")

    stream.launch_host_func(bad, payload)
    del payload
    with pytest.raises(cw.CallbackError):
        stream.synchronize()
    # the CallbackError's traceback may hold frames; once it is gone, so must the argument be
    assert released(ref)


EXIT_WITH_A_CALLBACK_RUNNING = """
import threading
import time
import numpy as np
import cuweave as cw
started = threading.Event()
def callback():
    started.set()
    time.sleep(0.05)
    print("callback returned")
s = cw.Stream()
d = cw.zeros((4,), np.float32, stream=s)
s.launch_host_func(callback)
d.to_numpy(stream=s)  # the callback's turn on the stream has come (the simulator runs it only when the host waits)
assert started.wait(30)  # it runs now, and still sleeps as Python exits
"""


def test_the_interpreter_exits_cleanly_while_a_callback_runs():
    # The callback wakes up during interpreter shutdown; it must be let return before Python is finalized.
    import os
    import subprocess
    import sys

    for _ in range(5):
        child = subprocess.run([sys.executable, "-c", EXIT_WITH_A_CALLBACK_RUNNING], capture_output=True, text=True,
                               timeout=120, env=dict(os.environ))
        assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
        assert child.stdout.strip() == "callback returned"


@pytest.mark.real_time  # the callback must run while the spin goes on
def test_a_release_waiting_for_the_device_delays_no_host_callback(stream):
    """Releasing an executable graph waits for the device's queued work (CUDA's cudaGraphExecDestroy does, and so
    does the simulator's), so a graph let go while a stream is paused for the host is released once no pause is
    pending: here, as an ordered callback returns. That release runs off the callback thread, so the callbacks
    queued behind it run while it waits. On the callback thread, every callback waited for the device's work."""
    busy, pauser = cw.Stream(), cw.Stream()
    values = cw.zeros(16, np.float32, stream=stream)
    with cw.capture(stream) as captured:
        cw.ops.add(values, 1.0, out=values)
    graph = captured.graph
    graph.replay(stream)
    stream.synchronize()
    go = threading.Event()
    pauser.launch_host_func(go.wait, 30, ordered=True)  # a pause pending while the graph is let go
    del graph, captured
    gc.collect()
    cw.collect()  # the graph's release now waits behind the pause
    cw.ops.spin(1.0, stream=busy)  # the device's queued work, which the release waits for
    spin_done = busy.record()
    go.set()  # the callback returns, its pause ends, and the release begins
    spin_done_when_called = []
    stream.launch_host_func(lambda: spin_done_when_called.append(spin_done.query()))
    stream.synchronize()
    assert spin_done_when_called == [False]
    busy.synchronize()
    pauser.synchronize()
    np.testing.assert_array_equal(values.to_numpy(), np.ones(16, np.float32))
