"""Control flow inside graphs (conditional nodes): a loop that runs until converged inside one replay equals
the eager loop, branches go both ways on a device-side value, switches pick a case, bodies nest, graph
functions may hold them, and what CUDA forbids inside a body is refused by name. These run on every
backend; the user-kernel condition needs the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw

# compute-sanitizer's tools fail on conditional nodes in raw CUDA too: see tests/conftest.py.
pytestmark = pytest.mark.conditional_nodes

N = 1000


def _fixed_point_eager(tolerance: float) -> tuple[np.ndarray, int]:
    """s <- s / 2 + 1 from 0 until sum(2 - s) <= tolerance, on the host: the converged s and the rounds."""
    s = np.zeros(N)
    rounds = 0
    while np.sum(np.full(N, 2.0) - s) > tolerance:
        s = s * 0.5 + 1.0
        rounds += 1
    return s, rounds


def _capture_fixed_point(stream, tolerance):
    s = cw.zeros(N, np.float64, stream=stream)
    two = cw.to_device(np.full(N, 2.0), stream=stream)
    ones = cw.to_device(np.ones(N), stream=stream)
    gap = cw.empty(N, np.float64, stream=stream)
    residual = cw.empty((), np.float64, stream=stream)
    rounds = cw.zeros(1, np.int64, stream=stream)
    with cw.capture(stream) as captured:
        cw.ops.fill(s, 0.0)
        cw.ops.fill(rounds, 0)
        cw.ops.sum(cw.ops.axpy(-1.0, s, two, out=gap), out=residual)  # sum(2 - s) before the first round
        with cw.while_loop(residual, ">", tolerance) as body:
            assert cw.current_stream() == body
            cw.ops.axpy(0.5, s, ones, out=s)  # s = s / 2 + 1
            cw.ops.add(rounds, 1, out=rounds)
            cw.ops.sum(cw.ops.axpy(-1.0, s, two, out=gap), out=residual)
    return captured.graph, s, rounds


def test_a_loop_runs_until_converged_inside_one_replay_and_equals_the_eager_loop(stream):
    want_s, want_rounds = _fixed_point_eager(1e-9)
    graph, s, rounds = _capture_fixed_point(stream, 1e-9)
    for _ in range(2):  # each replay starts over: the condition and the state are reset inside the graph
        graph.replay(stream)
        assert int(rounds.to_numpy(stream=stream)[0]) == want_rounds
        assert s.to_numpy(stream=stream).tobytes() == want_s.tobytes()
    assert want_rounds > 10
    kinds = [node.kind for node in graph.nodes]
    assert kinds.count("conditional") == 1
    loop = next(node for node in graph.nodes if node.kind == "conditional")
    assert loop.label.startswith("while (")


def test_a_loop_whose_condition_is_false_at_first_runs_no_round(stream):
    x = cw.to_device(np.arange(8, dtype=np.int32), stream=stream)
    stop = cw.zeros((), np.int32, stream=stream)
    with cw.capture(stream) as captured:
        with cw.while_loop(stop):  # stop != 0 is false before the first round
            cw.ops.add(x, 100, out=x)
    captured.graph.replay(stream)
    assert np.array_equal(x.to_numpy(stream=stream), np.arange(8))


@pytest.mark.parametrize("flag", [0, 1])
def test_if_else_takes_the_branch_the_device_value_says(stream, flag):
    value = cw.to_device(np.array([flag], np.int32), stream=stream)
    out = cw.zeros(4, np.float32, stream=stream)
    with cw.capture(stream) as captured:
        then, otherwise = cw.if_else(value)
        with then:
            cw.ops.fill(out, 1.0)
        with otherwise:
            cw.ops.fill(out, 2.0)
    captured.graph.replay(stream)
    assert np.all(out.to_numpy(stream=stream) == (1.0 if flag else 2.0))
    # The same graph follows the value at each replay: flip it, replay again.
    cw.copy_async(value, np.array([1 - flag], np.int32), stream=stream)
    captured.graph.replay(stream)
    assert np.all(out.to_numpy(stream=stream) == (2.0 if flag else 1.0))


def test_if_then_compares_with_a_threshold_and_an_empty_else_does_nothing(stream):
    x = cw.to_device(np.array([0.25]), stream=stream)
    out = cw.zeros(2, np.float64, stream=stream)
    with cw.capture(stream) as captured:
        with cw.if_then(x, "<", 0.5):
            cw.ops.fill(out, 7.0)
        cw.if_else(x, ">", 0.5)  # neither body captured: both stay empty
    captured.graph.replay(stream)
    assert np.all(out.to_numpy(stream=stream) == 7.0)


def test_switch_runs_the_case_its_index_names_and_none_out_of_range(stream):
    index = cw.zeros(1, np.int64, stream=stream)
    out = cw.zeros(1, np.int64, stream=stream)
    with cw.capture(stream) as captured:
        cw.ops.fill(out, -1)
        for case, body in enumerate(cw.switch(index, 3)):
            with body:
                cw.ops.fill(out, 10 * case)
    got = []
    for value in (2, 0, 1, 3, -5):
        cw.copy_async(index, np.array([value], np.int64), stream=stream)
        captured.graph.replay(stream)
        got.append(int(out.to_numpy(stream=stream)[0]))
    assert got == [20, 0, 10, -1, -1]


def test_an_updatable_default_changes_the_graph_already_made(stream):
    """A switch on a Condition whose default is updated between replays: no capture or instantiation again,
    and a replay queued before an update keeps the value it was queued with."""
    out = cw.zeros(1, np.int64, stream=stream)
    with cw.capture(stream) as captured:
        choice = cw.Condition(1, updatable=True)
        for case, body in enumerate(cw.switch(choice, 3)):
            with body:
                cw.ops.add(out, 10 ** case, out=out)
    graph = captured.graph
    graph.replay(stream)  # default 1: case 1
    choice.update_default(2, stream=stream)
    graph.replay(stream)  # case 2
    choice.update_default(0, stream=stream)
    graph.replay(stream)  # case 0
    choice.update_default(7, stream=stream)
    graph.replay(stream)  # no such case
    assert int(out.to_numpy(stream=stream)[0]) == 10 + 100 + 1
    assert choice.default == 7
    with pytest.raises(ValueError, match="unsigned 32-bit integer, not -1"):
        choice.update_default(-1)


def test_a_fixed_default_cannot_be_updated(stream):
    with cw.capture(stream):
        fixed = cw.Condition(1)
        with cw.if_then(fixed):
            pass
    with pytest.raises(ValueError, match="updatable=True"):
        fixed.update_default(0)
    with pytest.raises(ValueError, match="updatable=True is for conditions of a capture"):
        cw.Condition(graph=cw.Graph(), updatable=True)


def test_conditional_nodes_nest(stream):
    """A loop of five rounds whose body branches on a parity that flips every round."""
    odd = cw.zeros(1, np.int64, stream=stream)
    evens = cw.zeros(1, np.int64, stream=stream)
    odds = cw.zeros(1, np.int64, stream=stream)
    left = cw.zeros((), np.int64, stream=stream)
    five = cw.to_device(np.array([5], np.int64), stream=stream)
    one = cw.to_device(np.array([1], np.int64), stream=stream)
    with cw.capture(stream) as captured:
        cw.ops.sum(five, out=left)
        with cw.while_loop(left, ">", 0):
            then, otherwise = cw.if_else(odd)
            with then:
                cw.ops.add(odds, 1, out=odds)
            with otherwise:
                cw.ops.add(evens, 1, out=evens)
            cw.ops.axpy(-1, odd, one, out=odd)  # odd = 1 - odd
            cw.ops.add(left, -1, out=left)
    captured.graph.replay(stream)
    assert [int(a.to_numpy(stream=stream)[0]) for a in (evens, odds, odd)] == [3, 2, 1]
    assert int(left.to_numpy(stream=stream)) == 0


def test_a_graph_function_may_loop_and_follows_new_inputs(stream):
    @cw.graph_function(stream=stream)
    def halve_until_small(x):
        total = cw.ops.sum(x)
        with cw.while_loop(total, ">", 1.0):
            cw.ops.scale(x, 0.5, out=x)
            cw.ops.sum(x, out=total)
        return x

    for start in (64.0, 1000.0):
        host = np.full(4, start / 4)
        got = halve_until_small(host)
        want = host.copy()
        while want.sum() > 1.0:
            want *= 0.5
        assert np.array_equal(got, want)
    assert halve_until_small.cache_info()["graphs"] == 1


def test_a_loop_built_node_by_node_runs_until_its_condition_fails(stream):
    x = cw.to_device(np.full(4, 10.0), stream=stream)
    total = cw.empty((), np.float64, stream=stream)
    with cw.capture(stream) as measure:  # graphs of built-in work, embedded below (nothing runs here)
        cw.ops.sum(x, out=total)
    with cw.capture(stream) as halve:
        cw.ops.scale(x, 0.5, out=x)
        cw.ops.sum(x, out=total)
    g = cw.Graph()
    loop = cw.Condition(0, graph=g)
    first = g.add_graph(measure.graph)
    check = g.add_set_condition(loop, total, ">", 1.0, after=first)
    node, (body,) = g.add_conditional("while", loop, after=check)
    assert body.is_body and not g.is_body and node.kind == "conditional"
    body.add_set_condition(loop, total, ">", 1.0, after=body.add_graph(halve.graph))
    assert [n.kind for n in g.nodes] == ["graph", "kernel", "conditional"]
    assert [n.kind for n in body.nodes] == ["graph", "kernel"]
    g.replay(stream)
    assert np.all(x.to_numpy(stream=stream) == 10.0 / 64)  # halved until the sum, 2.5, fell to 0.625
    with pytest.raises(ValueError, match="conditional node's body: it runs as part of the graph"):
        body.replay(stream)
    with pytest.raises(ValueError, match="host node cannot be part of a conditional node's body"):
        body.add_host(print, "never")


@pytest.mark.parametrize("flag", [0, 1])
def test_an_if_else_built_node_by_node_takes_one_branch(stream, flag):
    value = cw.to_device(np.array([flag], np.int64), stream=stream)
    out = cw.zeros(8, np.uint8, stream=stream)
    g = cw.Graph()
    branch = cw.Condition(graph=g)
    _, (then, otherwise) = g.add_conditional(
        "if", branch, 2, after=g.add_set_condition(branch, value))
    then.add_memset(out, 1)
    otherwise.add_memset(out, 2)
    g.replay(stream)
    assert np.all(out.to_numpy(stream=stream) == (1 if flag else 2))
    with pytest.raises(ValueError, match="an if node 1 or 2"):
        g.add_conditional("if", branch, 3)


def test_a_host_callback_inside_a_body_is_refused_by_name(stream):
    flag = cw.zeros(1, np.int32, stream=stream)
    with pytest.raises(cw.CaptureError, match="host callback cannot be part of a conditional node's body"):
        with cw.capture(stream):
            with cw.if_then(flag) as body:
                body.launch_host_func(print, "never")
    flag.to_numpy(stream=stream)  # the stream works afterwards


def test_an_exception_in_a_body_propagates_and_the_stream_works_afterwards(stream):
    flag = cw.to_device(np.array([1], np.int32), stream=stream)
    with pytest.raises(KeyError, match="inside the body"):
        with cw.capture(stream):
            with cw.if_then(flag) as body:
                raise KeyError("inside the body")
    assert cw.current_stream() != body  # the body's stream is no longer current
    with cw.capture(stream) as captured:  # a new capture on the same stream
        with cw.if_then(flag):
            cw.ops.add(flag, 1, out=flag)
    captured.graph.replay(stream)
    assert int(flag.to_numpy(stream=stream)[0]) == 2


def test_work_on_the_capturing_stream_while_a_body_is_open_is_refused(stream):
    flag = cw.zeros(1, np.int32, stream=stream)
    x = cw.zeros(4, np.float32, stream=stream)
    with pytest.raises(ValueError, match="runs after the node, not in the body"):
        with cw.capture(stream):
            with cw.if_then(flag):
                cw.ops.fill(x, 1.0, stream=stream)  # the capturing stream, not the body's


def test_conditional_nodes_need_a_capture(stream):
    flag = cw.zeros(1, np.int32, stream=stream)
    with pytest.raises(ValueError, match="belongs inside a cuweave.capture block"):
        cw.while_loop(flag, stream=stream)
    with pytest.raises(ValueError, match="belongs inside a cuweave.capture block"):
        cw.Condition(1, stream=stream)


def test_bad_conditions_are_refused_by_name(stream):
    many = cw.zeros(3, np.int32, stream=stream)
    flag = cw.zeros(1, np.int32, stream=stream)
    with cw.capture(stream):
        with pytest.raises(ValueError, match="computed from one element"):
            cw.if_then(many)
        with pytest.raises(ValueError, match="comparison must be one of"):
            cw.if_then(flag, "=>", 1)
        with pytest.raises(ValueError, match="at least one case"):
            cw.switch(flag, 0)
        with pytest.raises(TypeError, match="float32, float64, int32 and int64"):
            cw.if_then(cw.zeros(1, np.uint8))
        branch = cw.if_then(flag)
        with branch:
            pass
        with pytest.raises(ValueError, match="captured already"):
            with branch:
                pass


def test_sanitizer_sees_body_work_ordered_after_the_node(stream):
    x = cw.zeros(16, np.float32, stream=stream)
    flag = cw.to_device(np.array([1], np.int32), stream=stream)
    stream.synchronize()
    with cw.sanitize():
        with cw.capture(stream) as captured:
            cw.ops.fill(x, 3.0)
            with cw.if_then(flag):
                cw.ops.scale(x, 2.0, out=x)  # after the fill: ordered through the node, clean
            cw.ops.add(x, 1.0, out=x)  # after the body: clean
        captured.graph.replay(stream)
        assert np.all(x.to_numpy(stream=stream) == 7.0)


def test_sanitizer_names_a_race_inside_a_body(stream, other_stream):
    x = cw.zeros(16, np.float32, stream=stream)
    flag = cw.to_device(np.array([1], np.int32), stream=stream)
    stream.synchronize()
    with cw.sanitize():
        with cw.capture(stream):
            with cw.if_then(flag) as body:
                other_stream.wait(body.record())  # a fork inside the body
                cw.ops.fill(x, 1.0, stream=other_stream)
                with pytest.raises(cw.RaceError) as info:
                    cw.ops.scale(x, 2.0, out=x)  # the body's stream: nothing orders it after the fill
                body.wait(other_stream.record())  # joined: the body can end
    (earlier, later, _, _) = info.value.races[0]
    assert earlier[0] == "fill, captured," and later[0] == "ops.scale, captured,"


@pytest.mark.gpu
def test_a_compiled_kernel_sets_a_condition(stream):
    kernel = cw.compile(
        r"""
        extern "C" __global__ void countdown(cudaGraphConditionalHandle handle, long long* left, long long* rounds) {
            *left -= 1;
            *rounds += 1;
            cudaGraphSetConditional(handle, *left > 0 ? 1u : 0u);
        }
        """,
        "countdown",
    )
    left = cw.to_device(np.array([4], np.int64), stream=stream)
    rounds = cw.zeros(1, np.int64, stream=stream)
    with cw.capture(stream) as captured:
        condition = cw.Condition(1)
        with cw.while_loop(condition):
            kernel(1, 1, (condition, left, rounds))
    captured.graph.replay(stream)
    assert int(rounds.to_numpy(stream=stream)[0]) == 4
    assert int(left.to_numpy(stream=stream)[0]) == 0
