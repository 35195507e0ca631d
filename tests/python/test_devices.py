"""cw.Device, its properties, current device and device-wide synchronize."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw
from _support import Gate


def test_device_zero_identity():
    dev = cw.Device(0)
    assert dev.id == 0
    assert cw.Device().id == 0  # ordinal defaults to 0


def test_properties_are_plausible():
    props = cw.Device(0).properties
    assert isinstance(props.name, str) and props.name.strip()
    assert isinstance(props.multiprocessor_count, int) and props.multiprocessor_count > 0
    cc = props.compute_capability
    assert isinstance(cc, tuple) and len(cc) == 2
    assert all(isinstance(x, int) and x >= 0 for x in cc)
    assert isinstance(props.async_engine_count, int) and props.async_engine_count >= 0
    assert isinstance(props.total_memory, int) and props.total_memory > (1 << 28)


@pytest.mark.gpu  # a real GPU's compute capability (the simulator reports (0, 0))
def test_compute_capability_is_a_real_gpus():
    assert cw.Device(0).properties.compute_capability >= (3, 5)


def test_priority_range_is_lowest_then_highest():
    lowest, highest = cw.Device(0).properties.priority_range
    assert isinstance(lowest, int) and isinstance(highest, int)
    # CUDA: numerically lower means higher priority, so (0, -5) on Hopper
    assert highest <= lowest


def test_every_ordinal_below_count_is_a_device():
    ids = [cw.Device(i).id for i in range(cw.device_count())]
    assert ids == list(range(cw.device_count()))


def test_current_device_is_zero_by_default():
    assert cw.current_device().id == 0


def test_with_device_sets_and_restores_current_device():
    before = cw.current_device().id
    last = cw.device_count() - 1
    with cw.Device(last):
        assert cw.current_device().id == last
    assert cw.current_device().id == before


def test_with_device_restores_on_exception():
    before = cw.current_device().id
    with pytest.raises(KeyError):
        with cw.Device(cw.device_count() - 1):
            raise KeyError("boom")
    assert cw.current_device().id == before


@pytest.mark.skipif(cw.device_count() < 2, reason="needs two devices")
def test_with_device_switches_between_two_gpus():
    with cw.Device(1):
        assert cw.current_device().id == 1
        s = cw.Stream()
        try:
            assert s.device == 1
        finally:
            s.close()
        with cw.Device(0):
            assert cw.current_device().id == 0
        assert cw.current_device().id == 1
    assert cw.current_device().id == 0


def _synchronize_waits_for_stream_work(stream, synchronize):
    ran = []
    with Gate(stream) as gate:
        cw.ops.spin(0.001, stream=stream)
        stream.launch_host_func(ran.append, "queued after the gate")
        assert stream.query() is False
        gate.open()
        synchronize()
        # Read before any query (a query may run work in the exploring simulator): the wait ran it all.
        assert ran == ["queued after the gate"]
    assert stream.query() is True


def test_global_synchronize_waits_for_stream_work(stream):
    _synchronize_waits_for_stream_work(stream, cw.synchronize)


def test_device_synchronize_waits_for_stream_work(stream):
    _synchronize_waits_for_stream_work(stream, cw.Device(0).synchronize)


def test_objects_report_device_zero(stream):
    assert stream.device == 0
    assert cw.Event().device == 0
    d = cw.zeros((4,), np.float32, stream=stream)
    assert d.device == 0
    assert d.__dlpack_device__() == (2, 0)
