"""Graph memory: arrays allocated inside a capture with graph_memory on (cw.woven's, a graph function's) are the
graph's allocation nodes; those dropped inside are freed by free nodes after every user, results survive each
replay at a fixed address, and what CUDA refuses of such graphs is refused by name. Every backend."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw
from cuweave import _graph_view

N = 4096


def two_branches(x, y):
    """Two temporaries on two streams of a weave, joined into the result."""
    p = cw.ops.scale(x, 2.0)
    q = cw.ops.add(y, 1.0)
    return cw.ops.add(p, q)


def values(seed: int):
    rng = np.random.default_rng(seed)
    return rng.integers(-50, 50, N).astype(np.float32), rng.integers(-50, 50, N).astype(np.float32)


def test_a_woven_functions_temporaries_are_allocated_and_freed_inside_its_graph(stream):
    woven = cw.woven(two_branches, streams=2, graph_memory=True)
    x, y = values(0)
    with stream:
        result = woven(cw.to_device(x), cw.to_device(y))
        graph = woven.graph_for(cw.to_device(x), cw.to_device(y))
    np.testing.assert_array_equal(result.to_numpy(), 2 * x + (y + 1))
    kinds = _graph_view.kinds(graph)
    # p, q and the result are allocated in the graph; p and q, dropped inside, are freed there too.
    assert kinds["allocation"] == 3
    assert kinds["free"] == 2


def test_each_free_node_follows_every_node_that_uses_its_memory(stream):
    woven = cw.woven(two_branches, streams=2, graph_memory=True)
    x, y = values(1)
    with stream:
        woven(cw.to_device(x), cw.to_device(y))
        graph = woven.graph_for(cw.to_device(x), cw.to_device(y))
    nodes = graph.nodes
    position = {id(node): i for i, node in enumerate(nodes)}

    def ancestors(node, seen):
        for dependency in node.dependencies:
            if id(dependency) not in seen:
                seen.add(id(dependency))
                ancestors(dependency, seen)
        return seen

    frees = [node for node in nodes if node.kind == "free"]
    kernels = [node for node in nodes if node.kind == "kernel"]
    assert frees and kernels
    for free in frees:
        before = ancestors(free, set())
        # The joining add reads both temporaries: every kernel precedes every free.
        assert all(id(kernel) in before for kernel in kernels), (position, free.label)


def test_results_are_right_over_many_replays_with_other_arrays(stream):
    woven = cw.woven(two_branches, streams=2, copy=False, graph_memory=True)
    with stream:
        for seed in range(6):
            x, y = values(seed)
            result = woven(cw.to_device(x), cw.to_device(y))
            np.testing.assert_array_equal(result.to_numpy(), 2 * x + (y + 1))
    assert woven.cache_info()["misses"] == 1


def test_a_result_kept_past_the_woven_function_stays_readable(stream):
    woven = cw.woven(two_branches, streams=2, copy=False, graph_memory=True)
    x, y = values(7)
    with stream:
        result = woven(cw.to_device(x), cw.to_device(y))
    del woven
    cw.collect()
    np.testing.assert_array_equal(result.to_numpy(), 2 * x + (y + 1))


def test_an_operation_on_a_result_before_its_graphs_first_replay_is_refused_by_name(stream):
    with cw.capture(stream, graph_memory=True) as made:
        result = cw.ops.add(cw.ones(1024, np.float32), 1.0)
    # On a GPU a copy of those addresses into NumPy memory would read them on the host, and crash.
    with pytest.raises(ValueError, match="has not replayed yet"):
        result.to_numpy(stream=stream)
    with pytest.raises(ValueError, match="replay the graph before using the array"):
        cw.ops.add(result, 1.0, out=result, stream=stream)
    made.graph.replay(stream)
    np.testing.assert_array_equal(result.to_numpy(stream=stream), np.full(1024, 2.0, np.float32))



def test_a_graph_instantiated_anew_while_its_results_live_replays_right(stream):
    with cw.capture(stream, graph_memory=True) as made:
        ones = cw.ones(N, np.float32)
        result = cw.ops.add(ones, 1.0)
    made.graph.replay(stream)
    np.testing.assert_array_equal(result.to_numpy(stream=stream), np.full(N, 2.0, np.float32))
    # An instantiation flag: the next replay instantiates anew, the last executable's results still alive.
    made.graph.node_priorities = True
    for _ in range(2):
        made.graph.replay(stream)
        np.testing.assert_array_equal(result.to_numpy(stream=stream), np.full(N, 2.0, np.float32))
    np.testing.assert_array_equal(ones.to_numpy(stream=stream), np.ones(N, np.float32))

def test_a_graph_holding_graph_memory_is_refused_inside_another_capture(stream):
    with cw.capture(stream, graph_memory=True) as made:
        x = cw.ones(N, np.float32)
        cw.ops.add(x, 1.0)
    assert _graph_view.kinds(made.graph)["allocation"] == 2
    other = cw.Stream()
    with pytest.raises(cw.CaptureError, match="graph memory"):
        with cw.capture(other):
            made.graph.replay(other)


def test_a_graph_holding_graph_memory_is_refused_as_a_child_graph(stream):
    with cw.capture(stream, graph_memory=True) as made:
        cw.ops.add(cw.ones(N, np.float32), 1.0)
    parent = cw.Graph()
    with pytest.raises(cw.CaptureError, match="graph memory"):
        parent.add_graph(made.graph)


def test_without_graph_memory_a_capture_allocates_outside_its_graph(stream):
    with cw.capture(stream) as made:
        cw.ops.add(cw.ones(N, np.float32), 1.0)
    kinds = _graph_view.kinds(made.graph)
    assert kinds["allocation"] == 0 and kinds["free"] == 0
    woven = cw.woven(two_branches, streams=2)
    x, y = values(3)
    with stream:
        woven(cw.to_device(x), cw.to_device(y))
        kinds = _graph_view.kinds(woven.graph_for(cw.to_device(x), cw.to_device(y)))
    assert kinds["allocation"] == 0 and kinds["free"] == 0


def test_a_graph_functions_temporaries_are_graph_memory_when_asked():
    def scaled_sum(x):
        return cw.ops.add(cw.ops.scale(x, 3.0), 1.0)

    function = cw.graph_function(scaled_sum, graph_memory=True)
    x = np.arange(N, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(function(x), x * 3 + 1)
    kinds = _graph_view.kinds(function.graph_for(x))
    assert kinds["allocation"] == 2 and kinds["free"] == 1  # the scaled temporary freed inside; the result kept


def test_graph_memory_is_kept_between_replays_until_a_trim(stream):
    big = 16 << 20  # 64 MB floats: well above CUDA's granularity for graph memory
    device = cw.Device(stream.device)
    cw.synchronize()
    device.trim_graph_memory()
    baseline = device.graph_memory()["reserved"]
    woven = cw.woven(two_branches, streams=2, graph_memory=True)
    x = cw.ones(big, np.float32, stream=stream)
    with stream:
        woven(x, x)
    stream.synchronize()
    kept = device.graph_memory()
    # The two temporaries and the result, at least: CUDA keeps them mapped for the next replay.
    assert kept["reserved"] - baseline >= 3 * big * 4
    del woven  # the graph, then the result it held, go
    for _ in range(3):
        cw.collect()
        cw.synchronize()
    device.trim_graph_memory()
    assert device.graph_memory()["reserved"] <= kept["reserved"] - 2 * big * 4
