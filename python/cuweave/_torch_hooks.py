"""PyTorch's operators under cuweave: told to the stream-race sanitizer, and placed by cuweave.weave().

Note [PyTorch under the sanitizer]: while the sanitizer is on, a TorchDispatchMode sees every PyTorch
operator called on this thread and reports it as an operation on PyTorch's current stream: the CUDA
tensors its schema marks as written are writes, the other tensor arguments reads, and the tensors it
returns (new memory from PyTorch's allocator) writes; views and `empty` touch nothing. PyTorch's GPU
trace reports its event records and waits, and its stream, event and device synchronizes, as the
happens-before order they make. So a PyTorch kernel racing with a cuweave kernel on one tensor is named
with both call sites, and PyTorch work that PyTorch ordered is clean. PyTorch is never imported for this:
the hooks attach when a sanitize() block (or CUWEAVE_SANITIZE at cuweave's import) turns the sanitizer on
in a process that imported it, until that block ends, and the mode sees the thread that turned it on
(PyTorch's dispatch modes are per thread).

PyTorch's ordering is taken as the ordering, as its own CUDA sanitizer (CSAN) takes it: PyTorch reports every
synchronize it makes, so its streams are ordered by what it reports and never by being found idle (Note
[Foreign synchronizes]), and a race is named whether or not the earlier kernel happened to have finished.
Unlike CSAN, the caching allocator's reuse is checked, not trusted (Note [Reused blocks]): a tensor it hands out
(any operator's new output, `empty` included) on the stream whose pool its block went back to keeps the block's
history, and `record_stream` (seen as an operator) and the allocator's frees (its GPU trace) say what the reuse
is ordered after. Views (operators that return an alias and write nothing) and `record_stream` touch no memory
and are not operations. An event PyTorch destroys forgets its record, so
that a new event with the same CUDA handle orders nothing until it is recorded.

Pinned CPU tensors are followed too (Note [Host operations of another library] in sanitizer.cpp): a copy between
one and the device (`non_blocking=True` returns before it runs) touches its bytes on the copy's stream; a CPU
operator, `Tensor.numpy` or `Tensor.tolist` on one is the host's read or write, ordered after the copy only by a
synchronize; a pinned tensor PyTorch's host allocator hands out starts afresh (the allocator waits for the
copies that used the block before). Pageable CPU memory is left out: a copy to or from it is done when the call
returns. Operators a backward pass runs on PyTorch's autograd thread are named at the backward() call.

Note [PyTorch's CUDA graphs under the sanitizer]: work PyTorch captures (torch.cuda.graph, make_graphed_callables:
a torch.cuda.CUDAGraph between capture_begin and capture_end) runs at each replay, on the stream current then, not
where it is queued (Note [Work another library captures]). So the mode keeps what the captured operators read and
write as the graph's, and each replay is one operation on PyTorch's current stream with those reads and writes:
a replay racing with other work is named at the replay's line, and the capture itself reports nothing.

Note [PyTorch under a weave]: inside `cuweave.weave()` each PyTorch operator on this thread is placed as the weave
places its own operations (Note [Weaving]), by the same reads and writes: by a C++ hook in PyTorch's dispatcher
where it is built and the sanitizer is off (Note [PyTorch's operators placed from its dispatcher] in
cuweave/_torch_native), else by the same mode, as described here. The operator runs with the chosen stream as
PyTorch's current stream, so its outputs come from the caching allocator's pool of that stream, and each tensor it
touches is told `record_stream` of that stream, so that the allocator does not hand its memory out again before
the chosen stream has passed this use. An operator with no CUDA tensor, or one on another device than the
weave's, runs as it would outside the block.

Under a capture (`cuweave.woven`, or a weave inside `cuweave.capture()`) the operator runs at each replay, on
whatever stream replays the graph, not on the stream it was placed on: `record_stream` of that stream would order
nothing (and the capture's own stream may be gone when the tensor is freed, where PyTorch's allocator then fails
to record its event). So the tensors a captured operator touches, the ones it returns included, live as long as
the graph instead (its last replay done), and the sanitizer is told each operator on the stream it was placed on,
so that the graph's footprint holds PyTorch's reads and writes.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
from typing import Any, NamedTuple

from cuweave import _core, _torch_native
from cuweave._import_watch import ImportWatch
from cuweave._spans import strided_span
from cuweave.errors import CaptureError

_foreign = _core.sanitizer.foreign  # what another library did, told to the sanitizer
_kept_by_capture = _core.weave.kept_by_capture

_attached_mode: Any = None
_trace_hooks_installed = False
# Whether PyTorch said it has a GPU: once it has, it has for good, and asking again cost each weave about 1 µs.
_torch_has_gpu = False
_streams: dict[int, _core.Stream] = {}  # CUDA handle -> the adoption the sanitizer sees it through


class _TorchStream(NamedTuple):
    """PyTorch's view of a cuweave stream: its stream object, and the (stream_id, device_index, device_type) that
    torch._C's calls take."""

    stream: Any
    ids: tuple[int, int, int]


