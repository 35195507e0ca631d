"""The simulator exposes missing synchronization: planted bugs fail within a few seeds, the corrected
programs pass a thousand, and a failing seed replays the same failure."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest

import cuweave as cw
from _support import Gate, exploring

pytestmark = pytest.mark.skipif(cw.backend() != "sim", reason="exercises the simulator backend")

N = 4096


def producer_consumer(*, wait: bool) -> bool:
    """Producer on stream A fills a buffer; consumer on stream B copies it to the host.
    Returns True when the consumer saw the producer's data."""
    a, b = cw.Stream(), cw.Stream()
    buf = cw.zeros(N, np.float32, stream=a)
    a.synchronize()
    cw.ops.fill(buf, 1.0, stream=a)
    if wait:
        b.wait(a.record())
    out = cw.pinned_zeros(N, np.float32)
    # Without the wait the copy races the fill on purpose: the sanitizer (CUWEAVE_SANITIZE=1) is told so.
    with contextlib.nullcontext() if wait else cw.sanitize(on_race="ignore"):
        cw.copy_async(out, buf, stream=b).wait()
    return bool((out == 1.0).all())


def host_read(*, wait: bool) -> bool:
    """Copies device data into pinned memory and reads it on the host, with or without waiting."""
    s = cw.Stream()
    d = cw.to_device(np.full(N, 5.0, np.float32), stream=s)
    out = cw.pinned_zeros(N, np.float32)
    transfer = cw.copy_async(out, d, stream=s)
    if wait:
        transfer.wait()
    seen = bool((out == 5.0).all())
    s.synchronize()  # leave nothing queued for the next run
    return seen


def first_failing_seed(program, seeds) -> int | None:
    for seed in seeds:
        with cw.sim.explore(seed):
            if not program():
                return seed
    return None


def test_missing_wait_between_streams_is_caught_within_20_seeds():
    seed = first_failing_seed(lambda: producer_consumer(wait=False), range(20))
    assert seed is not None, "20 seeded schedules all hid the missing event wait"


def test_a_failing_seed_replays_the_same_failure():
    seed = first_failing_seed(lambda: producer_consumer(wait=False), range(20))
    assert seed is not None
    for _ in range(3):
        with cw.sim.explore(seed):
            assert producer_consumer(wait=False) is False


def test_corrected_producer_consumer_passes_1000_seeds():
    failing = first_failing_seed(lambda: producer_consumer(wait=True), range(1000))
    assert failing is None, f"the correctly synchronized program failed with seed {failing}"


def test_host_read_before_the_copy_finished_is_caught_within_20_seeds():
    assert first_failing_seed(lambda: host_read(wait=False), range(20)) is not None


def test_host_read_after_waiting_passes_1000_seeds():
    failing = first_failing_seed(lambda: host_read(wait=True), range(1000))
    assert failing is None, f"the waiting host read failed with seed {failing}"


def test_different_seeds_explore_different_orders():
    outcomes = set()
    for seed in range(40):
        with cw.sim.explore(seed):
            outcomes.add(producer_consumer(wait=False))
    assert outcomes == {True, False}, "exploration should find both orders of two unordered streams"


def next_stream_takes_the_destroyed_handle() -> bool:
    calls = cw._core.backend_calls
    gone = calls.create_stream(0)
    calls.destroy_stream(gone)
    made = calls.create_stream(0)
    calls.destroy_stream(made)
    return made == gone


def test_exploring_a_destroyed_streams_handle_is_taken_by_the_next_stream_or_not():
    # CUDA may hand a destroyed stream's handle to the next stream made, or not. Reused at once, a handle
    # someone still holds names a live stream again, and a use of the destroyed one that crashes CUDA goes
    # unseen: exploring, both happen.
    outcomes = set()
    for seed in range(40):
        with cw.sim.explore(seed):
            outcomes.add(next_stream_takes_the_destroyed_handle())
    assert outcomes == {True, False}
    with cw.sim.explore(7):
        first = next_stream_takes_the_destroyed_handle()
    with cw.sim.explore(7):
        assert next_stream_takes_the_destroyed_handle() == first  # a seed replays its choices


def legacy_then(stream_factory, *, racy: bool = False) -> bool:
    """Legacy default stream fills; a second stream reads. True when the read saw the fill. `racy`: the
    second stream is not ordered after the legacy one (the sanitizer is told the race is wanted)."""
    legacy = cw.default_stream()
    buf = cw.zeros(N, np.float32, stream=legacy)
    legacy.synchronize()
    cw.ops.fill(buf, 2.0, stream=legacy)
    reader = stream_factory()
    out = cw.pinned_zeros(N, np.float32)
    with cw.sanitize(on_race="ignore") if racy else contextlib.nullcontext():
        cw.copy_async(out, buf, stream=reader).wait()
    return bool((out == 2.0).all())


def test_blocking_streams_are_ordered_after_the_legacy_default_stream():
    failing = first_failing_seed(lambda: legacy_then(lambda: cw.Stream(blocking=True)), range(300))
    assert failing is None, f"a blocking stream overtook the legacy default stream (seed {failing})"


