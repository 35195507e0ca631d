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

Note [PyTorch under a weave]: inside `cuweave.weave()` the same mode places each PyTorch operator on this
thread as the weave places its own operations (Note [Weaving]), by the same reads and writes: the operator
runs with the chosen stream as PyTorch's current stream, so its outputs come from the caching allocator's
pool of that stream, and each tensor it touches is told `record_stream` of that stream, so that the
allocator does not hand its memory out again before the chosen stream has passed this use. An operator
with no CUDA tensor, or one on another device than the weave's, runs as it would outside the block.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from cuweave import _core

_attached_mode: Any = None
_trace_hooks_installed = False
_streams: dict[int, _core.Stream] = {}  # CUDA handle -> the adoption the sanitizer sees it through
_torch_streams: dict[int, Any] = {}  # cuweave stream handle -> PyTorch's stream object for it
_attached_count = 0  # sanitize() and weave() blocks on this thread that asked for the mode
_ALLOCATES_ONLY = frozenset({"empty.memory_format", "empty_strided.default", "empty_like.default"})


def _stream(handle: int) -> _core.Stream:
    stream = _streams.get(handle)
    if stream is None:
        stream = _streams[handle] = _core.Stream.from_external(handle)
    return stream


def _span(tensor: Any) -> tuple[int, int]:
    """The address and byte count from a tensor's lowest to its highest element."""
    low = high = 0
    for extent, stride in zip(tensor.shape, tensor.stride()):
        reach = (extent - 1) * stride * tensor.element_size()
        if reach < 0:
            low += reach
        else:
            high += reach
    return tensor.data_ptr() + low, high - low + tensor.element_size()


def _tensors(value: Any, torch: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_cuda and value.numel() > 0 else []
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item, torch)]
    return []


def _torch_stream(torch: Any, stream: _core.Stream) -> Any:
    """PyTorch's view of a cuweave stream (cached by handle; the legacy default stream is PyTorch's default)."""
    handle = stream.handle
    found = _torch_streams.get(handle)
    if found is None:
        if stream.kind == "legacy_default":
            found = torch.cuda.default_stream(stream.device)
        else:
            found = torch.cuda.ExternalStream(handle, device=torch.device("cuda", stream.device))
        _torch_streams[handle] = found
    return found


def _make_mode(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class CuweaveMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            kwargs = kwargs or {}
            sanitizing, weaving = _core.sanitizer_enabled(), _core.weave_active()
            if not sanitizing and not weaving:
                return func(*args, **kwargs)
            schema = func._schema
            ranges, touched = [], []
            by_name = dict(zip((a.name for a in schema.arguments), args))
            by_name.update(kwargs)
            for argument in schema.arguments:
                writes = argument.alias_info is not None and argument.alias_info.is_write
                for tensor in _tensors(by_name.get(argument.name), torch):
                    ranges.append((*_span(tensor), writes))
                    touched.append(tensor)
            name = f"torch {func.__name__}"
            placed = None
            if weaving and ranges:
                placed = _place(torch, ranges, touched)
            if placed is not None:
                with torch.cuda.stream(placed[1]):
                    return _run(torch, func, schema, args, kwargs, name, ranges, sanitizing, placed[0])
            return _run(torch, func, schema, args, kwargs, name, ranges, sanitizing, None)

    return CuweaveMode()


def _place(torch: Any, ranges: list, touched: list) -> tuple[_core.Stream, Any] | None:
    """Places a PyTorch operator in the active weave: (cuweave stream, PyTorch stream), or None when its
    tensors are not on the weave's device (it then runs on PyTorch's current stream, unordered by the weave)."""
    device = touched[0].device.index
    if any(t.device.index != device for t in touched) or _core.current_stream().device != device:
        return None
    stream = _core.weave_place(ranges)
    torch_stream = _torch_stream(torch, stream)
    for tensor in touched:
        tensor.record_stream(torch_stream)  # its block is not reused before this stream passes this use
    return stream, torch_stream


def _run(torch: Any, func: Any, schema: Any, args: tuple, kwargs: dict, name: str, ranges: list, sanitizing: bool,
         woven: _core.Stream | None) -> Any:
    if sanitizing and ranges:
        device = None if woven is None else woven.device
        _core.sanitizer_foreign_operation(_stream(torch.cuda.current_stream(device).cuda_stream), name, ranges)
    out = func(*args, **kwargs)
    if func.__name__ not in _ALLOCATES_ONLY and all(r.alias_info is None for r in schema.returns):
        made = _tensors(out if isinstance(out, (list, tuple)) else [out], torch)
        if made:
            spans = [_span(t) for t in made]
            if woven is not None:
                for begin, size in spans:  # new memory of the chosen stream's pool: its users elsewhere wait
                    _core.weave_allocated(begin, size, woven)
            if sanitizing:
                stream = _stream(torch.cuda.current_stream(made[0].device).cuda_stream)
                _core.sanitizer_foreign_operation(stream, name, [(*span, True) for span in spans])
    return out


def _install_trace_hooks(torch: Any) -> None:
    global _trace_hooks_installed
    if _trace_hooks_installed:
        return
    from torch.cuda import _gpu_trace

    def when_on(hook):  # noqa: ANN001, ANN202
        def call(*args: int) -> None:
            if _attached_mode is not None and _core.sanitizer_enabled():
                hook(*args)

        return call

    torch._C._activate_gpu_trace()
    _gpu_trace.register_callback_for_event_record(
        when_on(lambda event, stream: _core.sanitizer_foreign_event_recorded(event, _stream(stream))))
    _gpu_trace.register_callback_for_event_wait(
        when_on(lambda event, stream: _core.sanitizer_foreign_stream_waited_event(_stream(stream), event)))
    _gpu_trace.register_callback_for_event_synchronization(when_on(_core.sanitizer_foreign_event_synchronized))
    _gpu_trace.register_callback_for_stream_synchronization(
        when_on(lambda stream: _core.sanitizer_foreign_stream_synchronized(_stream(stream))))
    _gpu_trace.register_callback_for_device_synchronization(
        when_on(lambda: _core.sanitizer_foreign_device_synchronized(torch.cuda.current_device())))
    _trace_hooks_installed = True


def attach() -> bool:
    """Called as a sanitize() or weave() block begins: hooks PyTorch in if this process imported it and has a
    GPU. Returns whether this call attached (the caller then detaches); nested blocks share one mode. A
    PyTorch whose hooks fail to attach is said in a RuntimeWarning, and cuweave's own work goes on."""
    global _attached_mode, _attached_count
    if _attached_mode is not None:
        _attached_count += 1
        return True
    torch = sys.modules.get("torch")
    if torch is None or _core.backend_name() != "cuda":
        return False
    try:
        if not torch.cuda.is_available():
            return False
        _install_trace_hooks(torch)
        mode = _make_mode(torch)
        mode.__enter__()
    except Exception as error:  # noqa: BLE001 - another library's internals: say it, keep cuweave's checks
        warnings.warn(f"cuweave: PyTorch's operations are not checked or woven ({error!r})", RuntimeWarning,
                      stacklevel=3)
        return False
    _attached_mode, _attached_count = mode, 1
    return True


def detach() -> None:
    """Undoes an attach() that returned True (the block that attached ends)."""
    global _attached_mode, _attached_count
    if _attached_mode is None:
        return
    _attached_count -= 1
    if _attached_count == 0:
        mode, _attached_mode = _attached_mode, None
        mode.__exit__(None, None, None)