_torch_streams: dict[int, _TorchStream] = {}  # cuweave stream handle -> PyTorch's view of it
_attached_count = 0  # sanitize() and weave() blocks on this thread that asked for the mode


class _NativeOnThread(threading.local):
    """The C++ hook while it handles this thread's PyTorch operators (Note [PyTorch's operators placed from its
    dispatcher] and Note [PyTorch's operators checked from its dispatcher] in cuweave/_torch_native), and the weave
    and sanitize blocks on the thread that use it."""

    module: Any = None
    count = 0


_native = _NativeOnThread()
_native_checks = 0  # sanitize blocks, on any thread, whose PyTorch operators the C++ hook checks
_warned_capturing = False
# What the operators captured so far into the torch.cuda.CUDAGraph being captured read and write, by (address,
# bytes): whether written; None while no capture of PyTorch's is under way.
_graph_footprint: dict[tuple[int, int], bool] | None = None
_ALLOCATES_ONLY = frozenset({"empty.memory_format", "empty_strided.default", "empty_like.default"})
# record_stream's Tensor(a!) is the allocator's note, not a write; is_pinned reads no bytes.
_TOUCHES_NOTHING = frozenset({"record_stream.default", "is_pinned.default"})


def _stream(handle: int, torch: Any = None, device: int | None = None) -> _core.Stream | None:
    """cuweave's adoption of a stream PyTorch uses, made at first sight. It is kept where `torch` is given and
    `handle` is PyTorch's current stream on `device` (None: the current device), one of PyTorch's own streams,
    which it never destroys. A torch.cuda.ExternalStream's handle (a cuweave or CuPy stream), or one a GPU trace
    callback names (which stream object it belongs to is unknown), is adopted for the one use: its owner may
    destroy it, and a kept adoption would have the sanitizer and traces ask CUDA about a destroyed handle, which
    crashes (cuweave closes its adoptions as it closes a stream of its own; a kept one would then be closed).
    None for a stream first met while it takes part in a capture that it did not begin (CUDA refuses to describe
    it, and Stream.from_external refuses before asking, which would invalidate the capture): its work then goes
    unchecked, as a RuntimeWarning says once."""
    stream = _streams.get(handle)
    if stream is None or stream.closed:
        try:
            stream = _core.Stream.from_external(handle)
        except CaptureError:
            global _warned_capturing
            if not _warned_capturing:
                _warned_capturing = True
                warnings.warn("cuweave: PyTorch's work on a stream first met inside a capture that the stream did not "
                              "begin is not checked by the sanitizer (run one operation on that stream before the "
                              "capture to have it checked)", RuntimeWarning, stacklevel=2)
            return None
        if torch is not None and handle not in _torch_streams and not _external(torch, handle, device):
            _streams[handle] = stream
        _foreign.synchronizes_reported(stream)  # PyTorch's GPU trace tells each one
    return stream


def _external(torch: Any, handle: int, device: int | None) -> bool:
    """Whether PyTorch's current stream on `device`, whose handle is `handle`, is a torch.cuda.ExternalStream
    (PyTorch numbers an external stream by its handle, and its own streams by their pool and index)."""
    return handle != 0 and torch.cuda.current_stream(device).stream_id == handle


def _span(tensor: Any) -> tuple[int, int]:
    """The address and byte count from a tensor's lowest to its highest element."""
    if tensor.is_contiguous():  # most tensors: a third of the strided walk's cost, for every operator
        return tensor.data_ptr(), tensor.nbytes
    size = tensor.element_size()
    return strided_span(tensor.data_ptr(), tensor.shape, [stride * size for stride in tensor.stride()], size)


