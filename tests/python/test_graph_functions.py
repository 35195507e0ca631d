"""cuweave.graph_function: NumPy in, one replay, NumPy out; results equal eager execution bit for bit, each
input signature gets its own graph from a bounded cache that warns when it keeps growing."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuweave as cw


def step(x, y):
    t = cw.ops.axpy(2.5, x, cw.ops.add(y, -1.0), out=cw.ops.add(y, -1.0))
    return cw.ops.add(t, x), cw.ops.sum(t)


def _eager(x, y):
    with cw.Stream() as s:
        results = step(cw.to_device(x), cw.to_device(y))
        return tuple(r.to_numpy(stream=s) for r in results)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 3000), dtype=st.sampled_from([np.float32, np.float64]))
def test_results_equal_eager_execution_bit_for_bit(seed, size, dtype):
    rng = np.random.default_rng(seed)
    f = cw.graph_function(step)
    for _ in range(3):
        x = (rng.standard_normal(size) * 1e3).astype(dtype)
        y = (rng.standard_normal(size) * 1e3).astype(dtype)
        got = f(x, y)
        want = _eager(x, y)
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.tobytes() == w.tobytes()
    assert f.cache_info()["graphs"] == 1 and f.cache_info()["hits"] == 2


def test_large_inputs_staged_by_the_copy_threads_equal_eager_execution():
    rng = np.random.default_rng(5)
    f = cw.graph_function(step)
    n = (3 << 20) // 8 + 5  # 3 MiB and a little: staged by cuweave's copy threads, not np.copyto
    for _ in range(2):
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        for got, want in zip(f(x, y), _eager(x, y), strict=True):
            assert got.tobytes() == want.tobytes()
    strided = rng.standard_normal(2 * n)[::2]  # not contiguous: np.copyto stages it
    assert f(strided, y)[0].tobytes() == _eager(np.ascontiguousarray(strided), y)[0].tobytes()


def test_host_copy_refuses_what_it_cannot_copy():
    with pytest.raises(ValueError, match="differ in size"):
        cw._core.host_copy(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError, match="C-contiguous"):
        cw._core.host_copy(np.zeros(4), np.zeros(8)[::2])
    target = np.zeros(4)
    target.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cw._core.host_copy(target, np.ones(4))


@pytest.mark.parametrize("shape", [(8,), (2, 3)])
def test_results_are_new_arrays_each_call_in_the_compiled_and_the_general_path(shape):
    f = cw.graph_function(lambda x: cw.ops.add(x, 1.0))
    first = f(np.zeros(shape, np.float32))  # the capture: the general path
    second = f(np.ones(shape, np.float32))  # a call like the previous one: the compiled path
    third = f(np.full(shape, 5, np.float32))
    assert len({id(first), id(second), id(third)}) == 3
    assert not np.shares_memory(first, second) and not np.shares_memory(second, third)
    assert np.all(first == 1) and np.all(second == 2) and np.all(third == 6)
    assert not cw.is_pinned(third) and third.flags.writeable and third.flags.owndata
    results = [f(np.full(shape, i, np.float32)) for i in range(3)]  # the trap the reused buffer set
    assert [float(r.flat[0]) for r in results] == [1.0, 2.0, 3.0]
    pair = cw.graph_function(lambda x: (cw.ops.add(x, 1.0), cw.ops.add(x, 2.0)))
    one, two = pair(np.zeros(shape, np.float32)), pair(np.ones(shape, np.float32))
    assert np.all(one[0] == 1) and np.all(two[1] == 3) and not np.shares_memory(one[0], two[0])


def test_copy_false_returns_the_pinned_results_which_the_next_call_overwrites():
    f = cw.graph_function(lambda x: cw.ops.add(x, 1.0), copy=False)
    first = f(np.zeros(8, np.float32))
    assert cw.is_pinned(first)
    second = f(np.ones(8, np.float32))
    assert first is second or np.shares_memory(first, second)
    assert np.all(first == 2)  # overwritten by the second call
    kept = f(np.full(8, 5, np.float32), copy=True)  # per call
    f(np.zeros(8, np.float32))
    assert np.all(kept == 6)
    g = cw.graph_function(lambda x: cw.ops.add(x, 1.0))
    assert cw.is_pinned(g(np.zeros(4, np.float32), copy=False))  # per call, the other way


def test_each_signature_gets_its_own_graph_and_the_cache_warns_when_it_evicts():
    f = cw.graph_function(lambda x: cw.ops.scale(x, 3.0, out=x), max_graphs=2)
    assert np.array_equal(f(np.ones(4, np.float32)), np.full(4, 3, np.float32))
    assert np.array_equal(f(np.ones(5, np.float32)), np.full(5, 3, np.float32))
    with pytest.warns(cw.GraphCacheWarning, match="max_graphs"):
        f(np.ones((2, 3), np.float64))
    info = f.cache_info()
    assert info["graphs"] == 2 and info["evictions"] == 1 and info["misses"] == 3
    assert np.array_equal(f(np.ones(5, np.float32)), np.full(5, 3, np.float32))  # still cached: a hit
    with pytest.warns(cw.GraphCacheWarning):  # evicted (least recently used): captured again
        assert np.array_equal(f(np.ones(4, np.float32)), np.full(4, 3, np.float32))
    assert f.cache_info()["hits"] == 1 and f.cache_info()["misses"] == 4


def test_the_graph_copies_inputs_in_and_results_out():
    f = cw.graph_function(lambda x, y: cw.ops.add(x, y))
    graph = f.graph_for(np.zeros(16, np.float32), np.zeros(16, np.float32))
    kinds = [n.kind for n in graph.nodes]
    # Small inputs come in by copy engine, the small result goes out by kernel (Note [Copies by kernel]).
    assert kinds.count("copy") == 2 and kinds.count("kernel") == 2
    assert sum("HtoD" in n.label for n in graph.nodes) == 2
    assert [n.label for n in graph.nodes if "DtoH" in n.label] == ["copy_kernel DtoH"]


@pytest.mark.parametrize("elements", [1, 1023, 1 << 14, (1 << 18) + 1, 1 << 19])
def test_results_are_exact_whichever_way_the_graph_copies(elements):
    # 4 B to 2 MB: copy engines, kernels, and the host copy threads for the largest inputs.
    f = cw.graph_function(lambda x, y: cw.ops.add(x, y))
    rng = np.random.default_rng(elements)
    for _ in range(2):
        x = rng.integers(-1000, 1000, elements).astype(np.int32)
        y = rng.integers(-1000, 1000, elements).astype(np.int32)
        assert np.array_equal(f(x, y), x + y)


def test_calls_like_the_previous_one_take_any_layout_and_kind_of_input():
    # The one-input hit (answered in C++, Note [Graph function calls in C]) and the general path give the same
    # results.
    f = cw.graph_function(lambda x: (cw.ops.add(x, 1.0), cw.ops.scale(x, 2.0, out=x)))
    base = np.arange(64, dtype=np.float64)
    calls = [base, base[::-1], np.arange(128, dtype=np.float64)[::2], base.tolist(), base + 0.5]
    for x in calls:
        plus, twice = f(x)
        assert np.array_equal(plus, np.asarray(x) + 1) and np.array_equal(twice, np.asarray(x) * 2)
    assert f.cache_info()["misses"] == 1 and f.cache_info()["hits"] == len(calls) - 1
    assert f(base.astype(np.float32))[0].dtype == np.float32  # another dtype: another graph
    assert f.cache_info()["misses"] == 2
    plus, _ = f(base, copy=True)
    again, _ = f(base + 1)
    assert np.array_equal(plus, base + 1) and np.array_equal(again, base + 2)  # the copy kept its values


class _Tagged(np.ndarray):
    pass


def test_only_a_contiguous_ndarray_of_the_same_dtype_object_is_answered_in_cpp_and_every_input_gives_exact_results():
    # Note [Graph function calls in C]: the compiled hit memcpys a C-contiguous ndarray whose dtype is the very
    # object the graph was captured for; everything else goes to the Python path, which copies any layout.
    f = cw.graph_function(lambda x: cw.ops.scale(x, 2.0, out=x))
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    assert np.array_equal(f(base), base * 2)
    read_only = base + 1
    read_only.flags.writeable = False
    fortran = np.asfortranarray(base + 2)  # same shape and dtype, another layout
    tagged = (base + 3).view(_Tagged)  # an ndarray subclass
    with_metadata = (base + 4).astype(np.dtype(np.float32, metadata={"unit": "m"}))  # equal dtype, another object
    assert with_metadata.dtype == base.dtype and with_metadata.dtype is not base.dtype
    for x in (read_only, fortran, tagged, with_metadata, base + 5):
        assert np.array_equal(f(x), np.asarray(x) * 2)
    assert f.cache_info()["misses"] == 1 and f.cache_info()["hits"] == 5
    assert f._fast_hits == 2  # read_only and base + 5


def test_a_call_answered_in_cpp_raises_what_the_python_path_raises():
    s = cw.Stream()
    f = cw.graph_function(lambda x: cw.ops.add(x, 1.0), stream=s)
    x = np.zeros(4, np.float32)
    f(x)
    s.close()
    with pytest.raises(ValueError, match="closed"):
        f(x)  # the compiled path
    with pytest.raises(ValueError, match="closed"):
        f(x, copy=True)  # the Python path


@pytest.mark.parametrize("same_shapes", [False, True])
def test_threads_sharing_a_graph_function_take_turns_and_each_get_their_own_results(same_shapes):
    # Calls wait without the GIL; meanwhile another thread's call may capture on the same stream (a new shape),
    # switch the function's compiled fast path to another graph, or write the same staging (the same shape).
    # Calls take turns, so each returns its own results: with copy=True, also when both threads use one shape.
    f = cw.graph_function(lambda x: cw.ops.add(x, 1.0), copy=same_shapes)
    errors = []
    start = threading.Barrier(3)

    def calls(thread):
        length = 8 if same_shapes else 8 * (thread + 1)
        start.wait()
        try:
            for i in range(150):
                x = np.full(length, 1000 * thread + i, np.float32)
                got = f(x)
                if got.shape != (length,) or not np.all(got == x + 1):
                    errors.append(f"thread {thread}, call {i}: {got[:4]}")
        except Exception as error:  # noqa: BLE001 - reported below with the thread
            errors.append(f"thread {thread}: {error!r}")

    threads = [threading.Thread(target=calls, args=(thread,)) for thread in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert f.cache_info()["graphs"] == (1 if same_shapes else 3)


def test_graph_for_captures_between_calls_of_other_threads():
    f = cw.graph_function(lambda x: cw.ops.add(x, 1.0))
    errors = []

    def calls():
        try:
            for i in range(100):
                assert np.all(f(np.full(8, i, np.float32)) == i + 1)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(repr(error))

    caller = threading.Thread(target=calls)
    caller.start()
    graphs = [f.graph_for(np.zeros(n, np.float32)) for n in range(9, 15)]  # each a capture on f's stream
    caller.join()
    assert errors == [] and len({id(g) for g in graphs}) == 6


def test_decorator_forms_and_bad_arguments():
    @cw.graph_function
    def double(x):
        return cw.ops.add(x, x)

    @cw.graph_function(max_graphs=1)
    def triple(x):
        return cw.ops.scale(cw.ops.add(x, 0), 3.0, out=cw.ops.add(x, 0))

    assert double.__name__ == "double"
    assert np.array_equal(double(np.arange(3, dtype=np.int64)), np.array([0, 2, 4]))
    assert np.array_equal(triple([1.0, 2.0]), np.array([3.0, 6.0]))
    with pytest.raises(ValueError, match="max_graphs"):
        cw.graph_function(double, max_graphs=0)
    with pytest.raises(TypeError, match="callable"):
        cw.graph_function(42)
    with pytest.raises(TypeError, match="Python objects"):
        double(np.array([object()]))


def test_a_function_that_waits_on_the_host_is_refused_with_a_capture_error():
    def reads_back(x):
        y = cw.ops.add(x, 1.0)
        y.to_numpy()
        return y

    f = cw.graph_function(reads_back)
    with pytest.raises(cw.CaptureError, match="to_numpy"):
        f(np.zeros(4, np.float32))
    assert f.cache_info()["graphs"] == 0
