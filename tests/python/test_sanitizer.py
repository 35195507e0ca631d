"""The stream-race sanitizer: planted bugs are reported on the first run with both call sites; correctly
ordered programs are not (every backend: it is bookkeeping on the host)."""

from __future__ import annotations

import gc
import inspect
import os
import subprocess
import sys
import textwrap
import threading
import time
import types
import warnings
import weakref

import numpy as np
import pytest

import cuweave as cw
from _support import Gate, exploring
from cuweave import _core, _torch_hooks

N = 1 << 12


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def zeroed(stream) -> cw.DeviceArray:
    buf = cw.zeros(N, np.float32, stream=stream)
    stream.synchronize()
    return buf


def test_a_missing_event_wait_between_producer_and_consumer_names_both_call_sites(stream, other_stream):
    buf = zeroed(stream)
    with cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=stream); fill_line = here()  # noqa: E702
        with pytest.raises(cw.RaceError) as info:
            sum_line = here() + 1
            cw.ops.sum(buf, stream=other_stream)
    (earlier, later, begin, end) = info.value.races[0]
    assert earlier[0] == "fill" and earlier[2] == "write"
    assert earlier[3][0] == __file__ and earlier[3][1] == fill_line
    assert later[0] == "ops.sum" and later[2] == "read"
    assert later[3][0] == __file__ and later[3][1] == sum_line
    assert end - begin == N * 4
    message = str(info.value)
    name = os.path.basename(__file__)
    assert f"{name}:{fill_line}" in message and f"{name}:{sum_line}" in message
    assert "wait" in message  # names the fix


def test_call_sites_inside_a_generator_and_a_coroutine_name_their_own_lines_and_functions(stream, other_stream):
    """The innermost frame of the user's is the one named, wherever it runs: a generator resumed from a loop, a
    coroutine driven by asyncio (their frames belong to the generator, not to the thread's stack)."""
    import asyncio

    buf = zeroed(stream)
    lines = {}

    def filling():
        lines["fill"] = here() + 1
        yield cw.ops.fill(buf, 1.0, stream=stream)

    async def summing():
        lines["sum"] = here() + 1
        cw.ops.sum(buf, stream=other_stream)

    with cw.sanitize():
        for _ in filling():
            pass
        with pytest.raises(cw.RaceError) as info:
            asyncio.run(summing())
    (earlier, later, _, _) = info.value.races[0]
    assert earlier[3] == (__file__, lines["fill"], filling.__qualname__), earlier
    assert later[3] == (__file__, lines["sum"], summing.__qualname__), later


@pytest.mark.parametrize("stand_in", [False, True])
def test_work_from_a_thread_with_no_frame_of_the_users_is_named_where_the_thread_it_works_for_waits(
        stream, other_stream, stand_in):
    """As PyTorch's autograd thread runs a backward pass for the thread that waits in backward(): with that thread
    the stand-in (PyTorch's hooks make the thread they attach on one), the work is named at its line."""
    buf = zeroed(stream)

    def filled_by_a_worker():  # a thread whose only frames are threading's and cuweave's
        worker = threading.Thread(target=cw.ops.fill, args=(buf, 1.0), kwargs={"stream": stream})
        worker.start()
        worker.join()

    with cw.sanitize():
        # The process's own (CUWEAVE_SANITIZE=1 keeps PyTorch's hooks attached) is put back after.
        previous = _core._set_call_site_stand_in(threading.get_ident() if stand_in else 0)
        try:
            filled_by_a_worker()
            with pytest.raises(cw.RaceError) as info:
                cw.ops.sum(buf, stream=other_stream)
        finally:
            _core._set_call_site_stand_in(previous)
    earlier = info.value.races[0][0]
    assert earlier[0] == "fill" and earlier[2] == "write"
    if stand_in:
        assert earlier[3][0] == __file__ and earlier[3][2].endswith("filled_by_a_worker"), earlier
    else:
        assert earlier[3] is None, earlier  # named as an unknown call site
        assert "an unknown call site" in str(info.value)


def test_the_operation_that_would_race_is_not_queued(stream, other_stream):
    buf = zeroed(stream)
    with cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=stream)
        with pytest.raises(cw.RaceError):
            cw.ops.fill(buf, 2.0, stream=other_stream)
    stream.synchronize()
    other_stream.synchronize()
    assert np.all(buf.to_numpy(stream=stream) == 1.0)


@pytest.mark.parametrize(
    "order",
    ["event", "stream_wait", "stream_sync", "event_sync", "event_query", "device_sync"],
)
def test_each_kind_of_ordering_makes_the_consumer_clean(stream, other_stream, order):
    buf = zeroed(stream)
    with cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=stream)
        if order == "event":
            other_stream.wait(stream.record())
        elif order == "stream_wait":
            other_stream.wait(stream)
        elif order == "stream_sync":
            stream.synchronize()
        elif order == "event_sync":
            stream.record().synchronize()
        elif order == "event_query":
            done = stream.record()
            done.synchronize()
            assert done.query()
        else:
            cw.synchronize()
        total = cw.ops.sum(buf, stream=other_stream)
    assert float(total.to_numpy(stream=other_stream)) == N


def test_an_event_recorded_before_the_write_does_not_order_it(stream, other_stream):
    buf = zeroed(stream)
    with cw.sanitize():
        too_early = stream.record()
        cw.ops.fill(buf, 1.0, stream=stream)
        other_stream.wait(too_early)
        with pytest.raises(cw.RaceError):
            cw.ops.sum(buf, stream=other_stream)


