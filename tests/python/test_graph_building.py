"""Graphs built node by node, and changing graphs after instantiation: new copy pointers, repointed
buffers (rebind) and adopted re-captures go through an exec update, and a changed topology through a new
instantiation; results follow without re-capture. These run on every backend."""

from __future__ import annotations

import numpy as np

import cuweave as cw


def test_explicit_graph_runs_its_nodes_in_dependency_order(stream):
    n = 1000
    host_in = cw.pinned_empty(n, np.int32)
    np.copyto(host_in, np.arange(n, dtype=np.int32))
    out_copy = cw.pinned_zeros(n, np.int32)
    out_memset = cw.pinned_zeros(n, np.int32)
    a = cw.empty(n, np.int32, stream=stream)
    b = cw.empty(n, np.int32, stream=stream)
    c = cw.empty(n, np.int32, stream=stream)
    stream.synchronize()
    seen = []

    g = cw.Graph()
    load = g.add_copy(a, host_in)
    move = g.add_copy(b, a, after=[load])
    clear = g.add_memset(c, 7)
    join = g.add_empty(after=[move, clear])
    back = g.add_copy(out_copy, b, after=join)
    back_memset = g.add_copy(out_memset, c, after=join)
    g.add_host(seen.append, "done", after=[back, back_memset])
    assert [node.kind for node in g.nodes].count("copy") == 4
    assert len(g) == 7

    g.replay(stream)
    stream.synchronize()
    assert np.array_equal(out_copy, np.arange(n, dtype=np.int32))
    assert np.array_equal(out_memset.view(np.uint8), np.full(4 * n, 7, np.uint8))
    assert seen == ["done"]
    assert g.last_refresh == "instantiated"


def test_event_nodes_order_work_on_other_streams(stream, other_stream):
    done = cw.Event()
    x = cw.zeros(1 << 12, np.float32, stream=stream)
    stream.synchronize()
    g = cw.Graph()
    fill = g.add_memset(x, 0x3F)
    g.add_event_record(done, after=fill)
    g.replay(stream)
    other_stream.wait(done)
    y = cw.ops.add(x, 0.0, stream=other_stream)
    assert np.array_equal(y.to_numpy(stream=other_stream).view(np.uint8), np.full(4 << 12, 0x3F, np.uint8))
    assert [n.kind for n in g.nodes] == ["memset", "event_record"]


def test_set_copy_updates_the_executable_in_place(stream):
    first = cw.to_device(np.full(16, 1, np.float32), stream=stream)
    second = cw.to_device(np.full(16, 2, np.float32), stream=stream)
    out = cw.pinned_zeros(16, np.float32)
    stream.synchronize()
    g = cw.Graph()
    node = g.add_copy(out, first)
    g.replay(stream)
    stream.synchronize()
    assert np.all(out == 1) and g.last_refresh == "instantiated"
    g.set_copy(node, out, second)
    g.replay(stream)
    stream.synchronize()
    assert np.all(out == 2) and g.last_refresh == "updated"


def test_adding_a_node_after_instantiation_reinstantiates(stream):
    x = cw.zeros(8, np.float32, stream=stream)
    out = cw.pinned_zeros(8, np.float32)
    stream.synchronize()
    g = cw.Graph()
    g.add_copy(out, x)
    g.replay(stream)
    stream.synchronize()
    fill = g.add_memset(x, 0xFF)
    g.add_copy(out, x, after=fill)
    g.replay(stream)
    stream.synchronize()
    assert g.last_refresh == "reinstantiated"
    assert np.all(np.isnan(out))


def test_rebind_repoints_a_captured_graph_without_recapture(stream, rng):
    n = 512
    x, y, z = (cw.to_device(rng.standard_normal(n).astype(np.float32), stream=stream) for _ in range(3))
    with cw.capture(stream) as cap:
        cw.ops.add(x, y, out=z, stream=stream)
        cw.ops.scale(z, 0.5, out=z, stream=stream)
    g = cap.graph
    g.replay(stream)
    expected_z = (x.to_numpy(stream=stream) + y.to_numpy(stream=stream)) * np.float32(0.5)
    assert np.array_equal(z.to_numpy(stream=stream), expected_z)

    x2 = cw.to_device(rng.standard_normal(n).astype(np.float32), stream=stream)
    z2 = cw.zeros(n, np.float32, stream=stream)
    changed = g.rebind({x: x2, z: z2})
    assert changed == 4  # add reads x and writes z; scale reads z and writes z
    g.replay(stream)
    assert g.last_refresh == "updated"
    want = (x2.to_numpy(stream=stream) + y.to_numpy(stream=stream)) * np.float32(0.5)
    assert np.array_equal(z2.to_numpy(stream=stream), want)
    assert np.array_equal(z.to_numpy(stream=stream), expected_z), "the old output was written after rebind"


def test_update_adopts_a_recapture_with_the_same_topology(stream):
    def capture_on(a, b):
        with cw.capture(stream) as cap:
            cw.ops.add(a, 1.0, out=b, stream=stream)
        return cap.graph

    a1 = cw.to_device(np.full(4, 1, np.float32), stream=stream)
    b1 = cw.zeros(4, np.float32, stream=stream)
    a2 = cw.to_device(np.full(4, 10, np.float32), stream=stream)
    b2 = cw.zeros(4, np.float32, stream=stream)
    g = capture_on(a1, b1)
    g.replay(stream)
    assert g.update(capture_on(a2, b2)) == "updated"
    g.replay(stream)
    assert np.array_equal(b2.to_numpy(stream=stream), np.full(4, 11, np.float32))
    assert np.array_equal(b1.to_numpy(stream=stream), np.full(4, 2, np.float32))

    with cw.capture(stream) as bigger:
        cw.ops.add(a1, 5.0, out=b1, stream=stream)
        cw.ops.add(b1, 5.0, out=b1, stream=stream)
    assert g.update(bigger.graph) == "reinstantiated"
    g.replay(stream)
    assert np.array_equal(b1.to_numpy(stream=stream), np.full(4, 11, np.float32))


def test_graph_nodes_taken_before_update_are_refused_after_it(stream):
    x = cw.zeros(4, np.float32, stream=stream)
    g = cw.Graph()
    node = g.add_memset(x, 1)
    other = cw.Graph()
    other.add_memset(x, 2)
    g.update(other)
    import pytest

    with pytest.raises(ValueError, match="before update"):
        g.add_empty(after=[node])


def test_child_graphs_are_copies(stream):
    x = cw.zeros(4, np.int32, stream=stream)
    out = cw.pinned_zeros(4, np.int32)
    stream.synchronize()
    child = cw.Graph()
    child.add_memset(x, 1)
    parent = cw.Graph()
    inner = parent.add_graph(child)
    parent.add_copy(out, x, after=inner)
    child.add_memset(x, 2)  # after embedding: does not reach the parent
    parent.replay(stream)
    stream.synchronize()
    assert np.all(out == 0x01010101)
    assert [n.kind for n in parent.nodes] == ["graph", "copy"]
