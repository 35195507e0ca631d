"""cuweave.prefetch: batches arrive intact and in order, ordered before the consumer's stream, with
backpressure, exceptions re-raised, and nothing left behind on break, close or garbage collection."""

from __future__ import annotations

import gc
import threading
import time
import traceback

import numpy as np
import pytest

import cuweave as cw
from _support import skip_under_compute_sanitizer


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "cuweave-prefetch"]


def _wait_for_no_prefetch_threads(timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gc.collect()
        if not _prefetch_threads():
            return True
        time.sleep(0.01)
    return False


def _batches(seed: int, count: int = 12):
    rng = np.random.default_rng(seed)
    dtypes = [np.float32, np.uint8, np.int64, np.float64, np.complex64]
    out = []
    for i in range(count):
        dtype = dtypes[i % len(dtypes)]
        n = int(rng.integers(1, 3 << 20)) // np.dtype(dtype).itemsize + 1  # sizes that do not divide a slot
        out.append(rng.integers(0, 256, size=n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype))
    return out


def test_every_byte_arrives_in_order(stream):
    batches = _batches(seed=1)
    with stream:
        got = [d.to_numpy() for d in cw.prefetch(batches, depth=3)]
    assert len(got) == len(batches)
    for want, have in zip(batches, got, strict=True):
        assert have.dtype == want.dtype and np.array_equal(have.view(np.uint8), want.view(np.uint8))


def test_tuples_lists_and_dicts_keep_their_structure(stream):
    x = np.arange(10.0)
    y = np.arange(5, dtype=np.int32)
    source = [(x, y), {"x": x, "y": [y, x]}]
    with stream:
        first, second = list(cw.prefetch(source))
    assert isinstance(first, tuple) and isinstance(first[0], cw.DeviceArray)
    assert np.array_equal(first[1].to_numpy(), y)
    assert set(second) == {"x", "y"} and isinstance(second["y"], list)
    assert np.array_equal(second["y"][1].to_numpy(), x)


def test_batches_are_handed_to_the_consumer_stream(stream):
    with stream:
        for d in cw.prefetch([np.zeros(8)]):
            assert d.stream == stream


def test_consumer_kernels_see_the_data_without_a_host_wait(stream):
    # The consumer works on each batch on its own stream right away; the event wait orders it.
    batches = [np.full(1 << 18, float(i), np.float32) for i in range(8)]
    results = []
    with stream:
        for d in cw.prefetch(batches, depth=2):
            out = cw.empty(d.shape, d.dtype)
            cw.copy_async(out, d)  # device work on the consumer stream, ordered after the batch copy
            results.append(out)
    for i, out in enumerate(results):
        assert (out.to_numpy(stream=stream) == float(i)).all()


def test_consumer_never_sees_a_batch_early_in_any_explored_schedule():
    if cw.backend() != "sim":
        pytest.skip("schedule exploration needs the simulator")
    batches = [np.full(1000, float(i)) for i in range(4)]
    for seed in range(200):
        with cw.sim.explore(seed):
            consumer = cw.Stream()
            with consumer:
                seen = [d.to_numpy() for d in cw.prefetch(batches, depth=2)]
            consumer.close()
        assert all((s == float(i)).all() for i, s in enumerate(seen)), f"seed {seed}"


def test_backpressure_bounds_how_far_the_producer_reads_ahead(stream):
    pulled = []

    def source():
        for i in range(20):
            pulled.append(i)
            yield np.full(16, float(i))

    depth = 2
    with stream:
        iterator = cw.prefetch(source(), depth=depth)
        for consumed, _ in enumerate(iterator, start=1):
            time.sleep(0.01)  # a slow consumer
            # queued (depth) + one being copied + the ones consumed
            assert len(pulled) <= consumed + depth + 1
    assert len(pulled) == 20


def test_an_exception_from_the_source_is_re_raised_with_its_traceback(stream):
    def source():
        yield np.zeros(4)
        raise KeyError("the source broke")

    with stream, pytest.raises(KeyError, match="the source broke") as info:
        for _ in cw.prefetch(source()):
            pass
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any(frame.name == "source" for frame in frames), "the source's frame is missing from the traceback"
    assert _wait_for_no_prefetch_threads()


def test_a_bad_batch_is_a_type_error(stream):
    with stream, pytest.raises(TypeError, match="NumPy"):
        list(cw.prefetch(["not an array"]))


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="depth"):
        cw.prefetch([], depth=0)


