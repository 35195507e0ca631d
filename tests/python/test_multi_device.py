"""Several devices: copies between them, events across them, lifetimes and mismatch errors.

They need two devices: CI runs them on the simulator with CUWEAVE_SIM_DEVICES=3 (.ci/run), and a machine with
two GPUs runs them on hardware.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import cuweave as cw
from _support import Gate

pytestmark = pytest.mark.skipif(
    cw.device_count() < 2, reason="needs two devices (CUWEAVE_SIM_DEVICES=2 on the simulator)"
)


@pytest.fixture
def streams():
    """A stream on each of devices 0 and 1, closed after the test."""
    pair = cw.Stream(device=0), cw.Stream(device=1)
    yield pair
    for s in pair:
        s.synchronize()
        s.close()


def on_device(values: np.ndarray, stream: cw.Stream) -> cw.DeviceArray:
    array = cw.to_device(values, stream=stream)
    stream.synchronize()
    return array


@pytest.mark.parametrize("nbytes", [1, 3, 4096, (1 << 20) + 7, pytest.param(1 << 30, marks=pytest.mark.gpu, id="1GiB")])
@pytest.mark.parametrize("on", [0, 1], ids=["stream of the source", "stream of the destination"])
def test_a_copy_between_devices_is_byte_exact(streams, nbytes, on):
    values = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    src = on_device(values, streams[0])
    dst = cw.empty(nbytes, np.uint8, stream=streams[1])
    streams[1].synchronize()
    transfer = cw.copy_async(dst, src, stream=streams[on])
    assert transfer.route == "peer"  # the simulator's devices reach each other directly
    transfer.wait()
    assert dst.device == 1
    assert np.array_equal(dst.to_numpy(stream=streams[1]), values)


@pytest.mark.parametrize("on", [0, 1], ids=["stream of the source", "stream of the destination"])
def test_a_copy_by_kernel_between_devices_is_byte_exact(streams, on):
    # A kernel reaches only its own device's memory: such a copy goes the usual way.
    values = np.random.default_rng(on).integers(0, 256, 4099, dtype=np.uint8)
    src = on_device(values, streams[0])
    dst = cw.empty(values.size, np.uint8, stream=streams[1])
    streams[1].synchronize()
    cw.copy_async(dst, src, stream=streams[on], by_kernel=True).wait()
    assert np.array_equal(dst.to_numpy(stream=streams[1]), values)


def test_copies_on_one_device_have_no_route(streams):
    a = on_device(np.arange(8, dtype=np.float32), streams[0])
    b = cw.empty(8, np.float32, stream=streams[0])
    assert cw.copy_async(b, a, stream=streams[0]).route is None
    assert cw.copy_async(np.empty(8, np.float32), a, stream=streams[0]).route is None
    streams[0].synchronize()


def test_an_event_of_device_0_orders_a_copy_on_device_1(streams):
    first, second = streams
    src = on_device(np.zeros(1024, np.float32), first)
    dst = cw.empty(1024, np.float32, stream=second)
    second.synchronize()
    with Gate(first) as gate:  # the producer on device 0 is held: long, by construction
        cw.ops.fill(src, 7.0, stream=first)
        second.wait(first.record())  # an event of device 0 waited for by a stream of device 1
        transfer = cw.copy_async(dst, src, stream=second)
        assert transfer.done is False, "the copy on device 1 did not wait for device 0's fill"
        gate.open()
    transfer.wait()
    assert np.all(dst.to_numpy(stream=second) == 7.0)


def test_a_source_on_the_other_device_stays_alive_until_the_copy_completed(streams):
    first, second = streams
    values = np.arange(1 << 16, dtype=np.float32)
    src = on_device(values, first)
    dst = cw.empty(values.shape, np.float32, stream=second)
    second.synchronize()
    with Gate(second) as gate:
        transfer = cw.copy_async(dst, src, stream=second)
        del src
        gc.collect()
        for _ in range(4):  # memory freed too early would be handed out again here, and overwritten
            cw.ops.fill(cw.empty(values.shape, np.float32, stream=first), -1.0, stream=first)
        first.synchronize()
        gate.open()
    transfer.wait()
    assert np.array_equal(dst.to_numpy(stream=second), values)


def test_a_stream_of_a_third_device_is_refused(streams):
    if cw.device_count() < 3:
        pytest.skip("needs three devices")
    third = cw.Stream(device=2)
    a = on_device(np.zeros(4, np.float32), streams[0])
    b = cw.empty(4, np.float32, stream=streams[1])
    with pytest.raises(
        ValueError, match="from device 0 to device 1 is queued on a stream of one of them, not of device 2"
    ):
        cw.copy_async(b, a, stream=third)
    third.close()


def test_an_operation_on_another_devices_stream_names_both_devices(streams):
    a = on_device(np.zeros(4, np.float32), streams[0])
    with pytest.raises(ValueError, match="the array is on device 0 but the stream is on device 1"):
        cw.ops.add(a, 1.0, stream=streams[1])


def test_a_copy_between_devices_without_a_wait_is_a_race(streams):
    first, second = streams
    src = on_device(np.zeros(256, np.float32), first)
    dst = cw.empty(256, np.float32, stream=second)
    second.synchronize()
    with cw.sanitize():
        cw.ops.fill(src, 1.0, stream=first)
        with pytest.raises(cw.RaceError, match="(?s)write by fill on .* of device 0.*read by copy on .* of device 1"):
            cw.copy_async(dst, src, stream=second)  # device 1's stream never waited for device 0's fill
        second.wait(first.record())
        cw.copy_async(dst, src, stream=second).wait()  # ordered: clean
    assert np.all(dst.to_numpy(stream=second) == 1.0)


@pytest.mark.skipif(cw.backend() != "sim", reason="the simulator's switch for devices without peer links")
def test_without_peer_links_a_copy_goes_through_the_host():
    program = (
        "import numpy as np, cuweave as cw\n"
        "s0 = cw.Stream(device=0)\n"
        "a = cw.to_device(np.arange(5, dtype=np.int32), stream=s0)\n"
        "s0.synchronize()\n"
        "s = cw.Stream(device=1)\n"
        "b = cw.empty(5, np.int32, stream=s)\n"
        "t = cw.copy_async(b, a, stream=s)\n"
        "print(t.route, b.to_numpy(stream=s).tolist())\n"
    )
    env = dict(os.environ, CUWEAVE_BACKEND="sim", CUWEAVE_SIM_DEVICES="2", CUWEAVE_SIM_PEER_ACCESS="0")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "through host [0, 1, 2, 3, 4]"


def test_work_inside_a_device_block_belongs_to_that_device():
    with cw.Device(1):
        assert cw.current_stream().device == 1
        values = np.arange(16, dtype=np.float32)
        array = cw.to_device(values)
        assert array.device == 1 and cw.Event().device == 1
        assert np.array_equal(cw.ops.add(array, 1.0).to_numpy(), values + 1)
        (batch,) = list(cw.prefetch([values], depth=1))
        assert batch.device == 1
        stream = cw.Stream()
        with cw.capture(stream) as capture:
            doubled = cw.ops.scale(array, 2.0, out=array, stream=stream)
        capture.graph.replay(stream)
        assert stream.device == 1 and np.array_equal(doubled.to_numpy(stream=stream), values * 2)

        @cw.graph_function
        def plus_one(x):
            return cw.ops.add(x, 1.0)

        assert np.array_equal(plus_one(values), values + 1)
        stream.close()
    assert cw.current_stream().device == 0


def test_the_default_stream_of_another_device_queues_there():
    """cw.default_stream(1) used while device 0 is current queues on device 1's default stream, and so do
    the events and frees that end lifetimes there (Note [The device follows the stream]): device 0's
    default stream, held, holds none of it back."""
    assert cw.current_device() == cw.Device(0)
    with cw.Device(1):
        x = cw.zeros(1 << 16, np.float32)  # allocated, and freed, in the order of device 1's default stream
    other = cw.default_stream(1)
    with Gate(cw.default_stream(0)):
        cw.ops.fill(x, 3.0, stream=other)
        other.synchronize()  # device 0's held stream would keep this waiting until the gate's deadline
        assert (x.to_numpy(stream=other) == 3.0).all()
        del x
        gc.collect()
        cw.collect()
        with cw.Device(1):
            y = cw.zeros(1 << 16, np.float32)  # may reuse x's block: the free ran on device 1's stream
        cw.ops.fill(y, 4.0, stream=other)
        assert (y.to_numpy(stream=other) == 4.0).all()


def test_a_host_read_follows_a_copy_queued_on_the_other_devices_default_stream():
    """Each device's legacy default stream has handle 0: a read on device 1's must still wait for a copy
    into the array queued on device 0's."""
    assert cw.current_device() == cw.Device(0)
    x = cw.to_device(np.full(1 << 16, 7.0, np.float32))
    with cw.Device(1):
        y = cw.zeros(1 << 16, np.float32)
        cw.default_stream(1).synchronize()
    cw.ops.spin(0.05)  # device 0's default stream is busy...
    cw.copy_async(y, x)  # ...and then copies into device 1's array
    with cw.Device(1):
        np.testing.assert_array_equal(y.to_numpy(), 7.0)  # on device 1's default stream, after the copy