def _tensors(value: Any, torch: Any, on_host: list | None = None, writes: bool = False) -> list[Any]:
    """The CUDA tensors in an argument; its CPU tensors (not 0-d, which are scalars), with `writes`, go to
    `on_host` where given."""
    if isinstance(value, torch.Tensor):
        if value.is_cuda:
            return [value] if value.numel() > 0 else []
        if on_host is not None and value.dim() > 0 and value.numel() > 0:
            on_host.append((value, writes))
        return []
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item, torch, on_host, writes)]
    return []


# Whether a stream has touched pinned host memory: until then, CPU operators need no check (nor pinned tests).
_host_bytes_on_streams = False


def _host_bytes_seen() -> bool:
    """Whether a stream has touched pinned host memory, as the mode or the C++ hook saw."""
    module = _torch_native.built()
    return _host_bytes_on_streams or (module is not None and module.host_bytes_on_streams())


def _note_host_bytes_on_streams() -> None:
    global _host_bytes_on_streams
    _host_bytes_on_streams = True
    module = _torch_native.built()
    if module is not None:
        module.note_host_bytes_on_streams()


def _host_accesses(operator: _Operator, ranges: list, on_host: list) -> None:
    """An operator's pinned CPU tensors (Note [Host operations of another library] in sanitizer.cpp): beside CUDA
    tensors, a copy whose stream touches their bytes (added to `ranges`); alone, the host's own reads and writes,
    checked once a stream has touched pinned memory. Pageable memory is left out: a copy to or from it is done
    when the call returns."""
    if not ranges and not _host_bytes_seen():
        return
    pinned = [(*_span(tensor), writes) for tensor, writes in on_host if tensor.is_pinned()]
    if not pinned:
        return
    if ranges:
        ranges.extend(pinned)
        _note_host_bytes_on_streams()
    else:
        _foreign.host_operation(operator.name, pinned)


def _torch_stream(torch: Any, stream: _core.Stream) -> _TorchStream:
    """PyTorch's view of a cuweave stream (cached by handle; the legacy default stream is PyTorch's default)."""
    handle = stream.handle
    found = _torch_streams.get(handle)
    if found is None:
        if stream.kind == "legacy_default":
            made = torch.cuda.default_stream(stream.device)
        else:
            made = torch.cuda.ExternalStream(handle, device=torch.device("cuda", stream.device))
        found = _torch_streams[handle] = _TorchStream(made, (made.stream_id, made.device_index, made.device_type))
    return found


_made_mode: Any = None


def _mode_of(torch: Any) -> Any:
    """The dispatch mode, made at the first block that attaches and entered again by each later one: making its
    class at every block cost more than a short block's work."""
    global _made_mode
    if _made_mode is None:
        _made_mode = _make_mode(torch)
    return _made_mode