def test_early_break_stops_the_thread_and_releases_the_stream(stream):
    def endless():
        i = 0
        while True:
            i += 1
            yield np.full(1024, float(i))

    with stream:
        for i, _ in enumerate(cw.prefetch(endless(), depth=2)):
            if i == 3:
                break
    assert _wait_for_no_prefetch_threads(), "a prefetch thread outlived its iterator"


def test_close_is_idempotent_and_ends_iteration(stream):
    with stream:
        iterator = cw.prefetch([np.zeros(4)] * 5)
        next(iterator)
        iterator.close()
        iterator.close()
        with pytest.raises(StopIteration):
            next(iterator)
    assert _wait_for_no_prefetch_threads()


def test_abandoned_iterators_leave_no_pinned_memory_or_streams_behind(stream):
    cw.to_device(np.zeros(4 << 20, np.uint8), stream=stream)  # the staging ring exists from here on
    stream.synchronize()
    gc.collect()
    cw.collect()
    before = cw.pinned_pool().stats()["in_use_bytes"]
    for _ in range(5):
        with stream:
            iterator = cw.prefetch((np.zeros(3 << 20, np.uint8) for _ in range(10)), depth=2)
            next(iterator)
        del iterator
    assert _wait_for_no_prefetch_threads()
    cw.synchronize()
    cw.collect()
    gc.collect()
    assert cw.pinned_pool().stats()["in_use_bytes"] == before


def test_empty_source_ends_at_once(stream):
    with stream:
        assert list(cw.prefetch([])) == []
    assert _wait_for_no_prefetch_threads()


def test_interpreter_exit_mid_iteration_is_clean():
    import subprocess
    import sys

    program = (
        "import numpy as np, cuweave as cw\n"
        "it = cw.prefetch((np.full(1 << 20, float(i)) for i in range(1000)), depth=3)\n"
        "next(it)\n"
        "print('left with the prefetch thread running')\n"
    )
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert "left with the prefetch thread running" in run.stdout
    assert "Traceback" not in run.stderr


@pytest.mark.gpu
def test_prefetched_batches_feed_torch_and_cupy_consumers(stream):
    # Seen on an H100: under compute-sanitizer (which makes each launch wait for its kernel) the first
    # PyTorch reduction here had not returned after 100 s; the interop itself runs in every other check.
    skip_under_compute_sanitizer("PyTorch's launches behind prefetch did not return within 100 s under the tool")
    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    batches = [np.full(1 << 16, float(i), np.float32) for i in range(6)]
    torch_stream = torch.cuda.Stream()
    sums = []
    with torch.cuda.stream(torch_stream), cw.Stream.from_external(torch_stream):
        for d in cw.prefetch(batches, depth=2):
            t = torch.from_dlpack(d)  # ordered on the consumer stream, which is torch's
            sums.append(t.mul(2).sum())
    torch_stream.synchronize()
    assert [float(s) for s in sums] == [2.0 * i * (1 << 16) for i in range(6)]
    cupy_stream = cupy.cuda.Stream(non_blocking=True)
    with cupy_stream, cw.Stream.from_external(cupy_stream):
        totals = [float(cupy.asarray(d).sum()) for d in cw.prefetch(batches, depth=2)]
    assert totals == [float(i * (1 << 16)) for i in range(6)]
