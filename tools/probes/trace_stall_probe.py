"""Probe: where a trace's first operations stall, and what tracing leaves behind once closed.

For each mode (CUPTI detached between traces, the default, or kept attached with CUWEAVE_TRACE_KEEP_CUPTI=1,
set by the caller), prints: the host time of each of the first staged copies in a fresh trace; a spin's
event-timed length against its CUPTI length, first and later launches, with and without a warm-up of other
kernels; and the untraced cost of record + wait and of a launch before any trace and after one closed.
"""
import os
import time

import numpy as np

import cuweave as cw


def per_call_us(fn, n=20000):
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def untraced_costs(label):
    a, b = cw.Stream(), cw.Stream()
    event = cw.Event()
    x = cw.zeros(1, np.float32, stream=a)

    def pair():
        a.record(event)
        b.wait(event)

    def launch():
        cw.ops.add(x, 1.0, out=x, stream=a)

    rw = min(per_call_us(pair) for _ in range(5))
    add = min(per_call_us(launch, 5000) for _ in range(5))
    a.synchronize()
    print(f"{label}: record+wait {rw:.3f} us, built-in launch {add:.3f} us", flush=True)


def staged_copies():
    s = cw.Stream()
    batch = np.ones(16_000_000, np.float32)
    cw.to_device(batch, stream=s)
    s.synchronize()
    for attempt in range(2):
        with cw.trace():
            times = []
            for _ in range(4):
                start = time.perf_counter()
                cw.to_device(batch, stream=s)
                s.synchronize()
                times.append((time.perf_counter() - start) * 1e3)
        print(f"trace {attempt + 1}: 64 MB to_device + sync, ms each: {[round(t, 2) for t in times]}", flush=True)


def spins(warm_up: bool):
    s, other = cw.Stream(), cw.Stream()
    y = cw.zeros(1024, np.float32, stream=other)
    with cw.trace() as t:
        if warm_up:
            cw.ops.fill(y, 1.0, stream=other)
            y.to_numpy(stream=other)
        timings = []
        for _ in range(3):
            with cw.timer(s) as timer:
                cw.ops.spin(0.001, stream=s)
            timings.append(timer.ms)
    cupti = [k.duration_ns / 1e6 for k in t.select("kernel", stream=s)]
    print(f"spins (warm-up of another kernel: {warm_up}): events {[round(v, 3) for v in timings]} ms, "
          f"CUPTI {[round(v, 3) for v in cupti]} ms", flush=True)


def new_thread_copy():
    import threading

    s = cw.Stream()
    batch = np.ones(16_000_000, np.float32)
    cw.to_device(batch, stream=s)
    s.synchronize()
    times = []

    def work():
        for _ in range(3):
            start = time.perf_counter()
            cw.to_device(batch, stream=s)
            s.synchronize()
            times.append(round((time.perf_counter() - start) * 1e3, 2))

    with cw.trace(all_threads=True):
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    print(f"64 MB to_device + sync from a new thread inside a trace, ms each: {times}", flush=True)


if __name__ == "__main__":
    print("mode:", "keep CUPTI attached" if os.environ.get("CUWEAVE_TRACE_KEEP_CUPTI") == "1" else "detach", flush=True)
    untraced_costs("before any trace")
    staged_copies()
    spins(False)
    spins(True)
    new_thread_copy()
    untraced_costs("after the traces closed")