def _make_mode(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    get_device = torch._C._cuda_getDevice
    get_stream, set_stream = torch._C._cuda_getCurrentStream, torch._C._cuda_setStream
    sanitizer_enabled, weave_active = _core.sanitizer.enabled, _core.weave.active
    placing_device = _core.weave.placing_device
    tensor_class = torch.Tensor

    class CuweaveMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            kwargs = kwargs or {}
            sanitizing = sanitizer_enabled()
            # Where the C++ hook is attached, it places what it can (Note [PyTorch's operators placed from its
            # dispatcher]): the mode places the rest, under the sanitizer or a capture.
            weaving = weave_active() and (_native.module is None or placing_device() < 0)
            if not sanitizing and not weaving:
                return func(*args, **kwargs)
            operator = _operator(func)
            if operator.touches_nothing:
                if sanitizing and func.__name__ == "record_stream.default":
                    _stream_recorded(torch, *args, **kwargs)
                return func(*args, **kwargs)
            ranges, touched, on_host = [], [], [] if sanitizing else None
            given = len(args)
            for index, name, writes in operator.tensor_arguments:
                value = args[index] if index < given else kwargs.get(name)
                if value.__class__ is tensor_class and value.is_cuda:  # most arguments: no walk of lists
                    if value.numel():
                        ranges.append((*_span(value), writes))
                        touched.append(value)
                    continue
                for tensor in _tensors(value, torch, on_host, writes):
                    ranges.append((*_span(tensor), writes))
                    touched.append(tensor)
            if on_host:
                _host_accesses(operator, ranges, on_host)
            if not weaving or not ranges:
                return _run(torch, func, operator, args, kwargs, ranges, sanitizing, None)
            placed = _place(torch, ranges, touched, sanitizing)
            if placed is None:
                return _run(torch, func, operator, args, kwargs, ranges, sanitizing, None)
            ids = placed.torch_stream.ids
            if get_device() != ids[1]:  # torch.cuda.stream() restores both devices' current streams
                with torch.cuda.stream(placed.torch_stream.stream):
                    return _run(torch, func, operator, args, kwargs, ranges, sanitizing, placed)
            # PyTorch's current stream set and restored through the calls torch.cuda.stream() makes, without
            # its Python objects (a StreamContext, two Stream objects): about as costly as the operator.
            previous = get_stream(ids[1])
            set_stream(*ids)
            try:
                return _run(torch, func, operator, args, kwargs, ranges, sanitizing, placed)
            finally:
                set_stream(*previous)

    return CuweaveMode()


class _Operator(NamedTuple):
    """What the hooks need of an operator's schema, read once per operator rather than at every call."""

    name: str  # "torch fill_.Scalar", as reports name it
    touches_nothing: bool  # a view, or record_stream: no kernel runs
    # Each argument that can hold a tensor (scalars and sizes cannot): its position, name, and whether the schema
    # marks it written.
    tensor_arguments: tuple[tuple[int, str, bool], ...]
    returns_new: bool  # every return is new memory from the allocator (no alias of an argument)
    allocates_only: bool  # empty and its kin: new memory, nothing written
    copies: bool  # _to_copy: without non_blocking, a copy between the host and a device synchronizes inside


_operators: dict[Any, _Operator] = {}


def _operator(func: Any) -> _Operator:
    found = _operators.get(func)
    if found is None:
        schema = func._schema
        found = _operators[func] = _Operator(
            name=f"torch {func.__name__}",
            touches_nothing=func.__name__ in _TOUCHES_NOTHING or _is_view(schema),
            tensor_arguments=tuple((index, a.name, a.alias_info is not None and a.alias_info.is_write)
                                   for index, a in enumerate(schema.arguments) if "Tensor" in str(a.type)),
            returns_new=all(r.alias_info is None for r in schema.returns),
            allocates_only=func.__name__ in _ALLOCATES_ONLY,
            copies=func.__name__ == "_to_copy.default")
    return found


def _is_view(schema: Any) -> bool:
    """An operator that returns aliases of its inputs and writes none of them: no kernel runs."""
    return bool(schema.returns) and all(r.alias_info is not None for r in schema.returns) and not any(
        a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


class _Placed(NamedTuple):
    """Where the weave placed a PyTorch operator."""

    stream: _core.Stream
    torch_stream: _TorchStream  # PyTorch's view of `stream`
    captured: bool  # `stream` takes part in a capture: the tensors live as long as its graph


def _place(torch: Any, ranges: list, touched: list, sanitizing: bool) -> _Placed | None:
    """Places a PyTorch operator in the active weave, or None when its tensors are not on the weave's device (it
    then runs on PyTorch's current stream, unordered by the weave)."""
    device = touched[0].get_device()
    for tensor in touched[1:]:
        if tensor.get_device() != device:
            return None
    if _core.current_stream().device != device:
        return None
    stream = _core.weave.place(ranges)
    torch_stream = _torch_stream(torch, stream)
    if _kept_by_capture(stream, touched):
        return _Placed(stream, torch_stream, True)
    chosen = torch_stream.stream
    for tensor in touched:
        tensor.record_stream(chosen)  # its block is not reused before this stream passes this use
        if sanitizing:  # (made inside the mode, the call is not seen by it)
            _foreign.stream_recorded(tensor.untyped_storage().data_ptr(), stream)
    return _Placed(stream, torch_stream, False)


def _run(torch: Any, func: Any, operator: _Operator, args: tuple, kwargs: dict, ranges: list, sanitizing: bool,
         placed: _Placed | None) -> Any:
    woven = None if placed is None else placed.stream
    if sanitizing and ranges:
        _tell(torch, None, operator.name, ranges, woven)
    out = func(*args, **kwargs)
    if operator.returns_new:
        made_on_host = [] if sanitizing and (ranges or _host_bytes_seen()) else None
        made = _tensors(out if isinstance(out, (list, tuple)) else [out], torch, made_on_host, True)
        if made_on_host:
            _host_made(torch, operator, bool(ranges), made_on_host)
        if made:
            spans = [_span(t) for t in made]
            if woven is not None:
                for begin, size in spans:  # new memory of the chosen stream's pool: its users elsewhere wait
                    _core.weave.allocated(begin, size, woven)
                if placed.captured:
                    _kept_by_capture(woven, made)
            if sanitizing:
                # A block handed out again is checked against its earlier users; under a capture, the graph's
                # replays are checked against them instead (the capture keeps the block).
                allocating = None if placed is not None and placed.captured else (
                    woven or _current_stream(torch, made[0].device.index))
                if allocating is not None:
                    for begin, size in spans:
                        _foreign.allocated(begin, size, allocating)
                if not operator.allocates_only:
                    _tell(torch, made[0].device.index, operator.name, [(*span, True) for span in spans], woven)
        if operator.copies and sanitizing and not kwargs.get("non_blocking", False):
            _copy_synchronized(torch, args[0], out, woven)
    return out


def _copy_synchronized(torch: Any, source: Any, made: Any, woven: _core.Stream | None) -> None:
    """A copy between the host and a device without non_blocking synchronized its stream after the copy, before its
    new output was told: the synchronize is told again after it (Note [Blocking copies] in
    cuweave/_torch_native/hook.cpp). Not for a CUDA output that is not contiguous in another dtype, which PyTorch
    writes after the synchronize."""
    if made.is_cuda and not source.is_cuda and (made.is_contiguous() or made.dtype == source.dtype):
        device = made.device.index
    elif source.is_cuda and not made.is_cuda:
        device = source.device.index
    else:
        return
    stream = woven or _current_stream(torch, device)
    if stream is not None:
        _foreign.stream_synchronized(stream)


def _host_made(torch: Any, operator: _Operator, from_device: bool, made: list) -> None:
    """New CPU tensors an operator returned: a pinned one's block is handed out by PyTorch's host allocator once
    the copies that used it before are done (it waits for their events), so its history goes; made by a copy from
    the device (`to("cpu", non_blocking=True)`), the copy's stream writes it."""
    pinned = [_span(tensor) for tensor, _ in made if tensor.is_pinned()]
    for begin, size in pinned:
        _core.sanitizer.host_allocated(begin, size)
    if pinned and from_device:
        _note_host_bytes_on_streams()
        _tell(torch, None, operator.name, [(*span, True) for span in pinned])


def _stream_recorded(torch: Any, tensor: Any, stream: Any) -> None:
    """tensor.record_stream(stream): the caching allocator reuses the tensor's block only after `stream`'s work
    up to the tensor's free."""
    if not isinstance(tensor, torch.Tensor) or not tensor.is_cuda:
        return
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:  # the dispatcher's generic torch.Stream
        handle = torch.cuda.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                                   device_type=stream.device_type).cuda_stream
    adopted = _stream(handle)
    if adopted is not None:
        _foreign.stream_recorded(tensor.untyped_storage().data_ptr(), adopted)


def _tell(torch: Any, device: int | None, name: str, ranges: list, woven: _core.Stream | None = None) -> None:
    """Tells the sanitizer an operator's reads and writes on the stream a weave placed it on (`woven`), else on
    PyTorch's current stream on `device` (None: the current device), or keeps them as the graph's while PyTorch
    captures (Note [PyTorch's CUDA graphs under the sanitizer])."""
    if _graph_footprint is not None and torch.cuda.is_current_stream_capturing():
        for begin, size, writes in ranges:
            _graph_footprint[(begin, size)] = writes or _graph_footprint.get((begin, size), False)
        return
    stream = woven if woven is not None else _current_stream(torch, device)
    if stream is not None:
        # PyTorch reports its synchronizes: its work, on the default streams too, is never taken as waited for.
        _foreign.operation(stream, name, ranges, synchronizes_reported=True)


def _current_stream(torch: Any, device: int | None) -> _core.Stream | None:
    """cuweave's adoption of PyTorch's current stream on `device` (None: the current device); see _stream."""
    return _stream(_current_stream_handle(torch, device), torch, device)


def _current_stream_handle(torch: Any, device: int | None) -> int:
    """PyTorch's current stream on `device` (None: the current device), as a CUDA handle."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:  # a PyTorch without it: the public way, which makes a Stream object each time
        return torch.cuda.current_stream(device).cuda_stream
    return raw(torch.cuda.current_device() if device is None else device)


# Tensor methods that read a CPU tensor's bytes on the host without an operator: the dispatcher never sees them.
_HOST_READS = ("numpy", "tolist")
_host_read_hooks_installed = False


def _install_host_read_hooks(torch: Any) -> None:
    """Wraps Tensor.numpy and Tensor.tolist, once: while a sanitizer is attached and a stream has touched pinned
    memory, reading a pinned tensor that way is checked as the host's read (Note [Host operations of another
    library] in sanitizer.cpp): the read of a GPU-to-CPU copy's result made before waiting for the copy."""
    global _host_read_hooks_installed
    if _host_read_hooks_installed:
        return
    for name in _HOST_READS:
        setattr(torch.Tensor, name, _checked_host_read(getattr(torch.Tensor, name), f"torch Tensor.{name}"))
    _host_read_hooks_installed = True


