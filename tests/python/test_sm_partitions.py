"""SM partitions: a device's SMs split by CUDA's rules, streams made on a partition, and their lifetimes.

The sizes are read from the device (the simulator: 4 SMs, at least 2 a partition, in steps of 2; an H100: 132,
8 and 8), so every test but the last runs on both backends. The last checks on a GPU that a partition's
kernels run on its SMs only.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import cuweave as cw
from _support import Gate


def rounded(request: int, resources: cw.SMResources) -> int:
    """The size CUDA gives a partition asked for `request` SMs."""
    at_least = max(request, resources.min_partition_sms)
    return -(-at_least // resources.alignment) * resources.alignment


@pytest.fixture
def resources() -> cw.SMResources:
    return cw.Device(0).sm_resources


ON_SIMULATOR = cw.backend() == "sim"


def test_the_device_reports_its_sms_as_partitions_split_them(resources):
    assert resources.sm_count == cw.Device(0).properties.multiprocessor_count
    assert 1 <= resources.min_partition_sms <= resources.sm_count
    assert resources.alignment >= 1
    assert "sm_count=" in repr(resources)


def test_a_split_gives_the_reserved_sms_and_the_rest(resources):
    want = resources.min_partition_sms
    reserved, rest = cw.Device(0).partition(want)
    assert reserved.sms == rounded(want, resources) and not reserved.is_rest
    assert rest.is_rest and reserved.sms + rest.sms <= resources.sm_count
    if ON_SIMULATOR:  # (CUDA may leave SMs out of a remainder that cannot be co-scheduled)
        assert reserved.sms + rest.sms == resources.sm_count
    assert reserved.device == rest.device == 0
    assert repr(reserved) == f"<cuweave.SMPartition device=0 sms={reserved.sms}>"
    assert "left over" in repr(rest)


def test_a_request_is_rounded_up_to_the_devices_step(resources):
    (first, *_) = cw.Device(0).partition(1)
    assert first.sms == rounded(1, resources)
    assert first.sms % resources.alignment == 0 and first.sms >= resources.min_partition_sms


def test_groups_are_equal(resources):
    size = rounded(resources.min_partition_sms, resources)
    parts = cw.Device(0).partition(size, groups=2)
    groups = [p for p in parts if not p.is_rest]
    assert len(groups) == 2 and {p.sms for p in groups} == {size}
    assert sum(p.sms for p in parts) <= resources.sm_count


@pytest.mark.skipif(not ON_SIMULATOR, reason="the simulator's 4 SMs split into two partitions exactly")
def test_a_split_that_uses_every_sm_has_no_rest(resources):
    parts = cw.Device(0).partition(2, groups=2)
    assert [p.sms for p in parts] == [2, 2] and not any(p.is_rest for p in parts)
    (whole,) = cw.Device(0).partition(3)  # rounded up to all 4
    assert whole.sms == 4 and not whole.is_rest


def test_a_split_the_device_cannot_hold_says_what_fits(resources):
    size = rounded(resources.min_partition_sms, resources)
    too_many = resources.sm_count  # partitions of at least 2 SMs each, as many as the device has SMs
    with pytest.raises(ValueError, match=rf"cannot make {too_many} partitions .* so \d+ fit"):
        cw.Device(0).partition(size, groups=too_many)
    with pytest.raises(ValueError, match=f"device 0 has {resources.sm_count} SMs"):
        cw.Device(0).partition(resources.sm_count + 1)
    with pytest.raises(ValueError, match="sms must be at least 1"):
        cw.Device(0).partition(0)
    with pytest.raises(ValueError, match="groups must be at least 1"):
        cw.Device(0).partition(1, groups=0)
    with pytest.raises(TypeError, match="sms must be an int, not float"):
        cw.Device(0).partition(2.5)
    with pytest.raises(TypeError, match="sms must be an int, not bool"):
        cw.Device(0).partition(True)
    with pytest.raises(TypeError, match=r"Device\(n\).partition\(sms\) makes them"):
        cw.SMPartition()


def test_a_stream_on_a_partition_is_a_non_blocking_stream_of_its_device():
    reserved, *_ = cw.Device(0).partition(1)
    stream = cw.Stream(partition=reserved, priority="high", name="reserved")
    assert stream.partition is reserved
    assert stream.device == 0 and not stream.blocking
    assert stream.priority == cw.Device(0).properties.priority_range[1]
    assert repr(stream).endswith(f"non-blocking on {reserved.sms} SMs>")
    assert cw.Stream().partition is None
    assert cw.Stream(partition=reserved).name == f"on {reserved.sms} SMs"  # its trace lane says so


def test_a_stream_on_a_partition_refuses_what_cuda_refuses():
    reserved, *_ = cw.Device(0).partition(1)
    with pytest.raises(ValueError, match="cannot be blocking: CUDA makes every stream of a green context non-blocking"):
        cw.Stream(partition=reserved, blocking=True)
    with pytest.raises(TypeError, match="partition must be a cuweave.SMPartition"):
        cw.Stream(partition=0)


@pytest.mark.skipif(cw.device_count() < 2, reason="needs two devices (CUWEAVE_SIM_DEVICES=2 on the simulator)")
def test_a_stream_on_a_partition_is_on_the_partitions_device():
    reserved, *_ = cw.Device(1).partition(1)
    assert cw.Stream(partition=reserved).device == 1
    assert cw.Stream(partition=reserved, device=1).device == 1
    with pytest.raises(ValueError, match="differs from the partition's device 1"):
        cw.Stream(partition=reserved, device=0)


def test_work_on_partition_streams_is_ordered_as_on_any_stream(rng):
    reserved, rest = cw.Device(0).partition(1)
    first, second = cw.Stream(partition=reserved), cw.Stream(partition=rest)
    values = rng.standard_normal(1 << 16).astype(np.float32)
    x = cw.to_device(values, stream=first)
    y = cw.ops.add(x, 1.0, stream=first)
    done = cw.Event()
    done.record(first)
    second.wait(done)
    z = cw.ops.scale(y, 2.0, stream=second)
    assert np.array_equal(z.to_numpy(), (values + np.float32(1.0)) * np.float32(2.0))


def settled_partitions() -> int:
    """Partitions alive once released objects and completed work have let go of theirs."""
    gc.collect()
    cw.synchronize()
    cw.collect()
    return cw._core.sm_partitions_alive()


def test_a_partition_lives_until_its_streams_work_has_completed():
    before = settled_partitions()
    parts = cw.Device(0).partition(1)
    assert cw._core.sm_partitions_alive() == before + len(parts)
    stream = cw.Stream(partition=parts[0])
    with Gate(stream):
        cw.ops.spin(0.001, stream=stream)
        del parts
        gc.collect()
        assert cw._core.sm_partitions_alive() == before + 1  # its stream refers to it
        del stream
        gc.collect()
        cw.collect()
        assert cw._core.sm_partitions_alive() == before + 1  # the work queued on the destroyed stream waits
    assert settled_partitions() == before


def test_a_closed_partition_stream_releases_its_partition_once_its_work_completed():
    before = settled_partitions()
    reserved, *_ = cw.Device(0).partition(1)
    stream = cw.Stream(partition=reserved)
    x = cw.zeros(1024, np.float32, stream=stream)
    del reserved, _
    stream.close()
    assert np.all(x.to_numpy() == 0.0)
    assert settled_partitions() == before + 1  # the closed stream object still refers to it
    del stream, x
    assert settled_partitions() == before


WHICH_SM = r"""
extern "C" __global__ void which_sm(unsigned* sm_of_block, unsigned long long busy_ns) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < busy_ns);
    if (threadIdx.x == 0) sm_of_block[blockIdx.x] = sm;
}
"""


@pytest.mark.gpu
def test_kernels_on_a_partition_stream_run_on_its_sms_only(resources):
    kernel = cw.compile(WHICH_SM, "which_sm")
    reserved, rest = cw.Device(0).partition(resources.min_partition_sms)
    blocks = 4 * resources.sm_count

    def sms_used(stream: cw.Stream) -> set[int]:
        out = cw.zeros(blocks, np.uint32, stream=stream)
        with stream:
            kernel(blocks, 64, (out, np.uint64(20_000)))
        return set(out.to_numpy().tolist())

    on_reserved = sms_used(cw.Stream(partition=reserved))
    on_rest = sms_used(cw.Stream(partition=rest))
    on_device = sms_used(cw.Stream())
    assert len(on_reserved) <= reserved.sms, (len(on_reserved), reserved.sms)
    assert len(on_rest) <= rest.sms, (len(on_rest), rest.sms)
    assert not on_reserved & on_rest
    assert len(on_device) > reserved.sms


def test_a_weave_begun_on_a_partition_stream_places_its_work_on_that_partition(rng):
    reserved, *_ = cw.Device(0).partition(1)
    values = rng.standard_normal(4096).astype(np.float32)
    with cw.Stream(partition=reserved) as first, cw.weave(streams=3) as w:
        a = cw.to_device(values)
        b = cw.to_device(values)
        sums = [cw.ops.add(a, 1.0), cw.ops.add(b, 2.0)]  # independent: the weave spreads them
        streams = w.streams
    assert streams[0] is first and len(streams) == 3
    assert all(s.partition is reserved for s in streams)
    assert sum(w.counts.per_stream[1:]) > 0  # work went to the added streams
    assert np.array_equal(sums[0].to_numpy(), values + np.float32(1.0))
    assert np.array_equal(sums[1].to_numpy(), values + np.float32(2.0))
