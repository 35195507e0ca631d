"""PyTorch's operators in cw.weave() with the sanitizer off, placed by either hook: the C++ one in PyTorch's
dispatcher (Note [PyTorch's operators placed from its dispatcher]) and the Python dispatch mode it stands in for.
Both place by the same reads and writes and leave PyTorch's current stream as it was; under a capture, the mode
places the operators and keeps their tensors for the graph, whichever hook the weave began with."""

from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

import cuweave as cw
from cuweave import _torch_hooks, _torch_native
from _support import UNDER_COMPUTE_SANITIZER, sanitizer_off

pytestmark = pytest.mark.gpu

N = 1 << 16
# CUWEAVE_SANITIZE attaches the dispatch mode for the whole process: it then places PyTorch's operators itself.
PROCESS_SANITIZED = os.environ.get("CUWEAVE_SANITIZE", "0") not in ("", "0")


@pytest.fixture(params=["native", "python"])
def hook(request, torch, monkeypatch):
    """Which hook places PyTorch's operators in the test's weaves; the sanitizer off meanwhile."""
    if request.param == "native":
        module = _torch_native.wait(timeout=600)
        assert module is not None, f"the C++ hook could not be built: {_torch_native.failure()}"
    else:
        monkeypatch.setattr(_torch_hooks, "_native_hook", lambda: None)
    with sanitizer_off():
        yield request.param


def placing_with(hook: str) -> None:
    """Asserts, inside a weave, that `hook` places PyTorch's operators."""
    assert (_torch_hooks._native.module is not None) == (hook == "native" and not PROCESS_SANITIZED)


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


def test_a_woven_functions_operators_keep_their_temporaries_for_the_graph(torch, hook):
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.empty_like(x)
    torch.cuda.synchronize()

    @cw.woven(streams=3)
    def step(x_view: cw.DeviceArray, out_view: cw.DeviceArray) -> None:
        assert _torch_hooks._native.module is None  # the capture's operators are placed once, by the mode
        doubled = torch.mul(x, 2)  # temporaries PyTorch's allocator hands out during the capture
        shifted = torch.add(x, 1)  # independent of the first: another stream
        torch.add(doubled, shifted, out=out)

    # Earlier tests' tensors that only a collection frees, and blocks recorded on other streams, which are freed once
    # their events are seen: all of them now.
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    allocated_before = torch.cuda.memory_allocated()
    for shift in (0, 10):
        if shift:
            x.add_(10)
        torch.cuda.synchronize()
        step(cw.asarray(x), cw.asarray(out))
        cw.synchronize()
        assert torch.equal(out.cpu(), 3 * (torch.arange(N, dtype=torch.float32) + shift) + 1)
    # The graph's temporaries stay allocated for its replays, and no longer.
    gc.collect()
    assert torch.cuda.memory_allocated() - allocated_before == 2 * x.nbytes
    del step
    for _ in range(200):
        cw.collect()
        gc.collect()
        if torch.cuda.memory_allocated() == allocated_before:
            break
        time.sleep(0.01)
    # Under compute-sanitizer, frame objects of the calls (which hold the woven function in their locals) were still
    # alive here, so the release is asserted outside the tool only.
    assert UNDER_COMPUTE_SANITIZER or torch.cuda.memory_allocated() == allocated_before


def test_an_operator_captured_inside_a_weave_is_placed_by_the_mode_into_the_graph(torch, hook):
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    stream = cw.Stream()
    with cw.weave(streams=2):
        placing_with(hook)
        x.add_(1)
        with cw.capture(stream) as captured:
            assert _torch_hooks._native.module is None or cw._core.weave.placing_device() < 0
            x.add_(10)  # into the graph: nothing runs during a capture
        placing_with(hook)
    cw.synchronize()
    torch.cuda.synchronize()
    assert torch.equal(x.cpu(), torch.ones(N))
    captured.graph.replay(stream=stream)
    stream.synchronize()
    assert torch.equal(x.cpu(), torch.full((N,), 11.0))
