"""A block another library's allocator hands out again keeps its history: a reuse that work on another stream
may still be reading is named (where the block was used, freed and handed out again, and both fixes); the
reuses record_stream or a stream wait order are not. The allocator's reports come from stand-ins here (the
calls PyTorch's hooks make); cuweave's own arrays are shown safe by what the GPU reads. Every backend."""

from __future__ import annotations

import gc
import inspect
import os

import numpy as np
import pytest

import cuweave as cw
from _support import UNDER_HOST_SANITIZER
from cuweave import _core

N = 1 << 12


_memory: list[cw.DeviceArray] = []  # the stand-in allocators' memory, kept until the streams are done


@pytest.fixture
def torch_like_streams():
    """Two streams another library made and adopted as PyTorch's hooks adopt them: their owner reports its
    synchronizes, so a stream found idle does not count as waited for."""
    handles = [_core.backend_calls.create_stream(0) for _ in range(2)]
    streams = [cw.Stream.from_external(handle) for handle in handles]
    for adopted in streams:
        _core.sanitizer.foreign.synchronizes_reported(adopted)
    yield streams
    for adopted in streams:
        adopted.synchronize()
    _memory.clear()  # freed once the streams' work is done (the stand-in's uses are not cuweave's to follow)
    del streams, adopted
    gc.collect()  # a test's frame kept by a RaceError's traceback still holds a stand-in: its free needs the stream
    for handle in handles:
        _core.backend_calls.destroy_stream(handle)


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


class StandInAllocator:
    """Reports what a caching allocator does with one block of cuweave memory: hands it out on a stream, frees it,
    records a stream on it, as PyTorch's hooks report its caching allocator's."""

    def __init__(self, stream, allocator: str = "PyTorch"):
        self.allocator = allocator
        self.memory = cw.zeros(N, np.float32, stream=stream)
        _memory.append(self.memory)
        stream.synchronize()
        self.address = self.memory.__cuda_array_interface__["data"][0]

    def hand_out(self, stream) -> int:
        _core.sanitizer.foreign.allocated(self.address, self.memory.nbytes, stream, self.allocator)
        return self.address

    def free(self) -> None:
        _core.sanitizer.foreign.freed(self.address)

    def record_stream(self, stream) -> None:
        _core.sanitizer.foreign.stream_recorded(self.address, stream)

    def write(self, stream, name: str) -> None:
        _core.sanitizer.foreign.operation(stream, name, [(self.address, self.memory.nbytes, True)])

    def read(self, stream, name: str, *, synchronizes_reported: bool = False) -> None:
        _core.sanitizer.foreign.operation(stream, name, [(self.address, self.memory.nbytes, False)],
                                          synchronizes_reported=synchronizes_reported)


def _first_batch(pool: StandInAllocator, producer, consumer) -> None:
    """A prefetcher's batch: copied on `producer`, read on `consumer` after an event; the tensor then dropped."""
    pool.hand_out(producer)
    pool.write(producer, "copy batch 1")
    consumer.wait(producer.record())
    pool.read(consumer, "forward batch 1")


def test_a_block_handed_out_again_while_another_stream_reads_it_is_named_with_every_line(torch_like_streams):
    producer, consumer = torch_like_streams
    with cw.sanitize():
        pool = StandInAllocator(producer)
        address, size = pool.hand_out(producer), pool.memory.nbytes
        _core.sanitizer.foreign.operation(producer, "copy batch 1", [(address, size, True)])
        consumer.wait(producer.record())
        _core.sanitizer.foreign.operation(consumer, "forward batch 1", [(address, size, False)]); read = here()  # noqa: E702
        _core.sanitizer.foreign.freed(address); free = here()  # noqa: E702
        _core.sanitizer.foreign.allocated(address, size, producer); reuse = here()  # noqa: E702
        with pytest.raises(cw.RaceError) as info:
            _core.sanitizer.foreign.operation(producer, "copy batch 2", [(address, size, True)])
        write = here() - 1
    report = str(info.value)
    lines = report.splitlines()
    assert "read by forward batch 1" in lines[1] and f"test_sanitizer_reuse.py:{read} " in lines[2]
    assert "write by copy batch 2" in lines[3] and f"test_sanitizer_reuse.py:{write} " in lines[4]
    assert "then freed" in lines[5] and f"test_sanitizer_reuse.py:{free} " in lines[6]
    assert "handed the block out again" in lines[7] and f"test_sanitizer_reuse.py:{reuse} " in lines[8]
    assert "record_stream" in lines[9] and "wait_stream" in lines[9]


