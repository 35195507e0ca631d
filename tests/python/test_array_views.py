"""Views of device arrays: basic indexing, reshape, transpose, dtype views and contiguous copies, exact against
NumPy; what a view's bytes are to host reads, the sanitizer and copies."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import cuweave as cw

E = Ellipsis

KEYS = [
    2, -1, slice(1, 3), slice(None, None, 2), slice(None, None, -1), slice(5, 1, -2), slice(10, 20),
    (1, slice(None), 3), (E, 2), (None, 1), (slice(1, None, 2), None, E), (0, 0, 0), (E, slice(None, None, -3)),
    (slice(None), slice(4, 0, -1), slice(1, 5, 3)), (-1, -2), (E,), (), (None, E, None), (slice(3, 3), 1),
]


@pytest.fixture
def host():
    return np.arange(4 * 5 * 6, dtype=np.int32).reshape(4, 5, 6)


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_indexing_matches_numpy(stream, host, key):
    x = cw.to_device(host, stream=stream)
    view, expected = x[key], host[key]
    assert view.shape == np.shape(expected)
    assert view.strides == np.asarray(expected).strides
    assert view.base is x
    assert np.array_equal(view.to_numpy(), expected)
    assert view.contiguous == np.asarray(expected).flags.c_contiguous or view.size <= 1


def test_a_view_of_a_view_has_the_first_array_as_its_base(stream, host):
    x = cw.to_device(host, stream=stream)
    inner = x[1:][:, ::2][0]
    assert inner.base is x and x.base is None
    assert np.array_equal(inner.to_numpy(), host[1:][:, ::2][0])


@pytest.mark.parametrize(
    "key,error,words",
    [
        (7, IndexError, "index 7 is out of bounds for axis 0 with size 4"),
        ((0, -6), IndexError, "index -6 is out of bounds for axis 1 with size 5"),
        ((0, 0, 0, 0), IndexError, "too many indices for array: array is 3-dimensional, but 4 were indexed"),
        ((E, E), IndexError, "single ellipsis"),
        (slice(None, None, 0), ValueError, "slice step cannot be zero"),
        ([0, 1], TypeError, "advanced"),
        (True, TypeError, "basic indices"),
        (1.5, TypeError, "got float"),
    ],
    ids=repr,
)
def test_indexing_errors_say_what_is_wrong(stream, host, key, error, words):
    x = cw.to_device(host, stream=stream)
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        x[key]


@pytest.mark.parametrize(
    "take,shape",
    [
        (lambda a: a, (-1,)), (lambda a: a, (6, 20)), (lambda a: a, (2, -1, 3)), (lambda a: a[:, ::2], (2, 2, 3, 6)),
        (lambda a: a[1:3], (10, 6)), (lambda a: a[:, 1], (2, 2, 6)), (lambda a: a[..., ::2], (4, 5, 3, 1)),
        (lambda a: a[0:0], (0, 7)),
    ],
)
def test_reshape_is_a_view_where_numpy_makes_one(stream, host, take, shape):
    x = cw.to_device(host, stream=stream)
    view, expected = take(x).reshape(shape), take(host).reshape(shape)
    assert np.shares_memory(expected, host) or expected.size == 0  # NumPy made a view too
    assert view.shape == expected.shape
    assert np.array_equal(view.to_numpy(), expected)
    assert view.base is x
    assert take(x).reshape(*shape).shape == expected.shape  # reshape(2, 3) as well as reshape((2, 3))


@pytest.mark.parametrize(
    "take,shape", [(lambda a: a.T, (-1,)), (lambda a: a[:, ::2], (-1,)), (lambda a: a.transpose(1, 0, 2), (20, 6))]
)
def test_reshape_that_needs_a_copy_says_to_copy(stream, host, take, shape):
    x = cw.to_device(host, stream=stream)
    assert not np.shares_memory(take(host).reshape(shape), host)  # NumPy had to copy
    with pytest.raises(ValueError, match=r"reshape a contiguous copy, made with \.copy\(\)"):
        take(x).reshape(shape)
    assert np.array_equal(take(x).copy(stream=stream).reshape(shape).to_numpy(), take(host).reshape(shape))


def test_reshape_of_another_size_names_both_shapes(stream, host):
    x = cw.to_device(host, stream=stream)
    with pytest.raises(ValueError, match=r"cannot reshape array of size 120 \(shape \(4, 5, 6\)\) into shape \(7, 3\)"):
        x.reshape(7, 3)
    with pytest.raises(ValueError, match="one unknown dimension"):
        x.reshape(-1, -1)


@pytest.mark.parametrize(
    "axes", [(), ((1, 0, 2),), (2, 0, 1), ((-1, 0, 1),)], ids=["T", "tuple", "args", "negative"]
)
def test_transpose_matches_numpy(stream, host, axes):
    x = cw.to_device(host, stream=stream)
    view = x.transpose(*axes)
    expected = host.transpose(*axes)
    assert view.strides == expected.strides
    assert np.array_equal(view.to_numpy(), expected)
    assert np.array_equal(x.T.to_numpy(), host.T) and x.T.T.ptr == x.ptr
    with pytest.raises(ValueError, match="repeated axis"):
        x.transpose(0, 0, 1)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.int64, np.complex128])
def test_dtype_views_match_numpy(stream, dtype):
    host = np.arange(48, dtype=np.float32).reshape(3, 16)
    x = cw.to_device(host, stream=stream)
    view, expected = x.view(dtype), host.view(dtype)
    assert view.shape == expected.shape and view.dtype == expected.dtype
    assert np.array_equal(view.to_numpy(), expected, equal_nan=dtype != np.uint8 and dtype != np.int16)
    with pytest.raises(ValueError, match="last axis must be contiguous"):
        x[:, ::2].view(np.float64)


def test_copy_and_ascontiguousarray_make_contiguous_arrays(stream, host):
    x = cw.to_device(host, stream=stream)
    stepped = x[::-1, 1:, ::3]
    copy = stepped.copy(stream=stream)
    assert copy.contiguous and copy.base is None and copy.ptr != x.ptr
    assert np.array_equal(copy.to_numpy(), host[::-1, 1:, ::3])
    assert cw.ascontiguousarray(x) is x
    packed = cw.ascontiguousarray(stepped, stream=stream)
    assert packed.contiguous and np.array_equal(packed.to_numpy(), host[::-1, 1:, ::3])
    assert np.array_equal(stepped.ravel().to_numpy(), host[::-1, 1:, ::3].ravel())
    assert x.ravel().ptr == x.ptr


def test_len_and_iteration_walk_the_first_axis(stream, host):
    x = cw.to_device(host, stream=stream)
    rows = list(x)
    assert len(rows) == len(x) == 4
    assert all(np.array_equal(row.to_numpy(), expected) for row, expected in zip(rows, host, strict=True))
    with pytest.raises(TypeError, match="0-d"):
        iter(x[0, 0, 0])
    assert x[1, 2, 3].item() == host[1, 2, 3]


def test_to_device_takes_lists_and_scalars(stream):
    values = cw.to_device([[1, 2], [3, 4]], stream=stream)
    assert values.dtype == np.int64 and values.shape == (2, 2)
    assert np.array_equal(values.to_numpy(), [[1, 2], [3, 4]])
    scalar = cw.to_device(2.5, stream=stream)
    assert scalar.shape == () and scalar.item() == 2.5
    with pytest.raises(TypeError, match="Python objects"):
        cw.to_device([object()], stream=stream)


def test_a_view_keeps_its_memory_alive(stream):
    x = cw.to_device(np.arange(1 << 16, dtype=np.float32), stream=stream)
    tail = x[-4:]
    del x
    gc.collect()
    cw.collect()
    cw.zeros((1 << 16,), np.float32, stream=stream)  # would take the freed block
    assert np.array_equal(tail.to_numpy(), np.arange((1 << 16) - 4, 1 << 16, dtype=np.float32))


def test_ops_write_exactly_a_contiguous_view(stream):
    x = cw.zeros((3, 4), np.float64, stream=stream)
    cw.ops.fill(x[1], 5.0, stream=stream)
    cw.ops.scale(x[2, 1:3], 2.0, out=x[2, 1:3], stream=stream)
    cw.ops.add(x[1, :2], 1.0, out=x[0, 2:], stream=stream)
    expected = np.zeros((3, 4))
    expected[1] = 5.0
    expected[0, 2:] = 6.0
    assert np.array_equal(x.to_numpy(), expected)


def test_ops_on_a_strided_view_say_to_copy(stream):
    x = cw.zeros((8,), np.float32, stream=stream)
    with pytest.raises(ValueError, match=r"strided view; pass a contiguous copy of it, made with \.copy\(\)"):
        cw.ops.scale(x[::2], 2.0, stream=stream)
    assert np.array_equal(cw.ops.scale(x[::2].copy(stream=stream), 2.0, stream=stream).to_numpy(), np.zeros(4))


def test_copies_to_and_from_strided_views(stream, rng):
    host = rng.standard_normal((6, 8))
    x = cw.zeros((6, 8), np.float64, stream=stream)
    cw.copy_async(x[::2, 1::3], host[::2, 1::3].copy(), stream=stream)
    expected = np.zeros((6, 8))
    expected[::2, 1::3] = host[::2, 1::3]
    assert np.array_equal(x.to_numpy(), expected)
    out = np.empty((8, 6))
    cw.copy_async(out, x.T, stream=stream).wait()
    assert np.array_equal(out, expected.T)
    y = cw.zeros((8, 6), np.float64, stream=stream)
    cw.copy_async(y[::-1], x.T, stream=stream)
    assert np.array_equal(y.to_numpy(), expected.T[::-1])


def _chunks_written_on_their_streams(streams, n=1 << 14):
    """One buffer, chunk i filled with i + 1 on stream i behind a spin (longest for the first)."""
    x = cw.zeros((len(streams) * n,), np.float32, stream=streams[0])
    streams[0].synchronize()
    for i, s in enumerate(streams):
        cw.ops.spin(0.02 * (len(streams) - i), stream=s)
        cw.ops.fill(x[i * n:(i + 1) * n], float(i + 1), stream=s)
    return x, np.repeat(np.arange(1, len(streams) + 1, dtype=np.float32), n)


def test_a_host_read_waits_for_every_stream_that_wrote_its_views(stream, other_stream):
    x, expected = _chunks_written_on_their_streams([stream, other_stream, cw.Stream()])
    assert np.array_equal(x.to_numpy(), expected)  # the whole buffer: after all three writers
    y, _ = _chunks_written_on_their_streams([stream, other_stream])
    assert np.all(y[: 1 << 14].to_numpy() == 1.0)  # one chunk: after its writer
    z, expected = _chunks_written_on_their_streams([stream, other_stream])
    assert np.array_equal(z[::2].to_numpy(), expected[::2])  # a strided read gathers after both


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_host_reads_of_views_follow_their_writers_in_every_explored_schedule(stream, other_stream, seed):
    if cw.backend() != "sim":
        pytest.skip("schedules are explored by the simulator")
    with cw.sim.explore(seed):
        x, expected = _chunks_written_on_their_streams([stream, other_stream])
        assert np.array_equal(x.to_numpy(), expected)
        assert float(x[-1]) == 2.0


def test_the_sanitizer_sees_exactly_a_views_bytes(stream, other_stream):
    with cw.sanitize():
        x = cw.zeros((64,), np.float32, stream=stream)
        stream.synchronize()
        cw.ops.spin(0.02, stream=stream)
        cw.copy_async(x[::2], np.ones(32, np.float32), stream=stream)  # even elements
        cw.copy_async(x[1::2], np.full(32, 2.0, np.float32), stream=other_stream)  # odd ones: no race
        expected = np.tile(np.array([1.0, 2.0], np.float32), 32)
        assert np.array_equal(x.to_numpy(), expected)
        cw.ops.fill(x[0:40], 3.0, stream=stream)
        with pytest.raises(cw.RaceError) as raised:
            cw.ops.fill(x[32:64], 4.0, stream=other_stream)  # overlaps [32, 40) without an order
        assert "write by fill" in str(raised.value) and "race on 32 bytes" in str(raised.value)


def test_the_sanitizer_sees_exactly_the_elements_of_long_stepped_views(stream, other_stream):
    """Past 64 runs of bytes too: the even and odd halves of 8192 elements, and two blocks of columns of a matrix,
    written on two unordered streams are no race; a view sharing elements with one of them is, named from the
    first bytes both touch."""
    with cw.sanitize():
        x = cw.zeros((8192,), np.float32, stream=stream)
        m = cw.zeros((512, 64), np.float32, stream=stream)
        stream.synchronize()
        cw.ops.spin(0.02, stream=stream)
        cw.copy_async(x[::2], np.ones(4096, np.float32), stream=stream)
        cw.copy_async(x[1::2], np.full(4096, 2.0, np.float32), stream=other_stream)
        cw.copy_async(m[:, :8], np.ones((512, 8), np.float32), stream=stream)
        cw.copy_async(m[:, 8:16], np.full((512, 8), 2.0, np.float32), stream=other_stream)
        assert np.array_equal(x.to_numpy(), np.tile(np.array([1.0, 2.0], np.float32), 4096))
        expected = np.zeros((512, 64), np.float32)
        expected[:, :8], expected[:, 8:16] = 1.0, 2.0
        assert np.array_equal(m.to_numpy(), expected)
        cw.ops.spin(0.02, stream=stream)
        cw.copy_async(x[::2], np.full(4096, 3.0, np.float32), stream=stream)
        with pytest.raises(cw.RaceError) as raised:
            cw.copy_async(x[4::4], np.full(2047, 4.0, np.float32), stream=other_stream)  # every second even one
        report = str(raised.value)
        assert f"race on bytes from {x.ptr + 16:#x} (the first 4 bytes both touch" in report, report
        assert report.count("race on") == 1, report


def test_partly_overlapping_views_written_in_order_on_two_streams_read_exactly(stream, other_stream):
    with cw.sanitize():
        x = cw.zeros((64,), np.float32, stream=stream)
        cw.ops.spin(0.02, stream=stream)
        cw.ops.fill(x[0:40], 3.0, stream=stream)
        other_stream.wait(stream)
        cw.ops.fill(x[32:64], 4.0, stream=other_stream)
        expected = np.full(64, 3.0, np.float32)
        expected[32:] = 4.0
        assert np.array_equal(x.to_numpy(), expected)
        assert np.array_equal(x[30:34].to_numpy(), expected[30:34])


def test_cuda_array_interface_of_views(stream, other_stream):
    x = cw.zeros((4, 6), np.float32, stream=stream)
    column = x[:, 1]
    interface = column.__cuda_array_interface__
    assert interface["shape"] == (4,) and interface["strides"] == (24,)
    assert interface["data"][0] == x.ptr + 4
    other_stream.wait(stream)
    cw.ops.fill(x[0], 1.0, stream=other_stream)
    assert x[0].__cuda_array_interface__["stream"] == other_stream.__cuda_stream__()[1]
    # Written on two streams: the current stream waits for both, and consumers order after it.
    assert x.__cuda_array_interface__["stream"] == 1


def test_a_stepped_write_leaves_the_elements_between_its_own_to_their_writer(stream, other_stream):
    x = cw.zeros(32, np.float32, stream=stream)
    other_stream.wait(stream)
    cw.copy_async(x[1::2], cw.to_device(np.full(16, 2.0, np.float32), stream=stream), stream=stream)
    cw.copy_async(x[::2], cw.to_device(np.ones(16, np.float32), stream=other_stream), stream=other_stream)
    # Elements 1 and 2 are one of each: the current stream waits for both, and consumers order after it.
    assert x[1:3].__cuda_array_interface__["stream"] == 1
    assert np.array_equal(x[1:3].to_numpy(), np.array([2.0, 1.0], np.float32))


def test_repr_of_a_strided_view_shows_its_values(stream, host):
    x = cw.to_device(host, stream=stream)
    assert "[[ 0,  2,  4],\n" in repr(x[0, :, ::2])


def _busy(trace: cw.Trace, stream: cw.Stream) -> list[tuple[int, int]]:
    return [(event.start_ns, event.end_ns) for event in trace.select(None, stream=stream)
            if event.kind in ("copy", "kernel")]


@pytest.mark.real_time
@pytest.mark.parametrize("allocating", [False, True], ids=["views", "an_array_per_chunk"])
def test_the_chunk_recipe_overlaps_on_the_timeline(allocating):
    # NVIDIA's recipe, two chunks of 32 MB: chunk i's copy in, kernel and copy out on stream i. The second
    # chunk's copy in runs while the first chunk's kernel does, on a GPU and on the simulator alike.
    n, count = 2, 8 << 20
    host_in, host_out = cw.pinned_empty(n * count, np.float32), cw.pinned_empty(n * count, np.float32)
    host_in[:] = 1.0
    device = cw.empty(n * count, np.float32)
    streams = [cw.Stream(), cw.Stream()]
    with cw.trace() as trace:
        for i, s in enumerate(streams):
            part = slice(i * count, (i + 1) * count)
            chunk = cw.to_device(host_in[part], stream=s) if allocating else device[part]
            if not allocating:
                cw.copy_async(chunk, host_in[part], stream=s)
            cw.ops.scale(chunk, 2.0, out=chunk, stream=s)
            cw.ops.spin(0.02, stream=s)
            cw.copy_async(host_out[part], chunk, stream=s)
        for s in streams:
            s.synchronize()
    first, second = _busy(trace, streams[0]), _busy(trace, streams[1])
    assert any(a < d and c < b for a, b in first for c, d in second), (first, second)
    assert sum(row.overlap_ns for row in trace.summary().streams) > 0
    assert np.all(host_out == 2.0)


def test_assignment_through_an_index_writes_the_views_elements(stream):
    expected = np.zeros((4, 6), np.float32)
    x = cw.zeros((4, 6), np.float32, stream=stream)
    with stream:  # assignment queues on the current stream
        x[1] = 3.0  # a scalar into a contiguous view: a fill
        x[:, ::2] = 7  # a scalar into a strided one, broadcast
        x[2:, 1] = [5.0, 6.0]  # a list
        x[0, 1:4] = x[1, 1:4]  # a device array of the same shape
    expected[1] = 3.0
    expected[:, ::2] = 7
    expected[2:, 1] = [5.0, 6.0]
    expected[0, 1:4] = expected[1, 1:4]
    assert np.array_equal(x.to_numpy(), expected)
    with pytest.raises(ValueError, match="broadcast"):
        x[0] = np.ones(5)
    with pytest.raises(ValueError, match="shape"):
        with stream:
            x[0, :2] = x[1, :3]


def test_repr_of_an_array_behind_a_held_stream_says_so_instead_of_waiting(stream):
    x = cw.zeros(4, np.float32, stream=stream)
    with cw.HostLatch(stream):
        cw.ops.fill(x, 2.0, stream=stream)  # queued behind the hold: reading it would wait for the release
        assert "a stream it waits for is paused for the host" in repr(x)
        with pytest.raises(TypeError, match=r"DeviceArray\.handoff\(\) got an unexpected keyword argument"):
            x.handoff(stream, not_an_argument=1)  # an error message that names the array must not wait either
    assert "[2., 2., 2., 2.]" in repr(x)
