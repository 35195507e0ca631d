"""Streams: ordering, priorities, the thread-local current stream, default streams, adoption."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import cuweave as cw
from _support import Gate

N = 1 << 20  # elements in the race buffers: big enough that a copy is not instant, small enough to be cheap


def _zeroed_buffer(stream):
    buf = cw.zeros((N,), np.float32, stream=stream)
    stream.synchronize()
    assert np.all(buf.to_numpy(stream=stream) == 0)
    return buf


# --------------------------------------------------------------------------- ordering


def test_consumer_without_wait_races_the_producer(stream, other_stream):
    # A race made visible: the producer's fill is held behind a gate, and nothing orders the read after it.
    producer, consumer = stream, other_stream
    buf = _zeroed_buffer(producer)

    # The race is the point (CUWEAVE_SANITIZE=1 would report it). The block comes first: with CuPy imported, a
    # process's first block waits for the GPU's queued work, which the gate would hold forever.
    with cw.sanitize(on_race="ignore"), Gate(producer) as gate:
        cw.ops.fill(buf, 1.0, stream=producer)
        seen = buf.to_numpy(stream=consumer)  # nothing orders this after the fill
        assert producer.query() is False
        gate.open()
        producer.synchronize()
    assert np.all(seen == 0), "consumer saw the producer's fill without waiting for it"
    assert np.all(buf.to_numpy(stream=consumer) == 1)


def test_consumer_waiting_on_event_reads_the_producers_data(stream, other_stream):
    producer, consumer = stream, other_stream
    buf = _zeroed_buffer(producer)

    with Gate(producer) as gate:
        cw.ops.fill(buf, 1.0, stream=producer)
        consumer.wait(producer.record())
        # wait() must not block the host: it returned although the producer is held
        assert producer.query() is False
        assert consumer.query() is False, "consumer should now be behind the producer's work"
        gate.open()
        seen = buf.to_numpy(stream=consumer)
    assert np.all(seen == 1)


def test_consumer_waiting_on_stream_reads_the_producers_data(stream, other_stream):
    producer, consumer = stream, other_stream
    buf = _zeroed_buffer(producer)

    with Gate(producer) as gate:
        cw.ops.fill(buf, 1.0, stream=producer)
        consumer.wait(producer)
        assert producer.query() is False
        assert consumer.query() is False, "consumer should now be behind the producer's work"
        gate.open()
        assert np.all(buf.to_numpy(stream=consumer) == 1)


def test_wait_covers_only_work_queued_before_it(stream, other_stream):
    producer, consumer = stream, other_stream
    buf = _zeroed_buffer(producer)

    consumer.wait(producer.record())  # producer has nothing queued yet
    with cw.sanitize(on_race="ignore"), Gate(producer):  # the race is the point; the block first, as in the test above
        cw.ops.fill(buf, 1.0, stream=producer)
        seen = buf.to_numpy(stream=consumer)  # returns although the fill is held: the wait does not cover it
        assert producer.query() is False
    assert np.all(seen == 0)
    assert np.all(buf.to_numpy(stream=producer) == 1)


def test_work_on_one_stream_runs_in_order(stream):
    buf = _zeroed_buffer(stream)
    cw.ops.spin(0.05, stream=stream)
    cw.ops.fill(buf, 1.0, stream=stream)
    cw.ops.fill(buf, 2.0, stream=stream)
    cw.ops.fill(buf, 3.0, stream=stream)
    assert np.all(buf.to_numpy(stream=stream) == 3)


def test_query_and_synchronize_follow_the_work(stream):
    assert stream.query() is True  # nothing queued
    with Gate(stream) as gate:
        cw.ops.spin(0.001, stream=stream)
        assert stream.query() is False
        gate.open()
        stream.synchronize()
    assert stream.query() is True


def test_synchronize_releases_the_gil(stream):
    # The stream's work is held until another Python thread, which needs the GIL, opens the gate: the
    # main thread's synchronize() returns only if that thread made progress while it waited. (A
    # synchronize() that kept the GIL would deadlock here, the gate's own callback needing it too.)
    ticks = []
    waiting = threading.Event()
    with Gate(stream) as gate:
        cw.ops.spin(0.001, stream=stream)

        def opener():
            waiting.wait()
            for _ in range(3):
                ticks.append(1)
                threading.Event().wait(0.001)  # gives the GIL up, and needs it back
            gate.open()

        t = threading.Thread(target=opener)
        t.start()
        try:
            waiting.set()
            stream.synchronize()
            ticks_at_return = len(ticks)
        finally:
            gate.open()
            t.join()
    assert ticks_at_return == 3, f"synchronize() returned after {ticks_at_return} of the other thread's ticks"


# --------------------------------------------------------------------------- priorities


@pytest.mark.gpu  # priorities' real effect, read from GPU clock start times
def test_high_priority_work_overtakes_queued_low_priority_work():
    sm = cw.Device(0).properties.multiprocessor_count
    low = cw.Stream(priority="low")
    high = cw.Stream(priority="high")
    try:
        assert high.priority < low.priority, "the device offers no priority range"
        ts = cw.zeros((21,), np.uint64, stream=low)
        low.synchronize()

        for i in range(20):
            cw.ops.spin(0.002, stream=low, blocks=sm * 64, start_times=ts, slot=i)
        cw.ops.spin(0.0001, stream=high, blocks=1, start_times=ts, slot=20)
        low.synchronize()
        high.synchronize()

        starts = ts.to_numpy(stream=low)
    finally:
        low.close()
        high.close()

    assert np.all(starts != 0), f"some kernels did not record a start time: {starts}"
    low_starts = starts[:20].astype(np.int64)
    assert np.all(np.diff(low_starts) >= 0), "kernels on one stream started out of order"
    assert starts[20] < starts[19], (
        f"high-priority kernel started at {int(starts[20])} ns, after the last low one "
        f"({int(starts[19])} ns; first low at {int(starts[0])} ns)"
    )


def test_priority_names_map_into_the_device_range():
    lowest, highest = cw.Device(0).properties.priority_range
    made = {name: cw.Stream(priority=name) for name in ("low", "normal", "high")}
    try:
        assert made["high"].priority == highest
        assert made["low"].priority == lowest
        assert highest <= made["normal"].priority <= lowest
    finally:
        for s in made.values():
            s.close()


def test_default_priority_is_in_range(stream):
    lowest, highest = cw.Device(0).properties.priority_range
    assert isinstance(stream.priority, int)
    assert highest <= stream.priority <= lowest


def test_every_int_priority_in_range_is_kept():
    lowest, highest = cw.Device(0).properties.priority_range
    for p in range(highest, lowest + 1):
        s = cw.Stream(priority=p)
        try:
            assert s.priority == p
        finally:
            s.close()


# --------------------------------------------------------------------------- attributes


def test_owned_stream_attributes(stream):
    assert isinstance(stream.handle, int)
    assert stream.handle not in (0, 1, 2)
    assert stream.kind == "owned"
    assert stream.closed is False
    assert stream.blocking is False
    assert stream.device == 0


def test_blocking_flag_is_kept():
    s = cw.Stream(blocking=True)
    try:
        assert s.blocking is True
    finally:
        s.close()


def test_non_blocking_stream_ignores_legacy_default_work_but_blocking_one_does_not():
    legacy = cw.default_stream()
    nb = cw.Stream(blocking=False)
    bl = cw.Stream(blocking=True)
    try:
        with Gate(legacy) as gate:
            cw.ops.spin(0.0001, stream=nb)
            nb.synchronize()  # returns although the legacy default stream is held
            assert legacy.query() is False, "non-blocking stream waited for the legacy default stream"
            cw.ops.spin(0.0001, stream=bl)
            assert bl.query() is False, "blocking stream did not queue behind the legacy default stream"
            gate.open()
            legacy.synchronize()
            bl.synchronize()
        assert bl.query() is True
    finally:
        nb.close()
        bl.close()


@pytest.mark.parametrize(
    "make", [lambda: cw.Stream(blocking=True), cw.per_thread_default_stream], ids=["blocking", "per_thread_default"]
)
def test_blocking_streams_and_the_legacy_default_stream_order_each_other(make):
    # The legacy default stream's implicit synchronization, seen in the data: a blocking stream's work
    # runs after the legacy stream's earlier work, and the legacy stream's after the blocking one's.
    legacy = cw.default_stream()
    blocking = make()
    try:
        buf = cw.zeros((1 << 16,), np.float32, stream=blocking)
        blocking.synchronize()
        with Gate(legacy) as gate:
            cw.ops.fill(buf, 1.0, stream=legacy)
            later = blocking.record()
            assert later.query() is False, "blocking stream's work did not queue behind the legacy stream's"
            gate.open()
            assert np.all(buf.to_numpy(stream=blocking) == 1), "blocking stream ran before the legacy stream's fill"

        with Gate(blocking) as gate:
            cw.ops.fill(buf, 2.0, stream=blocking)
            later = legacy.record()
            assert later.query() is False, "legacy stream's work did not queue behind the blocking stream's"
            gate.open()
            assert np.all(buf.to_numpy(stream=legacy) == 2), "legacy stream ran before the blocking stream's fill"
    finally:
        if blocking.kind == "owned":
            blocking.synchronize()
            blocking.close()


def test_distinct_streams_have_distinct_handles():
    streams = [cw.Stream() for _ in range(8)]
    try:
        assert len({s.handle for s in streams}) == 8
        assert len(set(streams)) == 8
        assert streams[0] != streams[1]
    finally:
        for s in streams:
            s.close()


def test_cuda_stream_protocol(stream):
    assert stream.__cuda_stream__() == (0, stream.handle)
    assert cw.default_stream().__cuda_stream__() == (0, 1)
    assert cw.per_thread_default_stream().__cuda_stream__() == (0, 2)


def test_record_returns_a_timingless_event_or_the_one_given(stream):
    ev = stream.record()
    assert isinstance(ev, cw.Event)
    assert ev.timing is False
    mine = cw.Event(timing=True)
    assert stream.record(mine) is mine


# --------------------------------------------------------------------------- default streams


def test_default_stream_handles():
    legacy = cw.default_stream()
    per_thread = cw.per_thread_default_stream()
    assert legacy.handle == 1
    assert legacy.kind == "legacy_default"
    assert per_thread.handle == 2
    assert per_thread.kind == "per_thread_default"
    assert cw.default_stream() == legacy
    assert hash(cw.default_stream()) == hash(legacy)
    assert legacy != per_thread
    assert cw.default_stream(device=0) == legacy


@pytest.mark.parametrize("make", [cw.default_stream, cw.per_thread_default_stream])
def test_default_streams_run_work(make):
    s = make()
    with Gate(s) as gate:
        cw.ops.spin(0.001, stream=s)
        assert s.query() is False
        gate.open()
        s.synchronize()
    assert s.query() is True


# --------------------------------------------------------------------------- current stream


def test_current_stream_defaults_to_legacy_default():
    cur = cw.current_stream()
    assert cur == cw.default_stream()
    assert cur.handle == 1


def test_with_stream_sets_current_stream(stream):
    with stream as entered:
        assert cw.current_stream() == stream
        assert cw.current_stream().handle == stream.handle
        assert entered == stream
    assert cw.current_stream() == cw.default_stream()


def test_with_stream_nests(stream, other_stream):
    with stream:
        with other_stream:
            assert cw.current_stream() == other_stream
        assert cw.current_stream() == stream
    assert cw.current_stream() == cw.default_stream()


def test_with_stream_reenters(stream, other_stream):
    with stream:
        with stream:
            assert cw.current_stream() == stream
            with other_stream:
                with stream:
                    assert cw.current_stream() == stream
                assert cw.current_stream() == other_stream
            assert cw.current_stream() == stream
        assert cw.current_stream() == stream
    assert cw.current_stream() == cw.default_stream()


def test_with_stream_restores_on_exception(stream, other_stream):
    with stream:
        with pytest.raises(ZeroDivisionError):
            with other_stream:
                raise ZeroDivisionError("body")
        assert cw.current_stream() == stream
    assert cw.current_stream() == cw.default_stream()


def test_with_stream_does_not_hide_the_exception(stream):
    with pytest.raises(KeyError, match="inner"):
        with stream:
            raise KeyError("inner")


def test_current_stream_is_thread_local(stream, other_stream):
    seen = {}
    errors = []
    in_thread = threading.Event()
    main_checked = threading.Event()

    def worker():
        try:
            seen["fresh"] = cw.current_stream()
            with other_stream:
                seen["inside"] = cw.current_stream()
                in_thread.set()
                main_checked.wait(5)
            seen["after"] = cw.current_stream()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            in_thread.set()

    with stream:
        t = threading.Thread(target=worker)
        t.start()
        assert in_thread.wait(5)
        # the worker's `with` must not leak into this thread
        assert cw.current_stream() == stream
        main_checked.set()
        t.join(10)
        assert cw.current_stream() == stream
    assert not t.is_alive()
    assert errors == []
    assert seen["fresh"] == cw.default_stream()
    assert seen["inside"] == other_stream
    assert seen["after"] == cw.default_stream()


def test_ops_default_to_the_current_stream(stream, other_stream):
    buf = _zeroed_buffer(stream)
    # The race is the point; the block first (see test_consumer_without_wait_races_the_producer).
    with cw.sanitize(on_race="ignore"), Gate(stream) as gate:
        with stream:
            cw.ops.spin(0.001)
            cw.ops.fill(buf, 1.0)
        # Held behind the gate only if it went to `stream`; a read on an unrelated stream sees it not yet done.
        assert np.all(buf.to_numpy(stream=other_stream) == 0), "the fill was not queued on the current stream"
        assert stream.query() is False
        gate.open()
    # `stream` is non-blocking: only if the fill is on it is this read ordered after the fill
    assert np.all(buf.to_numpy(stream=stream) == 1)
    assert stream.query() is True


def test_arrays_default_to_the_current_stream(stream):
    with stream:
        d = cw.empty((8,), np.float32)
        h = cw.to_device(np.arange(8, dtype=np.float32))
    assert d.stream == stream
    assert h.stream == stream
    assert np.array_equal(h.to_numpy(stream=stream), np.arange(8, dtype=np.float32))


def test_threads_with_their_own_streams_do_not_mix(rng):
    n_threads = 4
    inputs = [rng.standard_normal(1 << 16).astype(np.float32) for _ in range(n_threads)]
    results = [None] * n_threads
    errors = []
    barrier = threading.Barrier(n_threads)

    def worker(i):
        try:
            s = cw.Stream()
            try:
                barrier.wait(5)
                for _ in range(10):
                    with s:
                        assert cw.current_stream() == s
                        d = cw.to_device(inputs[i])
                        out = d.to_numpy()
                    assert np.array_equal(out, inputs[i])
                results[i] = out
            finally:
                s.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    for i in range(n_threads):
        assert np.array_equal(results[i], inputs[i])


# --------------------------------------------------------------------------- adoption


class ForeignStream:
    """A stranger's stream object that only speaks the __cuda_stream__ protocol."""

    def __init__(self, handle):
        self._handle = handle

    def __cuda_stream__(self):
        return (0, self._handle)


