"""cw.weave() under cw.capture: the weave's decisions become the graph's edges, and nothing more; it composes
with conditional nodes, graph functions and graph replays (Note [Weaving]). Under the race sanitizer."""

from __future__ import annotations

import contextlib
import gc
import weakref

import numpy as np
import pytest

import cuweave as cw
from _support import Gate, released, sanitizer_off

N = 2048


@pytest.fixture(autouse=True)
def _sanitized():
    with cw.sanitize():
        yield


def name(node: cw.GraphNode) -> str:
    return node.label.split()[0]  # "copy 8192 bytes DtoD" -> "copy"


def edges(graph: cw.Graph) -> set[tuple[str, str]]:
    """The graph's edges as (name, name) pairs (the tests give every node a name of its own)."""
    return {(name(dependency), name(node)) for node in graph.nodes for dependency in node.dependencies}


def reachable(pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    closure = set(pairs)
    while True:
        more = {(a, d) for (a, b) in closure for (c, d) in closure if b == c} - closure
        if not more:
            return closure
        closure |= more


def inputs(stream):
    x = cw.to_device(np.arange(N, dtype=np.float32), stream=stream)
    # Zeros, not empty: a body that scales p by 0 would keep NaN bytes that pooled memory may hold.
    p, q = cw.zeros(N, np.float32, stream=stream), cw.zeros(N, np.float32, stream=stream)
    stream.synchronize()
    return x, p, q


def test_the_sources_dag_captured_woven_equals_the_hand_written_fork_join_capture(stream, other_stream):
    x, p, q = inputs(stream)
    a, b = other_stream, cw.Stream()
    with stream, cw.capture(stream) as by_hand:  # README's fork/join capture
        forked = stream.record()
        a.wait(forked)
        b.wait(forked)
        cw.ops.scale(x, 2.0, out=p, stream=a)
        cw.ops.add(x, 1.0, out=q, stream=b)
        stream.wait(a.record())
        stream.wait(b.record())
        r_hand = cw.ops.add(p, q)
    with stream, cw.capture(stream) as woven, cw.weave() as w:
        cw.ops.scale(x, 2.0, out=p)
        cw.ops.add(x, 1.0, out=q)
        r_woven = cw.ops.add(p, q)
    assert len(woven.graph) == len(by_hand.graph) == 3
    assert edges(woven.graph) == edges(by_hand.graph) == {("scale", "add"), ("add_scalar", "add")}
    assert w.counts.waits == 2
    for graph, r in ((by_hand.graph, r_hand), (woven.graph, r_woven)):
        graph.replay(stream)
        np.testing.assert_array_equal(r.to_numpy(stream=stream), 3 * np.arange(N, dtype=np.float32) + 1)


def test_a_woven_capture_has_exactly_the_edges_that_reads_and_writes_imply(stream):
    x, p, q = inputs(stream)
    r, s = cw.empty(N, np.float32, stream=stream), cw.empty(N, np.float32, stream=stream)
    stream.synchronize()
    with stream, cw.capture(stream) as cap, cw.weave(streams=4):
        cw.ops.scale(x, 2.0, out=p)  # scale: reads x, writes p
        cw.ops.add(x, 1.0, out=q)  # add_scalar: reads x, writes q
        cw.ops.axpy(2.0, p, q, out=q)  # axpy: RAW on p and q
        cw.ops.copy(r, x)  # copy: independent of all three (reads x only)
        cw.ops.add(q, r, out=s)  # add: RAW on q and r
        cw.ops.fill(x, 0.0)  # fill: WAR after every read of x
    want = {("scale", "axpy"), ("add_scalar", "axpy"), ("axpy", "add"), ("copy", "add"),
            ("scale", "fill"), ("add_scalar", "fill"), ("copy", "fill")}
    labels = {name(node) for node in cap.graph.nodes}
    assert len(cap.graph) == 6 and labels == {"scale", "add_scalar", "axpy", "copy", "add", "fill"}, labels
    assert edges(cap.graph) == want  # and nothing more: no edge a reachability check could call redundant
    assert reachable(edges(cap.graph)) == reachable(want)
    host = np.arange(N, dtype=np.float32)
    cap.graph.replay(stream)
    np.testing.assert_array_equal(s.to_numpy(stream=stream), 2 * (2 * host) + (host + 1) + host)
    np.testing.assert_array_equal(x.to_numpy(stream=stream), np.zeros(N, np.float32))


@pytest.mark.conditional_nodes
def test_a_conditional_node_inside_a_woven_capture_follows_everything_before_it_and_precedes_everything_after(
        stream):
    x, p, q = inputs(stream)
    left = cw.zeros((), np.int64, stream=stream)
    three = cw.to_device(np.array([3], np.int64), stream=stream)
    stream.synchronize()
    with stream, cw.capture(stream) as cap, cw.weave(streams=3):
        cw.ops.scale(x, 2.0, out=p)
        cw.ops.add(x, 1.0, out=q)
        cw.ops.sum(three, out=left)
        with cw.while_loop(left, ">", 0):  # three rounds: q += p
            cw.ops.add(q, p, out=q)
            cw.ops.add(left, -1, out=left)
        r = cw.ops.add(q, 1.0)
        cw.ops.scale(p, 0.0, out=p)  # after the loop, which reads p
    cap.graph.replay(stream)
    host = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(r.to_numpy(stream=stream), host + 1 + 3 * 2 * host + 1)
    np.testing.assert_array_equal(p.to_numpy(stream=stream), np.zeros(N, np.float32))


@pytest.mark.conditional_nodes
def test_a_weave_inside_a_conditional_body_forks_and_joins_inside_the_body(stream):
    x, p, q = inputs(stream)
    left = cw.zeros((), np.int64, stream=stream)
    two = cw.to_device(np.array([2], np.int64), stream=stream)
    stream.synchronize()
    with stream, cw.capture(stream) as cap:
        cw.ops.sum(two, out=left)
        with cw.while_loop(left, ">", 0):
            with cw.weave(streams=2) as w:
                cw.ops.scale(p, 0.0, out=p)
                cw.ops.add(x, 1.0, out=q)  # independent of the scale: the other stream, inside the body
                cw.ops.add(p, q, out=p)
                cw.ops.add(left, -1, out=left)
    assert w.counts.per_stream[1] >= 1
    cap.graph.replay(stream)
    np.testing.assert_array_equal(p.to_numpy(stream=stream), np.arange(N, dtype=np.float32) + 1)


def test_a_graph_function_weaves_its_body(stream):
    @cw.graph_function(stream=stream)
    def step(x):
        with cw.weave(streams=3):
            return cw.ops.add(cw.ops.scale(x, 2.0, out=cw.empty(x.shape, x.dtype)),
                              cw.ops.add(x, 1.0, out=cw.empty(x.shape, x.dtype)))

    for start in (0.0, 5.0):
        host = np.arange(N, dtype=np.float32) + start
        np.testing.assert_array_equal(step(host), 3 * host + 1)


def test_a_graph_function_called_inside_a_weave_keeps_to_its_own_capture(stream):
    @cw.graph_function(stream=stream)
    def double(x):
        return cw.ops.scale(x, 2.0, out=x)

    x = cw.to_device(np.arange(N, dtype=np.float32))
    with cw.weave(streams=3):
        got = double(np.ones(N, np.float32))  # its capture and replay are its own stream's
        y = cw.ops.add(x, 1.0)
    np.testing.assert_array_equal(got, np.full(N, 2, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.arange(N, dtype=np.float32) + 1)


def _capturing(sanitized: bool):
    """The sanitizer as a capture may find it: on, or off entirely."""
    return contextlib.nullcontext() if sanitized else sanitizer_off()


@pytest.mark.parametrize("captured_sanitized", [True, False])
def test_a_replay_inside_a_weave_is_ordered_by_what_its_graph_touches(stream, captured_sanitized):
    x, p, q = inputs(stream)
    # The graph knows it touches p, whether the sanitizer watched its capture or not: the replay follows the fill
    # of p, and nothing else.
    with _capturing(captured_sanitized), stream, cw.capture(stream) as cap:
        cw.ops.scale(p, 2.0, out=p)
    graph = cap.graph
    with cw.weave(streams=3) as w:
        cw.ops.fill(p, 1.0)
        cw.ops.fill(q, 5.0)  # independent of the graph's p
        graph.replay()  # p *= 2, after the fill of p
        r = cw.ops.add(p, q)
    np.testing.assert_array_equal(r.to_numpy(), np.full(N, 7, np.float32))
    assert w.counts.operations == 4
    assert w.counts.per_stream == (3, 1, 0)  # the fill of q beside; the replay after the fill of p, on its stream


def _captured(stream, sanitized: bool, body) -> cw.Graph:
    with _capturing(sanitized), stream, cw.capture(stream) as cap:
        body()
    return cap.graph


@pytest.mark.parametrize("captured_sanitized", [True, False])
def test_two_independent_captured_graphs_are_woven_onto_two_streams(stream, captured_sanitized):
    x, p, q = inputs(stream)
    first = _captured(stream, captured_sanitized, lambda: cw.ops.add(x, 1.0, out=p))
    second = _captured(stream, captured_sanitized, lambda: cw.ops.add(x, 2.0, out=q))
    with stream, cw.weave(streams=2) as w:
        first.replay()
        second.replay()
        r = cw.ops.add(p, q)  # waits for both
    assert w.counts.per_stream == (2, 1)  # the second replay went to the other stream, r back to the first's
    np.testing.assert_array_equal(r.to_numpy(), 2 * np.arange(N, dtype=np.float32) + 3)


@pytest.mark.parametrize("captured_sanitized", [True, False])
@pytest.mark.parametrize("raw_kernel", ["between", "after"])
def test_work_captured_past_cuweave_makes_the_replay_a_barrier(stream, captured_sanitized, raw_kernel):
    x, p, q = inputs(stream)
    # On `stream`: its free follows the replay's raw write, which nothing else keeps it alive for (freed first, the
    # simulator's write went to freed heap memory).
    elsewhere = cw.empty((N,), np.float32, stream=stream)

    def body():
        cw.ops.add(x, 1.0, out=p)
        if raw_kernel == "between":
            cw._core.backend_calls.fill_bytes(elsewhere.ptr, 64, 0, stream)  # no cuweave operation: unseen
            cw.ops.add(p, 1.0, out=p)
        else:
            cw._core.backend_calls.fill_bytes(elsewhere.ptr, 64, 0, stream)

    graph = _captured(stream, captured_sanitized, body)
    with stream, cw.weave(streams=2) as w:
        cw.ops.add(x, 2.0, out=q)
        graph.replay()  # may touch q: after the add
        cw.ops.add(x, 3.0, out=q)  # and before this
    assert w.counts.per_stream == (3, 0)


@pytest.mark.parametrize("told", [True, False])
def test_another_librarys_work_told_to_the_sanitizer_is_part_of_the_footprint(stream, told):
    x, p, q = inputs(stream)
    theirs = cw.empty((N,), np.float32, stream=stream)

    def body():
        cw.ops.add(x, 1.0, out=p)
        if told:  # as the PyTorch and CuPy hooks do: the operation is told to the sanitizer, then queued
            cw._core.sanitizer.foreign.operation(stream, "their fill", [(theirs.ptr, 64, True)])
        cw._core.backend_calls.fill_bytes(theirs.ptr, 64, 0, stream)

    graph = _captured(stream, True, body)
    with stream, cw.weave(streams=2) as w:
        cw.ops.add(x, 2.0, out=q)
        graph.replay()  # told: touches x, p and their bytes, beside the add of q; else it may touch q
        cw.ops.add(x, 3.0, out=q)
        cw.ops.fill(theirs, 1.0)  # after the replay's write of their bytes either way
    assert w.counts.per_stream == ((2, 2) if told else (3, 1))  # not told: the replay follows the add of q


@pytest.mark.conditional_nodes
@pytest.mark.parametrize("captured_sanitized", [True, False])
@pytest.mark.parametrize("raw_kernel_in_body", [False, True])
def test_a_conditional_body_is_counted_on_its_own(stream, captured_sanitized, raw_kernel_in_body):
    x, p, q = inputs(stream)
    elsewhere = cw.empty((N,), np.float32, stream=stream)  # its free follows the replay's raw write
    flag = cw.to_device(np.array([1], np.int32), stream=stream)

    def body():
        cw.ops.add(x, 1.0, out=p)
        with cw.if_then(flag):  # its body is a graph of its own, counted on the body's stream
            cw.ops.add(p, 1.0, out=p)
            if raw_kernel_in_body:
                cw._core.backend_calls.fill_bytes(elsewhere.ptr, 64, 0, cw.current_stream())
        cw.ops.add(p, 1.0, out=p)

    graph = _captured(stream, captured_sanitized, body)
    with stream, cw.weave(streams=2) as w:
        cw.ops.add(x, 2.0, out=q)
        graph.replay()
        cw.ops.add(x, 3.0, out=q)
    assert w.counts.per_stream == ((3, 0) if raw_kernel_in_body else (2, 1))
    np.testing.assert_array_equal(p.to_numpy(stream=stream), np.arange(N, dtype=np.float32) + 3)


@pytest.mark.parametrize("captured_sanitized", [True, False])
def test_an_embedded_graph_of_unknown_footprint_makes_the_capture_unknown(stream, captured_sanitized):
    x, p, q = inputs(stream)
    inner = _hand_built(p, x)
    inner.add_host(lambda: None)  # may touch anything
    graph = _captured(stream, captured_sanitized, lambda: inner.replay(stream))
    with stream, cw.weave(streams=2) as w:
        cw.ops.add(x, 2.0, out=q)
        graph.replay()
        cw.ops.add(x, 3.0, out=q)
    assert w.counts.per_stream == (3, 0)


@pytest.mark.parametrize("captured_sanitized", [True, False])
def test_a_captured_host_function_makes_the_capture_unknown(stream, captured_sanitized):
    x, p, q = inputs(stream)

    def body():
        cw.ops.add(x, 1.0, out=p)
        stream.launch_host_func(lambda: None)

    graph = _captured(stream, captured_sanitized, body)
    with stream, cw.weave(streams=2) as w:
        cw.ops.add(x, 2.0, out=q)
        graph.replay()
        cw.ops.add(x, 3.0, out=q)
    assert w.counts.per_stream == (3, 0)



def _hand_built(destination, source) -> cw.Graph:
    """A graph built node by node: one copy of `source` into `destination`."""
    graph = cw.Graph()
    graph.add_copy(destination, source)
    return graph


def test_two_independent_hand_built_graphs_are_woven_onto_two_streams(stream):
    x, p, q = inputs(stream)
    first, second = _hand_built(p, x), _hand_built(q, x)  # both read x, write their own array
    with stream, cw.weave(streams=2) as w:
        first.replay()
        second.replay()
        r = cw.ops.add(p, q)  # waits for both
    assert w.counts.per_stream == (2, 1)  # the second replay went to the other stream, r back to the first's
    assert w.counts.waits == 2  # the other stream joins after x's writer, and r waits for it
    np.testing.assert_array_equal(r.to_numpy(), 2 * np.arange(N, dtype=np.float32))


def test_hand_built_graphs_writing_one_array_stay_in_order(stream):
    x, p, _ = inputs(stream)
    fill = cw.Graph()
    fill.add_memset(p, 0)
    copy = _hand_built(p, x)
    with stream, cw.weave(streams=2) as w:
        for _ in range(3):
            fill.replay()
            copy.replay()
    assert w.counts.per_stream == (6, 0)  # each replay writes p: one chain, no other stream
    np.testing.assert_array_equal(p.to_numpy(), np.arange(N, dtype=np.float32))


def test_a_repointed_node_moves_the_footprint(stream):
    x, p, q = inputs(stream)
    graph = cw.Graph()
    node = graph.add_copy(p, x)
    graph.set_copy(node, q, x)  # now writes q, not p
    with stream, cw.weave(streams=2) as w:
        cw.ops.fill(p, 3.0)
        graph.replay()  # independent of the fill of p now
    np.testing.assert_array_equal(q.to_numpy(), np.arange(N, dtype=np.float32))


def test_a_rebound_graph_touches_the_new_arrays(stream):
    x, p, q = inputs(stream)
    graph = _hand_built(p, x)
    graph.rebind({p: q})
    with stream, cw.weave(streams=2) as w:
        cw.ops.fill(p, 3.0)
        graph.replay()
    np.testing.assert_array_equal(q.to_numpy(), np.arange(N, dtype=np.float32))


def test_a_graph_with_a_host_node_counts_as_touching_everything(stream):
    x, p, q = inputs(stream)
    graph = _hand_built(p, x)
    graph.add_host(lambda: None)
    with stream, cw.weave(streams=2) as w:
        cw.ops.fill(q, 3.0)
        graph.replay()  # may touch q through its host function: after the fill
        cw.ops.fill(q, 4.0)  # and before this
    assert w.counts.per_stream == (3, 0)


def test_a_hand_built_graph_racing_with_a_fill_is_named_by_the_sanitizer(stream, other_stream):
    x, p, _ = inputs(stream)
    graph = _hand_built(p, x)
    cw.ops.fill(x, 2.0, stream=other_stream)
    with pytest.raises(cw.RaceError, match="graph replay"):
        graph.replay(stream)  # reads x, which other_stream writes with nothing ordering them
    other_stream.synchronize()
    stream.synchronize()


def test_an_embedded_graph_brings_its_footprint(stream):
    x, p, q = inputs(stream)
    outer = cw.Graph()
    outer.add_graph(_hand_built(p, x))
    with stream, cw.weave(streams=2) as w:
        cw.ops.fill(q, 1.0)
        outer.replay()  # copies into p only: independent of the fill


def test_a_hand_built_graphs_event_nodes_order_work_for_the_sanitizer(stream, other_stream):
    x, p, _ = inputs(stream)
    done = cw.Event()
    graph = _hand_built(p, x)
    graph.add_event_record(done, after=graph.nodes[0])
    graph.replay(stream)
    other_stream.wait(done)  # recorded by the replay: orders the read below after its copy
    assert (cw.ops.add(p, 0.0, stream=other_stream).to_numpy(stream=other_stream) == np.arange(N)).all()
    waiter = cw.Graph()
    waiter.add_event_wait(done)
    waiter.add_memset(x, 0)  # after the wait: after the replay's read of x
    waiter.replay(other_stream)
    stream.synchronize()
    other_stream.synchronize()


class _ForeignArray:
    """Stands for another library's array: alive while anything holds it."""


def test_another_librarys_arrays_in_a_woven_capture_live_as_long_as_the_graph_and_its_replays(stream):
    x, p, q = inputs(stream)
    held = [_ForeignArray(), _ForeignArray()]
    refs = [weakref.ref(h) for h in held]
    assert not cw._core.weave.kept_by_capture(stream, held)  # no capture: the caller orders the free itself
    with stream, cw.capture(stream) as cap, cw.weave(streams=2):
        cw.ops.scale(x, 2.0, out=p)
        # Placed beside the scale (it touches q only): the weave's second stream, which joins the capture.
        placed = cw._core.weave.place([(*cw._core.touched_span(q), True)])
        assert placed != stream
        cw.ops.fill(q, 1.0, stream=placed)
        assert cw._core.weave.kept_by_capture(placed, held[:1])
        assert cw._core.weave.kept_by_capture(stream, held[1:])
    assert not cw._core.weave.kept_by_capture(placed, [_ForeignArray()])  # the capture is over
    del held
    gc.collect()
    assert all(ref() is not None for ref in refs)  # the graph holds them
    graph = cap.graph
    del cap
    with Gate(stream):
        graph.replay(stream)
        del graph
        gc.collect()
        assert all(ref() is not None for ref in refs)  # the replay queued behind the gate still holds them
    stream.synchronize()
    assert all(released(ref) for ref in refs)
    np.testing.assert_array_equal(q.to_numpy(stream=stream), np.ones(N, np.float32))
