"""Per-node and per-replay cost of graphs by how their kernel was loaded (a probe for the benchmark rows):
a runtime-registered built-in kernel (cw.ops.add), a cw.compile kernel, and CuPy's RawKernel."""
import functools
import sys

import numpy as np

import cuweave as cw

sys.path.insert(0, "benchmarks")
import graphs  # noqa: E402
import libraries  # noqa: E402
import timing  # noqa: E402

libraries.set_loaded("cw", cw)
import cupy  # noqa: E402

libraries.set_loaded("cupy", cupy)
cfg = timing.Config(n=20000, reps=7)


def builtin_graph(kernels):
    s = cw.Stream(blocking=False)
    x = cw.zeros(1, np.float32, stream=s)
    with cw.capture(s, mode="thread_local") as cap:
        for _ in range(kernels):
            cw.ops.add(x, 1.0, out=x)
    cap.graph.upload(s)
    return cap.graph, s


for name, make in (("builtin", builtin_graph), ("compiled", lambda k: graphs.cw_increment_graph(k)[:2])):
    g1, s1 = make(1)
    g2, s2 = make(graphs.GRAPH_NODES)
    replay = graphs.replay_cost_us(functools.partial(g1.replay, s1), s1.synchronize, cfg)
    node = graphs.per_node_us(functools.partial(g2.replay, s2), s2.synchronize, cfg)
    print(f"{name:9s} replay {replay:.3f} us  per node {node:.3f} us")
print(f"cupy      replay {graphs.cupy_graph_replay(cfg):.3f} us  per node {graphs.cupy_graph_node(cfg):.3f} us")