def test_streams_made_and_destroyed_leave_the_clocks():
    # A stream per batch, each synchronized and dropped, with the device synchronized now and then: what the
    # sanitizer keeps of the streams gone must not grow with their number (each join would grow with it).
    # Agents of streams gone are dropped in batches, each as large as twice what the last attempt had to keep, so
    # the sizes rise and fall; agents that earlier tests' histories still hold make the swing larger. So the
    # highest sizes of a second thousand streams are compared with those of the first: kept, every stream would
    # add its agent.
    host = np.ones(256, np.float32)

    def highest_sizes_over(count):
        highest = (0, 0)
        for i in range(count):
            stream = cw.Stream()
            batch = cw.to_device(host, stream=stream)
            stream.synchronize()
            del batch, stream
            if i % 100 == 99:
                cw.synchronize()
                highest = tuple(map(max, highest, _core.sanitizer.clock_sizes()))
        return highest

    with cw.sanitize():
        first = highest_sizes_over(1_000)
        second = highest_sizes_over(1_000)
    assert second[0] - first[0] < 100 and second[1] - first[1] < 100, (first, second)


def test_a_buffer_reused_by_a_second_stream_while_the_first_still_reads_it(stream, other_stream):
    buf = zeroed(stream)
    out = cw.zeros(N, np.float32, stream=stream)
    stream.synchronize()
    with cw.sanitize():
        cw.ops.copy(out, buf, stream=stream)  # reads buf
        with pytest.raises(cw.RaceError) as info:
            cw.to_device(np.ones(N, np.float32), stream=other_stream)  # a new array: fine
            cw.ops.fill(buf, 3.0, stream=other_stream)  # overwrites what the copy may still read
    earlier, later, _, _ = info.value.races[0]
    assert (earlier[0], earlier[2]) == ("copy", "read")
    assert (later[0], later[2]) == ("fill", "write")


def test_reads_on_two_streams_are_not_a_race(stream, other_stream):
    buf = zeroed(stream)
    with cw.sanitize():
        a = cw.ops.sum(buf, stream=stream)
        b = cw.ops.sum(buf, stream=other_stream)
    assert float(a.to_numpy(stream=stream)) == float(b.to_numpy(stream=other_stream)) == 0.0


def test_a_host_write_into_a_pinned_array_before_its_copy_was_waited_for_names_the_copy_and_the_wait(stream):
    host = cw.pinned_empty(N, np.float32)
    host[:] = 1.0
    dev = cw.empty(N, np.float32, stream=stream)
    with cw.sanitize():
        transfer = cw.copy_async(dev, host, stream=stream); copy_line = here()  # noqa: E702
        host[:] = 2.0  # the copy may still be reading: a race whether or not it has finished by now
        with pytest.raises(cw.RaceError) as info:
            wait_line = here() + 1
            transfer.wait()
    (earlier, later, begin, end) = info.value.races[0]
    assert earlier[0] == "copy" and earlier[2] == "read" and earlier[3][1] == copy_line
    assert later[0] == "a host write" and later[2] == "write" and later[3][1] == wait_line
    assert (begin, end - begin) == (host.ctypes.data, N * 4)
    assert "after waiting for the copy" in str(info.value)


@pytest.mark.parametrize("wait", ["transfer", "stream", "event", "device"])
def test_a_host_write_after_waiting_for_the_copy_is_clean(stream, wait):
    host = cw.pinned_empty(N, np.float32)
    host[:] = 1.0
    dev = cw.empty(N, np.float32, stream=stream)
    with cw.sanitize():
        transfer = cw.copy_async(dev, host, stream=stream)
        done = stream.record()
        {"transfer": transfer.wait, "stream": stream.synchronize, "event": done.synchronize,
         "device": cw.synchronize}[wait]()
        host[:] = 2.0
        cw.copy_async(dev, host, stream=stream).wait()
    assert np.all(dev.to_numpy(stream=stream) == 2.0)


@pytest.mark.parametrize("size", [N, (1 << 21) + 64], ids=["checked whole", "sampled"])
@pytest.mark.parametrize("how", ["one stream", "two streams and an event"])
def test_device_to_pinned_to_device_is_clean(stream, other_stream, how, size):
    """A copy into pinned memory and a copy out of it, ordered on the device: the bytes change under the
    second copy's checksum, written by the first copy, not by the host (Note [Host writes under a copy])."""
    src = cw.to_device(np.arange(size, dtype=np.float32), stream=stream)
    dst = cw.empty(size, np.float32, stream=other_stream)
    staging = cw.pinned_zeros(size, np.float32)
    cw.synchronize()
    reader = stream if how == "one stream" else other_stream
    with cw.sanitize():
        cw.copy_async(staging, src, stream=stream)
        reader.wait(stream.record())
        cw.copy_async(dst, staging, stream=reader)
        reader.synchronize()
    assert np.array_equal(dst.to_numpy(stream=other_stream), np.arange(size, dtype=np.float32))


def _staging_round(stream):
    """A pinned buffer of ones, a device array to copy it into, and a device array of twos to refill it from."""
    host = cw.pinned_empty(N, np.float32)
    host[:] = 1.0
    return host, cw.empty(N, np.float32, stream=stream), cw.to_device(np.full(N, 2.0, np.float32), stream=stream)


