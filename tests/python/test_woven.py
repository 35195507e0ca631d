"""cw.woven: a function's woven placement captured once per signature and replayed, with its input arrays
repointed; results equal the eager weave's, the cache hits, rebinds and captures again exactly when the
signature says, and bad input is refused. Every backend."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuweave as cw

N = 1024


def step(x, y, scale):
    """Two independent branches joined: the weave puts them on two streams."""
    p = cw.ops.scale(x, scale, out=cw.empty(x.shape, x.dtype))
    q = cw.ops.add(y, 1.0, out=cw.empty(y.shape, y.dtype))
    return cw.ops.add(p, q)


def expected(x, y, scale):
    return x * scale + (y + 1.0)


def arrays(seed: int, n: int = N):
    rng = np.random.default_rng(seed)
    x = rng.integers(-100, 100, n).astype(np.float32)
    y = rng.integers(-100, 100, n).astype(np.float32)
    return x, y


def test_calls_replay_the_first_capture_with_the_arrays_given(stream):
    woven = cw.woven(step, streams=2)
    with stream:
        for seed in range(6):
            x, y = arrays(seed)
            got = woven(cw.to_device(x), cw.to_device(y), 2.0)
            np.testing.assert_array_equal(got.to_numpy(), expected(x, y, 2.0))
    info = woven.cache_info()
    assert (info["misses"], info["hits"], info["graphs"]) == (1, 5, 1)
    assert info["rebinds"] == 5  # new arrays at every call after the first
    assert woven.graph_for(cw.to_device(x), cw.to_device(y), 2.0).kinds["kernel"] == 3


def test_the_same_arrays_again_need_no_rebind(stream):
    woven = cw.woven(step)
    x, y = arrays(1)
    dx, dy = cw.to_device(x, stream=stream), cw.to_device(y, stream=stream)
    with stream:
        for _ in range(3):
            result = woven(dx, dy, 1.0)
    np.testing.assert_array_equal(result.to_numpy(), expected(x, y, 1.0))
    assert woven.cache_info()["rebinds"] == 0


def test_results_are_new_arrays_unless_copy_is_false(stream):
    x, y = arrays(2)
    dx, dy = cw.to_device(x, stream=stream), cw.to_device(y, stream=stream)
    with stream:
        copied = cw.woven(step)
        first, second = copied(dx, dy, 1.0), copied(dx, dy, 2.0)
        shared = cw.woven(step, copy=False)
        a, b = shared(dx, dy, 1.0), shared(dx, dy, 1.0)
    assert first is not second
    np.testing.assert_array_equal(first.to_numpy(), expected(x, y, 1.0))
    assert a is b  # the graph's own result, overwritten by each call
    with pytest.raises(ValueError, match="copy"):
        with stream:
            shared(a, dy, 1.0)  # a result fed back would be read and written by one replay


@pytest.mark.parametrize("change", ["shape", "dtype", "value", "aliasing", "count"])
def test_a_changed_signature_captures_again_and_says_why(stream, caplog, change):
    woven = cw.woven(lambda x, y, scale, extra=1.0: step(x, y, scale * extra))
    x, y = arrays(3)
    with stream:
        woven(cw.to_device(x), cw.to_device(y), 2.0)
        args = {
            "shape": lambda: (cw.to_device(np.tile(x, 2)), cw.to_device(np.tile(y, 2)), 2.0),
            "dtype": lambda: (cw.to_device(x.astype(np.float64)), cw.to_device(y.astype(np.float64)), 2.0),
            "value": lambda: (cw.to_device(x), cw.to_device(y), 3.0),
            "aliasing": lambda: (lambda same: (same, same, 2.0))(cw.to_device(x)),
            "count": lambda: (cw.to_device(x), cw.to_device(y), 2.0, 0.5),
        }[change]()
        with caplog.at_level(logging.DEBUG, logger="cuweave"):
            got = woven(*args)
    scale = args[2] * (args[3] if len(args) > 3 else 1.0)
    np.testing.assert_array_equal(got.to_numpy(), expected(args[0].to_numpy(), args[1].to_numpy(), scale))
    assert woven.cache_info()["misses"] == 2
    assert "capturing again" in caplog.text


def test_a_block_that_changes_after_the_hundredth_call_is_captured_again(stream):
    woven = cw.woven(step, max_graphs=2)
    x, y = arrays(5)
    dx, dy = cw.to_device(x, stream=stream), cw.to_device(y, stream=stream)
    with stream:
        for _ in range(100):
            woven(dx, dy, 1.0)
        changed = woven(dx, dy, 4.0)
        again = woven(dx, dy, 1.0)  # the first signature is still cached
        with pytest.warns(cw.GraphCacheWarning, match=r"woven function 'step' has met 3 signatures .* max_graphs"):
            third = woven(dx, dy, 5.0)  # evicts the least recently used (scale 4)
    np.testing.assert_array_equal(changed.to_numpy(), expected(x, y, 4.0))
    np.testing.assert_array_equal(again.to_numpy(), expected(x, y, 1.0))
    np.testing.assert_array_equal(third.to_numpy(), expected(x, y, 5.0))
    info = woven.cache_info()
    assert (info["misses"], info["hits"], info["evictions"], info["graphs"]) == (3, 100, 1, 2)


def test_a_woven_step_in_place_accumulates_across_replays(stream):
    @cw.woven(streams=3)
    def accumulate(total, x):
        cw.ops.add(total, x, out=total)

    total = cw.zeros(N, np.float32, stream=stream)
    x = cw.to_device(np.ones(N, np.float32), stream=stream)
    with stream:
        for _ in range(10):
            assert accumulate(total, x) is None
    np.testing.assert_array_equal(total.to_numpy(), np.full(N, 10, np.float32))


def test_numpy_arguments_are_copied_in_before_each_replay(stream):
    woven = cw.woven(step, streams=2)
    _, y = arrays(5)
    dy = cw.to_device(y, stream=stream)
    host_x = np.zeros(N, np.float32)
    results = []
    with stream:
        for seed in range(4):
            host_x[:] = arrays(seed)[0]
            results.append((woven(host_x, dy, 2.0), host_x.copy()))
            host_x[:] = -7.0  # after the call: what it copied is the value at the call
    for got, x in results:
        np.testing.assert_array_equal(got.to_numpy(stream=stream), expected(x, y, 2.0))
    info = woven.cache_info()
    assert (info["misses"], info["hits"], info["rebinds"]) == (1, 3, 0)
    with stream:
        got = woven(np.ones((2, N), np.float32), cw.to_device(np.ones((2, N), np.float32)), 1.0)  # captured again
    np.testing.assert_array_equal(got.to_numpy(stream=stream), np.full((2, N), 3.0, np.float32))
    assert woven.cache_info()["misses"] == 2


def test_a_numpy_argument_is_not_overwritten_before_the_replay_that_reads_it(stream, other_stream):
    woven = cw.woven(step, streams=2)
    (x1, y), x2 = arrays(6), arrays(7)[0]
    dy = cw.to_device(y, stream=stream)
    with stream:
        woven(x1, dy, 1.0)  # captured
    stream.synchronize()
    cw.ops.spin(0.05, stream=stream)  # the next call's copy and replay on `stream` start late
    with stream:
        first = woven(x1, dy, 1.0)
    with other_stream:
        second = woven(x2, dy, 1.0)  # its copy of x2 waits for the replay on `stream` to have read x1
    np.testing.assert_array_equal(first.to_numpy(stream=stream), expected(x1, y, 1.0))
    np.testing.assert_array_equal(second.to_numpy(stream=other_stream), expected(x2, y, 1.0))


def test_a_numpy_array_given_twice_is_one_device_array_and_two_are_two(stream):
    def twice(a, b):
        return cw.ops.add(a, b)  # a + b: 2a when both are one array

    woven = cw.woven(twice)
    one = np.arange(N, dtype=np.float32)
    other = np.full(N, 10.0, np.float32)
    with stream:
        same = woven(one, one)
        different = woven(one, other)  # not the same signature: the graph of `same` reads one array
    np.testing.assert_array_equal(same.to_numpy(stream=stream), 2 * one)
    np.testing.assert_array_equal(different.to_numpy(stream=stream), one + other)
    assert woven.cache_info()["misses"] == 2


def test_bad_input_is_refused_with_the_fix():
    with pytest.raises(TypeError, match="callable"):
        cw.woven(3)
    with pytest.raises(ValueError, match="streams"):
        cw.woven(step, streams=0)
    with pytest.raises(ValueError, match="max_graphs"):
        cw.woven(step, max_graphs=0)
    woven = cw.woven(step)
    x = cw.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="ascontiguousarray"):
        woven(x.T[::2], x, 1.0)
    with pytest.raises(TypeError, match="device arrays, NumPy arrays and plain values"):
        woven([0.0] * 4, x, 1.0)


# Checked like the rest: any sequence of calls (shapes, aliasing and values changing, the cache evicting) gives the
# eager weave's results; replays are checked by the sanitizer through the arrays they are repointed to; and on the
# simulator every explored schedule gives the same results.


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([16, 64, 100]), st.booleans(), st.sampled_from([1.0, -2.0]),
                          st.integers(0, 1 << 16), st.booleans()), min_size=1, max_size=10))
def test_any_sequence_of_calls_gives_the_eager_results(calls):
    woven = cw.woven(step, streams=2, max_graphs=3)
    stream = cw.Stream()  # not a fixture: hypothesis runs the body many times per fixture setup
    seen = []
    with stream, warnings.catch_warnings():
        warnings.simplefilter("ignore", cw.GraphCacheWarning)  # evictions are part of what is drawn
        for n, aliased, scale, seed, from_numpy in calls:
            x, y = arrays(seed, n)
            dx = x if from_numpy else cw.to_device(x)  # NumPy: copied in at each call
            dy = dx if aliased else cw.to_device(y)
            got = woven(dx, dy, scale)
            np.testing.assert_array_equal(got.to_numpy(), expected(x, x if aliased else y, scale))
            seen.append((n, aliased, scale, from_numpy))
    info = woven.cache_info()
    assert info["hits"] + info["misses"] == len(calls)
    assert info["misses"] >= len(set(seen)) and info["graphs"] == min(3, info["misses"] - info["evictions"])


def test_a_replay_is_checked_by_the_sanitizer_through_the_arrays_it_was_repointed_to(stream, other_stream):
    woven = cw.woven(step, streams=2)
    with cw.sanitize():
        with stream:
            for seed in range(3):  # the first call captures, the others replay repointed
                x, y = arrays(seed)
                dx, dy = cw.to_device(x), cw.to_device(y)
                got = woven(dx, dy, 2.0)
                np.testing.assert_array_equal(got.to_numpy(), expected(x, y, 2.0))
                cw.ops.fill(dx, 0.0)  # the caller's stream writes an input after the replay: ordered
            dx, dy = cw.to_device(x), cw.to_device(y)
            got = woven(dx, dy, 2.0)
        with pytest.raises(cw.RaceError, match="replay"):
            cw.ops.fill(dy, 0.0, stream=other_stream)  # the replay on `stream` may still be reading dy
        other_stream.wait(stream.record())
        cw.ops.fill(dy, 0.0, stream=other_stream)  # now ordered after it
    np.testing.assert_array_equal(got.to_numpy(stream=stream), expected(x, y, 2.0))


def test_a_replay_waits_for_the_work_that_writes_its_arrays_on_other_streams(stream, other_stream):
    woven = cw.woven(step, streams=2)
    x, y = arrays(4)
    dx, dy = cw.to_device(x, stream=stream), cw.to_device(y, stream=stream)
    with stream:
        first = woven(dx, dy, 2.0)  # captured
    np.testing.assert_array_equal(first.to_numpy(stream=stream), expected(x, y, 2.0))
    cw.ops.spin(0.05, stream=other_stream)  # the next writes of both inputs come late, on another stream
    cw.ops.fill(dx, 3.0, stream=other_stream)
    cw.ops.fill(dy, -1.0, stream=other_stream)
    with stream:
        got = woven(dx, dy, 2.0)  # the same arrays: replayed with no rebind, after the fills
    np.testing.assert_array_equal(got.to_numpy(stream=stream), expected(np.full(N, 3.0, np.float32),
                                                                       np.full(N, -1.0, np.float32), 2.0))


@pytest.mark.skipif(cw.backend() != "sim", reason="schedules are explored by the simulator")
def test_in_place_replays_are_exact_in_every_explored_schedule():
    @cw.woven(streams=3)
    def accumulate(total, x, y):
        cw.ops.add(total, cw.ops.add(x, y), out=total)  # two branches' worth of reads, one write

    x, y = np.arange(N, dtype=np.float32), np.full(N, 2.0, np.float32)
    for seed in range(25):
        with cw.sim.explore(seed):
            stream = cw.Stream()
            total = cw.zeros(N, np.float32, stream=stream)
            with stream:
                dx, dy = cw.to_device(x), cw.to_device(y)
                for _ in range(4):
                    accumulate(total, dx, dy)
                np.testing.assert_array_equal(total.to_numpy(), 4 * (x + y))
    assert accumulate.cache_info()["misses"] == 1
