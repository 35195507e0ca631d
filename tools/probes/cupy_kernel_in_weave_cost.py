"""Where does a CuPy kernel's host time go inside a weave? The weave benchmark's wide DAG (8 chains of 20 spins of
20 µs, as a CuPy ElementwiseKernel, CuPy on a non-blocking stream of its own) issued plainly on that stream and
inside a weave: host µs per kernel, wall ms, and a trace of the woven issue (which streams its kernels ran on,
and when).

Found (one H200, CUDA 13.0, at 5f3905e): host µs per kernel plain 7.36-8.48, woven 15.35-15.75; wall ms plain
3.530, woven 2.376 (1.49x: host-bound, each chain on a weave stream of its own, kernels starting about 20 us apart).
With PyTorch imported first: plain 7.89, woven 19.96 µs per kernel, wall 3.529 against 3.695 (the weave benchmark's
CuPy row, 4.321 ms woven, ran with PyTorch imported). Under cProfile the Python side of a moved launch is _launched
(parsing the parameters, placing) and _launch_moved (CuPy's stream following the kernel), about half of the added
time; the rest is the callbacks' crossing into Python and CUPTI. With the launch placed in the core, in the
launching thread, without calling into Python (14 runs on two machines, PyTorch imported or not): host us per kernel
plain 6.67-7.71 and woven 9.32-10.78 in most runs, plain 9.95-10.60 and woven 14.86-15.90 in runs where the whole
machine was slower (one run 7.23 against 24.32), woven about 1.4x plain either way; wall ms plain 3.49-3.55, woven
1.46-2.60 (1.4-2.4x faster). A run's level did not follow PyTorch's import: without it, 9.95/14.86 came too;
with it, 7.23/10.12; so the earlier +4.6 us with PyTorch imported was most likely the machine's too.
"""

import statistics
import time

import cupy
import numpy as np

import cuweave as cw

CHAINS, STEPS, NS = 8, 20, 20_000
SPIN = r"""
unsigned long long start, now;
asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while ((long long)(now - start) < ns);
y = y + 1.0f;
"""
spin = cupy.ElementwiseKernel("int64 ns", "float32 y", SPIN, "cuweave_probe_spin")
slots = [cupy.zeros(1, dtype=np.float32) for _ in range(CHAINS)]
own = cupy.cuda.Stream(non_blocking=True)
main = cw.Stream()
with own:
    spin(NS, slots[0])
cupy.cuda.Device().synchronize()


def steps() -> None:
    for _ in range(STEPS):
        for slot in slots:
            spin(NS, slot)


def plain() -> None:
    with own:
        steps()


def woven() -> None:
    with own, main, cw.weave(streams=CHAINS):
        steps()


def host_us_per_kernel(issue, rounds=9) -> float:
    figures = []
    for _ in range(rounds):
        began = time.perf_counter()
        issue()
        figures.append((time.perf_counter() - began) / (CHAINS * STEPS) * 1e6)
        cupy.cuda.Device().synchronize()
    return statistics.median(figures)


def wall_ms(issue, rounds=9) -> float:
    figures = []
    for _ in range(rounds):
        began = time.perf_counter()
        issue()
        cupy.cuda.Device().synchronize()
        figures.append((time.perf_counter() - began) * 1e3)
    return statistics.median(figures)


print(f"host µs per kernel: plain {host_us_per_kernel(plain):.2f}, woven {host_us_per_kernel(woven):.2f}")
print(f"wall ms incl. synchronize: plain {wall_ms(plain):.3f}, woven {wall_ms(woven):.3f}")
with cw.trace() as timeline:
    woven()
print(timeline.summary())
kernels = sorted(timeline.select("kernel"), key=lambda k: k.start_ns)
first = kernels[0].start_ns
print("first 24 kernels (stream, start µs, end µs):",
      [(k.stream, round((k.start_ns - first) / 1e3, 1), round((k.end_ns - first) / 1e3, 1)) for k in kernels[:24]])
