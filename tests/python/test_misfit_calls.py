"""Calls written with another library's habits (PyTorch's and CuPy's keywords, a stream by position, a host array
where a GPU array goes) or with wrong types: each TypeError says what cuweave expected and how to write it, in
cuweave's words, never in pybind11's alone (its overload lists and C++ type names)."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave as cw

PYBIND11_WORDS = ("incompatible function arguments", "incompatible constructor arguments", "Unable to cast",
                  "C++ type", "Invoked with", "PYBIND11", "No constructor defined")


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
    (lambda: cw.Stream(0), ["0 positional arguments but 1 was given", "Stream(*, priority=None"]),
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
    (lambda: cw.ops.sum(_device(), _device()), ["1 positional argument but 2 were given", "sum(x, *, out=None"]),
    (lambda: cw.default_stream(0, 1), ["default_stream(device=None)"]),
    (lambda: cw.current_stream(0), ["current_stream() takes 0 positional arguments but 1 was given"]),
    (lambda: cw.pinned_empty(4, np.float32, device=0), ["unexpected keyword argument 'device'"]),
    (lambda: cw.DeviceArray(), ["not made directly", "cuweave.empty()"]),
    (lambda: cw.Transfer(), ["not made directly", "cuweave.copy_async()"]),
    (lambda: cw.PinnedPool(), ["not made directly", "cuweave.pinned_pool()"]),
    (lambda: cw.collectives.Communicator(b"id", world_size=2, rank=0), ["ranks=", "not world_size="]),
    (lambda: cw.collectives.Communicator(b"id", ranks="2", rank=0), ["ranks= as an int", "str"]),
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


def _public_callables():
    for module in (cw, cw.ops, cw.sim, cw.collectives):
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value) and not (isinstance(value, type) and issubclass(value, BaseException)):
                yield f"{module.__name__}.{name}", value


@pytest.mark.parametrize(("name", "function"), list(_public_callables()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_callable_answers_an_unknown_keyword_in_cuweaves_words(name, function):
    with pytest.raises(TypeError) as info:
        function(not_an_argument=1)
    message = str(info.value)
    assert "not_an_argument" in message or "not made directly" in message, message
    assert not any(word in message for word in PYBIND11_WORDS), message


def _objects_with_methods():
    """One object of each cuweave class whose methods a user calls (made on the active backend)."""
    stream = cw.Stream()
    pool = cw.StreamPool(2)
    host = np.zeros(4, np.float32)
    array = cw.to_device(host, stream=stream)
    with cw.capture(stream) as captured:
        cw.ops.fill(array, 1.0, stream=stream)
    transfer = cw.copy_async(host, array, stream=stream)  # before the latch holds the stream: it waits for it
    objects = {
        "Stream": stream,
        "StreamPool": pool,
        "StreamLease": pool.reserve(),
        "Event": cw.Event(),
        "HostLatch": cw.HostLatch(stream),
        "PinnedPool": cw.pinned_pool(),
        "DeviceArray": array,
        "Transfer": transfer,
        "Graph": captured.graph,
    }
    registration = cw.pinned(np.zeros(4)).__enter__()
    objects["HostRegistration"] = registration
    return objects


def test_every_public_method_answers_an_unknown_keyword_in_cuweaves_words():
    objects = _objects_with_methods()
    checked = []
    try:
        for owner, instance in objects.items():
            for name, member in vars(type(instance)).items():
                if name.startswith("_") or type(member).__name__ != "instancemethod":
                    continue  # properties, dunders, and the fast C methods (which word their own errors)
                with pytest.raises(TypeError) as info:
                    getattr(instance, name)(not_an_argument=1)
                message = str(info.value)
                assert f"{owner}.{name}()" in message and "not_an_argument" in message, message
                assert "the signature is" in message and not any(word in message for word in PYBIND11_WORDS), message
                checked.append(f"{owner}.{name}")
    finally:
        objects["HostLatch"].release()
        objects["HostRegistration"].__exit__(None, None, None)
        objects["Stream"].synchronize()
    assert len(checked) >= 40, checked


def test_a_method_given_what_it_takes_only_by_conversion_still_runs():
    # pybind11 converts in a second pass over the overloads, which the catch-all must not pre-empt.
    stream = cw.Stream()
    x = cw.zeros((2, 3), np.float32, stream=stream)
    assert x.reshape(np.int64(3), np.int32(2)).shape == (3, 2)
    assert x.handoff(stream, wait=np.True_) is None
    with pytest.raises(TypeError, match=r"DeviceArray\.view\(\) takes 1 positional argument but 2 were given; "
                                        r"the signature is DeviceArray\.view\(dtype\)"):
        x.view(np.int8, 3)
