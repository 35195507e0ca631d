"""HostLatch: streams paused until the host releases them; no thread busy meanwhile."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from _support import UNDER_COMPUTE_SANITIZER

import cuweave as cw

pytestmark = pytest.mark.skipif(
    UNDER_COMPUTE_SANITIZER, reason="pauses streams: launches block under compute-sanitizer"
)


def test_paused_work_runs_only_after_the_release(stream):
    data = cw.zeros(4096, np.float32, stream=stream)
    stream.synchronize()
    latch = cw.HostLatch(stream)
    cw.ops.fill(data, 3.0, stream=stream)
    done = stream.record()
    assert not done.query() and not stream.query()
    assert not latch.released and latch.pauses == 1
    latch.release()
    done.synchronize()
    assert latch.released
    assert np.array_equal(data.to_numpy(stream=stream), np.full(4096, 3.0, np.float32))


def test_one_latch_pauses_several_streams_and_no_other(stream):
    second = cw.Stream()
    free = cw.Stream()
    try:
        with cw.HostLatch(stream, second) as latch:
            paused = [stream.record(), second.record()]
            copied = cw.to_device(np.arange(16, dtype=np.int32), stream=free)
            free.synchronize()  # returns while the others are paused
            assert np.array_equal(copied.to_numpy(stream=free), np.arange(16, dtype=np.int32))
            assert not any(event.query() for event in paused)
            assert latch.pauses == 2
        for event in paused:
            event.synchronize()
    finally:
        second.close()
        free.close()


def test_pause_defaults_to_the_current_stream(stream):
    latch = cw.HostLatch()
    with stream:
        latch.pause()
    pending = stream.record()
    assert not pending.query()
    latch.release()
    pending.synchronize()


def test_host_callbacks_on_other_streams_run_while_one_is_paused(stream):
    # What an ordered callback cannot do: it would keep cuweave's callback thread busy.
    other = cw.Stream()
    try:
        log = []
        with cw.HostLatch(stream):
            stream.launch_host_func(log.append, "paused")
            other.launch_host_func(log.append, "free")
            other.synchronize()
            assert log == ["free"]
        stream.synchronize()
        assert log == ["free", "paused"]
    finally:
        other.close()


def test_the_with_block_releases_also_when_it_raises(stream):
    with pytest.raises(RuntimeError, match="boom"):
        with cw.HostLatch(stream) as latch:
            raise RuntimeError("boom")
    assert latch.released
    stream.synchronize()


def test_a_released_latch_pauses_nothing(stream):
    latch = cw.HostLatch()
    latch.release()
    latch.release()  # idempotent
    latch.pause(stream)
    assert latch.pauses == 0
    stream.synchronize()
    assert "released" in repr(latch)


def test_a_forgotten_latch_lets_its_stream_go(stream):
    cw.HostLatch(stream)  # dropped at once, unreleased
    gc.collect()
    stream.synchronize()  # would hang if the stream were still paused


def test_another_thread_can_release(stream):
    latch = cw.HostLatch(stream)
    pending = stream.record()
    releaser = threading.Thread(target=latch.release)
    releaser.start()
    pending.synchronize()  # the GIL is free while the host waits, so the other thread can release
    releaser.join()
    assert latch.released


def test_a_thread_enqueueing_behind_a_latch_lets_another_release_it(stream):
    # More launches than CUDA's queue takes: one blocks until the latch is released, which the other thread
    # can do only because cuweave releases the GIL around enqueues while a stream is paused.
    latch = cw.HostLatch(stream)
    queued_some = threading.Event()

    def release_once_queueing_began():
        queued_some.wait()
        latch.release()

    releaser = threading.Thread(target=release_once_queueing_began)
    releaser.start()
    d = cw.zeros(256, np.float32, stream=stream)
    for i in range(5000):
        cw.ops.add(d, 1.0, out=d, stream=stream)
        if i == 100:
            queued_some.set()
    stream.synchronize()
    releaser.join()
    assert d.to_numpy(stream=stream)[0] == 5000


def test_a_burst_queued_behind_a_latch_runs_in_order(stream):
    # The use beyond tests: queue a burst while the stream is paused, then let it start at once.
    data = cw.zeros(1, np.int64, stream=stream)
    with cw.HostLatch(stream):
        for value in range(1, 201):
            cw.ops.fill(data, value, stream=stream)
    assert data.to_numpy(stream=stream)[0] == 200


def test_a_pause_cannot_be_captured(stream):
    latch = cw.HostLatch()
    try:
        with pytest.raises(ValueError, match="cannot be captured"):
            with cw.capture(stream):
                latch.pause(stream)
    finally:
        latch.release()


def test_pause_checks_its_argument():
    latch = cw.HostLatch()
    try:
        with pytest.raises(TypeError):
            latch.pause(42)
    finally:
        latch.release()


FIRST_LAUNCHES_BEHIND_A_LATCH = r"""
import numpy as np
import cuweave as cw

s = cw.Stream()
x = cw.to_device(np.arange(1000, dtype=np.float64), stream=s)
s.synchronize()
with cw.HostLatch(s):  # the first launch of each built-in kernel comes while the stream is paused
    with s:
        cw.ops.fill(x, 2.0)
        y = cw.ops.add(x, 1.0)
        cw.ops.scale(y, 3.0, out=y)
        cw.ops.axpy(0.5, x, y, out=y)
        total = cw.ops.sum(y)
        cw.ops.spin(0.001)
    assert not s.query()
print(total.to_numpy(stream=s))
"""


def test_the_first_launch_of_each_built_in_kernel_behind_a_latch_does_not_wait_for_it():
    # A fresh process: with CUDA's lazy loading a kernel loads at its first launch, and loading may wait for
    # queued work, which the latch pauses (Note [Loading kernels before a pause]). A hang fails by the timeout.
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", FIRST_LAUNCHES_BEHIND_A_LATCH], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == 0, child.stderr
    assert float(child.stdout) == 1000 * (3 * 3.0 + 0.5 * 2.0)
