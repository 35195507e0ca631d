"""cw.weave() over several devices: an operation goes to a stream of the device its data lives on, whatever device
the weave began on; a copy between devices is ordered after what wrote its source and before what reads its
destination; a sequential two-device pipeline gives the sequential results; strands of other devices are
reused by later weaves; under a capture the weave stays on its device."""

from __future__ import annotations

import numpy as np
import pytest

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
    for _ in range(2):
        with stream, cw.weave(streams=2) as w:
            cw.ops.scale(x1, 1.0, out=x1)
            seen.append([s for s in w.streams if s.device == 1])  # held: the same objects if reused
        del w  # its streams of device 1 go back for the next weave
    assert len(seen[0]) == 2 and {id(s) for s in seen[0]} == {id(s) for s in seen[1]}


def test_under_a_capture_the_weave_stays_on_its_device(stream):
    x1 = on(1, np.ones(N, np.float32))
    with pytest.raises(ValueError, match="own device"):
        with cw.capture(stream), stream, cw.weave(streams=2):
            cw.ops.scale(x1, 2.0, out=x1)
    with cw.Device(1):
        np.testing.assert_array_equal(x1.to_numpy(), 1.0)  # nothing ran