def test_a_pinned_buffer_refilled_by_the_device_after_its_copy_out_is_clean(stream):
    # A staging buffer's next round: read by one copy, then written by a copy from the device, in stream order.
    host, dev, other = _staging_round(stream)
    with cw.sanitize():
        cw.copy_async(dev, host, stream=stream)
        cw.copy_async(host, other, stream=stream)
        stream.synchronize()
    assert np.all(host == 2.0) and np.all(dev.to_numpy(stream=stream) == 1.0)


def test_a_host_write_before_the_device_refills_the_buffer_is_still_found(stream):
    host, dev, other = _staging_round(stream)
    with cw.sanitize():
        cw.copy_async(dev, host, stream=stream); copy_line = here()  # noqa: E702
        host[3] = 5.0  # the copy may still be reading
        cw.copy_async(host, other, stream=stream)  # found here, reported by the next wait
        with pytest.raises(cw.RaceError) as info:
            stream.synchronize()
    (earlier, later, _, _) = info.value.races[0]
    assert earlier[0] == "copy" and earlier[3][1] == copy_line and later[0] == "a host write"


def test_a_host_write_is_checked_where_the_host_first_follows_the_copy(stream, other_stream):
    # Waiting for another stream orders nothing about the copy: the write is found later, at its wait.
    host = cw.pinned_empty(N, np.float32)
    host[:] = 1.0  # a pooled block may hold anything, the very bytes written below included (then unseen)
    dev = cw.empty(N, np.float32, stream=stream)
    with cw.sanitize():
        transfer = cw.copy_async(dev, host, stream=stream)
        host[:] = 3.0
        other_stream.synchronize()
        with pytest.raises(cw.RaceError):
            transfer.wait()


class _PeerStream:
    """Stands for another library's stream: cuweave adopts it, its owner synchronizes it directly."""

    def __init__(self) -> None:
        self.owner = cw.Stream()

    def __cuda_stream__(self):
        return (0, self.owner.handle)

    def synchronize(self) -> None:
        # Polled, as another library's own synchronize goes straight to CUDA: the sanitizer sees no wait (a
        # cuweave synchronize of the owner would be seen: the owner and its adoption are one stream to it).
        while not self.owner.query():
            time.sleep(0.0005)


@pytest.fixture
def peer():
    """A peer's stream, and cuweave's adoption of it as `peer.adopted`.

    Not closed at teardown: memory a test allocated on the adopted stream may outlive the test (a caught
    RaceError's traceback holds its frame), and is freed in that stream's order; the adoption keeps the
    peer, and so its stream, alive as long as such memory does, as it keeps a torch or cupy stream alive.
    """
    stream = _PeerStream()
    return types.SimpleNamespace(adopted=cw.Stream.from_external(stream), synchronize=stream.synchronize)


def test_an_adopted_stream_synchronized_by_its_owner_orders_its_work(peer, other_stream):
    buf = zeroed(other_stream)
    with cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=peer.adopted)
        peer.synchronize()  # as torch.cuda.Stream.synchronize() would: straight to the stream
        assert np.all(buf.to_numpy(stream=other_stream) == 1.0)


def test_an_adopted_stream_still_running_is_reported(peer, other_stream):
    buf = zeroed(other_stream)
    with Gate(peer.adopted) as gate, cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=peer.adopted); fill_line = here()  # noqa: E702
        with pytest.raises(cw.RaceError) as info:
            buf.to_numpy(stream=other_stream)
        gate.open()
    assert info.value.races[0][0][3][1] == fill_line
    peer.synchronize()


def test_a_host_write_under_a_copy_on_an_adopted_stream_is_found_once_its_owner_synchronized(peer, other_stream):
    host = cw.pinned_empty(N, np.float32)
    host[:] = 1.0  # not the bytes written below, whatever the pooled block held
    dev = cw.empty(N, np.float32, stream=peer.adopted)
    with cw.sanitize():
        cw.copy_async(dev, host, stream=peer.adopted); copy_line = here()  # noqa: E702
        host[:] = 5.0  # before anyone waited for the copy
        peer.synchronize()  # unseen by the sanitizer: the adopted stream is found idle at the next operation
        with pytest.raises(cw.RaceError) as info:
            cw.ops.fill(cw.empty(N, np.float32, stream=other_stream), 1.0, stream=other_stream)
    (earlier, later, _, _) = info.value.races[0]
    assert earlier[0] == "copy" and earlier[3][1] == copy_line and later[0] == "a host write"


def test_an_adopted_stream_whose_owner_reports_its_synchronizes_is_not_taken_as_waited_for_when_idle(
        peer, other_stream):
    # What cuweave/_torch_hooks.py tells of PyTorch's streams: PyTorch's GPU trace reports every synchronize.
    cw._core.sanitizer.foreign.synchronizes_reported(peer.adopted)
    buf = zeroed(other_stream)
    with cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=peer.adopted); fill_line = here()  # noqa: E702
        peer.synchronize()  # straight to the stream, untold: found idle, but the owner said it tells
        with pytest.raises(cw.RaceError) as info:
            buf.to_numpy(stream=other_stream)
        cw._core.sanitizer.foreign.stream_synchronized(peer.adopted)  # the owner tells its synchronize
        assert np.all(buf.to_numpy(stream=other_stream) == 1.0)
    assert info.value.races[0][0][3][1] == fill_line