def test_adopt_a_foreign_stream_via_protocol(stream):
    foreign = ForeignStream(stream.handle)
    ext = cw.Stream.from_external(foreign)
    assert ext.handle == stream.handle
    assert ext.kind == "external"
    assert ext == stream
    assert hash(ext) == hash(stream)

    with Gate(ext) as gate:
        cw.ops.spin(0.001, stream=ext)
        assert stream.query() is False, "work queued via the adopted stream is not on the owner's stream"
        gate.open()
        stream.synchronize()
    assert ext.query() is True


def test_adopt_an_int_handle(stream):
    ext = cw.Stream.from_external(stream.handle)
    assert ext.handle == stream.handle
    assert ext.kind == "external"
    with Gate(stream) as gate:
        cw.ops.spin(0.001, stream=stream)
        assert ext.query() is False, "the adopted handle does not see the owner's work"
        gate.open()
        ext.synchronize()
    assert stream.query() is True


def _check_peer_stream_ordering(ext, peer_query, peer_synchronize, other):
    buf = _zeroed_buffer(other)
    with Gate(ext) as gate:
        cw.ops.fill(buf, 1.0, stream=ext)
        assert peer_query() is False, "cuweave's work did not land on the peer's stream"
        gate.open()
        peer_synchronize()  # the peer's own synchronize must cover cuweave's work
    assert np.all(buf.to_numpy(stream=other) == 1)