def _checked_host_read(method: Any, name: str) -> Any:
    @functools.wraps(method)
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        if (_checking() and _host_bytes_seen() and not self.is_cuda and self.numel() > 0
                and self.is_pinned()):
            _foreign.host_operation(name, [(*_span(self), False)])
        return method(self, *args, **kwargs)

    return read


def _install_trace_hooks(torch: Any) -> None:
    global _trace_hooks_installed
    if _trace_hooks_installed:
        return
    from torch.cuda import _gpu_trace

    def when_on(hook):  # noqa: ANN001, ANN202
        def call(*args: int) -> None:
            if _checking():
                hook(*args)

        return call

    def event_recorded(event: int, handle: int) -> None:
        stream = _stream(handle)
        if stream is not None:
            _foreign.event_recorded(event, stream)

    def stream_waited_event(event: int, handle: int) -> None:
        stream = _stream(handle)
        if stream is not None:
            _foreign.stream_waited_event(stream, event)

    def stream_synchronized(handle: int) -> None:
        stream = _stream(handle)
        if stream is not None:
            _foreign.stream_synchronized(stream)

    torch._C._activate_gpu_trace()
    _gpu_trace.register_callback_for_event_record(when_on(event_recorded))
    _gpu_trace.register_callback_for_event_wait(when_on(stream_waited_event))
    _gpu_trace.register_callback_for_event_synchronization(when_on(_foreign.event_synchronized))
    _gpu_trace.register_callback_for_event_deletion(when_on(_foreign.event_destroyed))
    _gpu_trace.register_callback_for_stream_synchronization(when_on(stream_synchronized))
    _gpu_trace.register_callback_for_memory_deallocation(when_on(_foreign.freed))
    _gpu_trace.register_callback_for_device_synchronization(
        when_on(lambda: _foreign.device_synchronized(torch.cuda.current_device())))
    # PyTorch runs these callbacks outside its operators too (a block freed at a del), where a race the C++ hook set
    # to be raised and Python has not raised yet would go off inside them, and PyTorch would drop it (and the
    # callbacks would not run): they run with it held back (Note [PyTorch's operators checked from its dispatcher]).
    for registry in vars(_gpu_trace).values():
        if not isinstance(registry, type) and callable(getattr(registry, "fire_callbacks", None)):
            registry.fire_callbacks = functools.partial(_core.call_holding_raised, registry.fire_callbacks)
    _install_graph_hooks(torch)
    _trace_hooks_installed = True


