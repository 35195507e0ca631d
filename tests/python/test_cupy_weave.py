"""CuPy's kernels inside cuweave.weave() (Note [Other libraries' kernels in a weave] in cuweave/_cupy_hooks.py):
moved to the streams the weave chooses, with the right results beside CuPy's own work that stays on its stream."""

from __future__ import annotations

import contextlib
import importlib.util

import numpy as np
import pytest

import cuweave as cw
from _support import Gate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.cupti,  # the launch watch: CUPTI's callbacks
    pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="needs CuPy"),
]

N = 1 << 16

# Spins `ns` nanoseconds on the GPU's clock, then counts the spin in `y`.
SPIN = r"""
unsigned long long start, now;
asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while ((long long)(now - start) < ns);
y = y + 1.0f;
"""
# Writes the GPU's clock (ns) when it runs, plus `ns`, into `t`.
STAMP = r"""
unsigned long long now;
asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
t = now + ns;
"""


@pytest.fixture
def cupy():
    import cupy

    # CuPy on a stream of its own: the legacy default stream would be ordered with the weave's by CUDA itself
    with cupy.cuda.Stream(non_blocking=True):
        yield cupy


def test_independent_cupy_chains_are_spread_over_the_weaves_streams_with_the_right_results(cupy):
    host = [np.arange(N, dtype=np.float32) + i for i in range(4)]
    arrays = [cupy.asarray(h) for h in host]
    cupy.cuda.get_current_stream().synchronize()
    with cw.Stream(), cw.weave(streams=4) as weave:
        for _ in range(5):
            for x in arrays:
                x *= 2  # in place: each chain continues on its own stream
    woven = weave.counts
    got = [x.get() for x in arrays]  # on CuPy's stream, which follows each kernel moved off it
    for x, h in zip(got, host):
        np.testing.assert_array_equal(x, h * 32)
    assert woven.operations == 20
    assert sum(1 for n in woven.per_stream if n) == 4, woven  # four chains, four streams


def test_independent_cupy_chains_woven_overlap_on_the_timeline(cupy):
    spin = cupy.ElementwiseKernel("int64 ns", "float32 y", SPIN, "cuweave_test_spin")
    counts = [cupy.zeros(1, dtype=np.float32) for _ in range(2)]
    spin(1000, counts[0])  # compiled before the block
    with cw.trace() as timeline, cw.Stream(), cw.weave(streams=2):
        for _ in range(3):
            for count in counts:
                spin(2_000_000, count)  # 2 ms: each chain's three spins continue on its own stream
    kernels = [k for k in timeline.select("kernel") if k.end_ns - k.start_ns > 1_000_000]
    streams = sorted({k.stream for k in kernels})
    assert len(kernels) == 6 and len(streams) == 2, [(k.stream, k.start_ns, k.end_ns) for k in kernels]
    first, second = ([k for k in kernels if k.stream == s] for s in streams)
    assert any(a.start_ns < b.end_ns and b.start_ns < a.end_ns for a in first for b in second)
    # Side by side, the six spins take about three spins' time, not six.
    span = max(k.end_ns for k in kernels) - min(k.start_ns for k in kernels)
    assert span < 0.75 * sum(k.end_ns - k.start_ns for k in kernels), span
    assert [float(c.get()[0]) for c in counts] == [4.0, 3.0]


def test_a_moved_kernel_follows_work_cuweave_cannot_read_or_move(cupy):
    # A matrix product (cuBLAS) and a memset (cupy.zeros) stay on CuPy's stream; the kernels after them that the
    # weave moves must wait for them.
    a = cupy.asarray(np.random.default_rng(0).random((512, 512), dtype=np.float32))
    expected = a.get() @ a.get()
    with cw.Stream(), cw.weave(streams=4):
        product = a @ a  # cuBLAS: not moved
        product += 1  # moved: reads what cuBLAS writes
        zeros = cupy.zeros(N, dtype=np.float32)  # a memset on CuPy's stream
        zeros += 3  # moved: after the memset
    np.testing.assert_allclose(product.get(), expected + 1, rtol=1e-4)
    np.testing.assert_array_equal(zeros.get(), np.full(N, 3, np.float32))


