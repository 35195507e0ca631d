"""Round trips through a graph: cw.graph_function with NumPy in and out, the peers by hand."""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

import libraries
from in_turn import InTurnSetup, setup_of
from rows import Row, in_turn_row
from timing import Config, per_call_us

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())


ROUND_TRIP_ELEMENTS = 256  # 1 KB of float32; the larger rows: 1 MB and 64 MB


def round_trip_input(elements: int = ROUND_TRIP_ELEMENTS) -> np.ndarray:
    return np.random.default_rng(7).standard_normal(elements).astype(np.float32)


def check_round_trip(result, x: np.ndarray) -> None:
    assert np.array_equal(np.asarray(result), x + np.float32(1)), "the graph round trip computed a wrong result"


def round_trip_calls(cfg: Config, elements: int) -> int:
    """Calls per repetition: cfg.n / 10 for 1 KB, fewer as copies grow (about 200 MB moved each way)."""
    return max(10, min(cfg.n // 10, (200 << 20) // (4 * elements)))


def cw_graph_function_call(elements: int) -> Callable[[], object]:
    """cw.graph_function(x + 1) called with a float32 NumPy array: staging copy, replay, wait, NumPy result (its
    pinned output array, copy=False, as the peers return theirs)."""
    f = cw.graph_function(lambda x: cw.ops.add(x, 1.0), copy=False)
    x = round_trip_input(elements)
    check_round_trip(f(x), x)
    return functools.partial(f, x)


def torch_graph_function_call(elements: int) -> Callable[[], object]:
    """The same by hand with torch: pinned staging, a CUDAGraph with H2D, add, D2H, and a wait."""
    pinned_in = torch.empty(elements, dtype=torch.float32).pin_memory()
    pinned_out = torch.empty(elements, dtype=torch.float32).pin_memory()
    static_in = torch.empty(elements, dtype=torch.float32, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        static_out = static_in + 1
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_in.copy_(pinned_in, non_blocking=True)
        static_out = static_in + 1
        pinned_out.copy_(static_out, non_blocking=True)
    in_view, out_view = pinned_in.numpy(), pinned_out.numpy()
    x = round_trip_input(elements)

    def call():
        np.copyto(in_view, x)
        graph.replay()
        torch.cuda.current_stream().synchronize()
        return out_view

    check_round_trip(call(), x)
    return call


def cupy_graph_function_call(elements: int) -> Callable[[], object]:
    """The same by hand with CuPy: pinned staging, a captured graph with H2D, add, D2H, and a wait."""
    nbytes = elements * 4
    in_view = np.frombuffer(cupy.cuda.alloc_pinned_memory(nbytes), np.float32, elements)
    out_view = np.frombuffer(cupy.cuda.alloc_pinned_memory(nbytes), np.float32, elements)
    static_in = cupy.empty(elements, dtype=cupy.float32)
    static_out = cupy.empty_like(static_in)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        cupy.add(static_in, 1, out=static_out)  # compile outside the capture
    stream.synchronize()
    # CuPy refuses set()/get() during capture, so the copies are raw cudaMemcpyAsync calls.
    memcpy = cupy.cuda.runtime.memcpyAsync
    default = cupy.cuda.runtime.memcpyDefault
    stream.begin_capture()
    memcpy(static_in.data.ptr, in_view.ctypes.data, nbytes, default, stream.ptr)
    with stream:
        cupy.add(static_in, 1, out=static_out)
    memcpy(out_view.ctypes.data, static_out.data.ptr, nbytes, default, stream.ptr)
    graph = stream.end_capture()
    x = round_trip_input(elements)

    def call():
        np.copyto(in_view, x)
        graph.launch(stream)
        stream.synchronize()
        return out_view

    check_round_trip(call(), x)
    return call


GRAPH_FUNCTION_CALLS = {"cuweave": cw_graph_function_call, "torch": torch_graph_function_call,
                        "cupy": cupy_graph_function_call}


def graph_function_setups(cfg: Config, elements: int) -> dict[str, InTurnSetup]:
    per_call = functools.partial(per_call_us, n=round_trip_calls(cfg, elements))
    return {lib: setup_of(functools.partial(make, elements), per_call) for lib, make in GRAPH_FUNCTION_CALLS.items()}


def graph_function_row(title: str, elements: int) -> Row:
    return in_turn_row(title, "us", None, None, functools.partial(graph_function_setups, elements=elements),
                       GRAPH_FUNCTION_CALLS)


ROWS: dict[str, Row] = {
    "graph_function": graph_function_row(
        "graph round trip, 1 KB NumPy in and out (cw.graph_function; peers by hand)", ROUND_TRIP_ELEMENTS),
    "graph_function_1mb": graph_function_row("the same round trip, 1 MB in and out", 1 << 18),
    "graph_function_64mb": graph_function_row("the same round trip, 64 MB in and out", 1 << 24),
}
