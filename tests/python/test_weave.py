"""cw.weave(): sequential code placed on concurrent streams, ordered by what each operation reads and writes
(Note [Weaving]). Every test runs under the race sanitizer (a race fails it), on every backend; under
CUWEAVE_SIM_SEED the simulator runs the weave's streams in a seeded order as late as CUDA allows."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import cuweave as cw
from _support import Gate

N = 4096


@pytest.fixture(autouse=True)
def _sanitized():
    with cw.sanitize():
        yield


def sources_dag(x: cw.DeviceArray) -> cw.DeviceArray:
    """README's fork/join DAG written in order: p and q both read x, r joins them."""
    p = cw.ops.scale(x, 2.0, out=cw.empty(x.shape, x.dtype))
    q = cw.ops.add(x, 1.0, out=cw.empty(x.shape, x.dtype))
    return cw.ops.add(p, q)


def test_the_sources_dag_runs_its_branches_on_two_streams_with_two_waits():
    x = cw.to_device(np.arange(N, dtype=np.float32))
    with cw.weave(streams=4) as w:
        r = sources_dag(x)
        streams = w.streams
    counts = w.counts
    # scale (and its output) on the current stream, add(x, 1) and its output on a second one, the join back
    # on the current stream: q's branch waits for the block's entry, the join waits for q. Hand-written, the
    # same DAG takes 3 records and 4 waits (README).
    assert counts.per_stream == (3, 2, 0, 0)
    assert counts.waits == 2 and counts.records == 3
    assert streams[0] == cw.current_stream() and len(set(map(id, streams))) == 4
    assert r.stream == cw.current_stream()
    np.testing.assert_array_equal(r.to_numpy(), 3 * np.arange(N, dtype=np.float32) + 1)


def test_a_loop_of_weaves_keeps_each_array_on_the_stream_it_had():
    # Each weave takes the spare streams in the order the last one did. An array moved to another stream would
    # move its free after that stream: an event and a hold for every array, at every turn of the loop.
    xs = [cw.zeros(N, np.float32) for _ in range(3)]
    placed = []
    for _ in range(3):
        with cw.weave(streams=3):
            for x in xs:
                cw.ops.add(x, 1.0, out=x)
            placed.append([x.stream for x in xs])
    assert placed[0] == placed[1] == placed[2]
    assert placed[0][0] != placed[0][1] != placed[0][2] != placed[0][0]
    np.testing.assert_array_equal(xs[2].to_numpy(), np.full(N, 3, np.float32))


def test_a_chain_stays_on_the_current_stream_and_waits_for_nothing():
    x = cw.to_device(np.zeros(N, np.float32))
    with cw.weave(streams=4) as w:
        for _ in range(20):
            cw.ops.add(x, 1.0, out=x)
    assert w.counts.per_stream == (20, 0, 0, 0)
    assert w.counts.waits == 0
    assert w.counts.records == 1  # the block's entry, sealed as the current stream goes on past it
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 20, np.float32))


def test_independent_chains_spread_over_the_streams_issued_in_any_order():
    arrays = [cw.to_device(np.full(N, i, np.float32)) for i in range(4)]
    with cw.weave(streams=4) as w:
        for _ in range(5):  # interleaved: one step of each chain in turn
            for a in arrays:
                cw.ops.scale(a, 2.0, out=a)
    assert w.counts.per_stream == (5, 5, 5, 5)
    # each chain after the first waits once for the entry; leaving, the current stream waits for each
    assert w.counts.waits == 3 + 3
    for i, a in enumerate(arrays):
        np.testing.assert_array_equal(a.to_numpy(), np.full(N, i * 32, np.float32))


