"""Control flow inside graphs: ``while_loop``, ``if_then``, ``if_else`` and ``switch`` add a conditional node
to the graph being captured, whose condition is computed on the device as the graph runs (no trip to the host).

Each returns a ``with`` block (or several) for its bodies: inside one, the current stream is the body's own
stream, so cuweave operations without ``stream=`` are captured into the body. Bodies may hold conditional
nodes of their own. What CUDA allows in a body: kernels, copies, memsets, graphs replayed there and conditional
nodes; host callbacks are refused (``CaptureError``).

The condition is either one element of a device array, compared with a threshold (``while_loop(residual,
">", 1e-6)``: evaluated before the node and, for a loop, again at the end of every round), or a ``Condition``
that a kernel of yours sets by calling ``cudaGraphSetConditional(handle, value)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuweave import _core

_COMPARISONS = (">", ">=", "<", "<=", "==", "!=")


class Condition:
    """A condition of the graph being captured on ``stream`` (default: the current stream), or, with
    ``graph=``, of a graph built node by node (the graph, or body, that will hold its conditional node); set
    back to ``default`` at the start of every replay.

    Work inside the graph sets it: ``set()`` in a capture or ``Graph.add_set_condition`` (a built-in kernel
    reading one element), or your compiled kernel, given the condition as an ``unsigned long long``
    parameter (CUDA's ``cudaGraphConditionalHandle``), calling ``cudaGraphSetConditional(handle, value)``
    (cuweave.compile declares it). Non-zero means true; a switch runs the body whose index is the value.

    ``updatable=True`` (captured conditions) lets ``update_default()`` change the default of the graph
    already made, between replays, without capturing or instantiating again: the default then lives in a
    small device buffer, and the graph starts by setting the condition from it (a built-in kernel, captured
    where the Condition is made). CUDA 13.0 itself has no call that changes a condition's default in a graph.
    """

    def __init__(self, default: int = 0, *, stream: _core.Stream | None = None,
                 graph: _core.Graph | None = None, updatable: bool = False) -> None:
        default = _unsigned(default)
        if graph is not None and stream is not None:
            raise ValueError("a condition belongs to a capture (stream=) or to a graph built node by node (graph=)")
        self._cell: _core.DeviceArray | None = None
        if graph is not None:
            if updatable:
                raise ValueError("updatable=True is for conditions of a capture; in a graph built node by node, "
                                 "Graph.add_set_condition(condition, element, \"value\") from a device scalar you "
                                 "write does the same")
            self.handle: int = graph.create_condition(default)
        else:
            capturing = _stream_or_current(stream)
            self.handle = _core.create_condition(capturing, default)
            if updatable:
                # Made and written on a stream of its own, outside the capture: the graph only reads it.
                self._cell_stream = _core.Stream(device=capturing.device, name="condition default")
                self._cell = _core.zeros(1, np.int64, stream=self._cell_stream)
                self._write_default(default, self._cell_stream)
                _core.synchronize_when_capture_ends(capturing, self._cell_stream)  # before any replay
                _core.set_condition(self.handle, self._cell, "value", 0, capturing)
        self.default = default

    def update_default(self, default: int, *, stream: _core.Stream | None = None) -> None:
        """The value the condition starts from in replays queued on ``stream`` (default: the current stream)
        after this call, and in those ordered after it; replays queued before keep the old one. Only for a
        Condition made with ``updatable=True``."""
        if self._cell is None:
            raise ValueError("this condition's default is fixed; make it with cw.Condition(..., updatable=True) to "
                             "update it after capture")
        value = _unsigned(default)
        self._write_default(value, _stream_or_current(stream))
        self.default = value

    def _write_default(self, value: int, stream: _core.Stream) -> None:
        _core.fill_bytes(self._cell, value.to_bytes(8, "little"), stream)

    def set(self, element: Any, comparison: str = "!=", threshold: Any = 0, *,
            stream: _core.Stream | None = None) -> None:
        """Sets the condition on the device from ``element`` (a one-element device array): 1 when
        ``element <comparison> threshold`` holds, else 0; or, with ``comparison="value"``, the element itself
        (a switch's case index; a negative or too large value selects no case)."""
        _core.set_condition(self.handle, element, comparison, threshold, _stream_or_current(stream))

    def __int__(self) -> int:
        return self.handle

    def __index__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"<cuweave.Condition handle={self.handle:#x} default={self.default}>"


class _Body:
    """One body of a conditional node, captured by a ``with`` block (once)."""

    def __init__(self, node: _core.ConditionalNode, index: int, condition: Condition, round_end=None) -> None:
        self._node = node
        self._index = index
        self._round_end = round_end  # re-evaluates a while loop's condition at the end of each round
        self._stream: _core.Stream | None = None
        self.condition = condition

    @property
    def stream(self) -> _core.Stream | None:
        """The body's stream while its block runs."""
        return self._stream

    def __enter__(self) -> _core.Stream:
        self._stream = self._node.begin_body(self._index)
        self._stream.__enter__()
        return self._stream

    def __exit__(self, exc_type, exc, traceback) -> bool:
        assert self._stream is not None
        stream, self._stream = self._stream, None
        failed = exc_type is not None  # the block raised: its exception propagates, the body is dropped
        try:
            if not failed and self._round_end is not None:
                self._round_end(stream)
        except BaseException:
            failed = True
            raise
        finally:
            stream.__exit__(None, None, None)
            if failed:
                self._node.abandon_body()
        if not failed:
            self._node.end_body()
        return False


def _unsigned(default: Any) -> int:
    if isinstance(default, bool):
        default = int(default)
    if not isinstance(default, int) or not 0 <= default <= 0xFFFFFFFF:
        raise ValueError(f"a condition's default is an unsigned 32-bit integer, not {default!r}")
    return default


def _stream_or_current(stream: _core.Stream | None) -> _core.Stream:
    return _core.current_stream() if stream is None else stream


def _condition_for(what: Any, comparison: str | None, threshold: Any, stream: _core.Stream,
                   default_comparison: str) -> tuple[Condition, Any]:
    """The node's condition, and how to evaluate it again (None for a Condition the user sets)."""
    if isinstance(what, Condition):
        if comparison is not None or threshold is not None:
            raise ValueError("a Condition is set by your own work (Condition.set or a kernel); comparison and "
                             "threshold go with a device array instead")
        return what, None
    comparison = default_comparison if comparison is None else comparison
    if comparison not in _COMPARISONS and not (comparison == "value" and default_comparison == "value"):
        raise ValueError(f"comparison must be one of {', '.join(_COMPARISONS)}, not {comparison!r}")
    threshold = 0 if threshold is None else threshold
    condition = Condition(0, stream=stream)

    def evaluate(on: _core.Stream) -> None:
        condition.set(what, comparison, threshold, stream=on)

    evaluate(stream)  # before the node: an if's branch, a switch's case, a loop's first round
    return condition, evaluate


def while_loop(condition: Any, comparison: str | None = None, threshold: Any = None, *,
               stream: _core.Stream | None = None) -> _Body:
    """A loop inside the graph: ``with cw.while_loop(residual, ">", tol):`` captures a body that runs again
    as long as ``residual > tol`` on the device (checked before each round, the first included).

    ``condition``: a one-element device array (compared with ``threshold`` by ``comparison``, default
    ``"!="`` 0, evaluated again at the end of each round) or a ``Condition`` your work sets inside the body.
    ``stream``: the capturing stream (default: the current stream).
    """
    on = _stream_or_current(stream)
    made, evaluate = _condition_for(condition, comparison, threshold, on, "!=")
    node = _core.ConditionalNode.add(on, made.handle, "while", 1)
    return _Body(node, 0, made, round_end=evaluate)


def if_then(condition: Any, comparison: str | None = None, threshold: Any = None, *,
            stream: _core.Stream | None = None) -> _Body:
    """A branch inside the graph: the body captured by ``with cw.if_then(flag):`` runs when the condition
    holds on the device at that point of the graph (``flag != 0`` by default)."""
    on = _stream_or_current(stream)
    made, _ = _condition_for(condition, comparison, threshold, on, "!=")
    return _Body(_core.ConditionalNode.add(on, made.handle, "if", 1), 0, made)


def if_else(condition: Any, comparison: str | None = None, threshold: Any = None, *,
            stream: _core.Stream | None = None) -> tuple[_Body, _Body]:
    """A branch with two bodies: ``then, otherwise = cw.if_else(x, ">", 0)``, then ``with then: ...`` and
    ``with otherwise: ...``; one of them runs at each replay. A body never entered stays empty."""
    on = _stream_or_current(stream)
    made, _ = _condition_for(condition, comparison, threshold, on, "!=")
    node = _core.ConditionalNode.add(on, made.handle, "if", 2)
    return _Body(node, 0, made), _Body(node, 1, made)


def switch(index: Any, cases: int, *, stream: _core.Stream | None = None) -> list[_Body]:
    """``cases`` bodies, of which the one numbered by ``index`` runs (none when it is negative or
    ``>= cases``): ``index`` is a one-element integer device array read on the device, or a ``Condition``."""
    if isinstance(cases, bool) or not isinstance(cases, int) or cases < 1:
        raise ValueError(f"a switch has at least one case; cases={cases!r}")
    on = _stream_or_current(stream)
    made, _ = _condition_for(index, None, None, on, "value")
    node = _core.ConditionalNode.add(on, made.handle, "switch", cases)
    return [_Body(node, case, made) for case in range(cases)]