def _install_graph_hooks(torch: Any) -> None:
    """Wraps torch.cuda.CUDAGraph's capture and replay (Note [PyTorch's CUDA graphs under the sanitizer])."""
    graph_class = torch.cuda.CUDAGraph
    begin, end, replay = graph_class.capture_begin, graph_class.capture_end, graph_class.replay

    def capture_begin(self, *args, **kwargs):  # noqa: ANN001, ANN202
        global _graph_footprint
        begin(self, *args, **kwargs)
        self._cuweave_attached = attach_for_capture()  # the mode keeps the footprint, where the C++ hook checked
        _graph_footprint = {}

    def capture_end(self, *args, **kwargs):  # noqa: ANN001, ANN202
        global _graph_footprint
        footprint, _graph_footprint = _graph_footprint, None
        try:
            end(self, *args, **kwargs)
        finally:
            detach(self.__dict__.pop("_cuweave_attached", False))
        self._cuweave_footprint = [(address, size, writes) for (address, size), writes in (footprint or {}).items()]

    def replay_and_tell(self, *args, **kwargs):  # noqa: ANN001, ANN202
        footprint = getattr(self, "_cuweave_footprint", None)
        if footprint and _checking():
            _tell(torch, None, "torch CUDAGraph.replay", footprint)
        return replay(self, *args, **kwargs)

    graph_class.capture_begin, graph_class.capture_end, graph_class.replay = capture_begin, capture_end, replay_and_tell


