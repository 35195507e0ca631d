#!/usr/bin/env python3
# Found: the Python __call__ of a graph function cost 0.6-1.5 µs above its copy, replay and wait (1 KB, about 10 µs
# in all; H100, four processes).
# Cited by: Note [Graph function calls in C] (csrc/bindings/bind_graph_function.cpp).
"""Where does a 1 KB cw.graph_function round trip spend its time beside CuPy's hand-written graph? (GPU only.)

    python3 tools/probes/round_trip_breakdown.py [--rounds 7] [--elements 256]

Variants measured in turn within each round; each prints the median µs per call over rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import libraries  # noqa: E402


def per_call_us(call, n: int) -> float:
    call()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        call()
    return (time.perf_counter_ns() - t0) / n / 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--elements", type=int, default=256)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--only", action="append", help="measure only the variants whose name contains this")
    args = parser.parse_args()
    libraries.load_cuweave()
    libraries.load_peers({})
    cw, cupy = libraries.cw, libraries.cupy
    elements = args.elements
    x = np.arange(elements, dtype=np.float32)

    f = cw.graph_function(lambda a: cw.ops.add(a, 1.0))
    assert np.array_equal(f(x), x + 1)
    entry = f._last
    print("graph_function's graph:", [(n.kind, n.label) for n in entry.graph.nodes])

    def by_hand(out_by_kernel: bool, allocate_in_capture: bool, blocking: bool = False):
        s = cw.Stream(blocking=blocking)
        pin_in, pin_out = cw.pinned_empty(elements, np.float32), cw.pinned_empty(elements, np.float32)
        d_in = cw.empty(elements, np.float32, stream=s)
        d_out = cw.empty(elements, np.float32, stream=s)
        with cw.capture(s) as cap:
            cw.copy_async(d_in, pin_in)
            result = cw.ops.add(d_in, 1.0) if allocate_in_capture else cw.ops.add(d_in, 1.0, out=d_out)
            cw.copy_async(pin_out, result, by_kernel=out_by_kernel)
        graph = cap.graph
        graph.upload(s)
        replay, sync = graph.replay, s.synchronize

        def call():
            np.copyto(pin_in, x)
            replay(s)
            sync()
            return pin_out

        assert np.array_equal(call(), x + 1)
        return call

    stream_only = entry.replay, entry.synchronize

    def replay_sync_only():
        stream_only[0]()
        stream_only[1]()

    cs = cupy.cuda.Stream(non_blocking=True)
    c_in = np.frombuffer(cupy.cuda.alloc_pinned_memory(x.nbytes), np.float32, elements)
    c_out = np.frombuffer(cupy.cuda.alloc_pinned_memory(x.nbytes), np.float32, elements)
    cd_in, cd_out = cupy.empty(elements, cupy.float32), cupy.empty(elements, cupy.float32)
    with cs:
        cupy.add(cd_in, 1, out=cd_out)
    cs.synchronize()
    cs.begin_capture()
    cupy.cuda.runtime.memcpyAsync(cd_in.data.ptr, c_in.ctypes.data, x.nbytes, cupy.cuda.runtime.memcpyDefault, cs.ptr)
    with cs:
        cupy.add(cd_in, 1, out=cd_out)
    cupy.cuda.runtime.memcpyAsync(c_out.ctypes.data, cd_out.data.ptr, x.nbytes, cupy.cuda.runtime.memcpyDefault, cs.ptr)
    cgraph = cs.end_capture()

    def cupy_call():
        np.copyto(c_in, x)
        cgraph.launch(cs)
        cs.synchronize()
        return c_out

    assert np.array_equal(cupy_call(), x + 1)

    # How long the wait itself takes: the same replay of f's graph, waited for in other ways.
    graph, stream = entry.graph, f.stream
    stream_synchronize = cupy.cuda.runtime.streamSynchronize  # cudaStreamSynchronize: the driver's own wait
    query = stream.query

    def replay_cuda_synchronize():
        graph.replay(stream)
        stream_synchronize(stream.handle)

    def replay_query_spin():
        graph.replay(stream)
        while not query():
            pass

    # Does writing the staging the graph's H2D copy reads cost more than the host's copy itself (a DMA read of
    # lines dirty in the CPU's caches)? The same copy into an array no copy reads, then the same replay.
    staging, unused = entry.inputs[0], cw.pinned_empty(elements, np.float32)

    def staging_copy_replay_sync():
        staging[...] = x
        graph.replay(stream)
        stream.synchronize()

    def unused_copy_replay_sync():
        unused[...] = x
        graph.replay(stream)
        stream.synchronize()

    def replay_event_synchronize():
        graph.replay(stream)
        stream.record().synchronize()

    # The outputs' copy kernel raises a flag in mapped pinned memory once they are visible there; the host spins
    # on the flag instead of asking CUDA whether the stream is done.
    flagging = cw.compile(r"""
extern "C" __global__ void copy_then_flag(const float* src, float* dst, unsigned n, volatile unsigned* flag) {
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) *flag = *flag + 1;
}""", "copy_then_flag")

    def flagged(raise_in_copy: bool):
        s = cw.Stream(blocking=False)
        pin_in, pin_out = cw.pinned_empty(elements, np.float32), cw.pinned_empty(elements, np.float32)
        flag = cw.pinned_zeros(1, np.uint32)
        d_in, d_out = cw.empty(elements, np.float32, stream=s), cw.empty(elements, np.float32, stream=s)
        with cw.capture(s) as cap:
            cw.copy_async(d_in, pin_in)
            cw.ops.add(d_in, 1.0, out=d_out)
            if raise_in_copy:
                flagging((1,), (256,), (d_out, pin_out.ctypes.data, elements, flag.ctypes.data), stream=s)
            else:
                cw.copy_async(pin_out, d_out, by_kernel=True)
                flagging((1,), (32,), (d_out, d_out, 0, flag.ctypes.data), stream=s)
        g = cap.graph
        g.upload(s)
        replay = g.replay
        expected = [int(flag[0])]

        def call():
            np.copyto(pin_in, x)
            replay(s)
            expected[0] += 1
            want = expected[0]
            while flag[0] != want:
                pass
            return pin_out

        assert np.array_equal(call(), x + 1)
        s.synchronize()
        return call

    variants = {
        "cw.graph_function f(x)": lambda: f(x),
        "f's graph: replay + synchronize only": replay_sync_only,
        "f's graph: copy into its staging, replay, sync": staging_copy_replay_sync,
        "f's graph: copy into unused pinned, replay, sync": unused_copy_replay_sync,
        "f's graph: replay + cudaStreamSynchronize": replay_cuda_synchronize,
        "f's graph: replay + spin on stream.query()": replay_query_spin,
        "f's graph: replay + event synchronize": replay_event_synchronize,
        "by hand, D2H kernel raises a flag; host spins": flagged(True),
        "by hand, D2H kernel, flag kernel; host spins": flagged(False),
        "cw by hand, out= array, D2H by kernel": by_hand(True, False),
        "cw by hand, out= array, D2H copy engine": by_hand(False, False),
        "cw by hand, result allocated in capture": by_hand(True, True),
        "cupy by hand": cupy_call,
    }
    if args.only:
        variants = {name: call for name, call in variants.items() if any(part in name for part in args.only)}
    runs = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, call in variants.items():
            runs[name].append(per_call_us(call, args.n))
    print(f"device: {cw.Device(0).properties.name}; {elements * 4} B; {args.rounds} rounds of {args.n} calls")
    for name, values in runs.items():
        print(f"{name:45s} {statistics.median(values):7.2f} us (min {min(values):.2f})")


if __name__ == "__main__":
    main()