@pytest.mark.parametrize(("allocator", "fixes"), [
    ("PyTorch", ["tensor.record_stream(stream)", "stream.wait_stream(other)"]),
    ("CuPy", ["CuPy has no record_stream", "stream.wait_event(other.record())"]),
])
def test_a_reuse_is_reported_with_the_fixes_of_the_library_that_reused_the_block(torch_like_streams, allocator, fixes):
    producer, consumer = torch_like_streams
    with cw.sanitize():
        pool = StandInAllocator(producer, allocator)
        _first_batch(pool, producer, consumer)
        pool.free()
        pool.hand_out(producer)
        with pytest.raises(cw.RaceError) as info:
            pool.write(producer, "copy batch 2")
    fix_line = str(info.value).splitlines()[9]
    assert fix_line.startswith("  fix either:") and all(fix in fix_line for fix in fixes), fix_line
    assert ("PyTorch" in fix_line) == (allocator == "PyTorch")


def test_an_allocator_the_sanitizer_does_not_know_is_refused_with_the_ones_it_does(torch_like_streams):
    pool = StandInAllocator(torch_like_streams[0])
    with cw.sanitize(), pytest.raises(ValueError, match='"PyTorch" or "CuPy", not "JAX"'):
        _core.sanitizer.foreign.allocated(pool.address, pool.memory.nbytes, torch_like_streams[0], "JAX")


def test_a_block_read_on_pytorchs_default_stream_is_not_taken_as_waited_for_when_reused(torch_like_streams):
    # PyTorch's current stream is most often the legacy default stream, which other libraries share: its reads
    # there come told that PyTorch reports its synchronizes, so a read found finished (nothing runs here) does
    # not order the block's reuse on the prefetch stream.
    producer = torch_like_streams[0]
    default = cw.default_stream()
    with cw.sanitize():
        pool = StandInAllocator(producer)
        pool.hand_out(producer)
        pool.write(producer, "copy batch 1")
        default.wait(producer.record())
        pool.read(default, "forward batch 1", synchronizes_reported=True)
        pool.free()
        pool.hand_out(producer)
        with pytest.raises(cw.RaceError, match="forward batch 1 on the legacy default stream"):
            pool.write(producer, "copy batch 3")


# Where each ordering of the reuse after the reader goes, and what it is.
ORDERINGS = {
    "record_stream on the reader, before the free": ("free", lambda pool, producer, consumer: pool.record_stream(consumer)),
    "the allocating stream waits for the reader, before the allocation": (
        "hand_out", lambda pool, producer, consumer: producer.wait(consumer.record())),  # producer.wait_stream(consumer)
    "the allocating stream waits after the allocation, before the first write": (
        "write", lambda pool, producer, consumer: producer.wait(consumer.record())),
    "the host waits for the reader": ("free", lambda pool, producer, consumer: consumer.synchronize()),
}


@pytest.mark.parametrize("ordering", ORDERINGS)
def test_a_reuse_ordered_after_the_reader_is_clean(torch_like_streams, ordering):
    producer, consumer = torch_like_streams
    before, order = ORDERINGS[ordering]
    with cw.sanitize():
        pool = StandInAllocator(producer)
        _first_batch(pool, producer, consumer)
        for step in ("free", "hand_out", "write"):
            if step == before:
                order(pool, producer, consumer)
            if step == "free":
                pool.free()
            elif step == "hand_out":
                pool.hand_out(producer)
            else:
                pool.write(producer, "copy batch 2")


def test_record_stream_covers_only_the_work_queued_before_the_free(torch_like_streams):
    producer, consumer = torch_like_streams
    with cw.sanitize():
        pool = StandInAllocator(producer)
        pool.hand_out(producer)
        pool.write(producer, "copy batch 1")
        consumer.wait(producer.record())
        pool.record_stream(consumer)
        pool.free()
        pool.read(consumer, "a late read")  # after the free: a use after free, but what matters here is the reuse
        pool.hand_out(producer)
        with pytest.raises(cw.RaceError, match="a late read"):
            pool.write(producer, "copy batch 2")


