"""The bytes a strided array covers, as the sanitizer and the weave count PyTorch's tensors: cuweave's own arrays
are counted in C++ (sanitizer::touches), as are CuPy's kernel arguments (foreign_arguments)."""

from __future__ import annotations

from collections.abc import Sequence


def strided_span(address: int, shape: Sequence[int], byte_strides: Sequence[int], itemsize: int) -> tuple[int, int]:
    """(address, bytes) from the lowest element to the highest of a non-empty array whose first element is at
    `address` (strides in bytes, negative ones included)."""
    low = high = 0
    for extent, stride in zip(shape, byte_strides):
        reach = (extent - 1) * stride
        if reach < 0:
            low += reach
        else:
            high += reach
    return address + low, high - low + itemsize