def _peer_write(stream: cw.Stream, buf: cw.DeviceArray) -> None:
    """What cuweave/_cupy_hooks.py tells of a CuPy kernel writing `buf` on `stream`."""
    address = buf.__cuda_array_interface__["data"][0]
    cw._core.sanitizer.foreign.operation(stream, "peer write", [(address, buf.nbytes, True)])


def test_another_librarys_work_on_the_legacy_default_stream_found_idle_counts_as_waited_for(other_stream):
    # CuPy's kernels on the legacy default stream, then cupy.cuda.Device().synchronize(), which goes straight to
    # CUDA: the sanitizer takes the stream found idle as waited for, as it does for an adopted stream.
    legacy = cw.Stream.from_external(0)
    assert legacy.kind == "legacy_default"
    buf = zeroed(other_stream)
    with cw.sanitize():
        _peer_write(legacy, buf)
        assert np.all(buf.to_numpy(stream=other_stream) == 0.0)


def test_another_librarys_work_on_the_legacy_default_stream_still_pending_is_reported(other_stream):
    legacy = cw.Stream.from_external(0)
    buf = zeroed(other_stream)
    with Gate(legacy) as gate, cw.sanitize():
        _peer_write(legacy, buf)
        with pytest.raises(cw.RaceError) as info:
            buf.to_numpy(stream=other_stream)
        gate.open()
    (earlier, later, _, _) = info.value.races[0]
    assert (earlier[0], earlier[2], later[0], later[2]) == ("peer write", "write", "copy", "read")


def test_a_wait_through_an_adoption_since_dropped_still_orders_the_streams_later_adoptions(stream):
    # What a DLPack export to a consumer's stream does (bind_array.cpp): a short-lived adoption of the consumer's
    # stream waits for the array's stream and goes; the consumer's next operation comes through another adoption.
    handle = cw._core.backend_calls.create_stream(stream.device)  # a stream cuweave did not make
    try:
        buf = zeroed(stream)
        with Gate(stream) as gate, cw.sanitize():
            cw.ops.fill(buf, 1.0, stream=stream)
            buf.__dlpack__(stream=handle)  # the consumer's stream waits for the fill
            consumer = cw.Stream.from_external(handle)
            total = cw.ops.sum(buf, stream=consumer)  # clean: ordered by that wait
            with pytest.raises(cw.RaceError):
                cw.ops.fill(buf, 2.0, stream=stream)  # the sum may still be reading
            gate.open()
        assert float(total.to_numpy(stream=consumer)) == N
        del total, consumer  # their memory is freed in the consumer's order, before the stream goes
        cw.collect()
    finally:
        cw.synchronize()
        cw._core.backend_calls.destroy_stream(handle)


def test_work_another_library_captures_on_its_stream_is_not_taken_as_run_and_leaves_the_capture_valid(
        other_stream):
    # CuPy's Stream.begin_capture or torch.cuda.graph on the library's own stream: the captured kernel runs at the
    # graph's replays, not now, and asking CUDA whether the stream is idle would invalidate the capture (a stream
    # query during a capture is refused, and the refusal invalidates it).
    calls = cw._core.backend_calls
    owner = _PeerStream().owner  # the library's stream, which it captures itself, unknown to cuweave's captures
    peer = cw.Stream.from_external(owner.handle)
    buf = zeroed(other_stream)
    with cw.sanitize():
        _peer_write(peer, buf)  # watched for a synchronize that its owner makes unseen
        calls.synchronize(peer)
        calls.begin_capture(owner.handle)
        _peer_write(peer, buf)  # captured: never run here
        calls.end_capture(owner.handle)  # raises if anything invalidated the capture
        assert np.all(buf.to_numpy(stream=other_stream) == 0.0)  # no race: the first write was waited for


def test_memory_another_librarys_allocator_hands_out_with_no_known_past_starts_with_no_history(stream, other_stream):
    buf = zeroed(stream)
    address, nbytes = buf.__cuda_array_interface__["data"][0], buf.nbytes
    with Gate(stream) as gate, cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=stream)
        with pytest.raises(cw.RaceError):
            cw.ops.fill(buf, 2.0, stream=other_stream)
        # Bytes its allocator was not seen to free: nothing is known of their past (a reuse of a block it freed is
        # checked instead: test_sanitizer_reuse.py).
        cw._core.sanitizer.foreign.allocated(address, nbytes, other_stream)
        cw.ops.fill(buf, 2.0, stream=other_stream)  # the earlier fill is forgotten
        gate.open()
    cw.synchronize()


FILL_ONES = r"""
extern "C" __global__ void fill_ones(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}
"""

COPY_VALUES = r"""
extern "C" __global__ void copy_values(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
"""


