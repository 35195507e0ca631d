"""``cuweave.woven``: a function of device arrays whose woven placement is captured once per signature and
replayed as a CUDA graph.

The first call with a given signature runs the function under ``cuweave.weave()`` inside a capture, so its
operations land on several streams with only the waits their reads and writes need, and the graph keeps that
placement; later calls with the same signature replay the graph on the caller's current stream, each input
array repointed to the one given (an exec update where the arrays changed, nothing where they did not).

NumPy arrays may be given too: each call copies them to device arrays the graph keeps (asynchronously, through
pinned staging, in the caller's stream order before the replay), and the function receives those device arrays in
their place.

Two calls have the same signature when they pass the same number of arguments, device arrays of the same
shapes, dtypes and devices in the same places, NumPy arrays of the same shapes and dtypes in the same places, the
same other values (numbers, strings, None: they were read when the graph was captured), and the same arrays more
than once in the same places. A call with another
signature captures again (the reason is logged at DEBUG on the ``cuweave`` logger). As for any graph, the
function must only queue GPU work: its Python code runs once per signature, so it must not branch on values
it reads back from the GPU, nor on state that changes between calls.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuweave import _core, _cupy_hooks
from cuweave._capture import capture
from cuweave._graph_cache import GraphCache
from cuweave._weave import weave

_log = logging.getLogger("cuweave")
_DeviceArray = _core.DeviceArray


@dataclass
class _Entry:
    graph: _core.Graph
    bound: list[_core.DeviceArray]  # the input arrays the graph reads and writes now
    outputs: list[_core.DeviceArray]
    structure: Any  # None: one result; else the type of the tuple or list of results; False: no result
    # The device array each NumPy argument is copied to before a replay, in the order the NumPy arguments come.
    uploads: list[_core.DeviceArray] = field(default_factory=list)
    # Whether the graph holds CuPy's work (its stream joined the capture): replays follow CuPy's current stream,
    # which follows them, as the work would have been ordered on it.
    follows_cupy: bool = False


def _flatten(result: Any) -> tuple[list[_core.DeviceArray], Any]:
    if result is None:
        return [], False
    if isinstance(result, (tuple, list)):
        arrays = [_core.asarray(r) for r in result]
        return arrays, type(result)
    return [_core.asarray(result)], None


def _signature(args: tuple, kwargs: dict) -> tuple[tuple, list[_core.DeviceArray], list[np.ndarray]]:
    """The call's signature (see the module's docstring), its device arrays in order, and its distinct NumPy arrays
    in order."""
    arrays: list[_core.DeviceArray] = []
    host: list[np.ndarray] = []
    parts = []
    positions: dict[int, int] = {}  # id of an array given -> its place in `arrays` or `host` (alive: args hold them)
    for where, value in [*enumerate(args), *sorted(kwargs.items())] if kwargs else enumerate(args):
        if type(value) is _DeviceArray or isinstance(value, _DeviceArray):
            if not value.contiguous:
                raise ValueError(f"woven functions take contiguous device arrays: argument {where!r} is a strided "
                                 "view; pass cuweave.ascontiguousarray(it)")
            parts.append((where, "array", value.shape, value.dtype, value.device, positions.get(id(value))))
            positions.setdefault(id(value), len(arrays))
            arrays.append(value)
        elif value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
            parts.append((where, "value", type(value), value))
        elif isinstance(value, np.ndarray):  # a repeated one is one device array, copied once
            parts.append((where, "numpy", value.shape, value.dtype, positions.get(id(value))))
            if id(value) not in positions:
                positions[id(value)] = len(host)
                host.append(value)
        else:
            raise TypeError(f"woven functions take device arrays, NumPy arrays and plain values (numbers, strings, "
                            f"None); argument {where!r} is a {type(value).__name__}")
    return tuple(parts), arrays, host


def _difference(old: tuple, new: tuple) -> str:
    """What changed between two signatures, for the debug log."""
    if len(old) != len(new):
        return f"{len(new)} arguments instead of {len(old)}"
    for before, after in zip(old, new):
        if before != after:
            return f"argument {after[0]!r}: {before[1:]} -> {after[1:]}"
    return "an unseen signature"


def _upload(entry: _Entry, host: list[np.ndarray], stream: _core.Stream) -> None:
    """Copies the call's NumPy arrays to the device arrays the graph reads in their place, on `stream` after the
    work that used those arrays last (the previous replay, wherever it ran)."""
    _core.handoff_all(entry.uploads, stream)
    for device_array, array in zip(entry.uploads, host):
        _core.copy_async(device_array, np.ascontiguousarray(array), stream=stream)


def _replay(entry: _Entry, stream: _core.Stream) -> None:
    """Replays on `stream` after the work that writes the graph's arrays, wherever it was queued; the arrays then
    count as written there (host reads wait for the replay; their memory is freed in its order)."""
    _core.handoff_all([*entry.bound, *entry.uploads, *entry.outputs], stream)
    cupys = _cupy_hooks.current_stream() if entry.follows_cupy else None
    if cupys is not None:
        stream.wait(cupys)
    entry.graph.replay(stream)
    if cupys is not None:
        cupys.wait(stream)


class WovenFunction:
    """A function of device arrays replayed as a graph of its woven placement; see :func:`woven`."""

    def __init__(self, function: Callable[..., Any], *, streams: int = 4, max_graphs: int = 8,
                 copy: bool = True, graph_memory: bool = False) -> None:
        if not callable(function):
            raise TypeError("woven wraps a callable that takes device arrays and returns device arrays (or None)")
        if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
            raise ValueError(f"streams must be a positive int, not {streams!r}")
        self._graphs = GraphCache("woven function", function, "argument shapes, dtypes and values", max_graphs)
        functools.update_wrapper(self, function)
        self._function = function
        self._streams = streams
        self._graph_memory = graph_memory
        self._copy = copy
        self._last_key: tuple | None = None
        self._rebinds = 0
        self._lock = threading.RLock()  # calls from several threads take turns (one graph, one binding)

    def cache_info(self) -> dict[str, int]:
        """Graphs held, and the hits, misses (captures), evictions and rebinds (calls with other arrays)."""
        return self._graphs.info(rebinds=self._rebinds)

    def graph_for(self, *args: Any, **kwargs: Any) -> _core.Graph:
        """The graph replayed for calls like this one (capturing it, and running it once, if needed)."""
        key, arrays, host = _signature(args, kwargs)
        with self._lock:
            entry = self._graphs.peek(key)
            if entry is None:
                entry = self._capture(key, args, kwargs, arrays, host, _core.current_stream())
            return entry.graph

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key, arrays, host = _signature(args, kwargs)
        stream = _core.current_stream()
        with self._lock:
            return self._call(key, args, kwargs, arrays, host, stream)

    def _call(self, key: tuple, args: tuple, kwargs: dict, arrays: list[_core.DeviceArray], host: list[np.ndarray],
              stream: _core.Stream) -> Any:
        entry = self._graphs.get(key)
        if entry is None:
            entry = self._capture(key, args, kwargs, arrays, host, stream)
        else:
            self._bind(entry, arrays)
            if host:
                _upload(entry, host, stream)
            _replay(entry, stream)
        self._last_key = key
        results = [o.copy(stream=stream) for o in entry.outputs] if self._copy else list(entry.outputs)
        if entry.structure is False:
            return None
        return results[0] if entry.structure is None else entry.structure(results)

    def _bind(self, entry: _Entry, arrays: list[_core.DeviceArray]) -> None:
        mapping = {}
        for old, new in zip(entry.bound, arrays):
            if old is not new and old.ptr != new.ptr:
                if not self._copy and any(new is output for output in entry.outputs):
                    raise ValueError("with copy=False the results are the graph's own arrays, which the next call "
                                     "overwrites: pass a copy of a result (result.copy()) as an input")
                mapping[old] = new
        if mapping:
            entry.graph.rebind(mapping)
            self._rebinds += 1
        entry.bound = list(arrays)

    def _capture(self, key: tuple, args: tuple, kwargs: dict, arrays: list[_core.DeviceArray],
                 host: list[np.ndarray], stream: _core.Stream) -> _Entry:
        name = getattr(self._function, "__name__", "function")
        if self._last_key is None:
            _log.debug("woven %s: first call, capturing", name)
        else:
            _log.debug("woven %s: capturing again (%s)", name, _difference(self._last_key, key))
        # NumPy arrays become device arrays the graph keeps, written before each replay (the first one included).
        uploads = [_core.empty(array.shape, array.dtype, stream=stream) for array in host]
        if host:
            by_id = dict(zip(map(id, host), uploads))
            args = tuple(by_id.get(id(value), value) if isinstance(value, np.ndarray) else value for value in args)
            kwargs = {name: by_id.get(id(value), value) if isinstance(value, np.ndarray) else value
                      for name, value in kwargs.items()}
        # The capture begins after the work queued so far that writes its inputs: that work is outside the graph.
        _core.synchronize_device(stream.device)
        capturing = _core.Stream(blocking=False, device=stream.device)
        with capture(capturing, graph_memory=self._graph_memory) as cap, weave(self._streams) as woven_block:
            results, structure = _flatten(self._function(*args, **kwargs))
        assert cap.graph is not None
        entry = _Entry(cap.graph, list(arrays), results, structure, uploads, woven_block._captured_cupy)
        _upload(entry, host, stream)
        _replay(entry, stream)
        self._graphs.add(key, entry, stacklevel=3)
        return entry


def woven(function: Callable[..., Any] | None = None, *, streams: int = 4, max_graphs: int = 8,
          copy: bool = True, graph_memory: bool = False) -> Any:
    """Wraps ``function`` (device arrays, NumPy arrays and plain values in; a device array, a tuple or list of them,
    or None out) so that its work is woven onto ``streams`` streams once per signature, captured as a graph, and
    replayed on the caller's current stream at later calls, with the input arrays repointed to those given. NumPy
    arrays are copied to device arrays the graph keeps before each replay, and the function gets those in their
    place.

    The results are new device arrays (``copy=False``: the graph's own, which the next call overwrites).
    ``cache_info()`` tells hits, captures, evictions and rebinds; ``max_graphs`` signatures are kept, least
    recently used first out, with a ``GraphCacheWarning`` on eviction. ``graph_memory=True``: the arrays the
    function makes are the graph's own memory (as with :class:`cuweave.capture`'s ``graph_memory``), so that its
    temporaries hold no memory of their own between calls. Usable as a decorator, with or without arguments.
    """
    options = {"streams": streams, "max_graphs": max_graphs, "copy": copy, "graph_memory": graph_memory}
    if function is None:
        return lambda f: WovenFunction(f, **options)
    return WovenFunction(function, **options)


__all__ = ["WovenFunction", "woven"]