@pytest.mark.parametrize("seed", range(12))
def test_overlapping_bytes_are_ordered_read_after_write_write_after_read_and_write_after_write(seed):
    with cw.sim.explore(seed) if cw.backend() == "sim" else contextlib.nullcontext():
        base = cw.to_device(np.arange(3 * N, dtype=np.float32))
        expected = np.arange(3 * N, dtype=np.float32)
        left, middle, right = base[0 : 2 * N], base[N // 2 : N // 2 + 2 * N], base[N : 3 * N]
        other = cw.to_device(np.ones(2 * N, np.float32))
        with cw.weave(streams=4) as w:
            cw.ops.scale(left, 3.0, out=left)  # writes [0, 2N)
            expected[: 2 * N] *= 3
            decoy = cw.ops.add(left, 0.0)  # reads what the scale wrote, going on on its stream
            copied = cw.ops.copy(cw.empty(2 * N, np.float32), middle)  # another stream: RAW on the overlap
            snapshot = expected[N // 2 : N // 2 + 2 * N].copy()
            cw.ops.add(other, 5.0, out=right)  # WAR after the copy's read, WAW after the scale on [N, 2N)
            expected[N : 3 * N] = 6
            cw.ops.fill(other, 4.0)  # WAR after the add's read of `other`
            cw.ops.axpy(2.0, other, middle, out=middle)  # RAW after the fill, WAW after the scale and the add
            expected[N // 2 : N // 2 + 2 * N] = 2 * 4 + expected[N // 2 : N // 2 + 2 * N]
            assert sum(1 for n in w.counts.per_stream if n) >= 2 and w.counts.waits >= 2
        np.testing.assert_array_equal(copied.to_numpy(), snapshot)
        np.testing.assert_array_equal(decoy.to_numpy(), np.arange(2 * N, dtype=np.float32) * 3)
        np.testing.assert_array_equal(base.to_numpy(), expected)


@pytest.mark.parametrize("runs", [32, 4096])  # a range per run, and one stepped access past 64 runs
@pytest.mark.parametrize("seed", range(6))
def test_interleaved_strided_views_are_independent_and_a_window_over_both_waits_for_both(seed, runs):
    """A stepped view's bytes are its elements, not its extent: x[::2] and x[1::2] share none, at any length."""
    with cw.sim.explore(seed) if cw.backend() == "sim" else contextlib.nullcontext():
        x = cw.zeros(2 * runs, np.float32)
        evens, odds, threes = (cw.to_device(np.full(size, value, np.float32))
                               for size, value in ((runs, 1.0), (runs, 2.0), (runs // 2, 3.0)))
        with cw.weave(streams=2) as w:
            cw.copy_async(x[::2], evens)
            cw.copy_async(x[1::2], odds)  # no byte in common with the evens: the other stream, no wait for them
            apart = w.counts
            cw.copy_async(x[0:runs:2], threes)  # over the first half's evens alone: after their copy, on its stream
            after_evens = w.counts
            cw.ops.fill(x[0:4], 5.0)  # evens and odds: waits for the odds' stream
        assert apart.per_stream == (1, 1) and apart.waits == 1  # the odds' stream forks from the block's entry
        assert after_evens.per_stream == (2, 1) and after_evens.waits == 1
        assert w.counts.per_stream == (3, 1) and w.counts.waits == 2
        expected = np.tile(np.array([1.0, 2.0], np.float32), runs)
        expected[0:runs:2] = 3.0
        expected[0:4] = 5.0
        np.testing.assert_array_equal(x.to_numpy(), expected)


def test_to_numpy_inside_the_block_waits_only_for_the_work_producing_what_it_reads():
    x = cw.to_device(np.zeros(N, np.float32))
    with cw.weave(streams=2) as w:
        with Gate(w.streams[1]):  # whatever the weave puts on the second stream is held
            cw.ops.add(x, 1.0, out=x)  # on the current stream (x's producer)
            held = cw.zeros(N, np.float32)  # independent: the least recently used stream, the held one
            cw.ops.add(held, 7.0, out=held)
            assert w.counts.per_stream == (1, 2)
            np.testing.assert_array_equal(x.to_numpy(), np.ones(N, np.float32))  # returns while held
    np.testing.assert_array_equal(held.to_numpy(), np.full(N, 7, np.float32))


def test_leaving_the_block_orders_the_current_stream_after_everything_without_a_host_wait():
    x = cw.to_device(np.zeros(N, np.float32))
    with cw.weave(streams=2) as w:
        gate = Gate(w.streams[1])
        with gate:
            cw.ops.add(x, 1.0, out=x)
            y = cw.zeros(N, np.float32)
            cw.ops.add(y, 2.0, out=y)
    # (leaving the block returned while the second stream was held: no host synchronize)
    total = cw.ops.add(x, y)  # on the current stream, after both
    np.testing.assert_array_equal(total.to_numpy(), np.full(N, 3, np.float32))


def test_an_exception_in_the_block_propagates_unchanged_and_what_was_queued_stays_ordered():
    x = cw.to_device(np.zeros(N, np.float32))
    error = RuntimeError("from the body")
    with pytest.raises(RuntimeError) as info:
        with cw.weave(streams=3):
            y = cw.ops.add(x, 1.0, out=cw.empty(N, np.float32))
            z = cw.ops.add(x, 2.0, out=cw.empty(N, np.float32))
            cw.ops.add(y, z, out=y)
            raise error
    assert info.value is error
    assert not cw._core.weave.active()
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 3, np.float32))
    with cw.weave():  # the thread can weave again
        cw.ops.add(y, 1.0, out=y)
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 4, np.float32))


def test_streams_may_be_a_stream_pool_whose_streams_the_block_reserves():
    pool = cw.StreamPool(3)
    x = cw.to_device(np.arange(N, dtype=np.float32))
    with cw.weave(streams=pool) as w:
        assert pool.reserved_count == 3
        assert len(w.streams) == 4
        r = sources_dag(x)
    assert pool.reserved_count == 0
    assert w.counts.per_stream[:2] == (3, 2)
    np.testing.assert_array_equal(r.to_numpy(), 3 * np.arange(N, dtype=np.float32) + 1)


def test_an_explicit_stream_is_honoured_and_its_dependencies_are_still_ordered(stream):
    x = cw.to_device(np.zeros(N, np.float32))
    with cw.weave(streams=3) as w:
        cw.ops.add(x, 1.0, out=x)  # current stream
        cw.ops.scale(x, 4.0, out=x, stream=stream)  # honoured: waits for the add on the current stream
        y = cw.ops.add(x, 1.0)  # follows the scale on `stream`
        assert w.streams[-1] == stream and w.counts.per_stream[-1] == 1
        with stream:  # the current stream changed inside the block: honoured too
            cw.ops.add(x, 1.0, out=x)
        assert w.counts.per_stream[-1] == 2
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 5, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 5, np.float32))