def attach(weave: bool = False) -> Any:
    """Called as a sanitize() block, or with `weave` a weave() block, begins: hooks PyTorch in if this process has
    imported it and has a GPU, or, if PyTorch is not imported yet, as soon as it is (a program run by ``python -m
    cuweave sanitize`` imports it after the sanitizer is on; see _torch_imported). PyTorch's operators are placed
    and checked by the C++ hook once it is built (Note [PyTorch's operators placed from its dispatcher] and Note
    [PyTorch's operators checked from its dispatcher] in cuweave/_torch_native), else, and under a capture, by the
    dispatch mode: one of the two for all the blocks nested on a thread. Returns what the caller passes to detach()
    as its block ends, False when there is nothing to undo. A PyTorch whose hooks fail to attach is said in a
    RuntimeWarning, and cuweave's own work goes on."""
    global _attached_count
    if _attached_count == 0 and "torch" in sys.modules:
        if _native.count > 0:
            if not weave and not _begin_native_checks():
                return False
            _native.count += 1
            return "native" if weave else "native checks"
        # Under a capture (a woven function's weave) each operator is placed once, as the graph is made: the mode,
        # which keeps what it touches for the graph.
        module = None if _core.hook_steps_aside() else _native_hook()
        if module is not None:
            if not weave and not _begin_native_checks():
                return False
            _torch_native.attach(module)
            _native.module, _native.count = module, 1
            return "native" if weave else "native checks"
    if _attached_count > 0:
        _attached_count += 1
        return "mode"
    if "torch" not in sys.modules:
        _watch_for_torch()  # the backend is asked only then: cuweave's import must not choose it
    elif not _enter_mode(stacklevel=4):
        return False
    _attached_count = 1
    return "mode"


def _begin_native_checks() -> bool:
    """A sanitize block whose PyTorch operators the C++ hook checks begins: what PyTorch reports through its GPU trace
    (events, synchronizes, frees) and pinned tensors read without an operator are told to the sanitizer, as for the
    mode. False where PyTorch's hooks could not be installed (a RuntimeWarning says so)."""
    global _native_checks
    if _native_checks == 0:
        torch = sys.modules["torch"]
        try:
            _install_trace_hooks(torch)
            _install_host_read_hooks(torch)
        except Exception as error:  # noqa: BLE001 - another library's internals: say it, keep cuweave's checks
            warnings.warn(f"cuweave: PyTorch's operations are not checked ({error!r})", RuntimeWarning, stacklevel=4)
            return False
        if _host_bytes_on_streams:
            _torch_native.built().note_host_bytes_on_streams()
        # A backward pass runs on PyTorch's autograd thread: its operators are named at this thread's backward() call.
        _core._set_call_site_stand_in(threading.get_ident())
    _native_checks += 1
    return True


def _end_native_checks() -> None:
    global _native_checks
    _native_checks -= 1
    if _native_checks == 0 and _attached_mode is None:
        _core._set_call_site_stand_in(0)


def running_an_operator() -> bool:
    """Whether a PyTorch operator the C++ hook handles runs on this thread: the kernels it launches are checked as
    the operator's, and no Python frame of the hook's says so (the mode's frames do)."""
    module = _native.module
    return module is not None and module.running_an_operator()


def _checking() -> bool:
    """Whether the sanitizer checks PyTorch's work now (through the mode or the C++ hook)."""
    return (_attached_mode is not None or _native_checks > 0) and _core.sanitizer.enabled()


def attach_for_capture() -> Any:
    """Called as a capture begins on this thread (cuweave's, or PyTorch's torch.cuda.CUDAGraph): where the C++ hook
    handles PyTorch's operators, it pauses and the mode places and checks them while the capture lasts (keeping what
    they touch for the graph). Returns what the caller passes to detach() as the capture ends, False when there is
    nothing to undo."""
    module = _native.module
    if module is None:
        return False
    mode = _mode_of(sys.modules["torch"])
    module.pause()
    try:
        mode.__enter__()
    except BaseException:
        module.resume()
        raise
    return ("paused", module, mode)