def test_prefetch_copies_to_the_device_of_the_stream_that_uses_the_batches():
    """Each device has its own prefetch copy streams: a prefetch for device 1 after one for device 0 (whose
    copy streams then exist) must not copy on a stream of device 0."""
    values = np.arange(64, dtype=np.float32)
    (first,) = list(cw.prefetch([values], depth=1))
    assert first.device == 0
    consumer = cw.Stream(device=1)
    with consumer:
        (second,) = list(cw.prefetch([values], depth=1))
    assert second.device == 1 and np.array_equal(second.to_numpy(stream=consumer), values)
    with cw.Device(1):
        (third,) = list(cw.prefetch([values], depth=1))
    assert third.device == 1
    consumer.synchronize()
    consumer.close()


def test_a_weave_places_another_devices_array_on_that_device_or_on_the_stream_given(streams):
    """Inside a weave of device 0, an operation on device 1's array goes to a stream of device 1: one of the
    weave's own there, or the one given; either is ordered (after the array's writer before the block, and a
    copy to device 0 waits for it across devices, and so does leaving the block)."""
    x1 = on_device(np.ones(16, np.float32), streams[1])
    with streams[0], cw.sanitize(), cw.weave(streams=3) as w:
        cw.ops.scale(x1, 2.0, out=x1)  # on one of the weave's streams of device 1, after streams[1]'s write
        cw.ops.scale(x1, 3.0, out=x1, stream=streams[1])
        y0 = cw.empty(16, np.float32)
        cw.copy_async(y0, x1)  # on a stream of device 0, after both scales on device 1
        cw.ops.scale(x1, 5.0, out=x1, stream=streams[1])  # after the copy read x1
        assert streams[1] in w.streams and sum(s.device == 1 for s in w.streams) == 4  # the weave's 3, and the given
    np.testing.assert_array_equal(y0.to_numpy(stream=streams[0]), np.full(16, 6.0, np.float32))
    np.testing.assert_array_equal(x1.to_numpy(stream=streams[1]), np.full(16, 30.0, np.float32))


