"""StreamPool: round robin, reservations (leases), blocking and thread exclusivity."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import cuweave as cw
from _support import Gate


def test_size_and_len():
    pool = cw.StreamPool(3)
    assert pool.size == 3
    assert len(pool) == 3
    assert pool.reserved_count == 0
    assert cw.StreamPool().size == 4


def test_round_robin_cycles_through_distinct_streams():
    pool = cw.StreamPool(3)
    got = [pool.next() for _ in range(9)]
    handles = [s.handle for s in got]
    assert len(set(handles[:3])) == 3
    assert handles[3:6] == handles[:3]
    assert handles[6:9] == handles[:3]
    for s in got:
        assert isinstance(s, cw.Stream)
        assert s.kind == "pooled"
        assert s.handle not in (0, 1, 2)


def test_pools_do_not_share_streams():
    a, b = cw.StreamPool(2), cw.StreamPool(2)
    ha = {a.next().handle for _ in range(2)}
    hb = {b.next().handle for _ in range(2)}
    assert ha.isdisjoint(hb)


def test_pool_priority_applies_to_its_streams():
    lowest, highest = cw.Device(0).properties.priority_range
    pool = cw.StreamPool(2, priority="high")
    assert all(pool.next().priority == highest for _ in range(4))


def test_pooled_streams_run_work():
    pool = cw.StreamPool(2)
    s = pool.next()
    with Gate(s) as gate:
        cw.ops.spin(0.001, stream=s)
        assert s.query() is False
        gate.open()
        s.synchronize()
    assert s.query() is True


def test_reserved_stream_is_skipped_by_next_until_released():
    pool = cw.StreamPool(3)
    all_handles = {pool.next().handle for _ in range(3)}
    with pool.reserve() as s:
        assert isinstance(s, cw.Stream)
        assert s.handle in all_handles
        assert pool.reserved_count == 1
        handed_out = [pool.next().handle for _ in range(8)]
        assert s.handle not in handed_out
        assert set(handed_out) == all_handles - {s.handle}
    assert pool.reserved_count == 0
    assert {pool.next().handle for _ in range(3)} == all_handles


def test_lease_object_api():
    pool = cw.StreamPool(2)
    lease = pool.reserve()
    try:
        assert isinstance(lease.stream, cw.Stream)
        assert pool.reserved_count == 1
        assert lease.stream.handle not in {pool.next().handle for _ in range(4)}
    finally:
        lease.release()
    assert pool.reserved_count == 0


def test_reserve_with_all_reserved_times_out():
    pool = cw.StreamPool(2)
    leases = [pool.reserve() for _ in range(2)]
    try:
        assert len({lease.stream.handle for lease in leases}) == 2
        assert pool.reserved_count == 2
        with pytest.raises(TimeoutError):
            pool.reserve(timeout=0.05)
        with pytest.raises(RuntimeError):
            pool.next()
    finally:
        for lease in leases:
            lease.release()
    assert pool.reserved_count == 0
    pool.next()  # usable again


def test_blocked_reserve_wakes_when_a_lease_is_released():
    pool = cw.StreamPool(1)
    first = pool.reserve()
    got = {}
    errors = []

    def waiter():
        try:
            with pool.reserve(timeout=10) as s:
                got["handle"] = s.handle
                got["at"] = time.perf_counter()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)
    assert "handle" not in got, "reserve() did not wait for the only stream"
    released_at = time.perf_counter()
    handle = first.stream.handle
    first.release()
    t.join(10)
    assert not t.is_alive()
    assert errors == []
    assert got["handle"] == handle
    assert got["at"] >= released_at


def test_threads_reserving_get_distinct_streams():
    n = 4
    pool = cw.StreamPool(n)
    barrier = threading.Barrier(n)
    held = [None] * n
    errors = []

    def worker(i):
        try:
            with pool.reserve(timeout=10) as s:
                held[i] = s.handle
                barrier.wait(10)  # all leases are held at the same time here
                cw.ops.spin(0.001, stream=s)
                s.synchronize()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert len(set(held)) == n
    assert pool.reserved_count == 0


def test_more_threads_than_streams_never_share_a_lease():
    pool = cw.StreamPool(2)
    in_use = set()
    lock = threading.Lock()
    clashes = []
    errors = []

    def worker():
        try:
            for _ in range(20):
                with pool.reserve(timeout=10) as s:
                    with lock:
                        if s.handle in in_use:
                            clashes.append(s.handle)
                        in_use.add(s.handle)
                    time.sleep(0.001)
                    with lock:
                        in_use.discard(s.handle)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert clashes == []
    assert pool.reserved_count == 0


def test_lease_is_released_on_exception():
    pool = cw.StreamPool(1)
    with pytest.raises(KeyError):
        with pool.reserve():
            raise KeyError("x")
    assert pool.reserved_count == 0
    with pool.reserve(timeout=0.5):
        pass


def test_reserved_stream_works_as_current_stream():
    pool = cw.StreamPool(2)
    with pool.reserve() as s:
        with s:
            d = cw.to_device(np.arange(5, dtype=np.int32))
        assert d.stream == s
        assert np.array_equal(d.to_numpy(stream=s), np.arange(5, dtype=np.int32))
