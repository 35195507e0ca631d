"""PyTorch's operators in cw.weave(), placed by either hook: the C++ one in PyTorch's dispatcher (Note [PyTorch's
operators placed from its dispatcher]) and the Python dispatch mode it stands in for, with the sanitizer off or on.
Each places by the same reads and writes and leaves PyTorch's current stream as it was; under a capture, the mode
places the operators, whichever hook the weave began with."""

from __future__ import annotations

import os

import numpy as np
import pytest

import cuweave as cw
from cuweave import _torch_hooks
from _support import sanitizer_off

pytestmark = pytest.mark.gpu

N = 1 << 16
# CUWEAVE_SANITIZE attaches one hook for the whole process (the C++ one where a build is at hand, else the mode): it
# then places PyTorch's operators, whichever the test asks for.
PROCESS_SANITIZED = os.environ.get("CUWEAVE_SANITIZE", "0") not in ("", "0")


@pytest.fixture(params=["unsanitized", "sanitized"])
def hook(request, torch, torch_hook):
    """Which hook places PyTorch's operators in the test's weaves (the C++ one or the mode), with the sanitizer off
    or on (the same hook then also checks them)."""
    with sanitizer_off():
        if request.param == "sanitized":
            with cw.sanitize():
                yield torch_hook
        else:
            yield torch_hook


def placing_with(hook: str) -> None:
    """Asserts, inside a weave, that `hook` places PyTorch's operators."""
    if not PROCESS_SANITIZED:
        assert (_torch_hooks._native.module is not None) == (hook == "native")


def mode_entered() -> bool:
    """Whether the Python dispatch mode is PyTorch's current one."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return _torch_hooks._made_mode is not None and _get_current_dispatch_mode() is _torch_hooks._made_mode


def test_operators_are_placed_by_what_they_read_and_write(torch, hook):
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.current_stream()
    with cw.weave(streams=3) as w:
        placing_with(hook)
        p = x * 2  # reads x: the current stream
        q = x + 1  # also only reads x: another stream, with the allocator told
        r = p + q
        r.mul_(2)  # in place: after the add, on its stream
    assert torch.cuda.current_stream() == before
    assert sum(1 for n in w.counts.per_stream if n) >= 2 and w.counts.waits >= 2
    expected = 2 * (3 * torch.arange(N, dtype=torch.float32) + 1)
    assert torch.equal(r.cpu(), expected)


def test_an_operator_that_copies_inside_an_alias_returning_one_is_ordered(torch, hook):
    # `to` and `contiguous` return an alias where they can and copy inside where they must: the copy reads x.
    x = torch.zeros(256, 256, device="cuda")
    torch.cuda.synchronize()
    with cw.weave(streams=3):
        other = torch.ones(256, 256, device="cuda")
        x.add_(other)  # writes x
        transposed = x.t().contiguous()  # a copy of x, after the write
        on_host = x.to("cpu")
    torch.cuda.synchronize()
    assert torch.equal(transposed.cpu(), torch.ones(256, 256))
    assert torch.equal(on_host, torch.ones(256, 256))


def test_cuweave_and_pytorch_operations_weave_together(torch, hook):
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    with cw.weave(streams=3):
        y = cw.ops.scale(cw.asarray(x), 3.0, out=cw.empty(N, np.float32))  # cuweave reads PyTorch's x
        x.add_(1)  # PyTorch writes x: after cuweave's read
        z = torch.as_tensor(y, device="cuda") + x  # reads both
    torch.cuda.synchronize()
    expected = 3 * torch.arange(N, dtype=torch.float32) + torch.arange(N, dtype=torch.float32) + 1
    assert torch.equal(z.cpu(), expected)


def test_an_operator_that_throws_leaves_the_stream_and_the_next_operators_placed(torch, hook):
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.current_stream()
    with cw.weave(streams=3) as w:
        with pytest.raises(RuntimeError, match="size"):
            x.add_(torch.ones(3, device="cuda"))  # shapes that do not broadcast
        assert torch.cuda.current_stream() == before
        placed = w.counts.operations
        x.add_(1)
        assert w.counts.operations == placed + 1
    torch.cuda.synchronize()
    assert torch.equal(x.cpu(), torch.ones(N))


def test_a_woven_functions_operators_are_placed_by_the_mode(torch, hook):
    # Placed once, as the graph is made; what they keep for the graph: test_weave_gpu.py.
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()

    @cw.woven(streams=3)
    def step(x_view: cw.DeviceArray) -> None:
        assert mode_entered()  # the mode places them (the C++ hook, if attached, pauses)
        doubled = torch.mul(x, 2)
        x.add_(doubled)

    for _ in range(2):
        step(cw.asarray(x))
    cw.synchronize()
    assert torch.equal(x.cpu(), 9 * torch.arange(N, dtype=torch.float32))


def test_an_operator_captured_inside_a_weave_is_placed_by_the_mode_into_the_graph(torch, hook):
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    stream = cw.Stream()
    with cw.weave(streams=2):
        placing_with(hook)
        x.add_(1)
        with cw.capture(stream) as captured:
            assert mode_entered()  # the mode places them (the C++ hook pauses)
            x.add_(10)  # into the graph: nothing runs during a capture
        placing_with(hook)
    cw.synchronize()
    torch.cuda.synchronize()
    assert torch.equal(x.cpu(), torch.ones(N))
    captured.graph.replay(stream=stream)
    stream.synchronize()
    assert torch.equal(x.cpu(), torch.full((N,), 11.0))
