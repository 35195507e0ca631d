"""Operations that are illegal during capture raise CaptureError naming the operation, the body's own
exception is never hidden, and afterwards the stream works and can be captured again. Bad graph-building
input raises TypeError/ValueError. These run on every backend."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import cuweave as cw


def _assert_usable(stream):
    """Eager work runs on the stream, and it can be captured again."""
    x = cw.to_device(np.arange(4, dtype=np.float32), stream=stream)
    assert np.array_equal(cw.ops.add(x, 1.0, stream=stream).to_numpy(stream=stream), np.arange(1, 5, dtype=np.float32))
    with cw.capture(stream) as cap:
        cw.ops.scale(x, 2.0, out=x, stream=stream)
    cap.graph.replay(stream)
    assert np.array_equal(x.to_numpy(stream=stream), np.arange(4, dtype=np.float32) * 2)


def test_synchronizing_the_capturing_stream_raises_and_leaves_it_usable(stream):
    with pytest.raises(cw.CaptureError, match="synchronize") as info:
        with cw.capture(stream):
            stream.synchronize()
    assert info.value.name == "cudaErrorStreamCaptureUnsupported"
    _assert_usable(stream)


def test_a_stream_adopted_while_it_captures_is_described_by_the_capture_that_it_began(stream):
    # CUDA refuses to describe a capturing stream (cudaStreamGetDevice); PyTorch's operators captured on a torch
    # ExternalStream of a cuweave stream adopt it inside the capture (cuweave/_torch_hooks.py).
    x = cw.zeros(16, np.float32, stream=stream)
    with cw.capture(stream) as cap:
        adopted = cw.Stream.from_external(stream.handle)
        assert (adopted.device, adopted.kind) == (stream.device, "external")
        cw.ops.fill(x, 2.0, stream=adopted)  # captured: the same CUDA stream
    assert len(cap.graph) == 1
    cap.graph.replay(stream)
    assert np.all(x.to_numpy(stream=stream) == 2.0)


def test_adopting_a_stream_that_joined_a_capture_is_refused_and_the_capture_goes_on(stream, other_stream):
    # CUDA refuses to describe a capturing stream, and the refusal invalidates the capture (seen on an H200): the
    # adoption is refused before CUDA is asked.
    x = cw.zeros(16, np.float32, stream=stream)
    with cw.capture(stream) as cap:
        other_stream.wait(stream.record())  # the fork: other_stream captures too
        with pytest.raises(cw.CaptureError) as info:
            cw.Stream.from_external(other_stream.handle)
        assert info.value.name == "cudaErrorStreamCaptureUnsupported" and "before the capture" in str(info.value)
        cw.ops.fill(x, 3.0, stream=other_stream)
        stream.wait(other_stream.record())  # the join: the capture ends well
    cap.graph.replay(stream)
    assert np.all(x.to_numpy(stream=stream) == 3.0)


def test_describing_a_capturing_stream_is_refused_and_invalidates_the_capture(stream):
    # CUDA's rule, which the adoption above steps around (the raw call, as CUDA makes it).
    with pytest.raises(cw.CaptureError) as info:
        with cw.capture(stream):
            cw._core.backend_calls.stream_info(stream)
    assert info.value.name == "cudaErrorStreamCaptureUnsupported" and "cudaStreamGetDevice" in str(info.value)
    _assert_usable(stream)


def test_reading_results_on_the_host_inside_a_capture_raises(stream):
    x = cw.zeros(4, np.float32, stream=stream)
    with pytest.raises(cw.CaptureError, match="to_numpy"):
        with cw.capture(stream):
            x.to_numpy(stream=stream)
    _assert_usable(stream)


def test_a_fork_never_joined_raises_at_the_end_and_both_streams_stay_usable(stream, other_stream):
    x = cw.zeros(4, np.float32, stream=stream)
    with pytest.raises(cw.CaptureError) as info:
        with cw.capture(stream):
            other_stream.wait(stream.record())
            cw.ops.add(x, 1.0, out=x, stream=other_stream)  # forked, never joined
    assert info.value.name == "cudaErrorStreamCaptureUnjoined"
    assert "What to do: a stream that joined the capture" in str(info.value)
    assert "capturing.wait(other.record())" in str(info.value)
    _assert_usable(stream)
    _assert_usable(other_stream)


def test_the_legacy_default_stream_beside_a_blocking_capture_raises():
    stream = cw.Stream(blocking=True)  # the legacy default stream synchronizes implicitly with it
    x = cw.zeros(4, np.float32, stream=stream)
    stream.synchronize()
    with pytest.raises(cw.CaptureError) as info:
        with cw.capture(stream):
            cw.ops.add(x, 1.0, out=x, stream=cw.default_stream())
    assert info.value.name in ("cudaErrorStreamCaptureImplicit", "cudaErrorStreamCaptureInvalidated")
    cw.default_stream().synchronize()
    _assert_usable(stream)


def test_waiting_for_an_event_recorded_outside_the_capture_raises(stream, other_stream):
    before = other_stream.record()
    with pytest.raises(cw.CaptureError) as info:
        with cw.capture(stream):
            stream.wait(before)
    assert info.value.name == "cudaErrorStreamCaptureIsolation"
    assert "What to do: captured work can depend only on work of the same capture" in str(info.value)
    _assert_usable(stream)


def test_a_fork_join_whose_fork_was_recorded_before_the_capture_names_the_fix(stream, other_stream):
    # README's fork/join capture with one line out of place: the fork's event recorded before the capture began.
    # The side stream then never joins the capture, so the capturing stream's join waits for uncaptured work.
    x = cw.zeros(1024, np.float32, stream=stream)
    y = cw.zeros(1024, np.float32, stream=stream)
    stream.synchronize()
    forked = stream.record()
    with pytest.raises(cw.CaptureError) as info:
        with cw.capture(stream):
            other_stream.wait(forked)
            cw.ops.add(y, 1.0, out=y, stream=other_stream)
            cw.ops.add(x, 1.0, out=x, stream=stream)
            stream.wait(other_stream.record())
    assert info.value.name == "cudaErrorStreamCaptureIsolation"
    message = str(info.value)
    assert "Record the event after the capture began" in message
    assert "other.wait(capturing.record())" in message
    other_stream.synchronize()
    _assert_usable(stream)


def test_querying_an_event_recorded_in_the_capture_raises(stream):
    with pytest.raises(cw.CaptureError) as info:
        with cw.capture(stream):
            stream.record().query()
    assert info.value.name == "cudaErrorCapturedEvent"
    _assert_usable(stream)


def test_an_illegal_operation_caught_in_the_body_fails_the_end_of_the_capture(stream):
    with pytest.raises(cw.CaptureError) as info:
        with cw.capture(stream):
            try:
                stream.record().query()
            except cw.CaptureError:
                pass
    assert info.value.name == "cudaErrorStreamCaptureInvalidated"
    _assert_usable(stream)


def test_the_bodys_own_exception_propagates_unchanged_and_drops_the_capture(stream):
    class Boom(Exception):
        pass

    cap = cw.capture(stream)
    with pytest.raises(Boom):
        with cap:
            cw.ops.fill(cw.zeros(4, np.float32, stream=stream), 1.0, stream=stream)
            raise Boom
    assert cap.graph is None
    _assert_usable(stream)


def test_global_mode_refuses_waiting_for_another_stream_and_relaxed_mode_allows_it(stream, other_stream):
    with pytest.raises(cw.CaptureError):
        with cw.capture(stream, mode="global"):
            other_stream.synchronize()
    _assert_usable(stream)
    with cw.capture(stream, mode="relaxed") as cap:
        other_stream.synchronize()
        cw.ops.fill(cw.zeros(4, np.float32, stream=stream), 1.0, stream=stream)
    assert cap.graph.kinds["kernel"] == 1


def test_thread_local_mode_captures(stream):
    x = cw.zeros(4, np.float32, stream=stream)
    with cw.capture(stream, mode="thread_local") as cap:
        cw.ops.add(x, 2.0, out=x, stream=stream)
    cap.graph.replay(stream)
    assert np.array_equal(x.to_numpy(stream=stream), np.full(4, 2, np.float32))


def test_global_captures_survive_bookkeeping_on_another_thread(stream):
    # cuweave allocates on its own from any thread (cudaMalloc here: CUDA forbids it during a global capture
    # unless the thread relaxed its mode). A capture that begins while such a call is under way on another
    # thread must not be invalidated by it.
    from cuweave._core import backend_calls as raw

    stop = threading.Event()
    allocated = []

    def allocate_until_stopped():
        while not stop.is_set():
            allocated.append(raw.allocate_unpooled(4096, 0))

    x = cw.zeros(4, np.float32, stream=stream)
    worker = threading.Thread(target=allocate_until_stopped)
    worker.start()
    try:
        while not allocated:  # the worker is under way before the first capture
            time.sleep(0.001)
        before = len(allocated)
        for _ in range(200):
            time.sleep(1e-4)  # lets the worker take the GIL and call again, so that captures begin during its calls
            with cw.capture(stream, mode="global") as cap:
                cw.ops.add(x, 1.0, out=x, stream=stream)
            cap.graph.replay(stream)
        during = len(allocated) - before
    finally:
        stop.set()
        worker.join()
        for address in allocated:
            raw.free_unpooled(address)
    assert during > 0  # the captures overlapped the allocations
    assert np.array_equal(x.to_numpy(stream=stream), np.full(4, 200, np.float32))


def test_an_allocation_on_the_legacy_stream_beside_a_blocking_capture_is_refused_as_cuda_refuses_it():
    # CUDA refuses it (it would make the legacy stream depend on the capture) and invalidates the capture.
    stream = cw.Stream(blocking=True)
    x = cw.zeros(4, np.float32, stream=stream)
    with pytest.raises(cw.CaptureError, match="cudaErrorStreamCaptureImplicit"):
        with cw.capture(stream):
            cw.ops.add(x, 1.0, out=x, stream=stream)
            cw.empty(256, np.float32, stream=cw.default_stream())
    _assert_usable(stream)
    assert np.array_equal(x.to_numpy(stream=stream), np.zeros(4, np.float32))  # nothing captured ran


def test_blocking_captures_survive_legacy_stream_memory_dropped_on_another_thread():
    # The free of memory on the legacy stream waits for captures of blocking streams to end; a capture that
    # begins while another thread drops such memory must find the free either queued before it or deferred.
    stream = cw.Stream(blocking=True)
    stop = threading.Event()
    dropped = [0]
    # Allocated before: an allocation on the legacy stream during the capture would be refused by CUDA.
    memories = [cw.empty(256, np.float32, stream=cw.default_stream()) for _ in range(20_000)]
    cw.default_stream().synchronize()

    def drop_until_stopped():
        while not stop.is_set() and memories:
            memories.pop()
            dropped[0] += 1
            time.sleep(1e-5)  # spreads the drops over the captures

    x = cw.zeros(4, np.float32, stream=stream)
    worker = threading.Thread(target=drop_until_stopped)
    worker.start()
    try:
        while not dropped[0]:
            time.sleep(0.001)
        before = dropped[0]
        for _ in range(200):
            time.sleep(1e-4)
            with cw.capture(stream, mode="global") as cap:
                cw.ops.add(x, 1.0, out=x, stream=stream)
            cap.graph.replay(stream)
        during = dropped[0] - before
    finally:
        stop.set()
        worker.join()
    assert during > 0 and memories, (during, len(memories))  # drops went on beside every capture
    assert np.array_equal(x.to_numpy(stream=stream), np.full(4, 200, np.float32))


def test_bad_capture_requests_raise_value_errors(stream):
    with pytest.raises(ValueError, match="mode"):
        with cw.capture(stream, mode="sometimes"):
            pass
    with pytest.raises(ValueError, match="legacy default stream"):
        with cw.capture(cw.default_stream()):
            pass
    with pytest.raises(ValueError, match="already being captured"):
        with cw.capture(stream):
            with cw.capture(stream):
                pass
    _assert_usable(stream)
    cap = cw.capture(stream)
    with cap:
        pass
    with pytest.raises(ValueError, match="entered once"):
        with cap:
            pass


def test_capture_without_a_current_stream_uses_a_fresh_stream():
    x = cw.zeros(4, np.float32)
    cw.synchronize()
    with cw.capture() as cap:
        assert cap.stream != cw.default_stream()
        cw.ops.add(x, 1.0, out=x)
    cap.graph.replay()
    assert np.array_equal(x.to_numpy(), np.ones(4, np.float32))


def test_graph_building_errors_name_the_problem(stream):
    g = cw.Graph()
    other = cw.Graph()
    x = cw.zeros(4, np.float32, stream=stream)
    y = cw.zeros(8, np.float32, stream=stream)
    n = other.add_empty()
    with pytest.raises(ValueError, match="another graph"):
        g.add_empty(after=[n])
    with pytest.raises(TypeError, match="GraphNode"):
        g.add_empty(after=[1])
    with pytest.raises(ValueError, match="shape"):
        g.add_copy(x, y)
    with pytest.raises(TypeError):
        g.add_copy(x, np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="0..255"):
        g.add_memset(x, 300)
    copy = g.add_copy(x, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="kernel nodes"):
        g.set_arguments(copy, ())
    with pytest.raises(ValueError, match="same dtype and size"):
        g.rebind({x: y})
    with pytest.raises(ValueError, match="cannot contain itself"):
        g.add_graph(g)
    with pytest.raises(TypeError, match="callable"):
        g.add_host(42)


def test_memory_of_the_legacy_stream_dropped_beside_a_blocking_capture_is_freed_after_it():
    import gc

    stream = cw.Stream(blocking=True)
    legacy_memory = cw.zeros(1 << 10, np.float32, stream=cw.default_stream())
    cw.default_stream().synchronize()
    x = cw.zeros(4, np.float32, stream=stream)
    with cw.capture(stream) as cap:
        cw.ops.add(x, 1.0, out=x, stream=stream)
        del legacy_memory  # its free must wait: queued on the legacy stream now, it would break the capture
        gc.collect()
    cap.graph.replay(stream)
    assert np.array_equal(x.to_numpy(stream=stream), np.ones(4, np.float32))
    _assert_usable(stream)