def test_nested_weaves_are_refused_and_the_outer_block_goes_on():
    x = cw.to_device(np.zeros(N, np.float32))
    with cw.weave() as outer:
        cw.ops.add(x, 1.0, out=x)
        with pytest.raises(ValueError, match="already active"):
            with cw.weave():
                pass
        cw.ops.add(x, 1.0, out=x)
    assert outer.counts.operations == 2
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 2, np.float32))


def test_a_sanitizer_block_inside_a_weave_and_a_weave_inside_one_both_check_the_woven_work():
    x = cw.to_device(np.arange(N, dtype=np.float32))
    with cw.weave():
        with cw.sanitize():  # (also inside this module's own sanitize block)
            r = sources_dag(x)
    np.testing.assert_array_equal(r.to_numpy(), 3 * np.arange(N, dtype=np.float32) + 1)


def test_bad_streams_arguments_are_refused_naming_what_is_expected():
    with pytest.raises(ValueError, match="at least 1"):
        cw.weave(streams=0)
    with pytest.raises(TypeError, match="count or a cuweave.StreamPool"):
        cw.weave(streams="4")
    with pytest.raises(TypeError):
        cw.weave(streams=True)
    w = cw.weave()
    with pytest.raises(ValueError, match="has not run"):
        w.counts


def test_arrays_made_and_dropped_inside_the_block_are_ordered_after_their_allocation_and_freed_after_their_last_use():
    # Temporaries made on one stream, read on another and dropped mid-block: their memory comes back to the
    # pool and is handed out again inside the block. Any use of freed or not-yet-allocated memory shows up as
    # a wrong sum (under CUWEAVE_SIM_SEED, in a seeded order as late as CUDA allows).
    seeds = range(25) if cw.backend() == "sim" else [None]
    for seed in seeds:
        with cw.sim.explore(seed) if seed is not None else contextlib.nullcontext():
            inputs = [cw.to_device(np.full(N, i + 1, np.float32)) for i in range(6)]
            total = cw.zeros(N, np.float32)
            with cw.weave(streams=4):
                for i, a in enumerate(inputs):
                    t = cw.ops.scale(a, 2.0, out=cw.empty(N, np.float32))  # made on the least used stream
                    u = cw.ops.add(t, float(i))  # a new array on t's stream
                    del t
                    cw.ops.add(total, u, out=total)  # on total's stream: u crosses streams
                    del u
            np.testing.assert_array_equal(total.to_numpy(), np.full(N, sum(2 * (i + 1) + i for i in range(6)), np.float32))


