"""graph_temporaries_probe.py -- what a captured graph and a graph function with large temporaries do today, before
cuweave turns temporaries into graph memory nodes: the nodes a capture makes of an array made and dropped inside it,
whether replays stay right, and the device memory held between replays and calls.

    python3 tools/probes/graph_temporaries_probe.py        (on a GPU; cuda.bindings reads CUDA's memory figures)

Found (one H200, CUDA 13.0, cuweave at 6f4adf0): the capture of `temporary = scale(x, 2);
add(temporary, x, out=out); del temporary` over 256 MB arrays makes 2 kernel nodes and no memory node: the temporary
is allocated as it is captured, outside the graph (device memory in use 1,038 MB before, 1,296 MB after the capture),
and held for the graph (CUDA's graph memory stays 0 MB). Three replays are right; the memory in use stays 1,296 MB
after the graph is dropped (kept by cuweave's pool). A graph function with the same temporary, called three times
(256 MB in and out through NumPy), is right each time at 1,296 MB in use; a call takes 125 ms (the NumPy copies).
With graph memory nodes (graph_memory_nodes_probe.cu) the allocation is the graph's own: reserved at the launch,
kept between launches until trimmed, and shareable with other graphs' allocations.
"""

from __future__ import annotations

import gc
import time

import numpy as np

import cuweave as cw

try:
    from cuda.bindings import runtime
except ImportError:  # older cuda-python
    from cuda import cudart as runtime

N = 64 << 20  # 256 MB of float32 per array


def used_mb() -> int:
    _, free, total = runtime.cudaMemGetInfo()
    return (total - free) >> 20


def graph_memory_mb() -> tuple[int, int]:
    kinds = runtime.cudaGraphMemAttributeType
    _, used = runtime.cudaDeviceGetGraphMemAttribute(0, kinds.cudaGraphMemAttrUsedMemCurrent)
    _, reserved = runtime.cudaDeviceGetGraphMemAttribute(0, kinds.cudaGraphMemAttrReservedMemCurrent)
    return int(used) >> 20, int(reserved) >> 20


def report(label: str) -> None:
    gc.collect()
    cw.synchronize()
    used, reserved = graph_memory_mb()
    print(f"{label}: device memory in use {used_mb()} MB; graph memory used {used} MB, reserved {reserved} MB")


def captured_graph() -> None:
    x = cw.to_device(np.ones(N, np.float32))
    out = cw.empty(N, np.float32)
    stream = cw.Stream()
    cw.synchronize()
    report("capture: before")
    with cw.capture(stream) as cap:
        temporary = cw.ops.scale(x, 2.0)  # made and dropped inside the capture
        cw.ops.add(temporary, x, out=out)
        del temporary
    kinds: dict[str, int] = {}
    for node in cap.graph.nodes:
        kinds[node.kind] = kinds.get(node.kind, 0) + 1
    print(f"capture: nodes {kinds}")
    report("capture: after the capture")
    for replay in range(3):
        cw.ops.fill(out, 0.0, stream=stream)
        try:
            cap.graph.replay(stream)
            stream.synchronize()
            right = bool((out.to_numpy()[:: 1 << 20] == 3.0).all())
            print(f"capture: replay {replay + 1}: ok, result right: {right}")
        except Exception as error:  # noqa: BLE001 - what CUDA answers is the finding
            print(f"capture: replay {replay + 1}: {type(error).__name__}: {error}")
        report(f"capture: after replay {replay + 1}")
    del cap
    report("capture: graph dropped")


def graph_function() -> None:
    @cw.graph_function
    def step(x):
        temporary = cw.ops.scale(x, 2.0)
        return cw.ops.add(temporary, x)

    host = np.ones(N, np.float32)
    report("graph function: before")
    for call in range(3):
        try:
            result = step(host)
            print(f"graph function: call {call + 1}: result right: {bool((result[:: 1 << 20] == 3.0).all())}")
        except Exception as error:  # noqa: BLE001
            print(f"graph function: call {call + 1}: {type(error).__name__}: {error}")
        report(f"graph function: after call {call + 1}")
    times = []
    for _ in range(5):
        begin = time.perf_counter()
        step(host)
        times.append(time.perf_counter() - begin)
    print(f"graph function: a call (256 MB in, 256 MB out), median {sorted(times)[2] * 1e3:.2f} ms")


if __name__ == "__main__":
    print(f"cuweave {cw.__version__} on {cw.Device(0)} ({cw.backend()})")
    captured_graph()
    graph_function()