def test_a_moved_kernel_follows_cuweaves_own_kernel_left_on_cupys_stream(cupy):
    # cuweave's own kernel given CuPy's stream stays there; a CuPy kernel moved off that stream afterwards, to a stream
    # it already waited on, must wait again: CuPy expects its later work to follow everything on its stream.
    stamp = cupy.ElementwiseKernel("int64 ns", "uint64 t", STAMP, "cuweave_test_stamp")
    stamped = cupy.zeros(1, dtype=np.uint64)
    stamp(0, stamped)  # compiled before the block
    cupy.cuda.get_current_stream().synchronize()
    cupys = cw.Stream.from_external(cupy.cuda.get_current_stream().ptr)
    spin_start = cw.zeros(1, np.uint64, stream=cupys)  # zeroed in the spin's stream order
    with cw.Stream(), cw.weave(streams=4):
        stamp(0, stamped)  # moved: its stream waits for CuPy's work so far
        cw.ops.spin(0.005, stream=cupys, start_times=spin_start)  # 5 ms, left on CuPy's stream
        stamp(0, stamped)  # moved to the same stream (it continues the first), and after the spin
    spin_began = int(spin_start.to_numpy(stream=cupys)[0])
    assert int(stamped.get()[0]) >= spin_began + 4_000_000, "the moved kernel ran beside the spin left on its stream"


def test_blocks_cupys_pool_hands_out_again_are_not_written_under_a_moved_kernels_reads(cupy):
    # Each step's temporary is freed to CuPy's pool and handed out again to the next step: a kernel moved to another
    # stream that wrote the reused block before the earlier reader ran would change the sums.
    host = np.arange(N, dtype=np.float32)
    x = cupy.asarray(host)
    outs = []
    with cw.Stream(), cw.weave(streams=4):
        for step in range(20):
            temporary = x + step  # a fresh block, often the one the last step's temporary freed
            outs.append(temporary * 2)
            del temporary
    for step, out in enumerate(outs):
        np.testing.assert_array_equal(out.get(), (host + step) * 2)


def test_cupy_kernels_woven_under_the_sanitizer_are_clean(cupy):
    arrays = [cupy.ones(N, dtype=np.float32) for _ in range(3)]
    with cw.sanitize(), cw.Stream(), cw.weave(streams=3):
        for _ in range(4):
            for x in arrays:
                x += 1
        total = arrays[0] + arrays[1] + arrays[2]
    np.testing.assert_array_equal(total.get(), np.full(N, 15, np.float32))


def test_a_cupy_race_written_on_two_streams_is_ordered_away_by_the_weave(cupy):
    x = cupy.ones(N, dtype=np.float32)
    x += 0  # CuPy's kernels compiled and loaded before: a first launch waits for the device
    x * 2
    other = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.get_current_stream().synchronize()
    # By hand: a kernel on another stream reads what CuPy's stream still writes (held behind a gate), no wait between.
    cupys = cw.Stream.from_external(cupy.cuda.get_current_stream().ptr)
    with cw.sanitize(), Gate(cupys), pytest.raises(cw.RaceError):
        x += 1
        with other:
            x * 2
    cupy.cuda.Device().synchronize()
    x.fill(1)
    # Woven, the same program in order: the readers, on two of the weave's streams, follow the writer.
    with cw.sanitize(), cw.Stream(), cw.weave(streams=4) as weave, contextlib.ExitStack() as held:
        with weave.step(writes=[x]) as step:  # keeps x's writer pending, as above, until the block is queued
            held.enter_context(Gate(step))
        x += 1
        doubled = x * 2
        tripled = x * 3
    assert sum(1 for n in weave.counts.per_stream if n) >= 2, weave.counts
    np.testing.assert_array_equal(doubled.get(), np.full(N, 4, np.float32))
    np.testing.assert_array_equal(tripled.get(), np.full(N, 6, np.float32))


def test_a_woven_function_calling_cupy_captures_its_work_and_replays_it_with_new_values(cupy):
    host = np.arange(N, dtype=np.float32)
    x, out = cupy.asarray(host), cupy.zeros(N, dtype=np.float32)
    doubled, shifted = cupy.empty_like(x), cupy.empty_like(x)

    def kernels():
        cupy.multiply(x, 2, out=doubled)
        cupy.add(x, 1, out=shifted)  # independent of the first: another of the weave's streams
        cupy.add(doubled, shifted, out=out)

    kernels()  # compiled before the capture (a capture refuses loading a module)

    @cw.woven
    def step(x_view, out_view):
        kernels()
        return None

    x_view, out_view = cw.asarray(x), cw.asarray(out)  # the signature: cuweave's views of CuPy's arrays
    with cw.Stream():
        step(x_view, out_view)  # captured, and replayed once
        np.testing.assert_array_equal(out.get(), host * 3 + 1)  # .get() on CuPy's stream follows the replay
        nodes = step.graph_for(x_view, out_view).nodes
        kernels_in_graph = [node for node in nodes if node.kind == "kernel"]
        assert len(kernels_in_graph) == 3, nodes
        for _ in range(3):
            x += 10  # on CuPy's stream: the replay follows it
            step(x_view, out_view)
            np.testing.assert_array_equal(out.get(), (x.get() * 3 + 1))
        assert step.cache_info()["misses"] == 1

