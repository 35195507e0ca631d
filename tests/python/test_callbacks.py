"""Host callbacks: run after the work queued before them, in order, with their arguments."""

from __future__ import annotations

import time

import numpy as np
import pytest

import cuweave as cw
from _support import Gate


def test_callbacks_fire_in_order_between_kernels(stream):
    log = []
    for i in range(5):
        stream.launch_host_func(log.append, i)
        cw.ops.spin(0.005, stream=stream)
    stream.launch_host_func(log.append, "end")
    stream.synchronize()
    assert log == [0, 1, 2, 3, 4, "end"]


@pytest.mark.real_time  # told apart by the time the spin takes
def test_callback_runs_after_the_work_before_it(stream):
    times = {}

    def stamp(key):
        times[key] = time.perf_counter()

    launched = time.perf_counter()
    cw.ops.spin(0.05, stream=stream)
    stream.launch_host_func(stamp, "after_spin")
    stream.synchronize()
    assert times["after_spin"] - launched >= 0.04, "callback ran before the spin finished"


def test_callback_sees_the_copy_queued_before_it(stream, rng):
    host = rng.integers(0, 1 << 30, size=1 << 16, dtype=np.int32)
    d = cw.to_device(host, stream=stream)
    out = cw.pinned_zeros(host.shape, host.dtype)
    seen = []
    with Gate(stream) as gate:
        cw.copy_async(out, d, stream=stream)
        stream.launch_host_func(lambda: seen.append(out.copy()))  # reads host memory only: allowed in a callback
        assert seen == [] and not out.any()  # both still held behind the gate
        gate.open()
        stream.synchronize()
    assert len(seen) == 1
    assert np.array_equal(seen[0], host), "the callback ran before the copy queued before it"


def test_arguments_are_passed(stream):
    got = []

    def cb(a, b, c):
        got.append((a, b, c))

    payload = {"k": [1, 2]}
    stream.launch_host_func(cb, 1, "two", payload)
    stream.synchronize()
    assert got == [(1, "two", {"k": [1, 2]})]
    assert got[0][2] is payload


def test_callback_without_arguments(stream):
    hits = []
    stream.launch_host_func(lambda: hits.append(True))
    stream.synchronize()
    assert hits == [True]


def test_callbacks_on_two_streams_follow_their_own_stream(stream):
    other = cw.Stream()
    try:
        log = []
        with Gate(stream) as gate:  # a latch: no thread is busy while `stream` is held
            stream.launch_host_func(log.append, "held")
            other.launch_host_func(log.append, "free")
            other.synchronize()
            assert log == ["free"]
            gate.open()
            stream.synchronize()
        assert log == ["free", "held"]
    finally:
        other.close()


def test_many_callbacks(stream):
    total = []
    for i in range(1000):
        stream.launch_host_func(total.append, i)
    stream.synchronize()
    assert total == list(range(1000))
