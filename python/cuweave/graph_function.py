"""``cuweave.graph_function``: NumPy in, one graph replay, NumPy out.

The first call with a given set of input shapes and dtypes captures the function into a graph that
copies the inputs from pinned staging arrays to device arrays, runs the function's GPU work, and copies
its results into pinned output arrays. Later calls with that signature copy the NumPy inputs into the
staging arrays (host memcpy), replay the graph (one launch) and return copies of the pinned outputs (or, with
copy=False, the pinned outputs themselves).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cuweave import _core
from cuweave._capture import capture
from cuweave._graph_cache import GraphCache


_PARALLEL_COPY_BYTES = 1 << 20  # inputs this large are staged by the host copy threads
# Which staging copies the graph does with a kernel instead of a copy engine (Note [Copies by kernel]): on an
# H100 (tools/probes/small_round_trip_probe.cu) a kernel writing the pinned outputs won at every size up to
# 256 KB (1 KB round trip 9.8 µs against 12.4), and one reading the pinned inputs won from 64 KB to 256 KB
# but lost below 16 KB. At 1 MB the gain was a few percent in that probe and a loss in one benchmark run, so
# from 1 MB on the copy engines do it.
_KERNEL_COPY_IN_BYTES = range(32 << 10, (256 << 10) + 1)
_KERNEL_COPY_OUT_MOST_BYTES = 256 << 10


@dataclass
class _Entry:
    graph: _core.Graph
    inputs: list[np.ndarray]  # pinned staging the graph's H2D copies read
    outputs: list[np.ndarray]  # pinned arrays the graph's D2H copies write
    structure: Any  # how the function's results nest (a single array, a tuple or a list)
    replay: Callable[[], None]
    synchronize: Callable[[], None]
    keep: list[Any] = field(default_factory=list)
    signature: tuple = ()  # ((shape, dtype), ...) of the inputs it was captured for
    fast: tuple | None = None  # _fast_path's


def _fast_path(entry: _Entry, stream: _core.Stream) -> tuple | None:
    """_GraphFunctionBase._set_fast_path's arguments for a hit of a one-input call answered in C++ (Note [Graph
    function calls in C]): (staging, graph, stream, result); None where it does not apply (several inputs, inputs
    for the host copy threads, list results, which are new lists per call)."""
    if len(entry.inputs) != 1 or entry.inputs[0].nbytes >= _PARALLEL_COPY_BYTES or isinstance(entry.structure, list):
        return None
    result = entry.outputs[0] if entry.structure is None else entry.structure(entry.outputs)  # a tuple: immutable
    return entry.inputs[0], entry.graph, stream, result


def _flatten(result: Any) -> tuple[list[Any], Any]:
    if isinstance(result, (tuple, list)):
        return list(result), type(result)
    return [result], None


class GraphFunction(_core._GraphFunctionBase):
    """A function whose GPU work replays as a CUDA graph; see :func:`graph_function`.

    A call like the previous one (one NumPy input of the same shape and dtype) is answered by compiled code;
    every other call takes the general path: the graph cached for its inputs' shapes and dtypes, or a new
    capture. Calls from several threads take turns."""
    # This class must not define __call__, which would hide the compiled base's (Note [Graph function calls in C]).

    def __init__(self, function: Callable[..., Any], *, max_graphs: int = 8, stream: _core.Stream | None = None,
                 copy: bool = True, graph_memory: bool = False) -> None:
        if not callable(function):
            raise TypeError("graph_function wraps a callable that takes device arrays and returns device arrays")
        graphs = GraphCache("graph function", function, "input shapes and dtypes", max_graphs)
        super().__init__()
        functools.update_wrapper(self, function)
        self._function = function
        self._stream = stream
        self._copy = copy
        self._graph_memory = graph_memory
        self._graphs = graphs
        self._last: _Entry | None = None  # the most recent entry (moved to the cache's end already)

    @property
    def stream(self) -> _core.Stream:
        """The stream replays run on (a private non-blocking stream unless one was given)."""
        if self._stream is None:
            self._stream = _core.Stream(blocking=False)
        return self._stream

    def cache_info(self) -> dict[str, int]:
        """Graphs held, and the hits, misses and evictions of the per-signature cache."""
        return self._graphs.info(hits=self._graphs.stats["hits"] + self._fast_hits)

    def graph_for(self, *arrays: Any) -> _core.Graph:
        """The graph used for inputs like ``arrays`` (capturing it if needed), e.g. to draw it."""
        inputs = [np.asarray(a) for a in arrays]
        return self._in_turn(self._entry, self._key(inputs), inputs).graph  # may capture: between calls

    @staticmethod
    def _key(inputs: Any) -> tuple:
        return tuple([(value.shape, value.dtype) for value in inputs])

    def _call(self, *arrays: Any, copy: bool | None = None) -> Any:
        """Every call the compiled base does not answer itself (see the class's docstring)."""
        # The general path (measured: each line here costs tens to hundreds of ns on a 1 KB call): NumPy arrays are
        # taken as they are (np.copyto copies any layout), and a call like the previous one is recognized by
        # comparing shapes and dtypes in place, builtin dtypes by identity, without building a cache key.
        inputs = arrays
        for value in arrays:
            if type(value) is not np.ndarray:
                inputs = [np.asarray(a) for a in arrays]
                break
        entry = self._last
        if entry is not None and len(entry.signature) == len(inputs):
            for (shape, dtype), value in zip(entry.signature, inputs):
                if value.shape != shape or (value.dtype is not dtype and value.dtype != dtype):
                    entry = None
                    break
        else:
            entry = None
        if entry is None:
            entry = self._entry(self._key(inputs), inputs)
        else:
            self._graphs.stats["hits"] += 1
        for staging, value in zip(entry.inputs, inputs):  # as many: the signature matched
            # The previous replay has finished reading staging: it was waited for. Large contiguous inputs are
            # copied by cuweave's host copy threads (one thread moves about a fifth of what the link carries).
            if value.nbytes >= _PARALLEL_COPY_BYTES and value.flags.c_contiguous:
                _core.host_copy(staging, value)
            else:
                np.copyto(staging, value)
        entry.replay()
        entry.synchronize()
        if (self._copy if copy is None else copy):
            results = [o.copy() for o in entry.outputs]
        else:
            results = entry.outputs
        return results[0] if entry.structure is None else entry.structure(results)

    def _entry(self, key: tuple, inputs: Any) -> _Entry:
        entry = self._graphs.get(key)
        if entry is not None:
            self._use(entry)
            return entry
        for value in inputs:
            if value.dtype.hasobject:
                raise TypeError("graph functions take numeric NumPy arrays, not arrays of Python objects")
        entry = self._build(inputs)
        entry.signature = key
        entry.fast = _fast_path(entry, self.stream)
        self._graphs.add(key, entry, stacklevel=2)
        self._use(entry)
        return entry

    def _use(self, entry: _Entry) -> None:
        self._last = entry
        if entry.fast is None:
            self._clear_fast_path()
        else:
            self._set_fast_path(*entry.fast, fresh=self._copy)

    def _build(self, inputs: list[np.ndarray]) -> _Entry:
        stream = self.stream
        staging = [_core.pinned_empty(value.shape, value.dtype) for value in inputs]
        device_inputs = [_core.empty(value.shape, value.dtype, stream=stream) for value in inputs]
        with capture(stream, graph_memory=self._graph_memory) as cap:
            for device, host in zip(device_inputs, staging, strict=True):
                _core.copy_async(device, host, by_kernel=host.nbytes in _KERNEL_COPY_IN_BYTES)
            results, structure = _flatten(self._function(*device_inputs))
            outputs = []
            for result in results:
                array = _core.asarray(result)
                host = _core.pinned_empty(array.shape, array.dtype)
                _core.copy_async(host, array, by_kernel=host.nbytes <= _KERNEL_COPY_OUT_MOST_BYTES)
                outputs.append(host)
        assert cap.graph is not None
        cap.graph.upload(stream)
        replay = functools.partial(cap.graph.replay, stream)
        return _Entry(cap.graph, staging, outputs, structure, replay, stream.synchronize, keep=[device_inputs])


def graph_function(function: Callable[..., Any] | None = None, *, max_graphs: int = 8,
                   stream: _core.Stream | None = None, copy: bool = True, graph_memory: bool = False) -> Any:
    """Wraps ``function`` (device arrays in, device array or tuple/list of them out) so that calling it with
    NumPy arrays replays a CUDA graph and returns NumPy arrays.

    Each call copies the inputs into pinned staging bound into the graph, replays it on ``stream`` (default:
    a private stream), waits, and returns the results as new NumPy arrays; with ``copy=False`` (here or per
    call), the pinned output arrays the graph writes, which the next call overwrites (faster: no copy of the
    results, and no new memory per call). Results equal those of running ``function``
    eagerly, bit for bit. Each new input signature (shapes and dtypes) is captured once into a cache of
    ``max_graphs`` graphs, least recently used first out, with a ``GraphCacheWarning`` on eviction.

    ``graph_memory=True``: the device arrays the function makes are the graph's own memory (as with
    :class:`cuweave.capture`'s ``graph_memory``): its temporaries hold no memory of their own between calls, but
    share memory CUDA keeps for all graphs, which :meth:`cuweave.Device.trim_graph_memory` gives back.

    The function must only queue GPU work (no synchronize, no reading results on the host): its body runs
    once per signature, during capture. Usable as a decorator, with or without arguments.
    """
    options = {"max_graphs": max_graphs, "stream": stream, "copy": copy, "graph_memory": graph_memory}
    if function is None:
        return lambda f: GraphFunction(f, **options)
    return GraphFunction(function, **options)
