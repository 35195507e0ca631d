"""cw.weave() over several devices: an operation goes to a stream of the device its data lives on, whatever device
the weave began on; a copy between devices is ordered after what wrote its source and before what reads its
destination; a sequential two-device pipeline gives the sequential results; strands of other devices are
reused by later weaves; under a capture the weave stays on its device; an operation reading another device's
array reads a copy, made once until the array is written; random programs over two devices' arrays give
NumPy's results under the race sanitizer."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuweave as cw
from _support import needs_two

pytestmark = needs_two

N = 1 << 12


def on(device: int, values: np.ndarray) -> cw.DeviceArray:
    with cw.Device(device):
        return cw.to_device(values)


def test_an_operation_runs_on_the_device_its_data_lives_on(stream):
    x1 = on(1, np.arange(N, dtype=np.float32))
    with stream, cw.weave(streams=2) as w:
        y1 = cw.ops.scale(x1, 2.0)  # placed on a stream of device 1, though the weave began on device 0
        z1 = cw.ops.add(y1, 1.0)
        devices = [s.device for s in w.streams]
    assert y1.device == 1 and z1.device == 1
    assert devices[0] == 0 and devices.count(1) == 2  # as many strands on device 1 as the weave has of its own
    assert sum(w.counts.per_stream[i] for i, d in enumerate(devices) if d == 1) >= 2
    with cw.Device(1):
        np.testing.assert_array_equal(z1.to_numpy(), np.arange(N, dtype=np.float32) * 2 + 1)


def test_a_two_device_pipeline_written_in_order_gives_the_sequential_results(stream):
    batches = [np.full(N, i, np.float32) for i in range(4)]
    with cw.Device(1):
        results = [cw.empty(N, np.float32) for _ in batches]
    with stream, cw.weave(streams=2):
        for batch, result in zip(batches, results):
            x0 = cw.to_device(batch)                  # device 0 (the weave's)
            cw.ops.spin(0.002)                        # stage 1 takes a while...
            y0 = cw.ops.scale(x0, 3.0)                # ...and ends writing y0
            cw.copy_async(result, y0)                 # a copy to device 1: after stage 1, before stage 2
            cw.ops.add(result, 1.0, out=result)       # stage 2, on device 1, in place
    for i, result in enumerate(results):
        with cw.Device(1):
            np.testing.assert_array_equal(result.to_numpy(), np.full(N, 3 * i + 1, np.float32))


def test_the_end_of_the_weave_orders_the_current_stream_after_the_other_devices_work(stream):
    x1 = on(1, np.zeros(N, np.float32))
    with stream, cw.weave(streams=2):
        for _ in range(5):
            cw.ops.add(x1, 1.0, out=x1)  # on device 1
        cw.ops.scale(x1, 2.0, out=x1)
    y0 = cw.empty(N, np.float32, stream=stream)
    cw.copy_async(y0, x1, stream=stream)  # on the current stream (device 0), which follows the weave's end
    np.testing.assert_array_equal(y0.to_numpy(stream=stream), 10.0)


def test_later_weaves_reuse_the_other_devices_streams(stream):
    x1 = on(1, np.ones(N, np.float32))
    seen = []
    for _ in range(3):
        with stream, cw.weave(streams=2) as w:
            cw.ops.scale(x1, 1.0, out=x1)
            seen.append([s for s in w.streams if s.device == 1])  # held: the same objects if reused
        del w  # its streams of device 1 go back for the next weave
    # The same streams in the same order each time: x1 stays on the stream it had.
    assert len(seen[0]) == 2 and [id(s) for s in seen[0]] == [id(s) for s in seen[1]] == [id(s) for s in seen[2]]


def test_under_a_capture_the_weave_stays_on_its_device(stream):
    x1 = on(1, np.ones(N, np.float32))
    with pytest.raises(ValueError, match="own device"):
        with cw.capture(stream), stream, cw.weave(streams=2):
            cw.ops.scale(x1, 2.0, out=x1)
    with cw.Device(1):
        np.testing.assert_array_equal(x1.to_numpy(), 1.0)  # nothing ran


def test_a_read_of_another_devices_array_becomes_a_copy_placed_like_any_operation(stream):
    x0 = cw.to_device(np.arange(N, dtype=np.float32))
    y1 = on(1, np.ones(N, np.float32))
    with stream, cw.weave(streams=2) as w:
        z1 = cw.ops.add(y1, x0)  # device 1's operation (its first input's): it reads a copy of x0 on device 1
        devices = [s.device for s in w.streams]
    assert z1.device == 1
    on_device_1 = sum(w.counts.per_stream[i] for i, d in enumerate(devices) if d == 1)
    assert on_device_1 == 2  # the copy, then the add
    with cw.Device(1):
        np.testing.assert_array_equal(z1.to_numpy(), np.arange(N, dtype=np.float32) + 1)


def test_the_copy_is_made_once_for_its_readers_until_the_array_is_written(stream):
    x0 = cw.to_device(np.full(N, 2.0, np.float32))
    y1 = on(1, np.zeros(N, np.float32))
    operations = []
    for reads in (1, 2):
        with stream, cw.weave(streams=2) as w:
            for _ in range(reads):
                cw.ops.add(y1, x0, out=y1)
        operations.append(w.counts.operations)
    assert operations[1] - operations[0] == 1  # the second read reuses the first one's copy
    with stream, cw.weave(streams=2):
        cw.ops.add(y1, x0, out=y1)        # 6 + 2
        cw.ops.scale(x0, 5.0, out=x0)     # device 0 writes x0: the copy on device 1 is stale
        cw.ops.add(y1, x0, out=y1)        # + 10, read through a new copy
    with cw.Device(1):
        np.testing.assert_array_equal(y1.to_numpy(), 18.0)


def test_the_copy_follows_what_wrote_the_array_before_the_block():
    writer = cw.Stream()                  # device 0, not the weave's
    x0 = cw.empty(N, np.float32, stream=writer)
    cw.ops.spin(0.05, stream=writer)
    cw.ops.fill(x0, 4.0, stream=writer)   # written late on its stream
    with cw.Device(1):
        s1 = cw.Stream()
        y1 = cw.to_device(np.ones(N, np.float32), stream=s1)
        with s1, cw.weave(streams=2):     # a weave of device 1
            z1 = cw.ops.add(y1, x0)
        np.testing.assert_array_equal(z1.to_numpy(stream=s1), 5.0)



def test_a_copy_to_the_weaves_device_follows_what_wrote_its_source_before_the_block(stream):
    with cw.Device(1):
        writer = cw.Stream()
        x1 = cw.empty(N, np.float32, stream=writer)
        cw.ops.spin(0.05, stream=writer)
        cw.ops.fill(x1, 3.0, stream=writer)
    y0 = cw.empty(N, np.float32, stream=stream)
    with stream, cw.weave(streams=2):
        cw.copy_async(y0, x1)  # an operation of device 0, the weave's, reading device 1's data
    np.testing.assert_array_equal(y0.to_numpy(stream=stream), 3.0)


def test_inside_a_capture_a_read_of_another_devices_array_is_refused_not_copied(stream):
    x1 = on(1, np.ones(N, np.float32))
    y0 = cw.zeros(N, np.float32, stream=stream)
    with pytest.raises(ValueError, match="on device 1"):
        with cw.capture(stream), stream, cw.weave(streams=2):
            cw.ops.add(y0, x1, out=y0)  # a copy between devices would become part of the graph: refused
    with pytest.raises(ValueError, match="on device 1"):
        with stream, cw.weave(streams=2):
            with cw.capture(stream):  # begun inside the block: the weave pauses
                cw.ops.add(y0, x1, out=y0)
    np.testing.assert_array_equal(y0.to_numpy(stream=stream), 0.0)


def test_with_a_stream_made_current_in_the_block_a_read_of_another_devices_array_is_refused(stream):
    x0 = cw.to_device(np.ones(N, np.float32))
    y1 = on(1, np.ones(N, np.float32))
    with pytest.raises(ValueError, match="on device 1"):
        with stream, cw.weave(streams=2), cw.Stream():  # the weave no longer chooses: the stream given does
            cw.ops.add(y1, x0, out=y1)


def test_a_builtin_copy_from_another_device_is_one_copy_between_the_devices(stream):
    x0 = cw.to_device(np.arange(N, dtype=np.float32))
    y1 = on(1, np.zeros(N, np.float32))
    cw.synchronize()
    with stream, cw.weave(streams=2) as w:
        cw.ops.copy(y1, x0)                 # on device 1, straight from device 0: no copy kept on device 1 first
        cw.ops.add(y1, 1.0, out=y1)
    assert w.counts.operations == 2
    with cw.Device(1):
        np.testing.assert_array_equal(y1.to_numpy(), np.arange(N, dtype=np.float32) + 1)


@pytest.mark.skipif(cw.backend() != "sim", reason="counts the simulator's allocations")
def test_the_copies_a_weave_makes_are_freed_after_the_block(stream):
    x0 = cw.to_device(np.ones(N, np.float32))
    y1 = on(1, np.ones(N, np.float32))
    cw.synchronize()
    before = cw.sim.memory_in_use()["device_bytes"]
    with stream, cw.weave(streams=2) as w:
        cw.ops.add(y1, x0, out=y1)
        assert cw.sim.memory_in_use()["device_bytes"] == before + x0.nbytes  # the copy on device 1
    for device in (0, 1):
        cw.Device(device).synchronize()
    cw.collect()
    assert cw.sim.memory_in_use()["device_bytes"] == before
    assert w.counts.operations == 2  # the copy and the add


DEVICE_OPERATIONS = ("scale", "add", "axpy", "copy", "new", "read")


@st.composite
def device_programs(draw):
    steps = draw(st.lists(st.tuples(st.sampled_from(DEVICE_OPERATIONS), st.integers(0, 1 << 16),
                                    st.integers(0, 1 << 16), st.integers(0, 1 << 16),
                                    st.sampled_from((-1.0, 0.5, 2.0))),
                          min_size=1, max_size=30))
    return draw(st.integers(1, 200)), steps, draw(st.integers(0, 10_000)), draw(st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(device_programs())
def test_a_random_program_over_two_devices_woven_gives_numpys_results(program):
    length, steps, seed, streams = program
    rng = np.random.default_rng(length)
    models = [rng.integers(-8, 8, length).astype(np.float32) for _ in range(4)]
    arrays = [on(i % 2, m) for i, m in enumerate(models)]  # two arrays on each device
    reads, expected = [], []
    explore = cw.sim.explore(seed) if cw.backend() == "sim" else contextlib.nullcontext()
    with explore, cw.sanitize(), cw.weave(streams=streams):
        for name, a, b, c, alpha in steps:
            x, y, z = a % len(arrays), b % len(arrays), c % len(arrays)
            if name == "scale":
                cw.ops.scale(arrays[x], alpha, out=arrays[x])
                models[x] = models[x] * np.float32(alpha)
            elif name == "add":  # on z's device; x and y read across where they live elsewhere
                cw.ops.add(arrays[x], arrays[y], out=arrays[z])
                models[z] = models[x] + models[y]
            elif name == "axpy":
                cw.ops.axpy(alpha, arrays[x], arrays[y], out=arrays[y])
                models[y] = np.float32(alpha) * models[x] + models[y]
            elif name == "copy":  # between devices or on one
                cw.copy_async(arrays[x], arrays[y])
                models[x] = models[y].copy()
            elif name == "new":
                arrays.append(cw.ops.add(arrays[x], alpha))
                models.append(models[x] + np.float32(alpha))
            else:
                reads.append(arrays[x].to_numpy())
                expected.append(models[x].copy())
    for got, want in zip(reads, expected):
        np.testing.assert_array_equal(got, want)
    for array, model in zip(arrays, models):
        with cw.Device(array.device):
            np.testing.assert_array_equal(array.to_numpy(), model)