def test_non_blocking_streams_are_not_ordered_after_the_legacy_default_stream():
    assert first_failing_seed(lambda: legacy_then(lambda: cw.Stream(blocking=False), racy=True), range(40)) is not None


def test_exception_inside_explore_names_the_seed():
    with pytest.raises(AssertionError) as info:
        with cw.sim.explore(77):
            raise AssertionError("planted")
    assert any("77" in note for note in getattr(info.value, "__notes__", [])) or not hasattr(info.value, "add_note")


def test_explore_restores_the_previous_mode():
    before = cw.sim.seed()
    with cw.sim.explore(5):
        assert cw.sim.seed() == 5
    assert cw.sim.seed() == before


def test_interprocess_events_need_a_gpu():
    event = cw.Event(interprocess=True)
    with pytest.raises(cw.DeviceUnavailableError) as info:
        event.ipc_handle()
    assert info.value.name == "cudaErrorNotSupported"


def test_new_memory_holds_nan_bytes_so_a_read_before_any_write_fails_every_time():
    # CUDA leaves new memory as it was; a test that reads cw.empty() before writing it passes or fails with the
    # heap's garbage unless the simulator makes the garbage the same every time.
    s = cw.Stream()
    assert np.isnan(cw.empty(N, np.float32, stream=s).to_numpy(stream=s)).all()
    assert (cw.empty(N, np.int32, stream=s).to_numpy(stream=s) == -1).all()


def address(array) -> int:
    return array.__cuda_array_interface__["data"][0]


def test_memory_freed_on_a_stream_is_reused_by_its_next_allocation_there_and_reads_unwritten_again():
    # As CUDA's pool does (two addresses in turn on an H200): a loop making each array from the last reuses the
    # block freed on its stream, and the block reads as 0xFF bytes again for its new holder.
    s = cw.Stream()
    x = cw.zeros(N, np.float32, stream=s)
    addresses = set()
    with Gate(s):  # each free stays queued until the next allocation has taken its block
        for _ in range(50):
            x = cw.ops.add(x, 1.0, stream=s)
            addresses.add(address(x))
    assert len(addresses) == 2
    np.testing.assert_array_equal(x.to_numpy(stream=s), np.full(N, 50, np.float32))
    freed = address(x)
    with Gate(s):  # the free stays queued: the block is reused, not released and allocated anew
        del x
        y = cw.empty(N, np.float32, stream=s)
        assert address(y) == freed
    assert np.isnan(y.to_numpy(stream=s)).all()


def test_memory_freed_on_one_stream_is_not_reused_by_another_before_the_free_runs():
    a, b = cw.Stream(), cw.Stream()
    x = cw.zeros(N, np.float32, stream=a)
    a.synchronize()
    freed = address(x)
    with Gate(a):  # the free stays queued behind it
        del x
        y = cw.empty(N, np.float32, stream=b)
        assert address(y) != freed
        z = cw.empty(N, np.float32, stream=a)
        assert address(z) == freed


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_large_allocation_reads_as_unwritten_without_the_host_writing_it():
    # The host writes nothing up front (Note [Memory that reads unwritten]): the process's resident memory does not
    # grow by the allocation, which still reads as 0xFF bytes, and a write stays in its own allocation.
    s = cw.Stream()
    before = _resident_bytes()
    first = cw.empty(256 << 20, np.uint8, stream=s)
    second = cw.empty(256 << 20, np.uint8, stream=s)
    assert _resident_bytes() - before < (64 << 20)
    cw.ops.fill(first, 7, stream=s)
    assert (first.to_numpy(stream=s)[:: 1 << 20] == 7).all()
    assert (second.to_numpy(stream=s)[:: 1 << 20] == 0xFF).all()


def test_chunks_allocated_as_their_work_is_queued_overlap_on_two_streams():
    if exploring():
        pytest.skip("explored schedules run one operation at a time: nothing overlaps there")
    # The overlap recipe written naturally: each chunk's buffers are allocated as its copy and kernel are queued.
    # Allocations do not block the host (nothing is written up front), so the two streams' work overlaps.
    chunk_elements = 1 << 24  # 64 MB a chunk: filling it on the host took about as long as the chunk's kernel
    host = np.ones(2 * chunk_elements, np.float32)
    streams = [cw.Stream(name="chunk 0"), cw.Stream(name="chunk 1")]
    with cw.trace() as trace:
        for i, stream in enumerate(streams):
            chunk = cw.to_device(host[i * chunk_elements:(i + 1) * chunk_elements], stream=stream)
            cw.ops.spin(0.005, stream=stream)
            cw.ops.scale(chunk, 2.0, out=chunk, stream=stream)
    rows = {row.lane: row for row in trace.summary().streams}
    lanes = {trace.select(stream=stream)[0].lane for stream in streams}
    assert all(rows[lane].overlap_ns > 0.5 * rows[lane].busy_ns for lane in lanes), rows
