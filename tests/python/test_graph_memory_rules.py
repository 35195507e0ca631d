"""CUDA's rules for graphs holding memory allocation and free nodes, and the simulator keeping each of them (Note
[Simulated graph memory]).

Each test makes its calls the way CUDA takes them (cuweave._core.backend_calls: raw handles, none of cuweave's
checks) and expects what CUDA 13.0 answered on an H200 (tools/probes/graph_memory_nodes_probe.cu, the case named
in each test). They are why cuweave refuses such graphs inside captures and as child graphs by name, destroys
the old executable before instantiating anew, and instantiates them to free on launch (Note [Graph memory]).
"""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw
from cuweave._core import backend_calls as raw

BYTES = 1 << 20


def captured_allocation(stream: cw.Stream, free: bool) -> tuple[int, int]:
    """A graph holding an allocation node (and its free node, if `free`), captured on `stream`: (graph, address)."""
    raw.begin_capture(stream.handle)
    address = raw.allocate_in_capture(BYTES, stream.device, stream)
    raw.fill_bytes(address, BYTES, 7, stream)
    if free:
        raw.free(address, stream)
    return raw.end_capture_keeping(stream.handle), address


def error_name(call) -> str:
    try:
        call()
    except cw.CudaError as error:
        return error.name
    return "ok"


def test_a_captured_allocation_and_free_are_nodes_of_the_graph():
    stream = cw.Stream()
    graph, _ = captured_allocation(stream, free=True)  # case A
    try:
        assert raw.node_kinds(graph) == ["allocation", "kernel", "free"]
    finally:
        raw.destroy_graph(graph)


def test_a_second_executable_beside_the_first_is_refused_and_one_after_it_is_not():
    stream = cw.Stream()
    graph, _ = captured_allocation(stream, free=True)
    try:
        first = raw.instantiate(graph)
        assert error_name(lambda: raw.instantiate(graph)) == "cudaErrorNotSupported"  # case C
        raw.launch(first, stream)
        raw.synchronize(stream)
        raw.destroy_exec(first)
        second = raw.instantiate(graph)  # case O
        raw.launch(second, stream)
        raw.synchronize(stream)
        raw.destroy_exec(second)
    finally:
        raw.destroy_graph(graph)


def test_a_copy_as_a_child_graph_is_refused():
    stream = cw.Stream()
    graph, _ = captured_allocation(stream, free=True)
    parent = raw.create_graph()
    try:
        assert error_name(lambda: raw.add_child_graph(parent, graph)) == "cudaErrorNotSupported"  # case N
    finally:
        raw.destroy_graph(parent)
        raw.destroy_graph(graph)


def test_a_launch_inside_a_capture_is_refused_and_invalidates_it():
    stream = cw.Stream()
    graph, _ = captured_allocation(stream, free=True)
    exec_ = raw.instantiate(graph)
    other = cw.Stream()
    try:
        raw.begin_capture(other.handle)
        assert error_name(lambda: raw.launch(exec_, other)) == "cudaErrorStreamCaptureUnsupported"  # case M
        assert error_name(lambda: raw.end_capture(other.handle)) == "cudaErrorStreamCaptureInvalidated"
    finally:
        raw.destroy_exec(exec_)
        raw.destroy_graph(graph)


def test_an_unfreed_allocation_survives_its_launch_and_the_next_launch_makes_it_again_at_that_address():
    stream = cw.Stream()
    graph, address = captured_allocation(stream, free=False)  # cases B and K
    exec_ = raw.instantiate(graph, free_on_launch=True)
    try:
        for _ in range(3):
            raw.launch(exec_, stream)  # the executable frees on launch what the last launch left
            raw.synchronize(stream)
            host = cw.pinned_empty(BYTES, np.uint8)
            raw.copy(host.ctypes.data, address, BYTES, stream)
            raw.synchronize(stream)
            assert (host == 7).all()
    finally:
        raw.destroy_exec(exec_)
        raw.destroy_graph(graph)
    # The last launch's allocation outlives the executable and its graph, until freed outside them.
    raw.free(address, stream)
    raw.synchronize(stream)



def test_without_freeing_on_launch_a_launch_is_refused_while_the_last_ones_allocation_lives():
    stream = cw.Stream()
    graph, address = captured_allocation(stream, free=False)  # case B
    exec_ = raw.instantiate(graph)
    try:
        raw.launch(exec_, stream)
        assert error_name(lambda: raw.launch(exec_, stream)) == "cudaErrorInvalidValue"
        raw.free(address, stream)  # freed outside the graph: the next launch may make it again
        raw.launch(exec_, stream)
        raw.synchronize(stream)
        raw.free(address, stream)
        raw.synchronize(stream)
    finally:
        raw.destroy_exec(exec_)
        raw.destroy_graph(graph)

