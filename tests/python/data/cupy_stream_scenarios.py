"""CuPy programs with and without races between streams, for cuweave's sanitizer.

    python -m cuweave sanitize cupy_stream_scenarios.py NAME

Each scenario runs CuPy's own operators and kernels (ufuncs and operators, an ElementwiseKernel, CuPy's
reductions), its copies to and from the host (get(), set() from its pinned pool's memory) on two CuPy streams,
ordered or not by CuPy's events. CuPy reports none of its synchronizes, so
cuweave takes a CuPy stream found idle as waited for; to make a race visible whatever the GPU's speed, the first
stream is kept busy (a 50 ms spin, queued through cuweave on CuPy's stream) before the operation that races,
and each scenario runs once before, without the spin, so that CuPy's first launch of a kernel (which loads it,
waiting for the device) comes before.
RACES names those with a race; WARNS those where the sanitizer cannot see a kernel and says so. The program
prints "done" when it ends without a race.
"""

import sys

import cupy as cp
import numpy as np

import cuweave as cw

N = 1 << 20


WARMING_UP = False


def busy(stream):
    """Keeps `stream` busy for 50 ms, so that its next operation is still pending when the other stream runs."""
    if not WARMING_UP:
        cw.ops.spin(0.05, stream=cw.Stream.from_external(stream.ptr))


def own_reductions():
    """CuPy's own reduction kernels, which the sanitizer reads, in place of CUB's (CUPY_ACCELERATORS=)."""
    cp._core.set_reduction_accelerators([])
    cp._core.set_routine_accelerators([])


def add_on(s, x):
    """`x += 1` on stream s, kept pending behind the spin."""
    busy(s)
    with s:
        x += 1


def multiply_on(t, x):
    with t:
        x * 2


def ufunc_race(s, t, x):
    add_on(s, x)
    multiply_on(t, x)


def ufunc_ordered_by_event(s, t, x):
    add_on(s, x)
    t.wait_event(s.record())
    multiply_on(t, x)


def ufunc_ordered_by_cupy_event(s, t, x):
    add_on(s, x)
    event = cp.cuda.Event()
    event.record(s)
    t.wait_event(event)
    multiply_on(t, x)


def reads_on_both_streams(s, t, x):
    busy(s)
    with s:
        x * 2
    with t:
        x + 1


def disjoint_halves(s, t, x):
    busy(s)
    with s:
        x[: N // 2] += 1
    with t:
        x[N // 2:] += 1


def same_stream(s, t, x):
    busy(s)
    with s:
        x += 1
        x * 2


def synchronized(s, t, x):
    add_on(s, x)
    s.synchronize()
    multiply_on(t, x)


def elementwise_kernel_race(s, t, x):
    triple = cp.ElementwiseKernel("T x", "T y", "y = x * 3", "cuweave_test_triple")
    y = cp.empty_like(x)
    busy(s)
    with s:
        triple(x, y)
    with t:
        y += 1


def reduction_race(s, t, x):
    own_reductions()
    busy(s)
    with s:
        x += 1
    with t:
        x.reshape(1024, -1).sum(axis=1)


def reduction_then_write_race(s, t, x):
    own_reductions()
    busy(s)
    with s:
        x.sum()
    with t:
        x *= 3


def transposed_race(s, t, x):
    square = x.reshape(1024, 1024)
    busy(s)
    with s:
        square.T[:, :8] += 1  # the first 8 rows of x's 1024 x 1024 view, read through the transpose
    with t:
        square[7, 1000] * 2


def cub_reduction_unseen(s, t, x):
    cp._core.set_reduction_accelerators(["cub"])
    cp._core.set_routine_accelerators(["cub"])
    with s:
        x.sum()


def raw_kernel_unseen(s, t, x):
    scale = cp.RawKernel(r'extern "C" __global__ void cuweave_test_scale(float* x, int n) {'
                         r" int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }",
                         "cuweave_test_scale")
    with s:
        scale((N // 256,), (256,), (x, cp.int32(N)))


def _pool_reuse(s, t, x, wait):
    """CuPy's memory pool gives a dropped array's block back to the stream that allocated it and hands it to that
    stream's next allocation of the size at once: an array made on s and read on t, then dropped, and s's next
    array takes its block while t's read may still run, unless s first waits for t."""
    with s:
        made = x + 1  # its block comes from s's pool
    t.wait_event(s.record())
    busy(t)
    with t:
        made * 2  # pending behind the spin
    del made  # its block goes back to s's pool
    if wait:
        s.wait_event(t.record())
    with s:
        x + 2  # s's next allocation of the size: the dropped array's block


def pool_block_reused_while_read(s, t, x):
    _pool_reuse(s, t, x, wait=False)


def pool_block_reused_after_a_wait(s, t, x):
    _pool_reuse(s, t, x, wait=True)


def get_while_written(s, t, x):
    """x.get() on t while s's write of x is still queued: the copy to the host reads what s has not written."""
    add_on(s, x)
    with t:
        x.get()


def get_after_a_wait(s, t, x):
    add_on(s, x)
    t.wait_event(s.record())
    with t:
        x.get()


def get_on_the_writing_stream(s, t, x):
    add_on(s, x)
    x.get(stream=s)


def _pinned_reuse(s, t, x, synchronize):
    """CuPy's pinned pool takes a block back as soon as its last reference goes, and hands it out again at once
    (only the transfers CuPy makes itself keep their block until the copy is done): a block dropped while a copy
    from it is still queued, handed out again and written by the host, unless the stream is synchronized first."""
    block = cp.cuda.alloc_pinned_memory(x.nbytes)
    host = np.frombuffer(block, np.float32, x.size)
    host[:] = 1
    busy(s)
    x.set(host, stream=s)  # pending behind the spin
    del host, block  # the block goes back to the pool
    if synchronize:
        s.synchronize()
    again = cp.cuda.alloc_pinned_memory(x.nbytes)  # the same block
    np.frombuffer(again, np.float32, x.size)[:] = 2


def pinned_block_reused_while_copied(s, t, x):
    _pinned_reuse(s, t, x, synchronize=False)


def pinned_block_reused_after_a_synchronize(s, t, x):
    _pinned_reuse(s, t, x, synchronize=True)


RACES = {"ufunc_race", "elementwise_kernel_race", "reduction_race", "reduction_then_write_race", "transposed_race",
         "pool_block_reused_while_read", "get_while_written", "pinned_block_reused_while_copied"}
WARNS = {"cub_reduction_unseen": "CUPY_ACCELERATORS", "raw_kernel_unseen": "raw pointers"}


def main(name):
    global WARMING_UP
    s, t = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    # Once without the spin, and synchronized: CuPy compiles and loads each kernel at its first launch, and the
    # load waits for the device, which would let the first stream finish before the race.
    WARMING_UP = True
    globals()[name](s, t, cp.zeros(N, dtype=cp.float32))
    cp.cuda.Device().synchronize()
    WARMING_UP = False
    x = cp.zeros(N, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    globals()[name](s, t, x)
    cp.cuda.Device().synchronize()
    print("done")


if __name__ == "__main__":
    main(sys.argv[1])
