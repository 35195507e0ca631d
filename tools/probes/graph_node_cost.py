"""Per-node and per-replay cost of graphs by how their kernel was loaded (a probe for the benchmark rows):
a runtime-registered built-in kernel (cw.ops.add), a cw.compile kernel, and CuPy's RawKernel."""
import functools
import sys

import numpy as np

import cuweave as cw

sys.path.insert(0, "benchmarks")
import run as bench  # noqa: E402

bench.cw = cw
import cupy  # noqa: E402

bench.cupy = cupy
cfg = bench.Config(n=20000, reps=7)


def builtin_graph(kernels):
    s = cw.Stream(blocking=False)
    x = cw.zeros(1, np.float32, stream=s)
    with cw.capture(s, mode="thread_local") as cap:
        for _ in range(kernels):
            cw.ops.add(x, 1.0, out=x)
    cap.graph.upload(s)
    return cap.graph, s


for name, make in (("builtin", builtin_graph), ("compiled", lambda k: bench.cw_increment_graph(k)[:2])):
    g1, s1 = make(1)
    g2, s2 = make(bench.GRAPH_NODES)
    replay = bench.replay_cost_us(functools.partial(g1.replay, s1), s1.synchronize, cfg)
    node = bench.per_node_us(functools.partial(g2.replay, s2), s2.synchronize, cfg)
    print(f"{name:9s} replay {replay:.3f} us  per node {node:.3f} us")
print(f"cupy      replay {bench.cupy_graph_replay(cfg):.3f} us  per node {bench.cupy_graph_node(cfg):.3f} us")
