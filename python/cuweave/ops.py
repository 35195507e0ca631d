"""Built-in kernels, usable without writing CUDA."""

from __future__ import annotations

import numpy as np

from cuweave import _core

# Element-wise arithmetic and reductions, straight from the compiled module (no Python wrapper on the
# launch path). Each rounds as NumPy does in the array's own type, so results equal NumPy's.
copy = _core.ops.copy
scale = _core.ops.scale
axpy = _core.ops.axpy
add = _core.ops.add
multiply = _core.ops.multiply
sum = _core.ops.sum  # noqa: A001 - cuweave.ops.sum mirrors numpy.sum


def fill(array: _core.DeviceArray, value: object, *, stream: object = None) -> _core.DeviceArray:
    """Sets every element of ``array`` to ``value``, ordered on ``stream`` (default: current), and returns the
    array written (a DeviceArray view, for another library's GPU array).

    Integer and bool arrays take only values they represent exactly; a value that would be
    truncated or wrap raises ValueError.
    """
    if not isinstance(array, _core.DeviceArray):
        array = _core.asarray(array)  # GPU arrays of other libraries; TypeError for anything else
    dtype = array.dtype
    try:
        converted = np.asarray(value).astype(dtype, casting="unsafe")
    except (TypeError, ValueError) as error:
        raise TypeError(f"cannot fill a {dtype} array with {value!r}: {error}") from None
    if dtype.kind in "biu" and converted.item() != value:
        raise ValueError(f"{value!r} does not fit a {dtype} array exactly; convert it first")
    _core.fill_bytes(array, converted.tobytes(), stream)
    return array


def spin(
    seconds: float,
    *,
    stream: object = None,
    blocks: int = 1,
    start_times: _core.DeviceArray | None = None,
    slot: int = 0,
) -> None:
    """A kernel whose ``blocks`` blocks each busy-wait ``seconds`` on the GPU, ordered on ``stream``.

    For demonstrating concurrency and ordering. With ``start_times`` (a uint64 DeviceArray), the
    GPU clock (ns) at the kernel's start is written to ``start_times[slot]``.
    """
    _core.spin(float(seconds), stream, blocks, start_times, slot)


__all__ = ["add", "axpy", "copy", "fill", "multiply", "scale", "spin", "sum"]
