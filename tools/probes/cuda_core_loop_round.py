"""Probe: cuda.core's conditional nodes (a while loop around a countdown kernel), for a loop_round comparison row.

Prints cuda.core's version and graph-builder API, then builds the same loop as benchmarks/run.py's loop_round
(1,000 rounds of a kernel that counts down and sets the loop's condition) and times a replay.

    python3 tools/probes/cuda_core_loop_round.py
"""
import time
import traceback

import numpy as np

try:
    from cuda import core as cc
    if not hasattr(cc, "Device"):
        raise ImportError
except ImportError:
    from cuda.core import experimental as cc
import cuda.core

print("cuda.core", getattr(cuda.core, "__version__", "?"), "from", cc.__name__)
ROUNDS = 1000
SOURCE = r"""
typedef unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
extern "C" __global__ void reset(int* left, int rounds) { *left = rounds; }
extern "C" __global__ void countdown(cudaGraphConditionalHandle handle, int* left) {
    const int now = --*left;
    cudaGraphSetConditional(handle, now > 0 ? 1u : 0u);
}
"""
dev = cc.Device()
dev.set_current()
stream = dev.create_stream()
gb = stream.create_graph_builder()
print("GraphBuilder:", [n for n in dir(gb) if not n.startswith("_")])
try:
    program = cc.Program(SOURCE, code_type="c++", options=cc.ProgramOptions(arch=f"sm_{dev.arch}"))
    module = program.compile("cubin")
    reset, countdown = module.get_kernel("reset"), module.get_kernel("countdown")
    left = dev.allocate(4, stream=stream)
    config = cc.LaunchConfig(grid=1, block=1)
    gb.begin_building()
    cc.launch(gb, config, reset, left, np.int32(ROUNDS))
    for name in ("create_condition", "while_loop"):
        print(name, (getattr(gb, name).__doc__ or "").strip().splitlines()[:12])
    try:
        condition = gb.create_condition(default_value=1)
    except TypeError:
        condition = gb.create_condition(1)
    body = gb.while_loop(condition)
    body = body[0] if isinstance(body, (list, tuple)) else body
    if not body.is_building:
        body.begin_building()
    cc.launch(body, config, countdown, condition, left)
    body.end_building()
    gb.end_building()
    graph = gb.complete()
    graph.upload(stream)
    graph.launch(stream)
    stream.sync()
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(20):
            graph.launch(stream)
        stream.sync()
        times.append((time.perf_counter() - t0) / 20 / ROUNDS * 1e6)
    print(f"cuda.core loop_round: {sorted(times)[3]:.3f} us per round (median of 7 x 20 replays of {ROUNDS} rounds)")
except Exception:
    traceback.print_exc()
