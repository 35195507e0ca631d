"""Device arrays made as NumPy makes host arrays: ones, full, arange, and the *_like forms.

Each is an allocation ordered on ``stream`` (default: the current stream) and the work that fills it, queued
there: usable on that stream at once, and by a host read anywhere (which follows the array's stream).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuweave import _core
from cuweave.ops import fill


def full(shape: Any, fill_value: Any, dtype: Any = None, *, stream: Any = None) -> _core.DeviceArray:
    """A device array of ``shape`` with every element ``fill_value`` (``dtype``: NumPy's choice for the value when
    None). An integer array takes only values it represents exactly."""
    dtype = np.asarray(fill_value).dtype if dtype is None else np.dtype(dtype)
    return fill(_core.empty(shape, dtype, stream=stream), fill_value, stream=stream)


def ones(shape: Any, dtype: Any = np.float64, *, stream: Any = None) -> _core.DeviceArray:
    """A device array of ``shape`` filled with ones."""
    return full(shape, 1, dtype, stream=stream)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *,
           stream: Any = None) -> _core.DeviceArray:
    """``numpy.arange(start, stop, step, dtype)`` on the device: the values made on the host, copied in one
    ordered copy."""
    return _core.to_device(np.arange(start, stop, step, dtype), stream=stream)


def _layout_like(array: Any, dtype: Any, shape: Any) -> tuple[Any, Any]:
    """(shape, dtype): those given, else ``array``'s (a DeviceArray, or another library's GPU array; TypeError for
    a host array, naming to_device)."""
    prototype = array if isinstance(array, _core.DeviceArray) else _core.asarray(array)
    return (prototype.shape if shape is None else shape), (prototype.dtype if dtype is None else dtype)


def empty_like(array: Any, dtype: Any = None, shape: Any = None, *, stream: Any = None) -> _core.DeviceArray:
    """An uninitialized device array of ``array``'s shape and dtype (or those given), allocated in order on
    ``stream`` (default: the current stream)."""
    return _core.empty(*_layout_like(array, dtype, shape), stream=stream)


def zeros_like(array: Any, dtype: Any = None, shape: Any = None, *, stream: Any = None) -> _core.DeviceArray:
    """A zero-filled device array of ``array``'s shape and dtype (or those given)."""
    return _core.zeros(*_layout_like(array, dtype, shape), stream=stream)


__all__ = ["arange", "empty_like", "full", "ones", "zeros_like"]