def _native_hook(wait: bool = False) -> Any:
    """The C++ hook, where PyTorch has a GPU, cuweave runs on CUDA, the hook is built and, while the sanitizer is on,
    it checks; None otherwise (the first call starts its build; with `wait`, it waits for the build, saying so)."""
    global _torch_has_gpu
    if not _torch_has_gpu:
        _torch_has_gpu = sys.modules["torch"].cuda.is_available()
    if not _torch_has_gpu or _core.backend_name() != "cuda":
        return None
    if _core.sanitizer.enabled() and not _torch_native.checks():
        return None  # the mode checks (Note [PyTorch's operators checked from its dispatcher])
    module = _torch_native.hook()
    if module is None and wait and _torch_native.building():
        print("cuweave: compiling its hook in PyTorch's dispatcher for this PyTorch, once (later runs load it)",
              file=sys.stderr, flush=True)
        module = _torch_native.wait()
    return module


# Whether PyTorch imported inside a sanitized block waits for the C++ hook's first build (python -m cuweave sanitize,
# whose whole program would otherwise run under the Python mode): see wait_for_native_hook.
_waits_for_native_build = False


def wait_for_native_hook() -> None:
    """PyTorch imported from now on inside a sanitized block waits for the C++ hook's first build, rather than
    checking through the Python mode meanwhile: a whole program run under ``python -m cuweave sanitize`` then pays
    the build once (tens of seconds, on its first run for a PyTorch) instead of the mode's cost at every operator."""
    global _waits_for_native_build
    _waits_for_native_build = True


def _enter_mode(stacklevel: int) -> bool:
    global _attached_mode, _torch_has_gpu
    torch = sys.modules["torch"]
    try:
        if not _torch_has_gpu:
            _torch_has_gpu = torch.cuda.is_available()
        if not _torch_has_gpu or _core.backend_name() != "cuda":
            return False
        _install_trace_hooks(torch)
        _install_host_read_hooks(torch)
        mode = _mode_of(torch)
        mode.__enter__()
    except Exception as error:  # noqa: BLE001 - another library's internals: say it, keep cuweave's checks
        warnings.warn(f"cuweave: PyTorch's operations are not checked or woven ({error!r})", RuntimeWarning,
                      stacklevel=stacklevel)
        return False
    _attached_mode = mode
    # A backward pass runs on PyTorch's autograd thread: its operators are named at this thread's backward() call.
    _core._set_call_site_stand_in(threading.get_ident())
    return True


def detach(attached: Any = "mode") -> None:
    """Undoes what attach() or attach_for_capture() returned (its block ends): for the C++ hook, raises a failure
    it met meanwhile."""
    global _attached_mode, _attached_count
    if attached is False:
        return
    if isinstance(attached, tuple):  # a capture's: the mode, then the hook again
        _, module, mode = attached
        try:
            mode.__exit__(None, None, None)
        finally:
            module.resume()
        return
    if attached in ("native", "native checks"):
        if _native.count == 0:
            return
        if attached == "native checks":
            _end_native_checks()
        _native.count -= 1
        if _native.count == 0:
            module, _native.module = _native.module, None
            _torch_native.detach(module)
        return
    if _attached_count == 0:
        return
    _attached_count -= 1
    if _attached_count == 0:
        _stop_watching()
        mode, _attached_mode = _attached_mode, None
        if mode is _NATIVE_IN_PLACE:
            detach("native checks")
        elif mode is not None:
            if _native_checks == 0:
                _core._set_call_site_stand_in(0)
            mode.__exit__(None, None, None)


def _torch_imported(_module: Any) -> None:
    """PyTorch imported inside a sanitize() or weave() block (or after CUWEAVE_SANITIZE turned the sanitizer on):
    checked and placed from its first operator, on the thread that imported it, by the C++ hook where a build of it
    is at hand, else by the mode."""
    if _attached_count > 0 and _attached_mode is None and not _native_in_place_of_mode():
        _enter_mode(stacklevel=3)


# _attached_mode while the C++ hook stands in for the mode that blocks begun before PyTorch's import asked for.
_NATIVE_IN_PLACE = object()


def _native_in_place_of_mode() -> bool:
    global _attached_mode
    if _native.count > 0 or _core.hook_steps_aside():
        return False
    module = _native_hook(wait=_waits_for_native_build)
    if module is None or not _begin_native_checks():
        return False
    _torch_native.attach(module)
    _native.module, _native.count = module, 1
    _attached_mode = _NATIVE_IN_PLACE
    return True


# In sys.meta_path while a block is attached and PyTorch is not imported yet: one watch, made once (every weave
# block of a program without PyTorch starts and stops it).
_import_watch = ImportWatch("torch", _torch_imported)


def _watch_for_torch() -> None:
    _import_watch.start()


def _stop_watching() -> None:
    _import_watch.stop()
