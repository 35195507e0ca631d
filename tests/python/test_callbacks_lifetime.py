"""Callables and their arguments live until the callback has run, and are released after."""

from __future__ import annotations

import gc
import weakref

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
