"""PyTorch under the stream-race sanitizer: its kernels, events and synchronizes, told to cuweave's checks.

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
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from cuweave import _core

_attached_mode: Any = None
_trace_hooks_installed = False
_streams: dict[int, _core.Stream] = {}  # CUDA handle -> the adoption the sanitizer sees it through
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


def _make_mode(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class CuweaveSanitizerMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            kwargs = kwargs or {}
            if not _core.sanitizer_enabled():
                return func(*args, **kwargs)
            schema = func._schema
            ranges, device = [], None
            by_name = dict(zip((a.name for a in schema.arguments), args))
            by_name.update(kwargs)
            for argument in schema.arguments:
                writes = argument.alias_info is not None and argument.alias_info.is_write
                for tensor in _tensors(by_name.get(argument.name), torch):
                    ranges.append((*_span(tensor), writes))
                    device = tensor.device
            name = f"torch {func.__name__}"
            if ranges:
                stream = _stream(torch.cuda.current_stream(device).cuda_stream)
                _core.sanitizer_foreign_operation(stream, name, ranges)
            out = func(*args, **kwargs)
            if func.__name__ not in _ALLOCATES_ONLY and all(r.alias_info is None for r in schema.returns):
                made = _tensors(out if isinstance(out, (list, tuple)) else [out], torch)
                if made:
                    stream = _stream(torch.cuda.current_stream(made[0].device).cuda_stream)
                    _core.sanitizer_foreign_operation(stream, name, [(*_span(t), True) for t in made])
            return out

    return CuweaveSanitizerMode()


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
    """Called as the sanitizer turns on: hooks PyTorch in if this process imported it and has a GPU.
    Returns whether this call attached (the caller then detaches). A PyTorch whose hooks fail to attach
    is said in a RuntimeWarning, and cuweave's own checks go on."""
    global _attached_mode
    torch = sys.modules.get("torch")
    if _attached_mode is not None or torch is None or _core.backend_name() != "cuda":
        return False
    try:
        if not torch.cuda.is_available():
            return False
        _install_trace_hooks(torch)
        mode = _make_mode(torch)
        mode.__enter__()
    except Exception as error:  # noqa: BLE001 - another library's internals: say it, keep cuweave's checks
        warnings.warn(f"cuweave.sanitize(): PyTorch's operations are not checked ({error!r})", RuntimeWarning,
                      stacklevel=3)
        return False
    _attached_mode = mode
    return True


def detach() -> None:
    """Undoes the attach() that returned True (the block that attached ends)."""
    global _attached_mode
    if _attached_mode is not None:
        mode, _attached_mode = _attached_mode, None
        mode.__exit__(None, None, None)
