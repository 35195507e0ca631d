"""Probe: what CUPTI reports for cuweave's and other libraries' work (run on a GPU machine).

Prints every traced event of a mixed scenario (copies, a stream wait, built-in, compiled, PyTorch and CuPy
kernels, a host callback, a captured graph replay, ranges), compares a spin kernel's CUPTI duration with
event timing, and times record + wait with and without an open trace. Used to check Note [Tracing with
CUPTI] against a real driver; not part of the test suite.
"""

from __future__ import annotations

import time

import numpy as np

import cuweave as cw


def show(trace: cw.Trace) -> None:
    print(trace)
    for lane in trace.lanes:
        print(f"  lane {lane.key}: {lane.label}")
    for e in trace.events:
        print(f"  {e.kind:13} {e.label[:40]:40} {e.start_ns / 1e3:10.1f} +{e.duration_ns / 1e3:9.1f} us "
              f"dev={e.device} stream={e.stream} corr={e.correlation} link={e.link} node={e.graph_node} "
              f"placed={e.placed} site={e.call_site}")


def mixed() -> None:
    s, c = cw.Stream(name="compute"), cw.Stream(name="copy")
    x = cw.to_device(np.ones(1 << 20, np.float32), stream=s)
    kernel = cw.compile('extern "C" __global__ void bump(float* p) { p[0] += 1.0f; }', "bump")
    s.synchronize()
    with cw.trace() as t:
        host = cw.pinned_empty(1 << 26, np.uint8)
        dev = cw.empty(1 << 26, np.uint8, stream=c)
        cw.copy_async(dev, host, stream=c)
        s.wait(c.record())
        cw.ops.spin(0.002, stream=s)
        cw.ops.scale(x, 2.0, out=x, stream=s)
        kernel((1,), (1,), (x,), stream=s)
        s.launch_host_func(lambda: time.sleep(0.001))
        with cw.range("graph"):
            with cw.capture(s) as cap:
                cw.ops.add(x, 1.0, out=x)
                cw.ops.scale(x, 0.5, out=x)
            cap.graph.replay(s)
        try:
            import torch

            tensor = torch.ones(1000, device="cuda")
            with torch.cuda.stream(torch.cuda.ExternalStream(s.handle)):
                tensor.add_(1)
        except ImportError:
            print("no torch")
        try:
            import cupy

            with cupy.cuda.Stream.from_external(s):
                cupy.arange(1000).sum()
        except ImportError:
            print("no cupy")
        x.to_numpy(stream=s)
    show(t)
    raw = t._session.activities()
    print("raw activities:", len(raw))
    for row in raw[:80]:
        print("  ", row)
    print("streams:", t._session.streams())


def timing() -> None:
    s = cw.Stream()
    for spin_ms in (1.0, 10.0):
        with cw.trace() as t:
            with cw.timer(s) as timer:
                cw.ops.spin(spin_ms / 1e3, stream=s)
        kernels = t.select("kernel")
        print(f"spin {spin_ms} ms: events {timer.ms:.4f} ms, CUPTI {kernels[0].duration_ns / 1e6:.4f} ms")


def overhead() -> None:
    a, b = cw.Stream(), cw.Stream()
    event = cw.Event()

    def loop(n: int = 20000) -> float:
        start = time.perf_counter()
        for _ in range(n):
            a.record(event)
            b.wait(event)
        return (time.perf_counter() - start) / n * 1e6

    loop(2000)
    print(f"record+wait, no trace: {min(loop() for _ in range(3)):.3f} us", flush=True)
    with cw.trace():
        traced = min(loop() for _ in range(3))
        print(f"record+wait, traced: {traced:.3f} us (trace still open)", flush=True)
    print(f"record+wait, traced: {traced:.3f} us")
    print(f"record+wait, no trace again: {min(loop() for _ in range(3)):.3f} us")


if __name__ == "__main__":
    import faulthandler

    faulthandler.dump_traceback_later(120, exit=True)  # a hang prints every thread's stack
    start = time.perf_counter()
    mixed()
    print(f"mixed scenario with trace: {time.perf_counter() - start:.2f} s")
    timing()
    overhead()
