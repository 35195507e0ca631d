"""Calls written with another library's habits (PyTorch's and CuPy's keywords, a stream by position, a host array
where a GPU array goes) or with wrong types: each TypeError says what cuweave expected and how to write it, in
cuweave's words, never in pybind11's alone (its overload lists and C++ type names)."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw

PYBIND11_WORDS = ("incompatible function arguments", "incompatible constructor arguments", "Unable to cast",
                  "C++ type", "Invoked with", "PYBIND11")


def _host():
    return np.ones(16, np.float32)


def _device():
    return cw.zeros(16, np.float32)


CASES = [
    # (call, words the message must contain)
    (lambda: cw.Event(enable_timing=True), ["timing=True", "not enable_timing=", "PyTorch's", "the signature is"]),
    (lambda: cw.Event(disable_timing=True), ["timing=False", "not disable_timing=", "CuPy's"]),
    (lambda: cw.Event(block=True), ["blocking=", "not block="]),
    (lambda: cw.Event(timing=1), ["timing=True or False", "int"]),
    (lambda: cw.Event(colour=True), ["unexpected keyword argument 'colour'", "Event(*, timing=False"]),
    (lambda: cw.Stream(non_blocking=True), ["blocking=False", "not non_blocking="]),
    (lambda: cw.Stream(0), ["0 positional arguments but 1 were given", "Stream(*, priority=None"]),
    (lambda: cw.Stream(name=3), ["name= as a str", "int"]),
    (lambda: cw.Stream(blocking="yes"), ["blocking=True or False", "str"]),
    (lambda: cw.StreamPool(2, non_blocking=True), ["blocking=False", "not non_blocking="]),
    (lambda: cw.to_device(_host(), cw.Stream()), ["stream as a keyword, stream=s", "to_device(array, *, stream=None)"]),
    (lambda: cw.to_device(_host(), strem=None), ["unexpected keyword argument 'strem'"]),
    (lambda: cw.copy_async(_device(), _host(), non_blocking=True), ["not non_blocking=", "Transfer.wait()"]),
    (lambda: cw.copy_async(_device(), _host(), cw.Stream()), ["stream as a keyword"]),
    (lambda: cw.copy_async(_device(), _host(), by_kernel="no"), ["by_kernel=True or False"]),
    (lambda: cw.empty(3, device="cuda"), ["stream=", "not device=", "PyTorch's"]),
    (lambda: cw.zeros(3, np.float32, cw.Stream()), ["stream as a keyword"]),
    (lambda: cw.ops.add(_device(), _host()), ["host (CPU) array", "cuweave.to_device(array)"]),
    (lambda: cw.ops.scale(_host(), 2.0), ["host (CPU) array", "cuweave.to_device(array)"]),
    (lambda: cw.ops.add(_device(), 1.0, _device()), ["add() takes 2 positional arguments"]),
    (lambda: cw.ops.scale(_device(), 2.0, output=None), ["unexpected keyword argument 'output'"]),
]


@pytest.mark.parametrize(("call", "words"), CASES)
def test_a_call_that_does_not_fit_says_what_cuweave_expects(call, words):
    with pytest.raises(TypeError) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, message
    assert not any(word in message for word in PYBIND11_WORDS), message


def test_numpy_scalars_and_bools_are_taken_where_python_ones_are():
    x = _device()
    assert np.array_equal(cw.ops.add(x, np.float32(2)).to_numpy(), np.full(16, 2, np.float32))
    assert np.array_equal(cw.ops.add(x, np.int64(3)).to_numpy(), np.full(16, 3, np.float32))
    assert cw.Event(timing=np.True_).timing
    assert cw.Stream(blocking=np.False_).blocking is False
