"""Graph replays: the call of a 1-node graph, and per node of a 1000-node graph."""

from __future__ import annotations

import functools
import itertools
import time
from typing import Callable

import numpy as np

import libraries
import timing
from launches import INCREMENT
from raw_cuda import paired_with_raw_here, raw_in_process
from rows import Row
from timing import Config, median_of

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())


# --------------------------------------------------------------------------- graphs

GRAPH_NODES = 1000  # kernels in the straight-line graph (as raw_cuda.cu)
GRAPH_REPLAYS = 20  # replays of it per repetition


def replay_cost_rep(replay: Callable[[], object], sync: Callable[[], object], cfg: Config) -> Callable[[], float]:
    """One repetition of replay_cost_us."""

    def run() -> float:
        t0 = time.perf_counter_ns()
        for _ in itertools.repeat(None, cfg.n):
            replay()
        per_call = (time.perf_counter_ns() - t0) / cfg.n / 1e3
        sync()
        return per_call - timing.call_overhead_us

    return run


def replay_cost_us(replay: Callable[[], object], sync: Callable[[], object], cfg: Config) -> float:
    """Host µs per replay call in a loop of n (the sync after the loop is not timed), as raw_cuda.cu, less the
    Python call overhead of `replay` itself."""
    return median_of(cfg.reps, replay_cost_rep(replay, sync, cfg))


def per_node_rep(replay: Callable[[], object], sync: Callable[[], object],
                 units: int = GRAPH_NODES) -> Callable[[], float]:
    """One repetition of per_node_us."""

    def run() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(GRAPH_REPLAYS):
            replay()
        sync()
        return (time.perf_counter_ns() - t0) / (GRAPH_REPLAYS * units) / 1e3

    return run


def per_node_us(replay: Callable[[], object], sync: Callable[[], object], cfg: Config,
                units: int = GRAPH_NODES) -> float:
    """Wall µs of GRAPH_REPLAYS replays and the sync, per unit of work in a replay: per node of the
    straight-line graph, or (units=LOOP_ROUNDS) per round of a loop inside the graph."""
    return median_of(cfg.reps, per_node_rep(replay, sync, units))


def cw_increment_graph(kernels: int):
    kernel = cw.compile(INCREMENT, "increment")
    s = cw.Stream(blocking=False)
    x = cw.zeros(1, np.float32, stream=s)
    with cw.capture(s, mode="thread_local") as cap:
        for _ in range(kernels):
            kernel(1, 1, (x,))
    cap.graph.upload(s)
    return cap.graph, s, x


def cw_graph_replay(cfg: Config) -> float:
    graph, s, x = cw_increment_graph(1)
    result = replay_cost_us(functools.partial(graph.replay, s), s.synchronize, cfg)
    assert x.to_numpy(stream=s)[0] > 0
    return result


def cw_graph_replay_paired(cfg: Config) -> dict[str, float]:
    """cw_graph_replay in turn with raw CUDA's replay loop of the same graph in this process."""
    graph, s, x = cw_increment_graph(1)
    result = paired_with_raw_here(replay_cost_rep(functools.partial(graph.replay, s), s.synchronize, cfg),
                                  lambda: raw_in_process().raw_graph_replay_us(1, cfg.n), cfg)
    assert x.to_numpy(stream=s)[0] > 0
    return result


def cw_graph_node(cfg: Config) -> float:
    graph, s, x = cw_increment_graph(GRAPH_NODES)
    return per_node_us(functools.partial(graph.replay, s), s.synchronize, cfg)


def cw_graph_node_paired(cfg: Config) -> dict[str, float]:
    """cw_graph_node in turn with raw CUDA's replays of the same graph in this process."""
    graph, s, x = cw_increment_graph(GRAPH_NODES)
    return paired_with_raw_here(per_node_rep(functools.partial(graph.replay, s), s.synchronize),
                                lambda: raw_in_process().raw_graph_node_us(1), cfg)


def torch_increment_graph(kernels: int):
    x = torch.zeros(1, dtype=torch.float32, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # warm up, as torch's documentation asks
        x.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(kernels):
            x.add_(1)
    return graph


def torch_graph_replay(cfg: Config) -> float:
    graph = torch_increment_graph(1)
    return replay_cost_us(graph.replay, torch.cuda.synchronize, cfg)


def torch_graph_node(cfg: Config) -> float:
    graph = torch_increment_graph(GRAPH_NODES)
    return per_node_us(graph.replay, torch.cuda.synchronize, cfg)


def cupy_increment_graph(kernels: int):
    kernel = cupy.RawKernel(INCREMENT, "increment")
    x = cupy.zeros(1, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel((1,), (1,), (x,), stream=stream)  # compile and load outside the capture
    stream.synchronize()
    stream.begin_capture()
    for _ in range(kernels):
        kernel((1,), (1,), (x,), stream=stream)
    graph = stream.end_capture()
    graph.upload(stream)
    return graph, stream


def cupy_graph_replay(cfg: Config) -> float:
    graph, stream = cupy_increment_graph(1)
    return replay_cost_us(functools.partial(graph.launch, stream), stream.synchronize, cfg)


def cupy_graph_node(cfg: Config) -> float:
    graph, stream = cupy_increment_graph(GRAPH_NODES)
    return per_node_us(functools.partial(graph.launch, stream), stream.synchronize, cfg)


ROWS: dict[str, Row] = {
    "graph_replay": Row(
        "1-node graph replay call", "us", 1.6, "graph_replay_us",
        {"cuweave": cw_graph_replay_paired, "torch": torch_graph_replay, "cupy": cupy_graph_replay}),
    "graph_node": Row(
        "1000-node graph, per node, wall incl. sync", "us", 0.75, "graph_node_us",
        {"cuweave": cw_graph_node_paired, "torch": torch_graph_node, "cupy": cupy_graph_node}),
}