@pytest.mark.gpu  # torch
def test_adopt_a_torch_stream(torch, stream):
    ts = torch.cuda.Stream()
    ext = cw.Stream.from_external(ts)
    assert ext.handle == ts.cuda_stream
    assert ext.kind == "external"
    _check_peer_stream_ordering(ext, ts.query, ts.synchronize, stream)


@pytest.mark.gpu  # cupy
def test_adopt_a_cupy_stream(cupy, stream):
    cs = cupy.cuda.Stream(non_blocking=True)
    ext = cw.Stream.from_external(cs)
    assert ext.handle == cs.ptr
    assert ext.kind == "external"
    _check_peer_stream_ordering(ext, lambda: cs.done, cs.synchronize, stream)


@pytest.mark.gpu  # torch
def test_peer_work_is_seen_through_the_adopted_stream(torch):
    ts = torch.cuda.Stream()
    ext = cw.Stream.from_external(ts)
    # The peer's own work, held by construction: torch makes `ts` wait for a torch event that torch records
    # on a second peer stream behind a gate (cuweave queues nothing on `ts` itself).
    held = torch.cuda.Stream()
    held_by_cuweave = cw.Stream.from_external(held)
    with Gate(held_by_cuweave) as gate:
        released = torch.cuda.Event()
        released.record(held)
        ts.wait_event(released)
        assert ext.query() is False
        gate.open()
        ext.synchronize()
    assert ts.query() is True
