"""A loop in the graph (a while node) against the same loop driven from the host."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

import libraries
from graphs import per_node_us
from in_turn import InTurnSetup, setup_of
from rows import Row, in_turn_row
from timing import Config

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())

CUDA_CORE = "cuda.core"  # a measurement shown below the table where cuda.core has a counterpart
LOOP_ROUNDS = 1000  # rounds of the loop inside one graph per replay (as raw_cuda.cu)
HOST_LOOP_ROUNDS = 200  # rounds of the host-driven loop per repetition
COUNTDOWN = r"""
extern "C" __global__ void countdown(cudaGraphConditionalHandle handle, int* left) {
    const int now = --*left;
    cudaGraphSetConditional(handle, now > 0 ? 1u : 0u);
}
"""
DECREMENT = r'extern "C" __global__ void decrement(int* left) { --*left; }'


def cw_loop_round(cfg: Config) -> float:
    """cw.while_loop around a compiled kernel that counts down and sets the condition (cw.Condition)."""
    kernel = cw.compile(COUNTDOWN, "countdown")
    s = cw.Stream()
    start = cw.to_device(np.array([LOOP_ROUNDS], np.int32), stream=s)
    left = cw.zeros(1, np.int32, stream=s)
    with cw.capture(s) as captured:
        cw.copy_async(left, start)
        condition = cw.Condition(1)
        with cw.while_loop(condition):
            kernel(1, 1, (condition, left))
    graph = captured.graph
    result = per_node_us(functools.partial(graph.replay, s), s.synchronize, cfg, units=LOOP_ROUNDS)
    assert left.to_numpy(stream=s)[0] == 0, "the loop did not run to zero"
    return result


def host_loop_round_us(step: Callable[[], int]) -> float:
    """One repetition: wall µs per round of a loop whose every round replays a graph and reads the counter back."""
    t0 = time.perf_counter_ns()
    for _ in range(HOST_LOOP_ROUNDS):
        if step() <= 0:
            break
    return (time.perf_counter_ns() - t0) / HOST_LOOP_ROUNDS / 1e3


def cuda_core_loop_round(cfg: Config) -> float:
    """The same loop with cuda.core's conditional nodes (GraphBuilder.while_loop, a GraphCondition passed to the
    kernel), where cuda.core is installed; the counter is a cuweave array, checked after the replays."""
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    device = Device()
    device.set_current()
    stream = device.create_stream()
    source = ("typedef unsigned long long cudaGraphConditionalHandle;\n"
              'extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle, unsigned int);\n'
              'extern "C" __global__ void reset(int* left, int rounds) { *left = rounds; }\n' + COUNTDOWN)
    module = Program(source, code_type="c++", options=ProgramOptions(arch=f"sm_{device.arch}")).compile("cubin")
    left = cw.zeros(1, np.int32)
    cw.synchronize()
    pointer = np.uint64(left.__cuda_array_interface__["data"][0])
    config = LaunchConfig(grid=1, block=1)
    builder = stream.create_graph_builder()
    builder.begin_building()
    launch(builder, config, module.get_kernel("reset"), pointer, np.int32(LOOP_ROUNDS))
    condition = builder.create_condition(1)
    body = builder.while_loop(condition)
    if not body.is_building:
        body.begin_building()
    launch(body, config, module.get_kernel("countdown"), condition, pointer)
    body.end_building()
    builder.end_building()
    graph = builder.complete()
    graph.upload(stream)
    result = per_node_us(functools.partial(graph.launch, stream), stream.sync, cfg, units=LOOP_ROUNDS)
    assert left.to_numpy()[0] == 0, "the cuda.core loop did not run to zero"
    return result


@dataclass
class HostLoop:
    """What a host-driven loop round uses: the decrement kernel, its stream, the device counter, a pinned array the
    counter is read into, and a graph of one decrement."""
    kernel: object
    stream: object
    left: object
    seen: np.ndarray
    graph: object


def cw_host_loop() -> HostLoop:
    kernel = cw.compile(DECREMENT, "decrement")
    s = cw.Stream()
    left = cw.to_device(np.array([1 << 30], np.int32), stream=s)
    with cw.capture(s) as captured:
        kernel(1, 1, (left,))
    return HostLoop(kernel, s, left, cw.pinned_empty(1, np.int32), captured.graph)


def cw_loop_round_host_step() -> Callable[[], int]:
    """The loop driven from the host: replay a one-kernel graph, read the counter into pinned memory."""
    parts = cw_host_loop()
    graph, s, left, seen = parts.graph, parts.stream, parts.left, parts.seen

    def step() -> int:
        graph.replay(s)
        left.to_numpy(stream=s, out=seen)
        return int(seen[0])

    return step


def torch_loop_round_host_step() -> Callable[[], int]:
    left = torch.full((1,), 1 << 30, dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        left.sub_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        left.sub_(1)

    def step() -> int:
        graph.replay()
        return int(left.item())

    return step


def cupy_host_loop() -> HostLoop:
    import cupyx

    kernel = cupy.RawKernel(DECREMENT, "decrement")
    left = cupy.full(1, 1 << 30, dtype=cupy.int32)
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel((1,), (1,), (left,), stream=stream)
    stream.synchronize()
    stream.begin_capture()
    kernel((1,), (1,), (left,), stream=stream)
    graph = stream.end_capture()
    graph.upload(stream)
    return HostLoop(kernel, stream, left, cupyx.empty_pinned(1, np.int32), graph)


def cupy_loop_round_host_step() -> Callable[[], int]:
    parts = cupy_host_loop()
    graph, stream, left, seen = parts.graph, parts.stream, parts.left, parts.seen

    def step() -> int:
        graph.launch(stream)
        left.get(stream=stream, out=seen)  # blocking: waits for the stream
        return int(seen[0])

    return step


HOST_LOOP_STEPS = {"cuweave": cw_loop_round_host_step, "torch": torch_loop_round_host_step,
                   "cupy": cupy_loop_round_host_step}


def loop_round_host_setups(cfg: Config) -> dict[str, InTurnSetup]:
    return {lib: setup_of(make, host_loop_round_us) for lib, make in HOST_LOOP_STEPS.items()}


ROWS: dict[str, Row] = {
    "loop_round": Row(
        "loop inside one graph (while node), per round of a countdown kernel", "us", None, "loop_round_us",
        {"cuweave": cw_loop_round, CUDA_CORE: cuda_core_loop_round}),
    "loop_round_host": in_turn_row(
        "the same loop driven from the host (replay a round, read the counter), per round", "us", None, None,
        loop_round_host_setups, HOST_LOOP_STEPS),
}