def test_the_allocating_streams_own_earlier_uses_need_no_order(torch_like_streams):
    stream = torch_like_streams[0]
    with cw.sanitize():
        pool = StandInAllocator(stream)
        pool.hand_out(stream)
        pool.write(stream, "first")
        pool.read(stream, "second")
        pool.free()
        pool.hand_out(stream)
        pool.write(stream, "third")


def test_a_new_holder_that_writes_first_replaces_the_old_history(torch_like_streams):
    producer, consumer = torch_like_streams
    with cw.sanitize():
        pool = StandInAllocator(producer)
        _first_batch(pool, producer, consumer)
        pool.free()
        producer.wait(consumer.record())
        pool.hand_out(producer)
        pool.write(producer, "copy batch 2")
        consumer.wait(producer.record())
        pool.read(consumer, "forward batch 2")  # ordered after batch 2's write: no report, old history gone


def test_bytes_first_seen_or_coming_from_another_streams_pool_start_afresh(torch_like_streams):
    # A caching allocator hands a block back out only on the stream it came from; bytes on another stream's
    # pool went back to the driver in between (which synchronizes), and bytes never seen freed have no known past.
    producer, consumer = torch_like_streams
    with cw.sanitize():
        pool = StandInAllocator(producer)
        _first_batch(pool, producer, consumer)
        pool.read(producer, "a read the consumer does not wait for")
        pool.free()
        pool.hand_out(consumer)
        pool.write(consumer, "on the other pool")
        other = StandInAllocator(producer)
        other.write(consumer, "never handed out")  # cuweave memory: its own rules
        other.hand_out(producer)  # no free seen: starts afresh
        other.write(producer, "first holder seen")


def test_cuweaves_own_memory_is_never_reused_under_a_reader_on_another_stream(stream, other_stream):
    # cuweave's frees follow every stream that used the memory: new arrays on the first stream cannot take the
    # bytes the other stream is still reading, whatever the schedule (on the simulator, queued work may run as
    # late as CUDA allows).
    old = cw.to_device(np.full(N, 7.0, np.float32), stream=stream)
    stream.synchronize()
    cw.ops.spin(0.02, stream=other_stream)  # the reader starts late
    result = cw.empty(N, np.float32, stream=other_stream)
    cw.ops.copy(result, old, stream=other_stream)
    del old  # its last reference goes while other_stream's copy is still queued
    fresh = [cw.to_device(np.full(N, -1.0, np.float32), stream=stream) for _ in range(8)]
    stream.synchronize()
    assert (result.to_numpy(stream=other_stream) == 7.0).all()
    assert all((f.to_numpy(stream=stream) == -1.0).all() for f in fresh)


def test_ten_thousand_steps_of_reuse_keep_the_bookkeeping_bounded(torch_like_streams):
    # A training loop's shape: every step a batch block is handed out on the producer, read by the consumer,
    # recorded and freed; the blocks rotate among three places in the pool. What the sanitizer keeps per block
    # must not grow with the steps.
    producer, consumer = torch_like_streams
    pools = [StandInAllocator(producer) for _ in range(3)]
    with cw.sanitize():
        before = _core.sanitizer.shadow_ranges()  # (a process-wide sanitizer tracks other memory too)
        sizes = []
        for step in range(-2_000, 10_000):  # 2000 steps first, so that pools and caches reach their size
            if step == 0:
                gc.collect()
                resident = _resident_bytes()
            pool = pools[step % 3]
            pool.hand_out(producer)
            pool.write(producer, "copy batch")
            consumer.wait(producer.record())
            pool.read(consumer, "forward")
            pool.record_stream(consumer)
            pool.free()
            if step >= 0 and step % 1000 == 999:
                sizes.append(_core.sanitizer.shadow_ranges())
        grown = _resident_bytes() - resident
    assert sizes == [sizes[0]] * 10 and sizes[0] <= before + 3, (before, sizes)  # at most one range per block
    # A block tracked costs about 500 bytes: kept per step, 10,000 steps would add 5 MB.
    if not UNDER_HOST_SANITIZER:
        assert grown < 2 << 20, f"resident memory grew by {grown} bytes over 10,000 steps"


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