@pytest.mark.gpu
def test_a_compiled_kernel_racing_with_a_builtin_names_the_kernel_and_both_call_sites(stream, other_stream):
    kernel = cw.compile(FILL_ONES, "fill_ones")
    buf = zeroed(stream)
    with cw.sanitize():
        kernel(N // 256, 256, (buf, N), stream=stream); launch_line = here()  # noqa: E702
        with pytest.raises(cw.RaceError) as info:
            cw.ops.sum(buf, stream=other_stream)
    (earlier, later, begin, end) = info.value.races[0]
    assert earlier[0] == "kernel fill_ones" and earlier[2] == "write" and earlier[3][1] == launch_line
    assert later[0] == "ops.sum" and end - begin == N * 4
    stream.synchronize()
    assert np.all(buf.to_numpy(stream=stream) == 1.0)


# A kernel past 64 parameters, whose read-only flags a launch reads otherwise than those of smaller kernels.
WIDE_COPY = ('extern "C" __global__ void wide_copy(float* out, ' + ", ".join(f"int p{i}" for i in range(64)) +
             ', const float* in) { out[0] = in[0]; }')


@pytest.mark.gpu
@pytest.mark.parametrize(("source", "name", "read_only", "arguments"), [
    (COPY_VALUES, "copy_values", (0,), lambda read, written: (read, written, N)),
    (WIDE_COPY, "wide_copy", (65,), lambda read, written: (written, *(0,) * 64, read)),
], ids=["three parameters", "past the 64th parameter"])
def test_a_compiled_kernels_const_parameters_are_reads_that_two_streams_may_share(stream, other_stream, source, name,
                                                                                 read_only, arguments):
    kernel = cw.compile(source, name)
    assert kernel.read_only == read_only
    shared = zeroed(stream)
    a, b = zeroed(stream), zeroed(other_stream)
    with cw.sanitize():
        kernel(N // 256, 256, arguments(shared, a), stream=stream)
        kernel(N // 256, 256, arguments(shared, b), stream=other_stream)  # both only read `shared`: clean
        kernel.read_only = ()  # declared read-write: the same launch now writes what the first one reads
        with pytest.raises(cw.RaceError) as info:
            kernel(N // 256, 256, arguments(shared, b), stream=other_stream)
    assert info.value.races[0][1][0] == f"kernel {name}" and info.value.races[0][1][2] == "write"
    cw.synchronize()


@pytest.fixture
def torch_side(torch, torch_hook):
    """PyTorch, a zeroed CUDA tensor of N floats and a PyTorch side stream; its operators checked by either hook."""
    tensor = torch.zeros(N, device="cuda")
    # Loads PyTorch's add and mul kernels now: CUDA loads a kernel's module lazily, at its first launch, and
    # that waits for the device, which a Gate holding a stream would keep from ever being idle.
    tensor.add_(0.0).mul_(1.0)
    # And PyTorch's dispatch-mode machinery, which imports torch._dynamo (and sympy) at the first operation
    # under a mode: tens of seconds on a fresh machine, which a held stream must not wait through.
    with cw.sanitize():
        tensor.add_(0.0)
        torch.cuda.synchronize()  # seen by the sanitizer (also when CUWEAVE_SANITIZE=1 keeps it on)
    yield torch, tensor, torch.cuda.Stream()
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_a_pytorch_kernel_racing_with_a_cuweave_op_on_one_tensor_names_both_call_sites(stream, torch_side):
    torch, tensor, side = torch_side
    # Held, so that the add_ is still pending when the sum is queued: an adopted stream found idle counts
    # as waited for (Note [Foreign synchronizes]), and the add_ alone would finish within microseconds.
    with Gate(cw.Stream.from_external(side.cuda_stream)) as gate, cw.sanitize():
        with torch.cuda.stream(side):
            tensor.add_(1.0); add_line = here()  # noqa: E702
        with pytest.raises(cw.RaceError) as info:
            sum_line = here() + 1
            cw.ops.sum(cw.asarray(tensor), stream=stream)  # nothing waits for `side`
        gate.open()
    (earlier, later, begin, end) = info.value.races[0]
    assert earlier[0] == "torch add_.Tensor" and earlier[2] == "write" and earlier[3][1] == add_line
    assert later[0] == "ops.sum" and later[3][1] == sum_line
    assert (begin, end - begin) == (tensor.data_ptr(), N * 4)


@pytest.mark.gpu
def test_pytorch_work_ordered_by_its_own_events_and_synchronizes_is_clean(stream, torch_side):
    torch, tensor, side = torch_side
    with cw.sanitize():
        with torch.cuda.stream(side):
            tensor.add_(1.0)
        torch.cuda.current_stream().wait_stream(side)  # an event recorded on `side`, waited for here
        tensor.mul_(2.0)
        torch.cuda.current_stream().synchronize()  # the host waits for both
        total = cw.ops.sum(cw.asarray(tensor), stream=stream)  # clean: after the host's wait
        with torch.cuda.stream(side):
            with pytest.raises(cw.RaceError) as info:
                tensor.add_(1.0)  # nothing ordered the sum, still reading `tensor`, before this write
        if _torch_hooks._native.module is None:  # the mode raises before the add_ is queued; the C++ hook as it returns
            assert float(total.to_numpy(stream=stream)) == 2.0 * N
    assert info.value.races[0][0][0] == "ops.sum" and info.value.races[0][1][0] == "torch add_.Tensor"


@pytest.mark.gpu
def test_a_backward_pass_racing_with_a_side_streams_write_is_named_at_the_backward_call(torch_side):
    torch, tensor, side = torch_side
    weight = torch.ones(N, device="cuda", requires_grad=True)
    # A backward pass before the gate: CUDA loads a kernel's module at its first launch, which waits for the device,
    # held by the gate (the likely reason why this test, run alone in a new process, met the gate's deadline).
    (weight * tensor).sum().backward()
    weight.grad = None
    torch.cuda.synchronize()
    # Held, so that the side stream's write is still pending when the backward pass reads the tensor.
    with Gate(cw.Stream.from_external(side.cuda_stream)) as gate, cw.sanitize():
        loss = (weight * tensor).sum()  # mul keeps `tensor` for weight's gradient
        side.wait_stream(torch.cuda.current_stream())  # after the forward pass's read
        with torch.cuda.stream(side):
            tensor.data.add_(1.0); write_line = here()  # noqa: E702  (.data: no version bump for autograd to refuse)
        with pytest.raises(cw.RaceError) as info:
            backward_line = here() + 1
            loss.backward()  # on PyTorch's autograd thread, reading `tensor`: nothing waits for the side stream
        gate.open()
    (earlier, later, begin, end) = info.value.races[0]
    assert earlier[0] == "torch add_.Tensor" and earlier[3][1] == write_line
    assert later[2] == "read" and later[3][1] == backward_line  # the autograd thread's work, at the user's call
    assert (begin, end - begin) == (tensor.data_ptr(), N * 4)


@pytest.mark.gpu
def test_a_race_raised_by_an_operator_making_a_tensor_comes_out_as_itself_and_the_program_goes_on(stream, torch_side):
    # Python lets go of the operator's new output as the race propagates, while the error is set: the free must not
    # run PyTorch's GPU trace callbacks then, which fail on an error already set and would lose the race.
    torch, tensor, side = torch_side
    with Gate(cw.Stream.from_external(side.cuda_stream)) as gate, cw.sanitize():
        with torch.cuda.stream(side):
            tensor.add_(1.0)
        with pytest.raises(cw.RaceError) as info:
            tensor.sum()  # a new tensor, on the current stream, which nothing ordered after the add_
            cw.synchronize()  # (where the C++ hook's race is raised late, a function call raises it)
        gate.open()
        side.synchronize()
        assert float((tensor * 2).sum()) == 2.0 * N  # the next operators run, and the race is not raised again
    assert info.value.races[0][0][0] == "torch add_.Tensor" and info.value.races[0][1][0] == "torch sum.default"


@pytest.mark.gpu
def test_an_exception_freeing_a_functions_tensors_as_it_propagates_comes_out_as_itself(torch_side):
    # A frame's last references to CUDA tensors are let go while the exception is set, which frees their blocks.
    torch, tensor, _ = torch_side

    def step() -> None:
        scratch = tensor * 2  # noqa: F841  (freed as the KeyError leaves this frame)
        raise KeyError("the program's own error")

    with cw.sanitize():
        for _ in range(3):
            with pytest.raises(KeyError, match="the program's own error"):
                step()
        assert float(tensor.sum()) == 0.0


@pytest.mark.gpu
def test_a_tensor_copied_from_the_host_without_non_blocking_is_ready_for_any_stream(torch_side):
    # PyTorch synchronizes the copy's stream inside the call, after the copy.
    torch, _, side = torch_side
    with cw.sanitize():
        copied = torch.ones(N).cuda()
        listed = torch.tensor([1.0, 2.0, 3.0], device="cuda")
        transposed = torch.ones(N // 64, 64).t().cuda()  # the same strides: one copy, before the synchronize
        with torch.cuda.stream(side):
            for tensor in (copied, listed, transposed):
                tensor.mul_(2.0)  # clean: nothing is still writing it
        side.synchronize()
        # Into a tensor that is not contiguous, in another dtype, PyTorch copies to a contiguous one first and from
        # that on the stream after the synchronize: a write elsewhere races with that copy.
        staged = torch.ones(N // 64, 64, dtype=torch.float64).t().to("cuda", torch.float32)
        assert not staged.is_contiguous()
        with torch.cuda.stream(side), pytest.raises(cw.RaceError):
            staged.mul_(2.0)
            cw.synchronize()  # (where the C++ hook's race is raised late, a function call raises it)
        torch.cuda.synchronize()
    assert float(copied.sum()) == 2.0 * N and float(transposed.sum()) == 2.0 * N


@pytest.mark.gpu
def test_the_kernels_a_pytorch_operator_launches_are_its_own_also_where_cupys_launches_are_watched(
        torch_side, torch_hook, cupy):
    # With CuPy imported, the kernels other libraries launch through the driver are watched, and those of unknown
    # extents named as unchecked; a PyTorch operator's are its hook's to check. A kernel is asked about at its first
    # launch in the process: each hook its own operator.
    torch, tensor, _ = torch_side
    operator = {"native": torch.special.i1e, "python": torch.special.erfcx}[torch_hook]
    with cw.sanitize(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        operator(tensor)
        torch.cuda.synchronize()
    assert [str(w.message) for w in caught if "does not check kernel" in str(w.message)] == []


@pytest.mark.gpu
def test_checking_an_operator_keeps_none_of_its_tensors_past_it(torch_side):
    # A tensor the program lets go of is freed there, its block back with the allocator at once.
    torch, tensor, _ = torch_side
    with cw.sanitize():
        scratch = torch.empty(N, device="cuda")
        let_go = weakref.ref(scratch)
        scratch.copy_(tensor)
        tensor.add_(scratch)
        gc.collect()  # earlier tests' garbage, which would otherwise be freed at any allocation
        held = torch.cuda.memory_allocated()
        del scratch
        assert let_go() is None
        assert torch.cuda.memory_allocated() == held - N * 4


def test_a_stream_and_its_adoptions_are_one_stream_to_the_sanitizer(stream, other_stream):
    first, second = cw.Stream.from_external(stream.handle), cw.Stream.from_external(stream.handle)
    buf = zeroed(stream)
    # Held, so that the fill is still pending: an adopted stream found idle counts as waited for.
    with Gate(stream) as gate, cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=first)
        del first  # the other adoption goes on as the same stream
        cw.ops.sum(buf, stream=second)  # after the fill in the stream's own order: clean
        cw.ops.fill(buf, 2.0, stream=stream)  # the stream itself, after the sum: clean
        with pytest.raises(cw.RaceError):
            cw.ops.sum(buf, stream=other_stream)
        gate.open()
    stream.synchronize()


def test_the_legacy_default_stream_orders_blocking_streams_only(stream):
    legacy = cw.default_stream()
    blocking = cw.Stream(blocking=True)
    try:
        for reader, races in ((blocking, False), (stream, True)):  # `stream` is non-blocking
            buf = cw.zeros(N, np.float32, stream=legacy)
            legacy.synchronize()
            with cw.sanitize():
                cw.ops.fill(buf, 1.0, stream=legacy)
                if races:
                    with pytest.raises(cw.RaceError):
                        cw.ops.sum(buf, stream=reader)
                else:
                    cw.ops.sum(buf, stream=reader)
            cw.synchronize()
    finally:
        blocking.close()


def test_arrays_used_on_two_streams_and_dropped_are_not_a_use_after_free(stream, other_stream):
    with cw.sanitize():
        for _ in range(3):
            buf = cw.zeros(N, np.float32, stream=stream)
            cw.ops.fill(buf, 1.0, stream=stream)
            other_stream.wait(stream.record())
            total = cw.ops.sum(buf, stream=other_stream)
            del buf  # freed in other_stream's order, after stream's work (cuweave keeps it)
            cw.collect()
            assert float(total.to_numpy(stream=other_stream)) == N
        stream.synchronize()
        cw.ops.fill(cw.zeros(N, np.float32, stream=stream), 0.0, stream=stream)  # raises any deferred report


# The races these tests queue on purpose must not run at once: the producer is held until the consumer is
# done (on the simulator, two worker threads touching one buffer are a data race to ThreadSanitizer too).


def test_warn_mode_warns_and_queues_the_work(stream, other_stream):
    buf = zeroed(stream)
    with Gate(stream), cw.sanitize(on_race="warn"):
        cw.ops.fill(buf, 1.0, stream=stream)
        with pytest.warns(cw.RaceWarning, match="race on"):
            total = cw.ops.sum(buf, stream=other_stream)
        assert float(total.to_numpy(stream=other_stream)) == 0.0  # queued, and ran before the held fill
    stream.synchronize()


def test_an_inner_ignore_block_marks_a_wanted_race(stream, other_stream):
    buf = zeroed(stream)
    with Gate(stream), cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=stream)
        with cw.sanitize(on_race="ignore"):
            cw.ops.sum(buf, stream=other_stream)
            other_stream.synchronize()
        with pytest.raises(cw.RaceError):  # the outer block raises again
            cw.ops.fill(buf, 2.0, stream=other_stream)


@pytest.mark.skipif(os.environ.get("CUWEAVE_SANITIZE", "0") not in ("", "0"), reason="the process runs sanitized")
def test_off_by_default(stream, other_stream):
    buf = zeroed(stream)
    with Gate(stream), warnings.catch_warnings():
        warnings.simplefilter("error")
        cw.ops.fill(buf, 1.0, stream=stream)
        cw.ops.sum(buf, stream=other_stream)  # a race, unchecked
        other_stream.synchronize()
    cw.synchronize()


def test_sanitizing_says_whether_operations_are_checked():
    whole_process = os.environ.get("CUWEAVE_SANITIZE", "") not in ("", "0")
    assert cw.sanitizing() == whole_process
    with cw.sanitize():
        assert cw.sanitizing()
        with cw.sanitize(on_race="warn"):
            assert cw.sanitizing()
        assert cw.sanitizing()
    assert cw.sanitizing() == whole_process


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="raise"):
        with cw.sanitize(on_race="explode"):
            pass


def test_cuweave_sanitize_turns_it_on_for_a_whole_process(tmp_path):
    script = tmp_path / "racy.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import cuweave as cw
            a, b = cw.Stream(name="producer"), cw.Stream(name="consumer")
            x = cw.zeros(1024, np.float32, stream=a)
            a.synchronize()
            cw.ops.fill(x, 1.0, stream=a)
            cw.ops.sum(x, stream=b)
            """
        )
    )
    env = dict(os.environ, CUWEAVE_SANITIZE="1")
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "RaceError" in result.stderr
    assert "stream 'producer'" in result.stderr and "stream 'consumer'" in result.stderr
    assert "racy.py:7" in result.stderr and "racy.py:8" in result.stderr
    env["CUWEAVE_SANITIZE"] = "0"
    assert subprocess.run([sys.executable, str(script)], env=env, capture_output=True, timeout=120).returncode == 0


def test_a_race_between_two_branches_of_a_captured_graph_is_reported_while_capturing(stream, other_stream):
    buf, out = zeroed(stream), zeroed(stream)
    with cw.sanitize():
        with pytest.raises(cw.RaceError) as info:
            with cw.capture(stream):
                other_stream.wait(stream.record())  # fork
                cw.ops.fill(buf, 1.0, stream=stream)
                cw.ops.copy(out, buf, stream=other_stream)  # no edge from the fill
                stream.wait(other_stream.record())  # join
    earlier, later, _, _ = info.value.races[0]
    assert earlier[0] == "fill, captured," and later[0] == "copy, captured,"


def test_two_adoptions_of_the_capturing_stream_are_one_stream_in_the_capture(stream):
    # What PyTorch's operators on a torch.cuda.ExternalStream of the capturing stream come through: a new
    # adoption each (Note [One agent per CUDA stream]). Program order on the one CUDA stream orders them.
    buf = zeroed(stream)
    with cw.sanitize():
        with cw.capture(stream) as cap:
            first, second = cw.Stream.from_external(stream.handle), cw.Stream.from_external(stream.handle)
            cw.ops.fill(buf, 1.0, stream=first)
            cw.ops.fill(buf, 2.0, stream=second)
        cap.graph.replay(stream)
    assert np.all(buf.to_numpy(stream=stream) == 2.0)


def test_a_correct_graph_is_clean_and_its_replay_is_one_operation_on_the_replay_stream(stream, other_stream):
    buf, out = zeroed(stream), zeroed(stream)
    with cw.sanitize():
        with cw.capture(stream) as cap:
            cw.ops.fill(buf, 1.0, stream=stream)
            other_stream.wait(stream.record())
            cw.ops.copy(out, buf, stream=other_stream)
            stream.wait(other_stream.record())
        cap.graph.replay(stream)
        with pytest.raises(cw.RaceError) as info:
            cw.ops.fill(out, 5.0, stream=other_stream)  # the replay on `stream` writes `out`
        assert info.value.races[0][0][0] == "graph replay"
        stream.synchronize()
        cw.ops.fill(out, 5.0, stream=other_stream)
    assert np.all(out.to_numpy(stream=other_stream) == 5.0)



@pytest.mark.skipif(exploring(), reason="queued work runs only once the host waits while the simulator "
                    "explores schedules: the replay cannot end unseen")
def test_a_woven_functions_temporaries_freed_once_its_replay_was_seen_complete_are_not_a_use_after_free(stream):
    def two_branches(x, y):
        return cw.ops.add(cw.ops.scale(x, 2.0), cw.ops.add(y, 1.0))  # two temporaries, on two streams

    with cw.sanitize():
        x, y = cw.ones(N, np.float32, stream=stream), cw.ones(N, np.float32, stream=stream)
        for _ in range(8):  # Python lets the function's parts go in an order of its own: try several
            woven = cw.woven(two_branches, streams=2)
            with stream:
                woven(x, y)
                woven(x, y)  # a replay
            time.sleep(0.05)  # it ends meanwhile, unseen: the host neither waits nor asks
            # Letting the function go, cuweave finds the replay complete and frees the temporaries its graph kept,
            # each on its own stream: the host saw the replay end first, which orders each free after it.
            del woven
            cw.collect()
        stream.synchronize()  # raises any deferred report

COLLECTION_DURING_A_CALL_SITE = """
import gc
import numpy as np
import cuweave as cw

with cw.sanitize():
    s = cw.Stream()
    x = cw.zeros(4, np.float32, stream=s)
    for _ in range(50):
        doomed = [cw.Stream()]
        # the sanitizer knows it now: its destructor tells the sanitizer
        cw.ops.fill(cw.zeros(4, np.float32, stream=doomed[0]), 1.0, stream=doomed[0])
        doomed[0].synchronize()
        doomed.append(doomed)  # a cycle: only the collector frees it
        del doomed
        gc.set_threshold(1)  # the next allocation of a tracked object collects, the call-site lookup's included
        try:
            (lambda: cw.ops.fill(x, 2.0, stream=s))()
        finally:
            gc.set_threshold(700, 10, 10)
    s.synchronize()
print("done")
"""


def test_a_collection_while_the_sanitizer_looks_up_a_call_site_frees_streams_without_deadlock():
    # The sanitizer asks for the call site under its lock; a collection started there would run a Stream's
    # destructor, which tells the sanitizer: the lookup starts no collection.
    run = subprocess.run([sys.executable, "-c", COLLECTION_DURING_A_CALL_SITE], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr[-3000:]


def test_a_closed_stream_going_away_leaves_the_stream_that_took_its_handle_alone():
    # CUDA hands a destroyed stream's handle to a stream made later (the simulator does too). The closed
    # stream's object may outlive that: when it goes, the new stream and its adoptions must stay one stream.
    cw.Stream().synchronize()  # whatever a first stream sets up, set up before the handle is watched
    old = cw.Stream()
    handle = old.handle
    old.close()
    cw.synchronize()  # its handle is free once the event recorded as it closed has completed
    made = [cw.Stream() for _ in range(8)]
    reusing = next((s for s in made if s.handle == handle), None)
    if reusing is None:
        pytest.skip("no stream made here took the closed stream's handle")
    buf = cw.zeros(1024, np.float32, stream=reusing)
    reusing.synchronize()
    with cw.sanitize():
        cw.ops.fill(buf, 1.0, stream=reusing)
        del old
        gc.collect()
        adoption = cw.Stream.from_external(reusing.handle)
        cw.ops.fill(buf, 2.0, stream=adoption)  # the same CUDA stream, after the first fill: clean
    reusing.synchronize()
    assert np.all(buf.to_numpy() == 2.0)