def test_dropping_the_source_of_a_copy_between_devices_at_once_is_no_race(streams):
    """The source, another device's array, is held until the copy completed, then freed in its own device's
    order: the sanitizer knows the free comes after the copy."""
    first, second = streams
    with cw.Device(1):
        out = cw.empty(4096, np.float32, stream=second)
    with cw.sanitize():
        for i in range(3):
            y0 = cw.ops.scale(on_device(np.full(4096, i, np.float32), first), 2.0, stream=first)
            second.wait(first.record())
            cw.copy_async(out, y0, stream=second)
            del y0  # freed on `first` once the copy on `second` completed
            gc.collect()
        np.testing.assert_array_equal(out.to_numpy(stream=second), 4.0)


def test_a_host_read_of_another_devices_array_naming_no_stream_reads_on_its_device_after_its_writer():
    """With device 0's stream current, to_numpy(), item(), repr and a strided view's read of a device 1 array read
    on device 1, after the stream that wrote it (a spin first: the write is pending when the read is asked for)."""
    with cw.Device(1):
        writer = cw.Stream()
        x = cw.zeros(1 << 16, np.float32, stream=writer)
        cw.ops.spin(0.05, stream=writer)
        cw.ops.fill(x, 7.0, stream=writer)
    current = cw.Stream()
    with cw.sanitize(), current:  # a race (a read before the fill) fails the test
        assert cw.current_stream().device == 0
        np.testing.assert_array_equal(x.to_numpy(), 7.0)
        assert x[5].item() == 7.0
        np.testing.assert_array_equal(x[::1024].to_numpy(), 7.0)
        assert "7." in repr(x)
    assert current.device == 0
