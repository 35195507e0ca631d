"""Which adoptions the PyTorch hooks keep: PyTorch's own streams, never another library's handle."""

from __future__ import annotations

import types

import pytest

import cuweave as cw
from cuweave import _torch_hooks


def _torch_whose_current_stream_id_is(stream_id: int) -> types.SimpleNamespace:
    """A stand-in for `torch` as the hooks ask it which stream is current (PyTorch numbers an ExternalStream by its
    CUDA handle, its own streams by pool and index)."""
    current = types.SimpleNamespace(stream_id=stream_id)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(current_stream=lambda device=None: current))


@pytest.fixture
def handle(monkeypatch):
    """A stream cuweave did not make, and an empty adoption cache."""
    monkeypatch.setattr(_torch_hooks, "_streams", {})
    made = cw._core.backend_calls.create_stream(0)
    yield made
    cw._core.backend_calls.destroy_stream(made)


def test_pytorchs_own_stream_is_adopted_once(handle):
    torch = _torch_whose_current_stream_id_is(0x21)  # pool stream 1 of the low-priority pool
    adopted = _torch_hooks._stream(handle, torch, 0)
    assert adopted.handle == handle
    assert _torch_hooks._stream(handle, torch, 0) is adopted


def test_an_external_stream_is_adopted_for_one_use(handle):
    # A torch.cuda.ExternalStream over a cuweave or CuPy stream: its owner may destroy the handle.
    torch = _torch_whose_current_stream_id_is(handle)
    assert _torch_hooks._stream(handle, torch, 0).handle == handle
    assert handle not in _torch_hooks._streams


def test_a_handle_a_gpu_trace_callback_names_is_adopted_for_one_use(handle):
    # PyTorch's GPU trace names a handle, not the stream object that owns it.
    assert _torch_hooks._stream(handle).handle == handle
    assert handle not in _torch_hooks._streams


def test_a_kept_adoption_that_cuweave_closed_is_made_again(handle):
    gone = cw.Stream()
    closed = cw.Stream.from_external(gone.handle)
    gone.close()
    _torch_hooks._streams[handle] = closed  # as if `handle` were the closed stream's, handed out again
    adopted = _torch_hooks._stream(handle, _torch_whose_current_stream_id_is(0x21), 0)
    assert not adopted.closed and adopted is _torch_hooks._streams[handle]