def test_sum_fill_copy_and_host_copies_are_woven():
    host = np.arange(N, dtype=np.float32)
    with cw.weave(streams=3):
        d = cw.to_device(host)
        e = cw.zeros(N, np.float32)
        cw.ops.fill(e, 2.0)
        cw.copy_async(e, host[::-1].copy())  # WAW after the fill
        f = cw.ops.axpy(3.0, d, e, out=cw.empty(N, np.float32))
        s = cw.ops.sum(f)
        back = cw.empty(N, np.float32)
        cw.ops.copy(back, f)
        result = back.to_numpy()
    expected = 3 * host + host[::-1]
    np.testing.assert_array_equal(result, expected)
    np.testing.assert_allclose(s.to_numpy(), expected.sum(dtype=np.float64), rtol=1e-6)


def test_a_step_declares_work_the_weave_cannot_see():
    # backend_calls.copy is a raw cudaMemcpyAsync: neither the weave nor the sanitizer sees it by itself.
    for seed in range(15) if cw.backend() == "sim" else [None]:
        with cw.sim.explore(seed) if seed is not None else contextlib.nullcontext():
            x = cw.to_device(np.arange(N, dtype=np.float32))
            y = cw.zeros(N, np.float32)
            with cw.weave(streams=3) as w:
                cw.ops.scale(x, 2.0, out=x)
                decoy = cw.ops.add(x, 1.0)  # x's stream goes on: the step's own stream is its choice
                with w.step(reads=[x], writes=[y]) as s:
                    assert cw.current_stream() == s
                    cw._core.backend_calls.copy(y.__cuda_array_interface__["data"][0],
                                                x.__cuda_array_interface__["data"][0], x.nbytes, s)
                z = cw.ops.add(y, 1.0)  # after the step
                cw.ops.fill(x, -1.0)  # after the step read x
            np.testing.assert_array_equal(z.to_numpy(), 2 * np.arange(N, dtype=np.float32) + 1)
            np.testing.assert_array_equal(decoy.to_numpy(), 2 * np.arange(N, dtype=np.float32) + 1)
            np.testing.assert_array_equal(x.to_numpy(), np.full(N, -1, np.float32))


def test_step_outside_the_block_is_refused():
    w = cw.weave()
    with pytest.raises(ValueError, match="not open"):
        with w.step(reads=[]):
            pass


@pytest.mark.real_time
def test_the_trace_shows_independent_branches_overlapping_on_two_streams():
    first, second = cw.zeros(1, np.uint64), cw.zeros(1, np.uint64)
    with cw.trace() as t, cw.weave(streams=2) as w:
        cw.ops.spin(0.05, start_times=first)  # writes first[0]
        cw.ops.spin(0.05, start_times=second)  # independent: the other stream
        streams = w.streams
    (a,) = t.select("kernel", stream=streams[0])
    (b,) = t.select("kernel", stream=streams[1])
    assert a.start_ns < b.end_ns and b.start_ns < a.end_ns, ((a.start_ns, a.end_ns), (b.start_ns, b.end_ns))


def test_a_weave_prints_its_size_and_what_it_queued(stream):
    weave = cw.weave(streams=2)
    assert repr(weave) == "<cuweave.Weave 2 streams, not entered>"
    with stream, weave:
        x = cw.zeros(16, np.float32)
        cw.ops.fill(x, 1.0)
        assert repr(weave).startswith("<cuweave.Weave 2 streams, open: 2 operations (")
    counts = weave.counts
    assert repr(weave) == (f"<cuweave.Weave 2 streams, ended: {counts.operations} operations "
                           f"({', '.join(map(str, counts.per_stream))} by stream), {counts.records} records, "
                           f"{counts.waits} waits>")
